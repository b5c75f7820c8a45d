"""livetail's event stream behind NVIDIA Dynamo's KV router, all on loopback.

Needs ``ai-dynamo-runtime`` (``pip install ai-dynamo-runtime==1.6.1``); skipped without it.
A Dynamo ``KvEventPublisher`` relays livetail's ZMQ stream (``zmq_endpoint=``) into
Dynamo's event plane; a ``KvRouter`` on the same endpoint answers ``get_overlap_scores``.
Names that carry their token ids (``cache_full_blocks(..., token_ids=prompt)``) make the
default ``publish(pool.take_events())`` enough: Dynamo hashes the tokens itself.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import livetail
import pytest
from livetail.events import KVEventPublisher

dynamo = pytest.importorskip("dynamo._core")

BLOCK = 16


async def overlap(router: Any, tokens: list[int], want: int) -> int:
    """Device blocks Dynamo reports for the one worker, polled until ``want`` (10 s)."""
    got = 0
    for _ in range(100):
        scores = await router.get_overlap_scores(tokens)
        got = max((w["device_blocks"] for w in scores["workers"]), default=0)
        if got == want:
            break
        await asyncio.sleep(0.1)
    return got


async def scenario(tmp: Path) -> list[tuple[int, int]]:
    """(Dynamo's device blocks, livetail's own match in blocks) after each batch."""
    loop = asyncio.get_running_loop()
    rt = dynamo.DistributedRuntime(loop, "file", "tcp", event_plane="zmq")
    ep = rt.endpoint("livetail.engine.generate")

    async def handler(request: Any, context: Any = None) -> Any:
        yield {"token_ids": []}

    await dynamo.register_model(
        dynamo.ModelInput.Tokens,
        dynamo.ModelType.Chat,
        ep,
        "livetail-test",
        "livetail-test",
        worker_type=dynamo.WorkerType.Aggregated,
        kv_cache_block_size=BLOCK,
        skip_model_assets=True,
    )
    serving = ep.serve_endpoint(handler)
    coord = livetail.Coordinator(
        [livetail.GroupSpec("full", BLOCK)], livetail.BlockPool(64, events=True)
    )
    pub = KVEventPublisher("tcp://127.0.0.1:0", coord.specs)
    relay = dynamo.KvEventPublisher(ep, kv_block_size=BLOCK, zmq_endpoint=pub.endpoint)
    router = dynamo.KvRouter(ep, BLOCK, dynamo.KvRouterConfig())
    try:
        for _ in range(40):  # the relay's subscription comes up
            pub.publish([])
            await asyncio.sleep(0.1)
        tokens = list(range(1, 6 * BLOCK + 1))
        keys = livetail.page_keys(tokens, BLOCK)
        out = []

        async def check() -> None:
            mine = coord.match_prefix(keys).num_tokens // BLOCK
            out.append((await overlap(router, tokens, mine), mine))

        # Names without their token ids: Dynamo cannot hash them and stores nothing.
        bare = list(range(1000, 1000 + 2 * BLOCK))
        bare_keys = livetail.page_keys(bare, BLOCK)
        t = coord.new_tables()
        assert coord.acquire(t, len(bare))
        coord.cache_full_blocks(t, bare_keys, len(bare))
        coord.free(t)
        pub.publish(coord.pool.take_events())

        tables = coord.new_tables()
        assert coord.acquire(tables, len(tokens))
        coord.cache_full_blocks(tables, keys, len(tokens), token_ids=tokens)
        coord.free(tables)
        pub.publish(coord.pool.take_events())  # the default: the names carry the tokens
        await check()
        # Dynamo has applied the earlier batch too (in order): the bare names are not there.
        mine = coord.match_prefix(bare_keys).num_tokens // BLOCK
        out.append((await overlap(router, bare, 0), mine))
        # Evictions index too: a new request takes the oldest free pages.
        other = coord.new_tables()
        assert coord.acquire(other, 61 * BLOCK)  # 63 pages free, 61 taken: 4 names evicted
        pub.publish(coord.pool.take_events())
        await check()
        coord.free(other)
        assert coord.pool.reset_names()
        pub.publish(coord.pool.take_events())
        await check()
        return out
    finally:
        relay.shutdown()
        pub.close()
        rt.shutdown()
        del serving


def test_dynamo_indexes_livetails_default_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every Dynamo socket on loopback, discovery in files under tmp_path.
    for var in ("DYN_TCP_RPC_HOST", "DYN_EVENT_PLANE_HOST", "DYN_TCP_RESPONSE_STREAM_HOST",
                "DYN_SYSTEM_HOST"):  # fmt: skip
        monkeypatch.setenv(var, "127.0.0.1")
    monkeypatch.setenv("DYN_FILE_KV", str(tmp_path / "discovery"))
    # Named with token ids: 6 blocks; named without: livetail holds 2, Dynamo none; then 4 of
    # the 6 evicted (the last slots go first) and a reset: Dynamo agrees.
    assert asyncio.run(scenario(tmp_path)) == [(6, 6), (0, 2), (2, 2), (0, 0)]
