"""Fixtures and known-defect marks for the packaged properties suite (run by ``pytest --masker=...``)."""

from __future__ import annotations

import pytest

from .context import CONTEXT_KEY, PropertyContext


@pytest.fixture(scope="session")
def ctx(request: pytest.FixtureRequest) -> PropertyContext:
    found = request.config.stash.get(CONTEXT_KEY, None)
    if found is None:
        pytest.skip("no --masker given: the properties suite needs a masker to test")
    return found


#: Properties without a hypothesis run of their own: a known defect of theirs is a plain strict xfail.
#: The hypothesis properties settle known defects themselves (``expect.settle``: reproduced, not
#: exercised, or not reproduced in N examples).
PLAIN_TESTS = ("test_support_probe",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A known defect of a plain (non-hypothesis) property is a strict xfail: fixed upstream → XPASS → failure."""
    found = config.stash.get(CONTEXT_KEY, None)
    if found is None:
        return
    for item in items:
        name = getattr(item, "originalname", item.name)
        defect = found.masker.known_defects.get(name) if name in PLAIN_TESTS else None
        if defect:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"known defect of {found.masker.version}: "
                                                                  f"{defect.reason}"))


def pytest_report_header(config: pytest.Config) -> str | None:
    found = config.stash.get(CONTEXT_KEY, None)
    if found is None:
        return None
    from hypothesis import settings

    return (f"drafter-contracts properties: {found.describe()}; "
            f"hypothesis profile {settings.get_current_profile_name()!r}")
