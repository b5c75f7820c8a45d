"""Shared fixtures: most behaviour tests run on both implementations."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

# Derandomized, no example database: CI is reproducible and leaves nothing behind.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# A long campaign: random seeds, more examples, run by hand or by `livetail verify`.
settings.register_profile(
    "campaign",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("LIVETAIL_HYPOTHESIS_PROFILE", "ci"))

IMPLEMENTATIONS = {"native": "livetail", "spec": "livetail.spec"}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def impl(request: pytest.FixtureRequest) -> ModuleType:
    """The native module or the executable spec: same classes, same method names."""
    return importlib.import_module(IMPLEMENTATIONS[request.param])
