"""The template -> mask properties on TRL 1.16.0's real templates, one context per template, one process.

    python benchmarks/property_templates.py --masker speculators --templates untagged \
        --properties test_mask_is_sound --no-shrink          # examples until 0.7.0's user-text leak shows
    python benchmarks/property_templates.py --masker hf --templates tagged   # every property, every tagged template

Prints one markdown table row per (template, property): outcome, seconds, the example that
first showed a reproduced known defect, and the verdict's message. ``--no-shrink`` keeps
hypothesis' generation (the ci profile draws the same examples) and skips shrinking, which
is what measuring "examples until found" needs and costs most of a failing run's time.
"""

from __future__ import annotations

import testkit_path  # noqa: F401  (drafter_testkit is imported from the checkout)
import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--masker", default="speculators")
    parser.add_argument("--speculators-path", default=None)
    parser.add_argument("--templates", default="untagged", help="tagged, untagged or a comma-separated list")
    parser.add_argument("--properties", default=None, help="comma-separated property names (default: all six)")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--hf-original", action="store_true",
                        help="hf: the original template's tokenizer with --chat-template TRAINING_FILE")
    args = parser.parse_args(argv)

    from hypothesis import Phase, settings

    from drafter_contracts.contract import EXAMPLE_CONTRACT, load_contract, resolve_contract_path
    from drafter_contracts.errors import UsageProblem
    from drafter_testkit import real_templates as rt
    from drafter_contracts.properties.context import make_context
    from drafter_testkit.inprocess import HYPOTHESIS_PROPERTIES, load_ci_profile, run_property

    load_ci_profile()
    if args.no_shrink:
        settings.register_profile("ci-measure", settings.get_profile("ci"),
                                  phases=[Phase.explicit, Phase.reuse, Phase.generate])
        settings.load_profile("ci-measure")
    contract = load_contract(resolve_contract_path(EXAMPLE_CONTRACT), {})
    names = rt.template_names()
    if args.templates == "tagged":
        chosen = [n for n in names if rt.has_generation_tags(rt.template_text(n))]
    elif args.templates == "untagged":
        chosen = [n for n in names if not rt.has_generation_tags(rt.template_text(n))]
    else:
        chosen = args.templates.split(",")
    props = args.properties.split(",") if args.properties else list(HYPOTHESIS_PROPERTIES)
    print("| template | property | outcome | seconds | first failing example | message |\n|---|---|---|---|---|---|")
    for name in chosen:
        chat_template = None
        directory = rt.template_tokenizer_dir(name)
        if args.hf_original and name.endswith("_training") and name.removesuffix("_training") in names:
            directory = rt.template_tokenizer_dir(name.removesuffix("_training"))
            chat_template = str(rt.template_tokenizer_dir(name) / "chat_template.jinja")
        try:
            ctx = make_context(args.masker, str(directory), contract, chat_template=chat_template,
                               speculators_path=args.speculators_path)
        except UsageProblem as exc:
            print(f"| `{name}` | (all) | usage error | | | {str(exc)[:200]} |", flush=True)
            continue
        for prop in props:
            v = run_property(ctx, prop)
            msg = v.message.splitlines()[0][:240].replace("|", "\\|") if v.message else ""
            print(f"| `{name}` | {prop} | {v.outcome} | {v.seconds:.1f} | {v.first_failure or ''} | {msg} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
