"""Repo-local wiring only: hypothesis profiles. Everything else is in the plugin.

Kept free of ``pytest_plugins``: this file is an ancestor of the packaged contract
suite in an editable install, so pytest may load it when a user checks a dataset.
"""

import os


def pytest_configure(config):
    # Imported here, not at module level: hypothesis takes 1-4 s to import, and a
    # dataset run (--dataset-path) has no property tests to configure.
    if config.getoption("dataset_path", None):
        return
    from hypothesis import HealthCheck, settings

    settings.register_profile("ci", max_examples=200, derandomize=True, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.register_profile("thorough", max_examples=5000, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
