"""Prefix caching, native side: SHA-256 and page_keys inputs, PrefixMatch, stubs, and a
stateful comparison with the spec (names, queue order, reference counts after every step)."""

from __future__ import annotations

import hashlib
import random
import struct
from collections.abc import Callable
from importlib import resources
from typing import Any

import livetail
import livetail.spec as spec
import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from livetail import _core

# --- SHA-256 --------------------------------------------------------------------------------


@pytest.mark.parametrize("accelerated", [False, True])
def test_sha256_equals_hashlib_at_every_padding_boundary(accelerated: bool) -> None:
    rng = random.Random(1)
    for n in list(range(0, 300)) + [1000, 4095, 4096, 65537]:
        data = rng.randbytes(n)
        assert _core._sha256(data, accelerated) == hashlib.sha256(data).digest(), n


@settings(max_examples=300)
@given(data=st.binary(max_size=2000))
def test_sha256_equals_hashlib_on_random_data(data: bytes) -> None:
    want = hashlib.sha256(data).digest()
    assert _core._sha256(data, False) == want
    assert _core._sha256(data, True) == want


def test_sha256_reports_its_compression_function() -> None:
    assert _core._sha256_implementation in ("sha-ni", "portable")


# --- page_keys --------------------------------------------------------------------------------


def chain(tokens: list[int], base: int, salt: bytes = b"") -> list[bytes]:
    keys, prev = [], b""
    for j in range(len(tokens) // base):
        page = struct.pack(f"<{base}I", *tokens[j * base : (j + 1) * base])
        prev = hashlib.sha256(prev + page + salt).digest()
        keys.append(prev)
    return keys


@settings(max_examples=200)
@given(
    tokens=st.lists(st.integers(0, 2**32 - 1), max_size=80),
    base=st.integers(1, 9),
    salt=st.binary(max_size=70),
)
def test_page_keys_are_the_sha256_chain_for_any_tokens_and_salt(
    tokens: list[int], base: int, salt: bytes
) -> None:
    keys = livetail.page_keys(tokens, base, salt=salt)
    assert keys == chain(tokens, base, salt)
    assert all(type(k) is bytes and len(k) == 32 for k in keys)


@pytest.mark.parametrize(
    "dtype", ["<u4", ">u4", "<i4", ">i4", "u1", "i1", "<u2", ">i2", "<i8", ">i8", "<u8", ">u8"]
)
def test_page_keys_read_integer_arrays_of_any_dtype_and_byte_order(dtype: str) -> None:
    rng = np.random.default_rng(3)
    hi = min(np.iinfo(np.dtype(dtype)).max, 2**32 - 1)
    a = rng.integers(0, hi, 203, dtype=np.uint64, endpoint=True).astype(dtype)
    assert livetail.page_keys(a, 8, salt=b"t") == chain([int(x) for x in a], 8, b"t")


def test_page_keys_read_strided_arrays_and_other_sequences() -> None:
    a = np.arange(64, dtype=np.int64)
    assert livetail.page_keys(a[::3], 4) == chain(list(range(0, 64, 3)), 4)
    assert livetail.page_keys(range(20), 5) == chain(list(range(20)), 5)
    assert livetail.page_keys((1, 2, 3, 4), 2) == chain([1, 2, 3, 4], 2)
    assert livetail.page_keys(np.array([1, 2, 3], dtype=object), 1) == chain([1, 2, 3], 1)
    assert livetail.page_keys([np.uint32(7), True, 3], 1) == chain([7, 1, 3], 1)
    assert livetail.page_keys(b"\x01\x02", 1) == chain([1, 2], 1)
    assert livetail.page_keys([1, 2, 3], 2, salt=bytearray(b"s")) == chain([1, 2, 3], 2, b"s")
    assert livetail.page_keys([1, 2], 1, salt=memoryview(b"ab")) == chain([1, 2], 1, b"ab")
    assert livetail.page_keys([1, 2, 3], 4) == []
    assert livetail.page_keys(np.zeros(0, dtype=np.uint32), 1) == []


@pytest.mark.parametrize(
    "tokens",
    [
        np.array([1, -1], dtype=np.int32),
        np.array([2**32], dtype=np.uint64),
        np.array([2**63 - 1], dtype=np.int64),
        [2**32],
        [-1],
        [2**70],
        [-(2**70)],
    ],
    ids=["neg-int32", "2**32-uint64", "int64-max", "2**32", "-1", "2**70", "-2**70"],
)
def test_page_keys_reject_token_ids_outside_uint32_as_value_error(tokens: Any) -> None:
    for lt in (livetail, spec):
        with pytest.raises(ValueError):
            lt.page_keys(tokens, 1)


@pytest.mark.parametrize(
    "tokens",
    [
        np.array([1.0, 2.0]),
        np.array([True, False]),
        np.zeros((2, 2), dtype=np.int32),
        [1, "2"],
        ["x", -1],  # every element is converted before any is range-checked
        3,
        "12",
    ],
    ids=["float", "bool-array", "2-d", "str-item", "str-then-negative", "int", "str"],
)
def test_page_keys_reject_non_integer_tokens_as_type_error(tokens: Any) -> None:
    for lt in (livetail, spec):
        with pytest.raises(TypeError):
            lt.page_keys(tokens, 1)


@pytest.mark.parametrize(
    ("base", "salt", "error"),
    [
        (0, b"", ValueError),
        (2**31, b"", ValueError),
        (-1, b"", ValueError),
        (True, b"", TypeError),
        (1.0, b"", TypeError),
        (1, "salt", TypeError),
        (1, None, TypeError),
    ],
)
def test_page_keys_check_base_and_salt(base: Any, salt: Any, error: type) -> None:
    for lt in (livetail, spec):
        with pytest.raises(error):
            lt.page_keys([1, 2], base, salt=salt)


def test_page_keys_accept_a_numpy_integer_base() -> None:
    assert livetail.page_keys([1, 2], np.int64(2)) == chain([1, 2], 2)


# --- PrefixMatch, keys, stubs ---------------------------------------------------------------------


def small_coordinator(lt: Any = livetail, num_blocks: int = 200) -> Any:
    return lt.Coordinator(
        [
            lt.GroupSpec("full", 16),
            lt.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
            lt.GroupSpec("state", 16),
        ],
        lt.BlockPool(num_blocks),
    )


def computed(c: Any, prompt: list[int], chunk: int = 16) -> tuple[list[Any], list[bytes]]:
    keys = livetail.page_keys(prompt, c.base_block_size)
    ts = c.new_tables()
    done = 0
    while done < len(prompt):
        n = min(chunk, len(prompt) - done)
        assert c.acquire(ts, n)
        done += n
        c.cache_full_blocks(ts, keys, done)
        c.reclaim_expired(ts, done)
    return ts, keys


def test_prefix_match_has_int32_pages_per_group_and_a_repr() -> None:
    c = small_coordinator()
    _, keys = computed(c, list(range(64)))
    m = c.match_prefix(keys)
    assert isinstance(m, livetail.PrefixMatch)
    assert m.num_tokens == 64 and type(m.num_tokens) is int
    pages = m.pages
    assert isinstance(pages, list) and len(pages) == 3
    assert all(isinstance(p, np.ndarray) and p.dtype == np.int32 for p in pages)
    assert [len(p) for p in pages] == [4, 8, 4]
    assert repr(m) == "PrefixMatch(num_tokens=64, real_pages=7)"
    pages[0][:] = 0  # a copy: the match is untouched
    assert all(m.pages[0])


def test_prefix_match_is_not_constructible_from_python() -> None:
    with pytest.raises(TypeError):
        livetail.PrefixMatch()  # type: ignore[call-arg]


def test_claim_and_consumed_reject_a_non_match_as_type_error() -> None:
    c = small_coordinator()
    with pytest.raises(TypeError):
        c.claim(c.new_tables(), None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        c.blocks_consumed_by_claim("match")  # type: ignore[arg-type]


def test_claimed_tables_keep_the_pool_alive_and_free_unbinds_them() -> None:
    c = small_coordinator()
    _, keys = computed(c, list(range(64)))
    ts = c.new_tables()
    c.claim(ts, c.match_prefix(keys))
    assert all(t.pool is c.pool for t in ts)
    c.free(ts)
    assert all(t.pool is None for t in ts)


@pytest.mark.parametrize("lt", [livetail, spec], ids=["native", "spec"])
def test_a_match_of_zero_tokens_still_checks_freshness_and_coordinator(lt: Any) -> None:
    c, d = small_coordinator(lt), small_coordinator(lt)
    m = c.match_prefix([])
    assert m.num_tokens == 0
    busy = c.new_tables()
    assert c.acquire(busy, 8)
    with pytest.raises(ValueError):
        c.claim(busy, m)
    with pytest.raises(ValueError):
        d.claim(d.new_tables(), m)
    with pytest.raises(ValueError):
        d.blocks_consumed_by_claim(m)
    fresh = c.new_tables()
    c.claim(fresh, m)
    assert not any(t.is_bound for t in fresh)


@pytest.mark.parametrize("lt", [livetail, spec], ids=["native", "spec"])
def test_keys_must_be_a_list_or_tuple_of_bytes(lt: Any) -> None:
    c = small_coordinator(lt)
    k = hashlib.sha256(b"x").digest()
    assert c.match_prefix((k,)).num_tokens == 0
    for bad in ([bytearray(k)], k, iter([k]), None):  # a wrong type: TypeError
        with pytest.raises(TypeError, match="keys"):
            c.match_prefix(bad)
    with pytest.raises(ValueError, match="pairwise distinct"):  # a wrong value
        c.match_prefix([k, k])


def test_a_page_evicted_and_named_again_with_the_same_key_keeps_the_match_valid() -> None:
    for lt in (livetail, spec):
        c = lt.Coordinator([lt.GroupSpec("full", 4)], lt.BlockPool(3))  # two pages
        keys = lt.page_keys([1, 2, 3, 4], 4)
        ts = c.new_tables()
        assert c.acquire(ts, 4)
        c.cache_full_blocks(ts, keys, 4)
        c.free(ts)
        m = c.match_prefix(keys)
        assert [list(p) for p in m.pages] == [[1]]
        # Page 2 is taken first, then page 1 (evicting its name), named again with the key.
        hog = lt.BlockTable()
        assert lt.FullAttentionManager(1).acquire(c.pool, hog, 1)
        assert c.acquire(ts, 4)
        assert list(ts[0].page_ids()) == [1] and c.pool.num_cached == 0
        c.cache_full_blocks(ts, keys, 4)
        c.free(ts)
        assert c.blocks_consumed_by_claim(m) == 1
        c.claim(c.new_tables(), m)


def test_lookup_prefers_the_earliest_registered_copy_in_use() -> None:
    prompt = list(range(32))
    for lt in (livetail, spec):
        c = lt.Coordinator([lt.GroupSpec("full", 8)], lt.BlockPool(20))
        keys = lt.page_keys(prompt, 8)
        a, b = c.new_tables(), c.new_tables()
        for ts in (a, b):  # two requests compute the same prompt: two copies of every name
            assert c.acquire(ts, 32)
            c.cache_full_blocks(ts, keys, 32)
        assert c.pool.num_cached == 8
        assert [list(p) for p in c.match_prefix(keys).pages] == [[1, 2, 3, 4]]
        c.free(a)
        assert [list(p) for p in c.match_prefix(keys).pages] == [[5, 6, 7, 8]]
        c.free(b)
        assert [list(p) for p in c.match_prefix(keys).pages] == [[1, 2, 3, 4]]
        assert c.pool.num_cached_free == 8


def test_stubs_describe_prefix_caching() -> None:
    stub = resources.files("livetail").joinpath("_core.pyi").read_text()
    for name in (
        "class PrefixMatch",
        "def page_keys(",
        "def cache_full_blocks(",
        "def match_prefix(self, keys: list[bytes] | tuple[bytes, ...]) -> PrefixMatch",
        "def blocks_consumed_by_claim(",
        "def claim(",
        "def num_cached(self) -> int",
        "def num_cached_free(self) -> int",
    ):
        assert name in stub, name
    assert "PrefixMatch" in livetail.__all__ and "page_keys" in livetail.__all__


# --- many names: hash map growth, deletion and eviction, against the spec -----------------------


def test_thousands_of_names_grow_evict_and_match_like_the_spec() -> None:
    rng = random.Random(5)
    prompts = [[rng.randrange(1000) for _ in range(rng.randrange(16, 160))] for _ in range(60)]
    sides = []
    for lt in (livetail, spec):
        c = lt.Coordinator(
            [
                lt.GroupSpec("full", 4),
                lt.GroupSpec("sliding", 2, sliding_window=5, live_tail_alloc=True),
            ],
            lt.BlockPool(700),
        )
        sides.append((lt, c, [lt.page_keys(p, c.base_block_size) for p in prompts]))
    order = [rng.randrange(len(prompts)) for _ in range(400)]
    for i in order:
        seen = []
        for _lt, c, keys in sides:
            m = c.match_prefix(keys[i])
            ts = c.new_tables()
            c.claim(ts, m)
            done = m.num_tokens
            while done < len(prompts[i]):
                n = min(24, len(prompts[i]) - done)
                assert c.acquire(ts, n)
                done += n
                c.cache_full_blocks(ts, keys[i], done)
                c.reclaim_expired(ts, done)
            c.free(ts)
            pool = c.pool
            seen.append(
                (
                    m.num_tokens,
                    [list(map(int, p)) for p in m.pages],
                    pool.num_cached,
                    pool.num_cached_free,
                    list(map(int, pool.free_queue())),
                )
            )
        assert seen[0] == seen[1]
    assert sides[0][1].pool.num_cached > 300


# --- stateful comparison with the spec ----------------------------------------------------------

LAYOUTS: dict[str, Callable[[Any], list[Any]]] = {
    # base 8, lcm 16: full, live-tail sliding (R = 2 of m = 2), state.
    "full-live-state": lambda lt: [
        lt.GroupSpec("full", 16),
        lt.GroupSpec("sliding", 8, sliding_window=12, live_tail_alloc=True),
        lt.GroupSpec("state", 16),
    ],
    # base 4, lcm 8: a window of 1 (R = 0: every boundary supported with no page).
    "full-live-w1": lambda lt: [
        lt.GroupSpec("full", 4),
        lt.GroupSpec("sliding", 4, sliding_window=6, live_tail_alloc=True),
        lt.GroupSpec("sliding", 8, sliding_window=1, live_tail_alloc=True),
    ],
    # base 2, lcm 8: no full group, so support is not monotone in the boundary.
    "sliding-state": lambda lt: [
        lt.GroupSpec("sliding", 2, sliding_window=5, live_tail_alloc=True),
        lt.GroupSpec("sliding", 8, sliding_window=9),
        lt.GroupSpec("state", 4),
    ],
}

COMMON = list(range(100, 148))
PROMPTS = [
    COMMON,
    COMMON + [7] * 20,
    COMMON[:24] + [9] * 30,
    COMMON[:40] + [3] * 9,
    [5] * 40,
]
REQUESTS = 3


def outcome(fn: Callable[[], Any]) -> Any:
    """A call's result, or the type of the exception it raised."""
    try:
        return ("ok", fn())
    except (ValueError, TypeError) as e:
        return ("raised", type(e).__name__)


def norm(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [int(x) for x in v]
    if isinstance(v, (list, tuple)):
        return [norm(x) for x in v]
    if isinstance(v, (livetail.PrefixMatch, spec.PrefixMatch)):
        return (v.num_tokens, norm(v.pages))
    return v


class Side:
    def __init__(self, lt: Any, layout: str, num_blocks: int) -> None:
        self.lt = lt
        self.pool = lt.BlockPool(num_blocks)
        self.coord = lt.Coordinator(LAYOUTS[layout](lt), self.pool)
        self.keys = [lt.page_keys(p, self.coord.base_block_size) for p in PROMPTS]
        self.tables = [self.coord.new_tables() for _ in range(REQUESTS)]
        self.hog = lt.BlockTable()
        self.hogger = lt.FullAttentionManager(1)
        self.matches: list[Any] = []

    def state(self) -> Any:
        pool = self.pool
        return (
            norm(pool.free_queue()),
            norm(pool.ref_counts()),
            pool.num_cached,
            pool.num_cached_free,
            [
                [(norm(t.page_ids()), t.tail_available, t.reclaim_floor, t.is_bound) for t in ts]
                for ts in self.tables
            ],
            norm(self.hog.page_ids()),
        )


class PrefixCachingAgainstSpec(RuleBasedStateMachine):
    """Requests share prompt prefixes through a small pool; native and spec move together."""

    @initialize(layout=st.sampled_from(sorted(LAYOUTS)), num_blocks=st.integers(10, 70))
    def setup(self, layout: str, num_blocks: int) -> None:
        self.sides = [Side(livetail, layout, num_blocks), Side(spec, layout, num_blocks)]
        assert self.sides[0].keys == self.sides[1].keys
        self.prompt = [0] * REQUESTS  # prompt index of each request
        self.done = [0] * REQUESTS  # tokens computed
        self.active = [False] * REQUESTS

    def both(self, fn: Callable[[Side], Any]) -> Any:
        native, model = (outcome(lambda s=s: norm(fn(s))) for s in self.sides)
        assert native == model
        return native

    # -- admission: match -> charge -> claim ------------------------------------------------

    @rule(
        r=st.integers(0, REQUESTS - 1), p=st.integers(0, len(PROMPTS) - 1), cut=st.integers(0, 30)
    )
    def admit(self, r: int, p: int, cut: int) -> None:
        if self.active[r]:
            self.both(lambda s: s.coord.free(s.tables[r]))
        keys_len = max(0, len(self.sides[0].keys[p]) - cut % 8)
        for s in self.sides:
            s.matches.append(s.coord.match_prefix(s.keys[p][:keys_len]))
        self.both(lambda s: s.matches[-1])
        self.both(lambda s: s.coord.blocks_consumed_by_claim(s.matches[-1]))
        kind, _ = self.both(lambda s: s.coord.claim(s.tables[r], s.matches[-1]))
        assert kind == "ok"
        event(f"admit: hit {self.sides[0].matches[-1].num_tokens > 0}")
        self.prompt[r], self.done[r], self.active[r] = p, self.sides[0].matches[-1].num_tokens, True

    @rule(r=st.integers(0, REQUESTS - 1), i=st.integers(0, 50))
    def claim_an_old_match(self, r: int, i: int) -> None:
        """A stored match, perhaps stale or into a busy table: both raise or both claim."""
        if not self.sides[0].matches:
            return
        i %= len(self.sides[0].matches)
        self.both(lambda s: s.coord.blocks_consumed_by_claim(s.matches[i]))
        kind, _ = self.both(lambda s: s.coord.claim(s.tables[r], s.matches[i]))
        event(f"old match: claim {kind}")
        if kind == "ok" and not self.active[r]:
            self.done[r], self.active[r] = self.sides[0].matches[i].num_tokens, True
            self.prompt[r] = -1  # keys unknown: name with any prompt's keys below

    # -- compute: acquire -> name -> reclaim --------------------------------------------------

    @rule(
        r=st.integers(0, REQUESTS - 1),
        n=st.integers(1, 40),
        name=st.booleans(),
        reclaim=st.booleans(),
        p=st.integers(0, len(PROMPTS) - 1),
    )
    def chunk(self, r: int, n: int, name: bool, reclaim: bool, p: int) -> None:
        kind, ok = self.both(lambda s: s.coord.acquire(s.tables[r], n))
        if kind != "ok" or not ok:
            return
        self.active[r] = True
        self.done[r] += n
        if self.prompt[r] < 0:
            self.prompt[r] = p
        p = self.prompt[r]
        if name:
            self.both(lambda s: s.coord.cache_full_blocks(s.tables[r], s.keys[p], self.done[r]))
        if reclaim:
            for g in range(len(self.sides[0].tables[r])):
                for uncached in (True, False):
                    self.both(
                        lambda s, g=g, u=uncached: s.coord.managers[g].blocks_reclaimable_at(
                            s.tables[r][g], self.done[r], count_uncached=u
                        )
                    )
            self.both(lambda s: s.coord.reclaim_expired(s.tables[r], self.done[r]))

    @rule(r=st.integers(0, REQUESTS - 1), back=st.integers(0, 40), p=st.integers(0, 4))
    def name_again(self, r: int, back: int, p: int) -> None:
        """Naming at any frontier up to the extent (and one past it), with any prompt's keys."""
        f = max(0, self.done[r] - back) if back != 40 else self.done[r] + 1
        self.both(lambda s: s.coord.cache_full_blocks(s.tables[r], s.keys[p], f))

    @rule(r=st.integers(0, REQUESTS - 1))
    def free(self, r: int) -> None:
        self.both(lambda s: s.coord.free(s.tables[r]))
        self.done[r], self.active[r] = 0, False

    # -- eviction pressure --------------------------------------------------------------------

    @rule(n=st.integers(1, 12))
    def hog(self, n: int) -> None:
        before = self.sides[0].pool.num_cached
        self.both(lambda s: s.hogger.acquire(s.pool, s.hog, n))
        event(f"hog evicted names: {self.sides[0].pool.num_cached < before}")

    @rule()
    def unhog(self) -> None:
        self.both(lambda s: s.hogger.free(s.pool, s.hog))

    # -- every step ---------------------------------------------------------------------------

    @invariant()
    def same_state_and_same_matches(self) -> None:
        if not hasattr(self, "sides"):
            return
        native, model = self.sides
        assert native.state() == model.state()
        for p in range(len(PROMPTS)):  # names compared through what every prompt matches
            m = self.both(lambda s, p=p: s.coord.match_prefix(s.keys[p]))
            assert m[0] == "ok"
        assert native.state() == model.state()  # matching changed nothing


PrefixCachingAgainstSpec.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
test_prefix_caching_against_spec = PrefixCachingAgainstSpec.TestCase
