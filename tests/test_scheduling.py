"""The project's xdist scheduler: the tests of one vendor tokenizer share a worker, every other test is free."""

from __future__ import annotations

from drafter_testkit import real_templates as rt
from drafter_testkit.scheduling import group_of


def test_a_vendors_templates_share_a_group() -> None:
    qwen = [n for n in rt.template_names() if rt.vendor_of(n).name == "qwen"]
    groups = {group_of(f"tests/test_real_templates.py::test_oracle_matches_truth[{n}]") for n in qwen}
    assert groups == {"tests/test_real_templates.py::qwen"}
    assert group_of("tests/test_real_templates.py::test_vendor_tokenizer_ids[qwen]") == groups.pop()
    assert group_of("tests/test_real_templates.py::test_oracle_matches_truth[llama3]") != \
        group_of("tests/test_real_templates.py::test_oracle_matches_truth[qwen3_6]")


def test_producers_group_by_their_templates_vendor() -> None:
    a = group_of("tests/test_real_producers.py::test_producer_on_template[speculators-0.7:qwen3_6]")
    b = group_of("tests/test_real_producers.py::test_producer_on_template[specforge:qwen3_6@qwen3.5]")
    assert a == b == "tests/test_real_producers.py::qwen"


def test_families_and_the_speculators_check_and_nothing_else() -> None:
    assert group_of("tests/test_families.py::test_derived_profile_labels_like_the_builtin[phi4]") == \
        group_of("tests/test_families.py::test_clean_family_dataset_passes_the_whole_suite[phi4]")
    assert group_of("tests/test_hidden_states.py::test_speculators_agrees_on_every_mutant_file[nan_position]") == \
        group_of("tests/test_hidden_states.py::test_speculators_reads_every_clean_file[bfloat16]") is not None
    assert group_of("tests/test_hidden_states.py::test_clean_folder_passes[bfloat16]") is None
    assert group_of("tests/test_checks.py::test_something") is None
    assert group_of("tests/test_real_templates.py::test_every_template_has_rules_a_vendor_and_a_description") is None
