"""Shared fixtures: most behaviour tests run on both implementations."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Helper modules of the tests (vllm_builders) import by name: --import-mode=importlib puts
# no test directory on sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

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


@pytest.fixture
def assert_one_minimal() -> Callable[[dict[str, Any], str], None]:
    """Checks that a failing trace of variant `name` is 1-minimal: without any one of its ops
    it no longer fails the same way (its first failed property), on the patched spec."""
    from livetail.verify import variants
    from livetail.verify.machine import implementations, run_trace

    def check(trace: dict[str, Any], name: str) -> None:
        first = trace["observed"]["properties"][0]
        with variants.applied(name):
            for i in range(len(trace["ops"]) - 1):
                shorter = {**trace, "ops": trace["ops"][:i] + trace["ops"][i + 1 :]}
                world, _ = run_trace(shorter, implementations("spec"))
                failed = world.failure is not None and first in world.failure.failed_properties()
                assert not failed, f"op {i} of {trace['ops']} is not needed"

    return check
