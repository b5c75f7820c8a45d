"""livetail.router's native loops (native/src/router.cpp) against its numpy loops.

The same streams go into an index on the native probes and boundary search and into one on
numpy alone: rows, names and every answer must be equal, on tables small enough that probes
collide and grow, with full, sliding (non-monotone support) and state groups. The private
hooks refuse wrong arrays with TypeError / ValueError.
"""

from __future__ import annotations

from typing import Any

import livetail.router as router
import livetail.router._index as router_index
import livetail.router._native as router_native
import numpy as np
import pytest
from livetail import _core
from livetail.router import PrefixIndex

LAYOUTS: list[list[Any]] = [
    [(4, "full_attention", None), (4, "sliding_window", 9), (8, "mamba", None)],
    [(8, "full_attention", None), (4, "sliding_window", 6)],
    [(4, "mamba", None), (8, "sliding_window", 13)],  # no full group: every key looked up
    [(4, "sliding_window", 1), (4, "full_attention", None)],
    # Chunked local attention (section 13.2), its chunk size registered up front.
    [(4, "chunked_local_attention", 16), (8, "full_attention", None)],
    [(4, "chunked_local_attention", 8), (8, "sliding_window", 13)],  # no full group
]


def stored(hashes: list[int], group: int, layout: list[Any]) -> dict[str, Any]:
    size, kind, window = layout[group]
    return {
        "type": "BlockStored",
        "block_hashes": hashes,
        "block_size": size,
        "medium": "GPU",
        "group_idx": group,
        "kv_cache_spec_kind": kind,
        "kv_cache_spec_sliding_window": window,
    }


def removed(hashes: list[int], group: int, medium: str = "GPU") -> dict[str, Any]:
    return {"type": "BlockRemoved", "block_hashes": hashes, "medium": medium, "group_idx": group}


def test_the_native_module_is_what_an_index_uses() -> None:
    assert router_native.NATIVE is True and PrefixIndex()._native is True


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("first_chunk", [1, 3, 512])
def test_native_and_numpy_indexes_agree_on_rows_names_and_answers(
    seed: int, first_chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router_index, "_FIRST_CHUNK", first_chunk)
    rng = np.random.default_rng(seed)
    native, numpy_only = PrefixIndex(), PrefixIndex()
    numpy_only._native = False
    # Prompts of 48 keys (base 4) sharing their first 16: hashes drawn from a small range
    # so that different engines name the same hashes and removals hit names never stored.
    prompts = [rng.integers(1, 2**64, 48, dtype=np.uint64) for _ in range(4)]
    for p in prompts[1:]:
        p[:16] = prompts[0][:16]
    for e, layout in enumerate(LAYOUTS):
        for index in (native, numpy_only):
            index.add_engine(e, layout)
    for step in range(60):
        e = int(rng.integers(len(LAYOUTS)))
        layout = LAYOUTS[e]
        events = []
        for _ in range(int(rng.integers(1, 4))):
            g = int(rng.integers(len(layout)))
            k = layout[g][0] // 4  # base pages per slot: slot j is named by key (j+1)*k - 1
            keys = prompts[int(rng.integers(len(prompts)))][k - 1 :: k]
            pick = rng.random(len(keys)) < rng.random()
            hashes = [int(x) for x in keys[pick]]
            if rng.random() < 0.3:
                events.append(removed(hashes, g, "GPU" if rng.random() < 0.8 else "CPU"))
            else:
                events.append(stored(hashes, g, layout))
        if step % 25 == 24:
            events.append({"type": "AllBlocksCleared"})
        batch = [0.0, events, 0]
        assert native.apply(e, batch) is True
        assert numpy_only.apply(e, batch) is True
        for n in (0, 1, 5, 16, 17, 48):
            for p in prompts:
                assert native.match_keys(p[:n].copy()) == numpy_only.match_keys(p[:n].copy())
    every = np.concatenate(prompts + [rng.integers(1, 2**64, 64, dtype=np.uint64)])
    assert np.array_equal(native._lookup(every), numpy_only._lookup(every))
    assert np.array_equal(native._lookup(every), _numpy_lookup(native, every))
    for e in range(len(LAYOUTS)):
        assert native.names(e) == numpy_only.names(e)
    answers = [native.match_keys(p) for p in prompts]
    assert any(t > 0 for a in answers for t in a.values())  # the streams did name prefixes


def _numpy_lookup(index: PrefixIndex, h: np.ndarray) -> np.ndarray:
    """The numpy probe over the native index's own table."""
    index._native = False
    try:
        return index._lookup(h)
    finally:
        index._native = True


def test_growth_and_compaction_keep_both_tables_equal_in_content() -> None:
    rng = np.random.default_rng(1)
    native, numpy_only = PrefixIndex(), PrefixIndex()
    numpy_only._native = False
    hashes = [int(x) for x in rng.integers(1, 2**64, 5000, dtype=np.uint64)]
    layout = [(16, "full_attention", None)]
    for i in range(0, 5000, 250):
        for index in (native, numpy_only):
            index.apply(0, [0.0, [stored(hashes[i : i + 250], 0, layout)], 0])
            index.apply(0, [0.0, [removed(hashes[i : i + 100], 0)], 0])  # rows to compact
    assert native._bits == numpy_only._bits and native._bits > 10
    assert native.names(0) == numpy_only.names(0)
    h = np.array(hashes, np.uint64)
    assert np.array_equal(native._lookup(h), numpy_only._lookup(h))
    full = native.match_keys(h[100:250], 16)
    assert full == numpy_only.match_keys(h[100:250], 16) == {0: 150 * 16}


def test_native_hooks_refuse_wrong_arrays() -> None:
    table = np.zeros((16, 2), np.uint64)
    h = np.array([5, 6], np.uint64)
    rows = np.array([1, 2], np.int32)
    _core._router_place(table, 4, h, rows)
    assert _core._router_lookup(table, 4, np.array([6, 5, 7], np.uint64)).tolist() == [2, 1, 0]
    with pytest.raises(TypeError, match="hashes"):
        _core._router_lookup(table, 4, h.astype(np.int32))
    with pytest.raises(TypeError, match="table"):
        _core._router_lookup([[0, 0]], 4, h)
    with pytest.raises(ValueError, match=r"shape \(2\*\*bits, 2\)"):
        _core._router_lookup(table, 3, h)
    with pytest.raises(TypeError, match="table"):
        _core._router_place(table[::2], 3, h, rows)  # not contiguous
    with pytest.raises(ValueError, match="rows must be >= 1"):
        _core._router_place(table, 4, np.array([9], np.uint64), np.array([0], np.int32))
    with pytest.raises(ValueError, match="one row per hash"):
        _core._router_place(table, 4, h, rows[:1])
    full = np.zeros((2, 2), np.uint64)
    _core._router_place(full, 1, h, rows)
    with pytest.raises(ValueError, match="no free slot"):
        _core._router_place(full, 1, np.array([7], np.uint64), np.array([3], np.int32))
    presence = np.ones((3, 2), np.uint8)
    rules = np.array([[4, -1, 0, 0]], np.int64)
    assert _core._router_longest(presence, rows, 4, 4, rules) == (8, True)
    assert _core._router_longest(presence, np.zeros(0, np.int32), 4, 4, rules) == (0, True)
    with pytest.raises(ValueError, match="rows: a row outside presence"):
        _core._router_longest(presence, np.array([3], np.int32), 4, 4, rules)
    with pytest.raises(ValueError, match="lcm"):
        _core._router_longest(presence, rows, 4, 6, rules)
    with pytest.raises(ValueError, match="rules"):
        _core._router_longest(presence, rows, 4, 4, np.array([[4, -1, 2, 0]], np.int64))
    with pytest.raises(ValueError, match="rules"):
        _core._router_longest(presence, rows, 4, 4, np.array([[4, -1, 0]], np.int64))
    with pytest.raises(ValueError, match="rules"):  # a chunked group has resume 0
        _core._router_longest(presence, rows, 4, 4, np.array([[4, 1, 0, 2]], np.int64))
    with pytest.raises(ValueError, match="rules"):
        _core._router_longest(presence, rows, 4, 4, np.array([[4, 0, 0, -1]], np.int64))
    # A chunked group of 2 slots per chunk, slot 0 present only: boundary 4 (b = 1) needs
    # slot 0, boundary 8 (b = 2) none; keys of 3 slots: the greatest is 8.
    chunked = np.array([[4, 0, 0, 2]], np.int64)
    sparse = np.array([[1, 0], [0, 0], [0, 0]], np.uint8)
    three = np.array([0, 1, 2], np.int32)
    assert _core._router_longest(sparse, three, 4, 4, chunked) == (8, False)
    assert _core._router_longest(sparse, three[:1], 4, 4, chunked) == (4, False)
    with pytest.raises(TypeError, match="rules"):
        _core._router_longest(presence, rows, 4, 4, rules.astype(np.int32))


def test_key_hashes_native_and_numpy_agree_and_refuse_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    keys = [bytes(range(i, i + 32)) for i in range(5)]
    want = [int.from_bytes(k[-8:], "big") for k in keys]
    native = router.key_hashes(keys)
    assert native.dtype == np.uint64 and native.tolist() == want
    assert router.key_hashes(tuple(keys)).tolist() == want
    assert _core._router_key_hashes([bytearray(keys[0])]) is None  # numpy decides
    assert router.key_hashes([bytearray(keys[0])]).tolist() == want[:1]
    bad: list[tuple[Any, type[Exception], str]] = [
        ("abc", TypeError, "list of 32-byte"),
        ([keys[0], 7], TypeError, "bytes objects"),
        ([keys[0], b"short"], ValueError, "32 bytes"),
    ]
    for arg, error, message in bad:
        with pytest.raises(error, match=message):
            router.key_hashes(arg)
    monkeypatch.setattr(router_native, "NATIVE", False)
    assert router.key_hashes(keys).tolist() == want
    assert router.key_hashes([]).tolist() == []
    for arg, error, message in bad:
        with pytest.raises(error, match=message):
            router.key_hashes(arg)


def test_longest_many_equals_longest_engine_by_engine() -> None:
    """One call for several engines (the keys' presence rows read once) gives each engine's
    _router_longest answer, for random presence over full, sliding and state groups."""
    rng = np.random.default_rng(5)
    width, nrows = 12, 40
    engines = [  # (lcm, rules): base 4; rules (size, resume, column, slots per chunk)
        (8, [[4, -1, 0, 0], [4, 2, 1, 0], [8, 1, 2, 0]]),
        (4, [[4, 2, 3, 0], [4, 1, 4, 0]]),  # no full group
        (8, [[8, -1, 5, 0], [4, 0, 6, 0]]),  # a W = 1 group: resume 0
        (8, [[4, -1, 7, 0], [8, 2, -1, 0]]),  # a group that never named a page
        (16, [[16, -1, 8, 0], [4, 3, 9, 0], [8, 1, 10, 0]]),
        (16, [[4, -1, 11, 0], [4, 0, 0, 2]]),  # a chunked group, 2 slots per chunk
    ]
    rules = np.array([r for _, rs in engines for r in rs], np.int64)
    ends = np.cumsum([len(rs) for _, rs in engines], dtype=np.int64)
    lcms = np.array([lcm for lcm, _ in engines], np.int64)
    for trial in range(60):
        presence = (rng.random((nrows, width)) < 0.2 + 0.012 * trial).astype(np.uint8)
        presence[0] = 0  # the null row
        rows = rng.integers(0, nrows, size=int(rng.integers(0, 48)), dtype=np.int32)
        want = [
            _core._router_longest(presence, rows, 4, lcm, np.array(rs, np.int64))
            for lcm, rs in engines
        ]
        assert _core._router_longest_many(presence, rows, 4, lcms, rules, ends) == want
    assert _core._router_longest_many(presence, rows, 4, lcms[:0], rules[:0], ends[:0]) == []
    with pytest.raises(ValueError, match="rows: a row outside presence"):
        _core._router_longest_many(presence, np.array([nrows], np.int32), 4, lcms, rules, ends)
    with pytest.raises(ValueError, match="lcm"):
        _core._router_longest_many(presence, rows, 4, lcms + 2, rules, ends)
    past = ends.copy()
    past[-1] += 1  # one rule more than there are
    with pytest.raises(ValueError, match="ends"):
        _core._router_longest_many(presence, rows, 4, lcms, rules, past)
    with pytest.raises(ValueError, match="ends"):
        desc = ends.copy()
        desc[1] = desc[0] - 1  # the second engine's rules would end before they begin
        _core._router_longest_many(presence, rows, 4, lcms, rules, desc)
    with pytest.raises(ValueError, match="ends"):
        _core._router_longest_many(presence, rows, 4, lcms, rules, ends[:-1])
    with pytest.raises(ValueError, match="rules"):
        bad = rules.copy()
        bad[0, 2] = width
        _core._router_longest_many(presence, rows, 4, lcms, bad, ends)
