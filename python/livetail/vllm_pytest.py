"""pytest plugin: vLLM's scheduler builds livetail's KV-cache manager.

``python -m pytest -p livetail.vllm_pytest <vLLM's tests>`` replaces the module attribute
``vllm.v1.core.sched.scheduler.KVCacheManager`` with ``livetail.vllm.KVCacheManager`` before
any test runs. With ``LIVETAIL_VLLM_SWAP=0`` vLLM's own manager stays (the baseline).

Either way every test's report carries two properties (junit xml ``<properties>``):
``kv_groups``, the group spec classes of every manager the test built ('|' between
managers), and ``unsupported``, the features livetail.vllm refused during the test.
scripts/vllm_stage1.py reads them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


def pytest_configure(config: Any) -> None:
    from livetail.vllm import install

    install(swap=os.environ.get("LIVETAIL_VLLM_SWAP", "1") != "0")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
    from livetail import vllm as adapter

    adapter.built_layouts.clear()
    adapter.unsupported_hits.clear()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    from livetail import vllm as adapter

    if call.when == "teardown":
        item.user_properties.append(("kv_groups", "|".join(adapter.built_layouts)))
        item.user_properties.append(
            ("unsupported", "|".join(dict.fromkeys(adapter.unsupported_hits)))
        )
    yield
