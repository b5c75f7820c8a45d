"""Host tier (semantics section 10): a host pool, offload plans and load plans.

The host pool follows section 2 exactly (its own page ids, page 0 null, one FIFO queue,
reference counts, names (group, key), retention); its events carry tier "CPU". The
coordinator (spec/coordinator.py) decides what to copy; the plans here record it and
apply the bookkeeping once the engine has copied (or given up).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import pool_state, slots
from ._args import count, instance
from .pool import BlockPool, Name
from .pool_state import LISTS

if TYPE_CHECKING:
    from .coordinator import Coordinator
    from .table import BlockTable

# Counters only the host pool has, after the device pool's (README: Host tier).
HOST_COUNTERS = ("pages_offloaded", "pages_loaded")

PENDING, COMPLETED, ABORTED = "pending", "completed", "aborted"


class HostPool(BlockPool):
    """Host pages 0 .. num_blocks-1 with the device pool's queue, counts and names."""

    _TIER = "CPU"

    def __init__(self, num_blocks: int, events: bool = False) -> None:
        super().__init__(num_blocks, retention=True, events=events)
        self._host_counters = dict.fromkeys(HOST_COUNTERS, 0)

    def stats(self) -> dict[str, int]:
        """The device pool's counters and gauges, then pages_offloaded and pages_loaded."""
        out = super().stats()
        out.update(self._host_counters)
        return out

    def __repr__(self) -> str:
        return f"HostPool(num_blocks={self.num_blocks}, num_free={self.num_free})"


class _Plan:
    """Copies between the tiers: entry i copies group groups[i]'s slot slots[i]."""

    def __init__(
        self,
        coordinator: Coordinator,
        groups: list[int],
        slots: list[int],
        device_pages: list[int],
        host_pages: list[int],
        names: list[Name],
        parents: list[bytes | None],
        tokens: list[tuple[int, ...] | None] | None = None,
    ) -> None:
        self._coordinator = coordinator
        self._groups = groups
        self._slots = slots
        self._device_pages = device_pages
        self._host_pages = host_pages
        self._names = names
        self._parents = parents  # key of slot - 1 for the stored event, None if unknown
        # The token ids each copied name carries (section 12), None where it carries none.
        self._tokens: list[tuple[int, ...] | None] = (
            tokens if tokens is not None else [None] * len(groups)
        )
        self._state = PENDING

    @property
    def num_pages(self) -> int:
        return len(self._groups)

    @property
    def groups(self) -> list[int]:
        return list(self._groups)

    @property
    def slots(self) -> list[int]:
        return list(self._slots)

    @property
    def device_pages(self) -> list[int]:
        return list(self._device_pages)

    @property
    def host_pages(self) -> list[int]:
        return list(self._host_pages)

    @property
    def state(self) -> str:
        """'pending' until completed or aborted (a load also aborts when its request is freed)."""
        return self._state

    def _check(self, c: Coordinator, what: str) -> None:
        if c._host is None:
            raise ValueError(f"{what}: the coordinator has no host pool")
        if self._coordinator is not c:
            raise ValueError("plan comes from another coordinator")
        if self._state != PENDING:
            raise ValueError(f"plan was {self._state} already")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_pages={self.num_pages}, state={self._state!r})"


class OffloadPlan(_Plan):
    """Device page -> host page copies; each device page holds one extra reference meanwhile."""


class LoadPlan(_Plan):
    """Host page -> device page copies into a claimed request's real slots."""

    def __init__(self, plan: _Plan, tables: list[BlockTable]) -> None:
        super().__init__(
            plan._coordinator,
            plan._groups,
            plan._slots,
            plan._device_pages,
            plan._host_pages,
            plan._names,
            plan._parents,
            plan._tokens,
        )
        self._tables = tables  # the request's tables; freeing one aborts the load


def offload_set(c: Coordinator, tables: list[BlockTable], n: int) -> list[tuple[int, int]]:
    """(group, slot) of every reachable named slot up to n tokens, by group then slot."""
    out: list[tuple[int, int]] = []
    align = c.alignment
    for g, (m, t) in enumerate(zip(c._managers, tables)):
        B = m.block_size
        R, q = c._resume(g), align // B
        # Every slot up to n that spec/slots.py's reachable rule picks: for a sliding or
        # state group the R slots behind every aligned boundary up to n, all a match can use.
        for j in range(n // B):
            page = t.slots[j]
            if m.kind == "chunked":  # its resume count is the one at the boundary deciding
                R = c._resume_at(g, (j // q + 1) * q)
            if slots.reachable(j, n, B, R, q) and page != 0 and c._pool._is_cached(page):
                out.append((g, j))
    return out


def plan_offload(
    c: Coordinator, tables: Sequence[BlockTable], num_tokens: int, max_pages: int | None = None
) -> OffloadPlan | None:
    """Host pages for every reachable named device page whose name the host lacks.

    With ``max_pages`` (semantics 13.7) only the first ``max_pages`` of them in write-back
    order (``write_back_order``: the lowest aligned boundary's pages first, groups in order,
    a group's slots ascending), listed by group then slot like a whole plan. None (nothing
    changed) when the host pool has too few free pages for the pages listed.
    """
    c._need_host("plan_offload")
    n = count("num_tokens", num_tokens)
    limit = None if max_pages is None else count("max_pages", max_pages)
    ts = c._check_tables(tables)
    for m, t in zip(c._managers, ts):
        if n > m._extent(t):
            raise ValueError(f"num_tokens={n} is past the table's extent ({m._extent(t)})")
    return _plan(c, ts, n, limit)


def write_back_order(c: Coordinator, entries: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (group, slot) entries by the aligned boundary each first serves
    (``slots.offload_rank``), then group, then slot: the order a partial plan takes them in."""
    align = c.alignment
    return sorted(
        entries,
        key=lambda e: (int(slots.offload_rank(e[1], align // c._managers[e[0]].block_size)), e),
    )


def _plan(
    c: Coordinator, tables: list[BlockTable], n: int, limit: int | None
) -> OffloadPlan | None:
    host = c._host
    assert host is not None
    pool = c._pool
    picked: list[tuple[int, int, int, Name, bytes | None]] = []
    tokens: list[tuple[int, ...] | None] = []
    lacking = [(g, j) for g, j in offload_set(c, tables, n) if not _on_host(c, tables[g].slots[j])]
    if limit is not None and limit < len(lacking):
        chosen = set(write_back_order(c, lacking)[:limit])
        lacking = [e for e in lacking if e in chosen]
    for g, j in lacking:
        page = tables[g].slots[j]
        name = pool._name(page)
        assert name is not None
        prev = tables[g].slots[j - 1] if j > 0 else 0
        prev_name = pool._name(prev) if prev else None
        picked.append((g, j, page, name, prev_name[1] if prev_name else None))
        tokens.append(pool._name_tokens(name))
    host_pages = host._allocate(len(picked))
    if host_pages is None:
        return None
    for _, _, page, _, _ in picked:
        pool_state.pin(pool, page, LISTS)  # the copy's reference: not reused meanwhile
    return OffloadPlan(
        c,
        [e[0] for e in picked],
        [e[1] for e in picked],
        [e[2] for e in picked],
        host_pages,
        [e[3] for e in picked],
        [e[4] for e in picked],
        tokens,
    )


def _on_host(c: Coordinator, page: int) -> bool:
    """Does the host hold the name of this named device page already?"""
    assert c._host is not None
    return c._pool._name(page) in c._host._pages_named


def _end_plan(c: Coordinator, plan: _Plan, completed: bool) -> None:
    """Complete or abort a plan, entry by entry, as spec/slots.py's host-tier rules say.

    Each entry ``ends_entry`` visits: its ``copy_target`` page takes ``copy_name`` (a name
    new to that pool is a stored event); then the host references ``drops_host`` names are
    released, last entry first, then the device references ``drops_device`` names, last
    entry first; each released page joins the queue where ``joins_front`` says (the pool).
    A device page whose request was freed meanwhile re-enters the queue here.
    """
    host = c._host
    assert host is not None
    load = isinstance(plan, LoadPlan)
    tier = c._pool if load else host  # the pool the copies land in
    k = plan.num_pages
    entries = [i for i in range(k) if slots.ends_entry(i, k)]
    for i in entries:
        name = slots.copy_name(plan._names[i], completed)
        if name != 0:
            page = slots.copy_target(plan._device_pages[i], plan._host_pages[i], load)
            toks = plan._tokens[i]
            if tier._set_name(page, name, toks) and tier._events_on:
                tier._note_stored(plan._groups[i], plan._slots[i], name[1], plan._parents[i], toks)
    if completed:
        tier._end_event_op()
        host._host_counters["pages_loaded" if load else "pages_offloaded"] += k
    host._release([plan._host_pages[i] for i in entries if slots.drops_host(load, completed)])
    for i in reversed(entries):
        if slots.drops_device(load, completed):
            c._pinned[plan._groups[i]] -= c._pool._release([plan._device_pages[i]])
    state = COMPLETED if completed else ABORTED
    if isinstance(plan, LoadPlan):
        _finish_load(plan, state)
    else:
        plan._state = state


def complete_offload(c: Coordinator, plan: object) -> None:
    """The engine copied: each host page takes its device page's name, the references drop."""
    instance("plan", plan, OffloadPlan)
    assert isinstance(plan, OffloadPlan)
    plan._check(c, "complete_offload")
    _end_plan(c, plan, True)


def abort_offload(c: Coordinator, plan: object) -> None:
    """The engine gave up: the host pages return unnamed, the references drop."""
    instance("plan", plan, OffloadPlan)
    assert isinstance(plan, OffloadPlan)
    plan._check(c, "abort_offload")
    _end_plan(c, plan, False)


def complete_load(c: Coordinator, plan: object) -> None:
    """The engine copied: each device page takes its entry's name, the host pins drop."""
    instance("plan", plan, LoadPlan)
    assert isinstance(plan, LoadPlan)
    plan._check(c, "complete_load")
    _end_plan(c, plan, True)


def abort_load_on_free(plan: LoadPlan) -> None:
    """A request freed before its load completed: the host pins drop, the plan is aborted.

    The device pages need nothing here (``drops_device``): they are ordinary unnamed slots
    of the tables being freed, so the free returns them to the front of the device queue
    like any unnamed page.
    """
    _end_plan(plan._coordinator, plan, False)


def _finish_load(plan: LoadPlan, state: str) -> None:
    plan._state = state
    for t in plan._tables:
        if t.load is plan:
            t.load = None
