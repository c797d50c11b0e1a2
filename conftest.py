"""Repo-local wiring only: hypothesis profiles. Everything else is in the plugin.

Kept free of ``pytest_plugins``: this file is an ancestor of the packaged contract
suite in an editable install, so pytest may load it when a user checks a dataset.
The profiles themselves live in ``drafter_contracts.hypothesis_settings`` (the packaged
properties suite needs them wherever it runs); here the project's own tests pick one
with ``HYPOTHESIS_PROFILE`` (default ``ci``).
"""

import os


def pytest_configure(config):
    # Imported here, not at module level: hypothesis takes 1-4 s to import, and a
    # dataset run (--dataset-path) has no property tests to configure.
    if config.getoption("dataset_path", None) or config.getoption("masker", None):
        return  # the plugin configures those runs (and --hypothesis-profile wins over HYPOTHESIS_PROFILE)
    if config.getoption("hypothesis_profile", None):
        return
    from hypothesis import settings

    from drafter_contracts.hypothesis_settings import register_profiles

    register_profiles()
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
