"""Hypothesis profiles ``ci`` and ``thorough``, shared by the packaged properties suite and the project's tests.

``ci`` is derandomized (the same examples every run, so a strict xfail cannot flip by
luck) and sized to finish the whole properties suite in about a minute on two cores;
``thorough`` draws thousands of fresh examples per property, for upgrades. Neither
writes an example database: users run the suite from anywhere, and nothing should
appear in their working directory.

A test that needs more examples than the profile's default asks :func:`examples` for its
count, so ``HYPOTHESIS_PROFILE=thorough`` raises it too instead of being ignored.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

CI_EXAMPLES = 200
THOROUGH_EXAMPLES = 3000
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]


def register_profiles() -> None:
    settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, deadline=None, database=None,
                              print_blob=True, suppress_health_check=_SLOW_OK)
    settings.register_profile("thorough", max_examples=THOROUGH_EXAMPLES, deadline=None, database=None,
                              print_blob=True, suppress_health_check=_SLOW_OK)


def examples(under_ci: int) -> int:
    """``under_ci`` examples under the ``ci`` profile, scaled by the loaded profile's size otherwise.

    Call it where ``@settings`` is applied (module import, after the profile is loaded).
    """
    return max(1, under_ci * settings.default.max_examples // CI_EXAMPLES)
