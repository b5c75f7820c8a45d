"""Block pool (semantics section 2): page 0 is the null page, free pages in one queue.

Retention rule: a page whose count drops to 0 joins the back of the queue if it carries a
prefix-cache name (evicted oldest first) and the front if it carries none (reused first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import pool_state, slots
from ._args import bounded, count
from .pool_state import LISTS

# A page's prefix-cache name: (group index, 32-byte key).
Name = tuple[int, bytes]

# An event (semantics sections 11-12): (kind, tier, group, keys, parent, first_slot,
# token_ids). "stored" carries the keys of consecutive group slots from first_slot on, in
# chain order, parent the key of slot first_slot - 1 (None at slot 0), and the token ids of
# those slots (block_size per key, in key order) when the names carry tokens, else ();
# "removed" carries dropped names' keys (parent and first_slot None, tokens ()); "cleared"
# (reset_names) is ("cleared", tier, -1, (), None, None, ()). The device pool's tier is "GPU".
Event = tuple[str, str, int, tuple[bytes, ...], "bytes | None", "int | None", tuple[int, ...]]

# The monotone counters of stats(), in order (README: Counters).
COUNTERS = (
    "pages_allocated",
    "pages_released",
    "pages_named",
    "pages_evicted",
    "names_stored",
    "names_removed",
    "match_calls",
    "match_tokens_queried",
    "match_tokens_matched",
    "pages_claimed",
    "pages_claimed_free",
)


class BlockPool:
    """Pages 0 .. num_blocks-1; page 0 is never allocated, freed, counted or cached."""

    _TIER = "GPU"  # the tier its events carry (the host pool's is "CPU")

    def __init__(self, num_blocks: int, retention: bool = True, events: bool = False) -> None:
        self._num_blocks = bounded("num_blocks", num_blocks, 1)
        if not isinstance(retention, bool):
            raise TypeError(f"retention must be a bool, got {type(retention).__name__}")
        if not isinstance(events, bool):
            raise TypeError(f"events must be a bool, got {type(events).__name__}")
        self._counters = dict.fromkeys(COUNTERS, 0)
        self._events_on = events
        # [kind, group, keys, parent, first_slot, op, tokens (a list, None: no tokens)]
        self._events: list[list[object]] = []
        self._op = 0  # events join only within one operation
        # retention=False keeps the earlier order (every freed page appended at the back).
        self._retention = retention
        # The free queue: a linked list over the page arrays behind page 0 (spec/pool_state.py),
        # the stack of unnamed released pages, then the ordered queue (never-used pages, then
        # named released ones) from _mid on; _free counts its pages.
        self._nxt, self._prv = pool_state.queue_links(self._num_blocks)
        self._mid = 1 if self._num_blocks > 1 else 0
        self._free = self._num_blocks - 1
        # Change counter (semantics section 9): bumped by every change to the queue or a
        # reference count, so a step plan can tell it is stale.
        self._version = 0
        self._ref = [0] * self._num_blocks
        # Prefix-cache names: each named page's name, and each name's pages in
        # registration order (several requests may have computed the same prefix).
        self._name_of: dict[int, Name] = {}
        self._pages_named: dict[Name, list[int]] = {}
        # The token ids a name was registered with (section 12), for names that carry them.
        self._tokens_of: dict[Name, tuple[int, ...]] = {}

    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def num_free(self) -> int:
        return self._free

    @property
    def num_pinned(self) -> int:
        return self._num_blocks - 1 - self.num_free

    @property
    def retention(self) -> bool:
        """True: unnamed freed pages go to the queue's front (section 2); False: to the back."""
        return self._retention

    def free_queue(self) -> list[int]:
        """The free pages, next to be allocated first."""
        # The walk stops at a link out of the queue and after num_blocks pages: a broken
        # queue (a wrong transition) shows as a wrong list, never as a walk that never ends.
        out: list[int] = []
        p = self._nxt[0]
        while p > 0 and len(out) < self._num_blocks:
            out.append(p)
            p = self._nxt[p]
        return out

    def ref_count(self, page: int) -> int:
        p = count("page", page)
        if p >= self._num_blocks:
            raise ValueError(f"page must be < num_blocks ({self._num_blocks}), got {p}")
        return self._ref[p]

    def ref_counts(self) -> list[int]:
        return list(self._ref)

    @property
    def num_cached(self) -> int:
        """Pages that carry a prefix-cache name (in use or free)."""
        return len(self._name_of)

    @property
    def num_cached_free(self) -> int:
        """Named pages in the free queue: matchable until an allocation evicts them."""
        return sum(1 for p in self._name_of if self._ref[p] == 0)

    @property
    def num_names(self) -> int:
        """Distinct names (group, key) the pool holds."""
        return len(self._pages_named)

    def stats(self) -> dict[str, int]:
        """The monotone counters, then the gauges num_free .. num_names."""
        out = dict(self._counters)
        out["num_free"] = self.num_free
        out["num_pinned"] = self.num_pinned
        out["num_cached"] = self.num_cached
        out["num_cached_free"] = self.num_cached_free
        out["num_names"] = self.num_names
        return out

    def take_events(self) -> list[Event]:
        """The queued events in order; the queue is empty afterwards."""
        if not self._events_on:
            raise ValueError("take_events: the pool was built with events=False")
        out: list[Event] = []
        for kind, group, keys, parent, first, _, tokens in self._events:
            assert isinstance(kind, str) and isinstance(group, int) and isinstance(keys, list)
            assert parent is None or isinstance(parent, bytes)
            assert first is None or isinstance(first, int)
            assert tokens is None or isinstance(tokens, list)
            toks = tuple(tokens) if tokens is not None else ()
            out.append((kind, self._TIER, group, tuple(keys), parent, first, toks))
        self._events.clear()
        return out

    def _note_stored(
        self,
        group: int,
        slot: int,
        key: bytes,
        parent: bytes | None,
        tokens: tuple[int, ...] | None = None,
    ) -> None:
        """A name new to the pool; joins the last event if it continues its run.

        Runs join only when both parts carry tokens or neither does.
        """
        if self._events:
            e = self._events[-1]
            keys, toks = e[2], e[6]
            assert isinstance(keys, list)
            if (
                e[0] == "stored"
                and e[5] == self._op
                and e[1] == group
                and e[4] == slot - len(keys)
                and (toks is None) == (tokens is None)
            ):
                keys.append(key)
                if tokens is not None:
                    assert isinstance(toks, list)
                    toks.extend(tokens)
                return
        t = list(tokens) if tokens is not None else None
        self._events.append(["stored", group, [key], parent, slot, self._op, t])

    def _note_removed(self, group: int, key: bytes) -> None:
        """A name the pool lost; joins the last event if the same allocation dropped it."""
        if self._events:
            e = self._events[-1]
            keys = e[2]
            assert isinstance(keys, list)
            if e[0] == "removed" and e[5] == self._op and e[1] == group:
                keys.append(key)
                return
        self._events.append(["removed", group, [key], None, None, self._op, None])

    def _end_event_op(self) -> None:
        self._op += 1

    def _allocate(self, k: int) -> list[int] | None:
        """The first k free pages, each with count 1; None (and nothing taken) if short."""
        if k > self.num_free:
            return None
        pages = []
        evicted = False
        for _ in range(k):
            # The queue's head, its name dropped (spec/pool_state.py take, by the rules).
            page, lost, removed, name = pool_state.take(self, LISTS)
            evicted = evicted or lost
            if removed and self._events_on:
                self._note_removed(name[0], name[1])
            pages.append(page)
        if evicted:
            self._end_event_op()
        return pages

    def _release(self, pages: Sequence[int]) -> int:
        """Drop one reference per entry, last entry first; returns pages that became free."""
        return sum(pool_state.release(self, page, LISTS) for page in reversed(pages))

    def _is_cached(self, page: int) -> bool:
        return page in self._name_of

    def _name(self, page: int) -> Name | None:
        return self._name_of.get(page)

    def _set_name(self, page: int, name: Name, tokens: tuple[int, ...] | None = None) -> bool:
        """Names a page; True if the name is new to the pool (which then keeps `tokens`).

        Only a pinned page takes a name: naming never touches the free queue's order."""
        assert self._ref[page] >= 1, f"naming free page {page}"
        return bool(pool_state.set_name(self, page, name, tokens, tokens is not None, LISTS))

    def _name_tokens(self, name: Name) -> tuple[int, ...] | None:
        """The token ids a held name was registered with, None if it carries none."""
        return self._tokens_of.get(name)

    def _drop_name(self, page: int) -> bool:
        """Drops the page's name if it has one (eviction); True if it had one."""
        if page not in self._name_of:
            return False
        removed, name = pool_state.drop_name(self, page, True, LISTS)
        if removed and self._events_on:
            self._note_removed(name[0], name[1])
        return True

    # -- section 12: names for engine adapters -------------------------------------------

    def name(self, page: int) -> Name | None:
        """The page's (group, key), or None (page 0 and unnamed pages). O(1)."""
        p = count("page", page)
        if p >= self._num_blocks:
            raise ValueError(f"page must be < num_blocks ({self._num_blocks}), got {p}")
        return self._name_of.get(p)

    def reset_names(self) -> bool:
        """Drop every name unless a named page is pinned (then False, nothing changed).

        One cleared event; the queue order and every count stay as they were.
        """
        if not slots.clears(sum(1 for p in self._name_of if self._ref[p] >= 1)):
            return False
        pool_state.clear_names(self, len(self._name_of), len(self._pages_named), LISTS)
        if self._events_on:
            self._events.append(["cleared", -1, [], None, None, self._op, None])
        self._end_event_op()
        return True

    def evict_names(self, pages: Iterable[int]) -> int:
        """Drop the names of the given pages (free or pinned); returns how many lost one.

        All-or-nothing on bad input. Unnamed pages are skipped, duplicates count once. A free
        page that loses its name moves to the queue's front as an unnamed release of the same
        list would put it (the list's first page nearest the head).
        """
        if isinstance(pages, (str, bytes, bytearray)) or not isinstance(pages, Iterable):
            raise TypeError(f"pages must be a sequence of page ids, not {type(pages).__name__}")
        ids = []
        for i, page in enumerate(pages):
            p = count(f"pages[{i}]", page)
            if not 1 <= p < self._num_blocks:
                raise ValueError(f"pages[{i}] = {p} is the null page or out of range")
            ids.append(p)
        dropped = 0
        moved: list[int] = []
        for p in ids:
            if self._drop_name(p):  # a repeat finds the page unnamed: counted once
                dropped += 1
                if self._ref[p] == 0:
                    moved.append(p)
        # A page that lost its name goes where an unnamed release would put it.
        for p in reversed(moved):
            pool_state.requeue_unnamed(self, p, LISTS)
        if dropped:
            self._end_event_op()
        return dropped

    def _lookup(self, name: Name) -> int:
        """The earliest registered page in use with this name, else the earliest one; 0 if none."""
        pages = self._pages_named.get(name, [])
        for p in pages:
            if self._ref[p] >= 1:
                return p
        return pages[0] if pages else 0

    def _take_shared(self, page: int) -> None:
        """One more reference to a real page; a free one leaves the queue wherever it is."""
        pool_state.share(self, page, LISTS)

    def __repr__(self) -> str:
        return f"BlockPool(num_blocks={self._num_blocks}, num_free={self.num_free})"
