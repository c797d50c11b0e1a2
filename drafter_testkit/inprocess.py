"""Run the packaged properties on one context inside this process, for sweeps over many templates.

``pytest --masker=...`` runs one masker on one tokenizer per process (seconds of imports
each). The tests and benchmarks that cover every real template build a context per
template (``context.make_context``) and call the same property functions here, reading
their verdict from pytest's outcome exceptions (xfail / skip / fail) as pytest would.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pytest

from drafter_contracts.properties import test_masker_properties as suite
from drafter_contracts.properties.context import PropertyContext

HYPOTHESIS_PROPERTIES = ("test_ids_equal_template_rendering", "test_mask_is_sound", "test_mask_is_complete",
                         "test_truncation_keeps_ids_and_mask_aligned",
                         "test_invalid_conversation_is_rejected_or_skipped", "test_same_conversation_same_rows",
                         "test_mask_follows_the_reply_not_its_copy")
_FIRST = re.compile(r"first shown by example (\d+)")


@dataclass
class PropertyOutcome:
    name: str
    outcome: str  # "passed" | "xfailed" | "skipped" | "failed"
    message: str
    seconds: float

    @property
    def first_failure(self) -> int | None:
        """The example that first showed a reproduced known defect (as ``expect.settle`` reports it)."""
        m = _FIRST.search(self.message)
        return int(m.group(1)) if m else None


def run_property(ctx: PropertyContext, name: str) -> PropertyOutcome:
    """One property's verdict on ``ctx`` under the current hypothesis profile."""
    fn = getattr(suite, name)
    start = time.perf_counter()
    try:
        fn(ctx)
    except pytest.xfail.Exception as exc:
        return PropertyOutcome(name, "xfailed", str(exc), time.perf_counter() - start)
    except pytest.skip.Exception as exc:
        return PropertyOutcome(name, "skipped", str(exc), time.perf_counter() - start)
    except (pytest.fail.Exception, AssertionError) as exc:
        return PropertyOutcome(name, "failed", str(exc), time.perf_counter() - start)
    return PropertyOutcome(name, "passed", "", time.perf_counter() - start)


def load_ci_profile() -> None:
    from hypothesis import settings

    from drafter_contracts.hypothesis_settings import register_profiles

    register_profiles()
    settings.load_profile("ci")
