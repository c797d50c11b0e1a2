"""Repo-local wiring only: hypothesis profiles. Everything else is in the plugin.

Kept free of ``pytest_plugins``: this file is an ancestor of the packaged contract
suite in an editable install, so pytest may load it when a user checks a dataset.
The profiles themselves live in ``drafter_contracts.profiles`` (the packaged
properties suite needs them wherever it runs); here the project's own tests pick one
with ``HYPOTHESIS_PROFILE`` (default ``ci``).
"""

import os

from hypothesis import settings

from drafter_contracts.profiles import register_profiles

register_profiles()
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
