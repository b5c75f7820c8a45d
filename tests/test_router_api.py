"""livetail.router.PrefixIndex: streams, layouts, hash forms, tiers and bad input."""

from __future__ import annotations

from typing import Any

import livetail
import msgpack
import numpy as np
import pytest
from livetail.events import encode_batch
from livetail.router import PrefixIndex, SequenceGap, key_hashes

KEYS = livetail.page_keys(list(range(1, 65)), 4)  # 16 keys of base 4
H = [int.from_bytes(k[-8:], "big") for k in KEYS]


def stored(hashes: list[Any], group: int = 0, size: int = 4, kind: str = "full_attention",
           window: int | None = None, medium: str | None = "GPU") -> dict[str, Any]:  # fmt: skip
    m: dict[str, Any] = {
        "type": "BlockStored",
        "block_hashes": hashes,
        "parent_block_hash": None,
        "token_ids": [],
        "block_size": size,
        "lora_id": None,
        "medium": medium,
        "lora_name": None,
        "group_idx": group,
        "kv_cache_spec_kind": kind,
    }
    if window is not None:
        m["kv_cache_spec_sliding_window"] = window
    return m


def removed(hashes: list[Any], group: int = 0, medium: str = "GPU") -> dict[str, Any]:
    return {"type": "BlockRemoved", "block_hashes": hashes, "medium": medium, "group_idx": group}


def batch(*events: dict[str, Any]) -> list[Any]:
    return [0.0, list(events), 0]


def test_a_full_group_matches_up_to_its_first_missing_slot() -> None:
    index = PrefixIndex()
    index.apply("e", batch(stored(H[:6]), removed([H[3]])))
    assert index.match_keys(KEYS) == {"e": 12}  # slots 0-2 named, slot 3 gone
    assert index.layout("e") == [(4, "full", None)]


def test_sliding_support_is_not_monotone_the_greatest_boundary_wins() -> None:
    index = PrefixIndex()
    # R = ceil((5 - 1) / 4) = 1: a boundary b needs slot b - 1 only.
    index.apply("e", batch(stored([H[0], H[3], H[9]], kind="sliding_window", window=5)))
    assert index.match_keys(KEYS) == {"e": 40}  # b = 10; b = 1, 4 also hold, b = 2, 3 do not
    assert index.match_keys(KEYS[:9]) == {"e": 16}  # at most 9 keys: b = 4
    # A state group needs the slot that ends at the boundary: the same here.
    index.apply("s", batch(stored([H[0], H[3]], kind="mamba")))
    assert index.match_keys(KEYS) == {"e": 40, "s": 16}


def test_every_group_must_support_the_boundary_on_its_own_page_size() -> None:
    index = PrefixIndex()
    # full B=4 on slots 0-7 (32 tokens), sliding B=8 W=9 (R=1) on its slot 1 (ends at 16).
    index.add_engine("e", [(4, "full_attention", None), (8, "sliding_window", 9)])
    index.apply("e", batch(stored(H[:8]), stored([H[3]], group=1, size=8,
                                                   kind="sliding_window", window=9)))  # fmt: skip
    assert index.match_keys(KEYS) == {"e": 16}
    # A sliding group of W = 1 needs no page at all.
    index.add_engine("w1", [(4, "full_attention", None), (8, "sliding_window", 1)])
    index.apply("w1", batch(stored(H[:7])))
    assert index.match_keys(KEYS) == {"e": 16, "w1": 24}  # lcm 8: 28 rounds down to 24


def test_an_engines_alignment_given_with_its_layout_sets_the_boundary_step() -> None:
    index = PrefixIndex()
    # One full group B=4 with slots 0-9 named (40 tokens): at the lcm (4) the answer is 40;
    # an engine aligned to 16 tokens matches only multiples of 16, so 32 (semantics 13.9).
    index.add_engine("lcm", [(4, "full_attention", None)])
    index.add_engine("a16", [(4, "full_attention", None)], alignment=16)
    index.apply("lcm", batch(stored(H[:10])))
    index.apply("a16", batch(stored(H[:10])))
    assert index.match_keys(KEYS) == {"lcm": 40, "a16": 32}
    slow = PrefixIndex()
    slow._native = False  # the numpy loops answer the same
    slow.add_engine("a16", [(4, "full_attention", None)], alignment=16)
    slow.apply("a16", batch(stored(H[:10])))
    assert slow.match_keys(KEYS) == {"a16": 32}
    # The engine's own coordinator agrees.
    c = livetail.Coordinator([livetail.GroupSpec("full", 4)], livetail.BlockPool(20), alignment=16)
    ts = c.new_tables()
    assert c.acquire(ts, 40)
    c.cache_full_blocks(ts, KEYS, 40)
    assert c.match_prefix(KEYS).num_tokens == 32


def test_an_alignment_without_a_layout_or_off_the_lcm_is_refused() -> None:
    index = PrefixIndex()
    with pytest.raises(ValueError, match="alignment needs the engine's layout"):
        index.add_engine("e", alignment=16)
    with pytest.raises(ValueError, match=r"multiple of the layout's lcm \(8\), got 12"):
        index.add_engine("e", [(4, "full_attention", None), (8, "sliding_window", 9)], alignment=12)
    with pytest.raises(ValueError, match="alignment must be an int >= 1"):
        index.add_engine("e", [(4, "full_attention", None)], alignment=0)
    assert index.engines == []


def test_host_names_count_and_a_cleared_event_drops_both_tiers() -> None:
    index = PrefixIndex()
    index.apply("e", batch(stored(H[:4], medium="CPU"), stored(H[4:6], medium=None)))
    assert index.match_keys(KEYS) == {"e": 24}  # a missing medium is the device
    index.apply("e", batch(removed(H[:4], medium="GPU")))  # not on the device: nothing
    assert index.match_keys(KEYS) == {"e": 24}
    index.apply("e", batch(stored(H[6:8], medium="STORAGE")))  # a tier that does not count
    assert index.match_keys(KEYS) == {"e": 24}
    index.apply("e", batch({"type": "AllBlocksCleared"}, stored(H[:1])))
    assert index.match_keys(KEYS) == {"e": 4}


def test_integer_and_32_byte_hashes_index_alike_and_a_batch_may_be_msgpack() -> None:
    index = PrefixIndex()
    index.apply("ints", encode_batch([stored(H[:5])]))
    index.apply("bytes", encode_batch([stored(KEYS[:5])]))
    assert index.match_keys(KEYS) == {"ints": 20, "bytes": 20}
    assert index.match(list(range(1, 65))) == {"ints": 20, "bytes": 20}
    assert index.match_keys(key_hashes(KEYS)) == {"ints": 20, "bytes": 20}
    assert index.best(list(range(1, 65))) == ("ints", 20)  # a tie: the engine known first
    assert index.names("bytes") == {(0, h): {"GPU"} for h in H[:5]}


def test_sequence_numbers_skip_repeats_and_refuse_gaps_unless_allowed() -> None:
    index = PrefixIndex()
    assert index.apply("e", batch(stored(H[:1])), 0) is True
    assert index.apply("e", batch(stored(H[1:2])), 0) is False  # seen before: skipped
    with pytest.raises(SequenceGap) as gap:
        index.apply("e", batch(stored(H[1:2])), 3)
    assert (gap.value.engine_id, gap.value.expected, gap.value.received) == ("e", 1, 3)
    assert index.expected_sequence("e") == 1 and index.match_keys(KEYS) == {"e": 4}
    with pytest.raises(SequenceGap):
        index.apply("late", batch(stored(H[:1])), 5)  # a new stream starts at 0
    assert index.engines == ["e"]
    assert index.apply("e", batch(stored(H[1:2])), 3, allow_gap=True) is True
    assert index.gaps("e") == [(1, 2)] and index.expected_sequence("e") == 4


def test_layouts_are_learned_checked_and_unknown_groups_answer_zero() -> None:
    index = PrefixIndex()
    index.apply("e", batch(stored(H[:4])), 0)
    before = index.names("e")
    with pytest.raises(ValueError, match="group 0"):
        index.apply("e", batch(stored(H[4:6]), stored(H[:1], size=8)), 1)
    assert index.names("e") == before and index.expected_sequence("e") == 1
    index.apply("e", batch(removed([H[0]], group=2)))  # group 2 exists; 1 and 2 unknown
    assert index.layout("e") == [(4, "full", None), None, None]
    assert index.match_keys(KEYS) == {"e": 0}
    index.add_engine("fixed", [(4, "full_attention", None)])
    with pytest.raises(ValueError, match="outside"):
        index.apply("fixed", batch(stored(H[:1], group=1)))
    with pytest.raises(ValueError, match="layout"):
        index.add_engine("e", [(8, "full_attention", None)])


@pytest.mark.parametrize(
    "bad",
    [
        b"\xc1",  # not msgpack
        [0.0],
        [0.0, "events", 0],
        batch({"type": "BlockMoved"}),
        batch(["BlockStored"]),  # array-encoded events (older vLLM)
        batch(stored([1.5])),
        batch(stored([-1])),
        batch(stored([2**64])),
        batch(stored([True])),
        batch(stored([b""])),
        batch(stored([1, b"x" * 32])),
        batch(stored([1], group=True)),  # type: ignore[arg-type]
        batch(stored([1], kind="cross_attention")),
        batch(stored([1], kind="sliding_window")),  # no window
        batch(stored([1], size=0)),
        batch(dict(stored([1]), medium=3)),
    ],
)
def test_a_malformed_batch_is_a_value_error_and_changes_nothing(bad: Any) -> None:
    index = PrefixIndex()
    index.apply("e", batch(stored(H[:2])), 0)
    with pytest.raises(ValueError):
        index.apply("e", bad, 1)
    assert index.names("e") == {(0, H[0]): {"GPU"}, (0, H[1]): {"GPU"}}
    assert index.expected_sequence("e") == 1 and index.layout("e") == [(4, "full", None)]


def test_queries_check_their_keys_and_bases() -> None:
    index = PrefixIndex()
    index.apply("a", batch(stored(H[:2])))
    index.apply("b", batch(stored(H[:2], size=8)))
    with pytest.raises(ValueError, match="base_block_size"):
        index.match_keys(KEYS)
    assert index.match_keys(KEYS, 4) == {"a": 8}
    assert index.match_keys(KEYS[:3], 8) == {"b": 16}  # taken as base-8 keys, as told
    with pytest.raises(ValueError, match="32 bytes"):
        index.match_keys([b"x" * 31, b"y" * 33], 4)
    with pytest.raises(TypeError):
        index.match_keys(np.zeros(3, np.int64), 4)
    with pytest.raises(TypeError):
        index.apply(["unhashable"], batch())
    with pytest.raises(KeyError):
        index.gaps("nobody")


def test_removing_an_engine_forgets_its_names_and_stream() -> None:
    index = PrefixIndex()
    index.apply("a", batch(stored(H[:3])), 0)
    index.apply("b", batch(stored(H[:2])), 0)
    index.remove_engine("a")
    assert index.engines == ["b"] and index.match_keys(KEYS) == {"b": 8}
    assert index.apply("a", batch(stored(H[:1])), 0) is True  # a restarted engine
    assert index.match_keys(KEYS) == {"b": 8, "a": 4}


def test_many_names_grow_the_table_and_survive_compaction() -> None:
    rng = np.random.default_rng(1)
    hs = [int(x) for x in rng.integers(1, 2**63, 5000, dtype=np.int64)]
    index = PrefixIndex()
    index.apply("e", batch(stored(H[:8])))
    for i in range(0, 5000, 500):
        index.apply("other", batch(stored(hs[i : i + 500])))
        index.apply("other", batch(removed(hs[i : i + 400])))
    assert index.match_keys(KEYS) == {"e": 32, "other": 0}
    assert len(index.names("other")) == 1000
    assert msgpack.unpackb(encode_batch([]), raw=False)[1] == []


def test_mla_kinds_follow_the_full_and_sliding_rules() -> None:
    index = PrefixIndex()
    index.apply("mla", batch(stored(H[:3], kind="mla_attention")))
    index.apply("swa", batch(stored([H[0], H[3]], kind="sliding_window_mla", window=5)))
    assert index.layout("mla") == [(4, "full", None)]
    assert index.layout("swa") == [(4, "sliding", 5)]
    assert index.match_keys(KEYS) == {"mla": 12, "swa": 16}
