"""Repo-local wiring only: hypothesis profiles and pytester. Everything else is in the plugin."""

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

settings.register_profile("ci", max_examples=200, derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=5000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
