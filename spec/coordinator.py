"""Coordinator (semantics section 6): several groups over one pool, one table per group.

GroupSpec (and KINDS) live in groups.py and are re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from . import batch as _batch
from . import fork as _fork
from . import geometry as geo
from . import runs, slots
from ._args import count, instance
from .detach import DetachedTables
from .detach import detach as _detach
from .detach import release_detached as _release_detached
from .geometry import INT32_MAX
from .groups import KINDS, GroupSpec
from .host import HostPool, LoadPlan, OffloadPlan, _Plan
from .host import abort_offload as _abort_offload
from .host import complete_load as _complete_load
from .host import complete_offload as _complete_offload
from .host import plan_offload as _plan_offload
from .managers import (
    ChunkedLocalAttentionManager,
    FullAttentionManager,
    SlidingWindowManager,
    StateManager,
    _Manager,
)
from .plan import StepPlan, apply_step, plan_step
from .pool import BlockPool
from .prefix import Name, PrefixMatch, check_keys, check_token_ids
from .prompt import PromptCharges
from .table import BlockTable

__all__ = ["KINDS", "Coordinator", "GroupSpec"]


class Coordinator(PromptCharges):
    """One manager per group spec (group id = index); live-tail groups aligned to ``alignment``.

    ``alignment`` (section 13.9): the token interval prefix hits land on, a positive multiple
    of the lcm of the page sizes (None: the lcm). Live-tail groups keep resume pages behind
    its multiples only, and sliding and state groups name only those (section 13.4).

    A call's tables must be one request's: one per group, all of one extent, none bound by
    another coordinator (an acquire of at least one token or a claim binds tables to their
    coordinator until free or detach); else a ValueError naming the table.
    """

    def __init__(
        self,
        specs: Sequence[GroupSpec],
        pool: BlockPool,
        host: HostPool | None = None,
        *,
        alignment: int | None = None,
    ) -> None:
        if not isinstance(specs, (list, tuple)):
            raise TypeError("specs must be a list of GroupSpec")
        for s in specs:
            instance("specs[i]", s, GroupSpec)
        instance("pool", pool, BlockPool)
        if isinstance(pool, HostPool):
            raise TypeError("pool must be a device BlockPool, not a HostPool")
        if host is not None:
            instance("host", host, HostPool)
        if not specs:
            raise ValueError("specs must name at least one group")
        sizes = [s.block_size for s in specs]
        base = 0
        lcm = 1
        for b in sizes:
            base = math.gcd(base, b)
            lcm = lcm * b // math.gcd(lcm, b)
            if lcm > INT32_MAX:
                raise ValueError(f"the lcm of the block sizes exceeds {INT32_MAX}")
        align = lcm if alignment is None else count("alignment", alignment)
        if not 1 <= align <= INT32_MAX:
            raise ValueError(f"alignment must be in [1, 2**31 - 1], got {align}")
        if align % lcm:
            raise ValueError(
                f"alignment must be a multiple of the lcm of the block sizes ({lcm}), got {align}"
            )
        self._specs = list(specs)
        self._pool = pool
        self._host = host
        self._base = base
        self._lcm = lcm
        self._alignment = align
        self._managers: list[_Manager] = [self._manager(s) for s in specs]
        self._pinned = [0] * len(specs)  # pages each group pins now (section 11)
        # What the tables this coordinator binds remember (native: its id). A token rather
        # than the coordinator itself: a copy of a coordinator and its tables made by the
        # bounded theorems' world copies is the same coordinator.
        self._identity = object()
        for m in self._managers:  # a table this coordinator binds changes only through it
            m._owner = self._identity

    def _manager(self, s: GroupSpec) -> _Manager:
        if s.kind == "full":
            return FullAttentionManager(s.block_size)
        if s.kind == "state":
            return StateManager(s.block_size, s.live_tail_alloc, s.checkpoints)
        if s.kind == "chunked":
            assert s.attention_chunk_size is not None
            return ChunkedLocalAttentionManager(s.block_size, s.attention_chunk_size)
        assert s.sliding_window is not None
        return SlidingWindowManager(
            s.block_size, s.sliding_window, self._alignment if s.live_tail_alloc else 0
        )

    @property
    def base_block_size(self) -> int:
        return self._base

    @property
    def lcm_block_size(self) -> int:
        return self._lcm

    @property
    def alignment(self) -> int:
        """Prefix hits land on multiples of it; live-tail groups keep resume pages behind them."""
        return self._alignment

    @property
    def num_groups(self) -> int:
        return len(self._managers)

    @property
    def pool(self) -> BlockPool:
        return self._pool

    @property
    def host(self) -> HostPool | None:
        """The host tier's pool (section 10), None without one."""
        return self._host

    @property
    def managers(self) -> list[_Manager]:
        return list(self._managers)

    @property
    def specs(self) -> list[GroupSpec]:
        return list(self._specs)

    def new_tables(self) -> list[BlockTable]:
        return [BlockTable() for _ in self._managers]

    def _check_tables(self, tables: object) -> list[BlockTable]:
        if not isinstance(tables, (list, tuple)):
            raise TypeError("tables must be a list with one BlockTable per group")
        if len(tables) != len(self._managers):
            raise ValueError(f"expected {len(self._managers)} tables, got {len(tables)}")
        for t in tables:
            instance("tables[i]", t, BlockTable)
        if len({id(t) for t in tables}) != len(tables):
            raise ValueError("tables must be distinct objects, one per group")
        for m, t in zip(self._managers, tables):
            m._check_table(t)
            m._check_pool(self._pool, t)
        for i, t in enumerate(tables):
            self._check_member(t, tables[0], f"tables[{i}]", "tables[0]")
        return list(tables)

    def _check_member(self, t: BlockTable, first: BlockTable, name: str, first_name: str) -> None:
        """t is no other coordinator's and covers the tokens its request's first table covers."""
        if t._coordinator is not None and t._coordinator is not self._identity:
            raise ValueError(
                f"{name} is bound to another coordinator (a table is used only through the "
                "coordinator that bound it, until it is freed)"
            )
        if t.extent != first.extent:
            raise ValueError(
                f"{name} has extent {t.extent}, {first_name} {first.extent}: "
                "one request's tables cover the same tokens"
            )

    def _own(self, tables: Sequence[BlockTable]) -> None:
        """An acquire of at least one token or a claim bound the tables to this coordinator."""
        for t in tables:
            t._coordinator = self._identity

    def blocks_needed_for(self, tables: Sequence[BlockTable], num_tokens: int) -> int:
        count("num_tokens", num_tokens)  # the count first, then the tables (as native)
        ts = self._check_tables(tables)
        return sum(m.blocks_needed_for(t, num_tokens) for m, t in zip(self._managers, ts))

    def blocks_needed_for_sequential(
        self, tables: Sequence[BlockTable], first_tokens: int, extra_tokens: int
    ) -> int:
        count("first_tokens", first_tokens)
        count("extra_tokens", extra_tokens)
        ts = self._check_tables(tables)
        return sum(
            m.blocks_needed_for_sequential(t, first_tokens, extra_tokens)
            for m, t in zip(self._managers, ts)
        )

    def acquire(self, tables: Sequence[BlockTable], num_tokens: int) -> bool:
        """All groups or none: false (nothing changed) if the summed need exceeds the free pages."""
        count("num_tokens", num_tokens)
        ts = self._check_tables(tables)
        n = 0
        for m, t in zip(self._managers, ts):
            n = m._validate_acquire(self._pool, t, num_tokens)
        step = runs.coordinator_acquire(
            self._pool.num_free,
            [m._state(t) for m, t in zip(self._managers, ts)],
            [m._group() for m in self._managers],
            n,
        )
        if not step.ok:
            return False
        for g, (m, t) in enumerate(zip(self._managers, ts)):
            before = self._pool.num_free
            ok = m._acquire(self._pool, t, n)
            assert ok, "a group acquire failed after the summed need was checked"
            self._pinned[g] += before - self._pool.num_free
        if n > 0:  # acquire(tables, 0) binds nothing
            self._own(ts)
        return True

    def reclaim_expired(self, tables: Sequence[BlockTable], num_computed_tokens: int) -> int:
        count("num_computed_tokens", num_computed_tokens)
        ts = self._check_tables(tables)
        fs = [
            m._validate_reclaim(self._pool, t, num_computed_tokens)
            for m, t in zip(self._managers, ts)
        ]
        total = 0
        for g, (m, t, f) in enumerate(zip(self._managers, ts, fs)):
            back = m._reclaim(self._pool, t, f)
            self._pinned[g] -= back
            total += back
        return total

    def decode_step(
        self, requests: Sequence[Sequence[BlockTable]], num_computed_tokens: Sequence[int]
    ) -> tuple[int, int]:
        """One decode token for many requests, then each one's reclaim (spec/batch.py)."""
        return _batch.decode_step(self, requests, num_computed_tokens)

    def free(self, tables: Sequence[BlockTable]) -> None:
        ts = self._check_tables(tables)
        for g, (m, t) in enumerate(zip(self._managers, ts)):
            before = self._pool.num_free
            m._free(self._pool, t)
            self._pinned[g] -= self._pool.num_free - before

    def detach(self, tables: Sequence[BlockTable]) -> DetachedTables:
        """Move the tables' references into a handle without releasing any (section 12).

        The tables are checked as free checks them and end empty and unbound; the pages stay
        pinned (and in their group's pinned_pages) until release_detached(handle).
        """
        return _detach(self, self._check_tables(tables))

    def release_detached(self, handle: DetachedTables) -> int:
        """Release a handle's references in the order free would have at detach time.

        Returns the pages that re-entered the free queue; a handle released already, or one
        of another coordinator, is a ValueError.
        """
        return _release_detached(self, handle)

    # Forks (semantics 13.6): fork(tables) and copy_tail(tables), in spec/fork.py.
    fork = _fork.fork
    copy_tail = _fork.copy_tail

    def stats(self) -> dict[str, int | list[int]]:
        """The pool's stats plus pinned_pages: the pages each group pins now."""
        out: dict[str, int | list[int]] = dict(self._pool.stats())
        out["pinned_pages"] = list(self._pinned)
        return out

    # -- prefix caching (semantics section 8) ------------------------------------------

    def _resume(self, g: int) -> int:
        """Slots behind a boundary a match needs from group g (every slot for full groups)."""
        m = self._managers[g]
        return -1 if m.kind == "full" else int(geo.resume_pages(m._window(), m.block_size))

    def _resume_at(self, g: int, b: int) -> int:
        """Slots behind the boundary of b slots that group g needs (-1: every slot, full).

        A chunked group's count depends on the boundary (section 13.2); the others' do not.
        """
        m = self._managers[g]
        if isinstance(m, ChunkedLocalAttentionManager):
            return int(geo.chunked_resume_pages(b, m.attention_chunk_size, m.block_size))
        return self._resume(g)

    def cache_full_blocks(
        self,
        tables: Sequence[BlockTable],
        keys: Sequence[bytes],
        num_tokens: int,
        token_ids: Sequence[int] | None = None,
    ) -> int:
        """Name every real full page up to num_tokens that can serve a match and has no name
        yet; returns how many. Sliding and state groups name only the slots behind multiples
        of the alignment (section 13.4; spec/slots.py ``offered``).

        token_ids (section 12): the request's token ids from position 0, at least num_tokens
        of them; each name new to the pool then keeps the B token ids of the slot it names,
        and its stored event carries them.
        """
        n = count("num_tokens", num_tokens)
        ks = check_keys(keys)
        ts = self._check_tables(tables)
        for m, t in zip(self._managers, ts):
            if n > m._extent(t):
                raise ValueError(f"num_tokens={n} is past the table's extent ({m._extent(t)})")
        toks = None if token_ids is None else check_token_ids(token_ids, n)
        named = 0
        for g, (m, t) in enumerate(zip(self._managers, ts)):
            B = m.block_size
            k = B // self._base
            covered = min(n // B, len(ks) // k)
            # The slots past the cursor that spec/slots.py's rule offers a name: for a sliding
            # group the R behind each multiple of the alignment, for a state group only the
            # slot ending at num_tokens (below the cursor lie the slots a claim brought in,
            # whose loads may still be pending: complete_load names them).
            upto, state = t.named_upto, m.kind == "state" and m._A >= 0  # 13.5: as sliding
            R, q = self._resume(g), self._alignment // B
            chunked = m.kind == "chunked"  # its R is the first boundary above j's (13.2)
            offered = [
                j
                for j in range(upto, covered)
                if slots.offered(
                    j, n, B, self._resume_at(g, (j // q + 1) * q) if chunked else R, q,
                    upto, covered, state,
                )
            ]
            t.named_upto = max(upto, covered)
            for j in offered:
                page = t.slots[j]
                if slots.takes_name(page, self._pool._is_cached(page)):
                    key = ks[(j + 1) * k - 1]
                    slot_tokens = None if toks is None else tuple(toks[j * B : (j + 1) * B])
                    new = self._pool._set_name(page, (g, key), slot_tokens)
                    named += 1
                    if new and self._pool._events_on:
                        parent = ks[j * k - 1] if j > 0 else None
                        self._pool._note_stored(g, j, key, parent, slot_tokens)
        self._pool._end_event_op()
        return named

    def _support(self, g: int, T: int, ks: list[bytes]) -> list[tuple[int, Name]] | None:
        """(slot, name) of each page group g needs to resume at T tokens; None if one is missing."""
        B = self._managers[g].block_size
        k = B // self._base
        b = T // B
        R = self._resume_at(g, b)
        low = 0 if R < 0 else max(0, b - R)
        need = []
        for j in range(low, b):
            name = (g, ks[(j + 1) * k - 1])
            if not self._present(name):
                return None
            need.append((j, name))
        return need

    def _supports(self, T: int, ks: list[bytes]) -> list[list[tuple[int, Name]]] | None:
        """Every group's support at T, in group order; None as soon as one group has none."""
        out = []
        for g in range(self.num_groups):
            need = self._support(g, T, ks)
            if need is None:
                return None
            out.append(need)
        return out

    def _present(self, name: Name) -> bool:
        """On the device, or on the host (section 10)."""
        if self._pool._lookup(name) != 0:
            return True
        return self._host is not None and self._host._lookup(name) != 0

    def match_prefix(self, keys: Sequence[bytes]) -> PrefixMatch:
        """The greatest aligned boundary every group can resume from (read-only)."""
        ks = check_keys(keys)
        match = self._match(ks)
        counters = self._pool._counters
        counters["match_calls"] += 1
        counters["match_tokens_queried"] += len(ks) * self._base
        counters["match_tokens_matched"] += match.num_tokens
        return match

    def _match(self, ks: list[bytes]) -> PrefixMatch:
        # Sliding and state support is not monotone in T: try every boundary from the top.
        # A claimed table may span at most INT32_MAX tokens (only all-W=1 layouts get there).
        top = min(len(ks) * self._base, INT32_MAX) // self._alignment * self._alignment
        for T in range(top, 0, -self._alignment):
            supports = self._supports(T, ks)
            if supports is not None:
                pages: list[list[int]] = []
                host_pages: list[list[int]] = []
                names: list[list[Name | None]] = []
                parents: list[list[bytes | None]] = []
                for g, need in enumerate(supports):
                    b = T // self._managers[g].block_size
                    k = self._managers[g].block_size // self._base
                    pg: list[int] = [0] * b
                    hp: list[int] = [0] * b
                    nm: list[Name | None] = [None] * b
                    pa: list[bytes | None] = [None] * b
                    for j, name in need:
                        # Device copies preferred slot by slot.
                        pg[j] = self._pool._lookup(name)
                        if pg[j] == 0:
                            assert self._host is not None
                            hp[j] = self._host._lookup(name)
                        nm[j] = name
                        pa[j] = ks[j * k - 1] if j > 0 else None
                    pages.append(pg)
                    host_pages.append(hp)
                    names.append(nm)
                    parents.append(pa)
                return PrefixMatch(self, T, pages, names, host_pages, parents)
        return PrefixMatch(self, 0, [[] for _ in self._managers], [[] for _ in self._managers])

    def _check_match(self, match: object) -> PrefixMatch:
        instance("match", match, PrefixMatch)
        assert isinstance(match, PrefixMatch)
        if match._coordinator is not self:
            raise ValueError("match comes from another coordinator")
        for pages, hps, names in zip(match._pages, match._host_pages, match._names):
            for page, hp, name in zip(pages, hps, names):
                if page != 0 and self._pool._name(page) != name:
                    raise ValueError("stale match: a matched page was evicted; match again")
                if hp != 0 and (self._host is None or self._host._name(hp) != name):
                    raise ValueError("stale match: a matched host page was evicted; match again")
        return match

    def blocks_consumed_by_claim(self, match: PrefixMatch) -> int:
        """Distinct matched real pages that are free now: the free pages a claim takes."""
        mt = self._check_match(match)
        distinct = {p for pages in mt._pages for p in pages if p != 0}
        loads = sum(1 for hps in mt._host_pages for hp in hps if hp != 0)
        return sum(1 for p in distinct if slots.claim_takes(self._pool.ref_count(p))) + loads

    def claim(self, tables: Sequence[BlockTable], match: PrefixMatch) -> LoadPlan | None:
        """Share the matched pages into fresh tables (one reference per slot).

        Every slot the match serves from the host gets a fresh device page (all-or-nothing
        with the device queue: ValueError, nothing changed, when blocks_consumed_by_claim
        exceeds the free pages) and its host page is pinned; the returned LoadPlan lists the
        copies. None when nothing is served from the host (no copy to make).
        """
        ts = self._check_tables(tables)
        mt = self._check_match(match)
        for t in ts:
            if not t.is_fresh:
                raise ValueError("claim needs fresh (empty, unbound) tables")
        if mt.num_tokens == 0:
            return None
        loads = [
            (g, j) for g, hps in enumerate(mt._host_pages) for j, hp in enumerate(hps) if hp != 0
        ]
        if loads:
            need = self.blocks_consumed_by_claim(mt)
            if need > self._pool.num_free:
                raise ValueError(
                    f"match: its claim takes {need} free device pages, "
                    f"the pool has {self._pool.num_free}"
                )
        for g in range(self.num_groups):
            for page in mt._pages[g]:
                if page != 0:
                    self._pinned[g] += bool(slots.claim_takes(self._pool.ref_count(page)))
                    self._pool._take_shared(page)
        # The matched pages are out of the queue now, so this allocation cannot evict them.
        fresh = self._pool._allocate(len(loads))
        assert fresh is not None, "the claim's free pages were checked"
        # Each claimed slot holds its matched device page, else the page loaded for it
        # (spec/slots.py claim_cell): a loaded page lands in the host-served slot itself.
        fresh_of = dict(zip(loads, fresh))
        table_slots = [
            [
                int(slots.claim_cell(page, hp, fresh_of.get((g, j), 0)))
                for j, (page, hp) in enumerate(zip(mt._pages[g], mt._host_pages[g]))
            ]
            for g in range(self.num_groups)
        ]
        for g, _ in loads:
            self._pinned[g] += 1
        plan: LoadPlan | None = None
        if loads:
            host = self._host
            assert host is not None
            hps = [mt._host_pages[g][j] for g, j in loads]
            for hp in hps:
                self._pin_host(hp)
            plan = LoadPlan(
                _Plan(
                    self,
                    [g for g, _ in loads],
                    [j for _, j in loads],
                    fresh,
                    hps,
                    [self._loaded_name(mt, g, j) for g, j in loads],
                    [mt._parents[g][j] for g, j in loads],
                    [host._name_tokens(self._loaded_name(mt, g, j)) for g, j in loads],
                ),
                ts,
            )
        for g, (m, t) in enumerate(zip(self._managers, ts)):
            b = len(mt._pages[g])
            t.slots = table_slots[g]
            t.load = plan
            t.tail_available = 0
            # The holes below the claimed resume pages are never rescanned.
            claimed = runs.claim_run(b, m._group(), self._resume_at(g, b))
            t.reclaim_floor = claimed.floor
            t.runs = list(claimed.runs)
            t.named_upto = b
            m._bind(self._pool, t)
            m._check_runs(t, 0, b)
        self._own(ts)
        return plan

    def _pin_host(self, host_page: int) -> None:
        """A pending load's host page leaves the host queue: no offload can evict it."""
        assert self._host is not None
        self._host._take_shared(host_page)

    @staticmethod
    def _loaded_name(mt: PrefixMatch, g: int, j: int) -> Name:
        name = mt._names[g][j]
        assert name is not None
        return name

    # -- host tier (semantics section 10; the plans live in spec/host.py) -----------------

    def _need_host(self, what: str) -> None:
        if self._host is None:
            raise ValueError(f"{what}: the coordinator has no host pool")

    def plan_offload(
        self, tables: Sequence[BlockTable], num_tokens: int, *, max_pages: int | None = None
    ) -> OffloadPlan | None:
        """Host pages for the reachable named pages up to num_tokens the host lacks; with
        max_pages at most that many, lowest boundaries first (13.7). None (nothing changed)
        when the host pool has too few free pages for the plan (spec/host.py)."""
        return _plan_offload(self, tables, num_tokens, max_pages)

    def complete_offload(self, plan: OffloadPlan) -> None:
        """The engine copied: the host pages take the names, the device references drop."""
        _complete_offload(self, plan)

    def abort_offload(self, plan: OffloadPlan) -> None:
        """The engine gave up: the host pages go back unnamed, the device references drop."""
        _abort_offload(self, plan)

    def complete_load(self, plan: LoadPlan) -> None:
        """The engine copied: the device pages take the names, the host pins drop."""
        _complete_load(self, plan)

    def __repr__(self) -> str:
        if self._alignment == self._lcm:
            return f"Coordinator({self._specs!r}, {self._pool!r})"
        return f"Coordinator({self._specs!r}, {self._pool!r}, alignment={self._alignment})"

    # -- step planning (semantics section 9; the logic lives in spec/plan.py) ------------

    def plan_step(self, requests: Sequence[tuple[Sequence[BlockTable], int]]) -> StepPlan:
        """Read-only plan of one step: which priority prefix steps, which suffix is preempted."""
        return plan_step(self, requests)

    def apply_step(self, plan: StepPlan) -> None:
        """Apply a fresh plan: free the preempted, then acquire for the stepped. Cannot fail."""
        apply_step(self, plan)
