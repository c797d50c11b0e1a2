"""How a property's hypothesis run becomes a verdict, known defects and empty properties included.

A property that holds on every example it was *given to test* passes. Two cases are not
that, and each says so instead of passing or failing for the wrong reason:

* **Nothing to test.** A property about conversations the template refuses has nothing to
  check on a lenient template that refuses none of them (Qwen3's TRL original renders
  unknown roles, late system prompts and assistant-only chats): the test skips, naming how
  many it drew and that the template accepted them all.
* **A known defect of the masker under test** (``Masker.known_defects``):
  reproduced → xfail, with the shrunk example's first line and the example that first
  showed it; its precondition (``KnownDefect.needs``) never drawn → skip, "not exercised";
  drawn but not reproduced → failure "not reproduced in N examples (K drew its
  precondition)": the entry is wrong for this version (fixed upstream, or the recorded
  failure needs more examples: try ``--hypothesis-profile thorough``). Never "fixed":
  only a run that exercised the precondition can say anything about it.

So the exit code stays meaningful: 1 means a property failed that is not recorded, or a
recorded defect was exercised and did not show; 0 means every property held or failed
exactly as recorded, with every skip saying why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

#: Preconditions a known defect can need: name -> what it means, for the verdicts.
PRECONDITIONS: dict[str, str] = {
    "assistant_header_in_text": "system or user text holding the template's assistant header (as the masker "
                                "opens a turn on it, for a masker that says)",
    "unknown_role_rejected": "a conversation with an unknown role that the template rejects",
}


@dataclass
class Tally:
    """What one property's run drew: examples tested, preconditions met, where it first failed."""

    examples: int = 0
    drawn: Counter = field(default_factory=Counter)
    first_failure: int | None = None
    skipped: Counter = field(default_factory=Counter)  # examples with nothing to test, by why

    def example(self) -> None:
        self.examples += 1

    def saw(self, precondition: str, met: bool = True) -> None:
        if precondition not in PRECONDITIONS:
            raise KeyError(f"unknown precondition {precondition!r}")
        if met:
            self.drawn[precondition] += 1

    def failed(self) -> None:
        if self.first_failure is None:
            self.first_failure = self.examples


def header_in_text(conv: dict[str, Any], headers: tuple[str, ...]) -> bool:
    """Whether a system or user message holds one of the template's assistant header strings."""
    return any(isinstance(m.get("content"), str) and any(h in m["content"] for h in headers)
               for m in conv["messages"] if m["role"] in ("system", "user"))


def settle(ctx: Any, name: str, prop: Callable[[], None], tally: Tally,
           nothing_to_test: Callable[[], str] | None = None) -> None:
    """Run the hypothesis property ``prop`` and turn its outcome into the verdict described above.

    ``nothing_to_test``: when given and no example was tested (``tally.examples == 0``), the
    test skips with the reason it returns (the drawn examples all fell outside the property).
    """
    defect = ctx.masker.known_defects.get(name)
    try:
        prop()
    except pytest.skip.Exception:
        raise
    except Exception as exc:  # noqa: BLE001 (hypothesis re-raises the property's own failure)
        inner = getattr(exc, "exceptions", None)  # hypothesis groups distinct failures
        if defect is None or not all(isinstance(e, AssertionError) for e in (inner or [exc])):
            raise
        exc = inner[0] if inner else exc
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        at = f"first shown by example {tally.first_failure}" if tally.first_failure else "shown"
        pytest.xfail(f"known defect of {ctx.masker.version}, reproduced ({at}): {defect.reason}. Shrunk: {first}")
    if tally.examples == 0 and nothing_to_test:
        why = nothing_to_test()
        if defect is not None:
            pytest.skip(f"known defect of {ctx.masker.version} not exercised: {why}")
        pytest.skip(why)
    if defect is None:
        return
    if defect.needs is not None and tally.drawn[defect.needs] == 0:
        why = getattr(ctx, "notes", {}).get(defect.needs)
        pytest.skip(f"known defect of {ctx.masker.version} not exercised: none of {tally.examples} examples drew "
                    f"{PRECONDITIONS[defect.needs]}" + (f" ({why})" if why else "") + f". The defect: {defect.reason}")
    drew = (f"; {tally.drawn[defect.needs]} of them drew {PRECONDITIONS[defect.needs]}" if defect.needs else "")
    pytest.fail(f"known defect of {ctx.masker.version} not reproduced in {tally.examples} examples{drew}: "
                f"{defect.reason}. If it is fixed in this version, remove its known-defects entry; otherwise run "
                "more examples (--hypothesis-profile thorough)", pytrace=False)
