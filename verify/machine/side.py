"""The implementations under test and what the differential machine observes of each.

``Impl`` and ``implementations`` choose the sides; ``Side`` is one implementation's pool,
coordinator and tables with the shadow the checks need; ``State`` is what is compared after
every step, ``Outcome`` what a call returned or raised.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..pages import COUNTS, QUEUE, Runs, shown
from ..trace import Geometry
from .oracle import Shape

# --- implementations ------------------------------------------------------------------


@dataclass(frozen=True)
class Impl:
    """One implementation under test: a label and a module with the livetail classes."""

    label: str
    module: Any


class NativeUnavailable(RuntimeError):
    """The native extension is not importable in this environment."""


def spec_impl() -> Impl:
    return Impl("spec", importlib.import_module("livetail.spec"))


def native_impl() -> Impl:
    try:
        mod = importlib.import_module("livetail")
        mod.BlockPool  # noqa: B018 - raises when livetail._core cannot be imported
    except ImportError as e:
        raise NativeUnavailable(f"livetail's native module cannot be imported: {e}") from None
    except AttributeError:
        raise NativeUnavailable(
            "livetail has no native module (livetail._core is not built or not importable)"
        ) from None
    return Impl("native", mod)


def native_available() -> bool:
    try:
        native_impl()
    except NativeUnavailable:
        return False
    return True


def implementations(which: str) -> list[Impl]:
    """``spec``, ``native`` or ``both`` (spec first: it is the reference side)."""
    if which == "spec":
        return [spec_impl()]
    if which == "native":
        return [native_impl()]
    if which == "both":
        return [spec_impl(), native_impl()]
    raise ValueError(f"impl must be spec, native or both, not {which!r}")


# --- observed state -------------------------------------------------------------------


@dataclass(frozen=True)
class TableState:
    pages: tuple[int, ...]
    tail: int
    floor: int
    extent: int
    bound: bool
    length: int
    real: int
    block_size: int = 0  # remembered by a bound table (0 when unbound)
    bound_to: str = "none"  # "pool", "other pool" or "none": the pool the table holds

    @property
    def shape(self) -> Shape:
        return Shape(self.length, self.tail)

    def compact(self) -> str:
        if not self.bound and self.length == 0:
            return "-"
        ids = [str(p) if p else "." for p in self.pages]
        if len(ids) > 20:
            ids = [*ids[:8], f"...{len(ids) - 16} more...", *ids[-8:]]
        return f"[{' '.join(ids)}] tail={self.tail} floor={self.floor} ext={self.extent}"


@dataclass(frozen=True)
class PoolState:
    num_free: int
    num_pinned: int
    queue: Runs  # the free queue, head first (kept as runs: cost follows the pages used)
    refs: Runs  # every page's reference count, page 0 included
    cached: int = -1  # pages carrying a prefix-cache name (-1: no prefix caching)
    cached_free: int = -1
    # (page, pool.name(page)) for every named page, ascending (section 12); () without prefix
    # caching.
    names: tuple[tuple[int, Any], ...] = ()

    def compact(self) -> str:
        q = " ".join(map(str, self.queue[:12])) + (" ..." if len(self.queue) > 12 else "")
        names = f" named={self.cached} (free {self.cached_free})" if self.cached > 0 else ""
        return f"free={self.num_free} pinned={self.num_pinned}{names} queue=[{q}]"


@dataclass(frozen=True)
class State:
    pool: PoolState
    tables: tuple[tuple[TableState, ...], ...]  # [request][group]
    # Pages referenced by detached handles not yet released (section 12), sorted.
    held: tuple[int, ...] = ()
    # [request][group]: the table was bound by the coordinator (its acquire or claim), so a
    # second coordinator over the same pool must reject it; a shadow, not read from a side.
    owned: tuple[tuple[bool, ...], ...] = ()

    def table(self, r: int, g: int) -> TableState:
        return self.tables[r][g]

    def split(self, r: int) -> bool:
        """Request r's tables cover different extents (a manager grew or freed one group's
        table): every coordinator call taking them is a ValueError that changes nothing."""
        return len({t.extent for t in self.tables[r]}) > 1


def _ints(values: Iterable[Any]) -> tuple[int, ...]:
    if hasattr(values, "tolist"):  # a numpy array: one C-level conversion
        return tuple(values.tolist())
    return tuple(int(v) for v in values)


def read_pool(p: Any) -> tuple[Runs, Runs]:
    """A pool's free queue and reference counts, as runs."""
    return Runs.of(p.free_queue(), QUEUE), Runs.of(p.ref_counts(), COUNTS)



def read_names(p: Any) -> tuple[tuple[int, Any], ...]:
    """Every named page of a pool with its name, ascending by page id (section 12).

    The pool's ``num_cached`` says how many pages carry a name, so the walk stops at the last
    one: its cost follows the highest named page, not the pool's size, once the pages in use
    are the low ids a fresh pool hands out first.
    """
    want = int(p.num_cached)
    out: list[tuple[int, Any]] = []
    page = 1
    while len(out) < want and page < int(p.num_blocks):
        name = p.name(page)
        if name is not None:
            out.append((page, name))
        page += 1
    return tuple(out)


def read_table(t: Any, pool: Any, other_pool: Any) -> TableState:
    held = t.pool
    bound_to = "none" if held is None else "pool" if held is pool else "other pool"
    if held is not None and held is not pool and held is not other_pool:
        bound_to = "unknown pool"
    return TableState(
        pages=_ints(t.page_ids()),
        tail=int(t.tail_available),
        floor=int(t.reclaim_floor),
        extent=int(t.extent),
        bound=bool(t.is_bound),
        length=len(t),
        real=int(t.num_real_pages),
        block_size=int(t.block_size),
        bound_to=bound_to,
    )


@dataclass(frozen=True)
class Outcome:
    """What a call returned (normalised to a plain value) or the exception type it raised."""

    value: Any = None
    error: str | None = None
    message: str = ""

    def __str__(self) -> str:
        return f"raise {self.error}" if self.error else str(self.value)

    @property
    def raised(self) -> bool:
        return self.error is not None


def _normalise(v: Any) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        return repr(v)


def call(fn: Callable[..., Any], *args: Any) -> Outcome:
    try:
        return Outcome(_normalise(fn(*args)))
    except Exception as e:  # every exception is an observation to compare
        return Outcome(error=type(e).__name__, message=str(e))


@dataclass
class Verdict:
    prop: str
    ok: bool
    detail: str = ""


CLAIMED = -1
"""Shadow creation frontier of a slot brought in by a claim: real iff at or above the floor."""


# --- one implementation's world -------------------------------------------------------


def other_pool_size(geometry: Geometry) -> int:
    """The pool size of the coordinators the foreign-pool abuses use."""
    return max(min(geometry.num_blocks, 64), len(geometry.groups) + 1)



class Side:
    """One implementation's pool, coordinator and tables, plus the shadow the checks need."""

    def __init__(self, impl: Impl, geometry: Geometry) -> None:
        m = impl.module
        self.label = impl.label
        self.mod = m
        self.geometry = geometry
        specs = [
            m.GroupSpec(
                g.kind, g.block_size, g.sliding_window, g.live_tail_alloc,
                attention_chunk_size=g.attention_chunk_size, checkpoints=g.checkpoints,
            )
            for g in geometry.groups
        ]
        self.pool = m.BlockPool(geometry.num_blocks, events=True)
        align = geometry.alignment  # None: the lcm
        self.coord = m.Coordinator(specs, self.pool, alignment=align)
        self.managers = list(self.coord.managers)
        # Another pool and coordinator over it: the target of foreign-pool abuses.
        # Room for one page per group, so a one-token acquire there always binds a table
        # (and no larger than it needs: a trace's pool may be huge).
        self.other_pool = m.BlockPool(other_pool_size(geometry))
        self.other_coord = m.Coordinator(specs, self.other_pool, alignment=align)
        # A second coordinator over the same pool: the target of the abuses of another
        # coordinator's tables (an acquire or claim binds a table to its coordinator).
        self.twin_coord = m.Coordinator(specs, self.pool, alignment=align)
        self.owned = [[False for _ in geometry.groups] for _ in range(geometry.num_requests)]
        self.tables = [self.coord.new_tables() for _ in range(geometry.num_requests)]
        # Read the pool's name counts (set by the lockstep core when every side has section 8).
        self.read_names = False
        # created[r][g][s]: the frontier of the acquire that created slot s (CLAIMED: a claim).
        self.created: list[list[list[int]]] = [
            [[] for _ in geometry.groups] for _ in range(geometry.num_requests)
        ]
        # Detached handles (section 12) in detach order: the handle, its pages in the order
        # a free at detach time would have released them, and whether it was released.
        self.handles: list[tuple[Any, tuple[int, ...]]] = []
        self.released: list[bool] = []

    def state(self) -> State:
        p = self.pool
        return State(
            PoolState(
                int(p.num_free),
                int(p.num_pinned),
                *read_pool(p),
                int(p.num_cached) if self.read_names else -1,
                int(p.num_cached_free) if self.read_names else -1,
                read_names(p) if self.read_names else (),
            ),
            tuple(tuple(read_table(t, p, self.other_pool) for t in ts) for ts in self.tables),
            tuple(
                sorted(
                    q
                    for (_, pages), done in zip(self.handles, self.released)
                    if not done
                    for q in pages
                )
            ),
            tuple(tuple(row) for row in self.owned),
        )

    def note_shape(self, r: int, g: int, frontier: int) -> None:
        """After an acquire attempt at `frontier`: slots it appended were created there."""
        n = len(self.tables[r][g])
        shadow = self.created[r][g]
        if n < len(shadow):
            del shadow[n:]
        shadow.extend([frontier] * (n - len(shadow)))

    def acquire(self, r: int, n: int) -> Outcome:
        """Coordinator acquire of n tokens for request r, recording the creation frontiers."""
        ts = self.tables[r]
        extents = [int(t.extent) for t in ts]
        out = call(self.coord.acquire, ts, n)
        for g, e in enumerate(extents):
            self.note_shape(r, g, e + n)
        if out.value is True and n > 0:
            self.note_owned(r)
        return out

    def note_owned(self, r: int) -> None:
        """A coordinator acquire of at least one token (or a claim) bound r's tables to it."""
        self.owned[r] = [True] * len(self.owned[r])

    def note_free(self, r: int, g: int) -> None:
        self.created[r][g] = self.created[r][g][: len(self.tables[r][g])]
        if not self.tables[r][g].is_bound:  # freed (or detached): no coordinator's any more
            self.owned[r][g] = False

    def note_claim(self, r: int) -> None:
        for g, t in enumerate(self.tables[r]):
            self.created[r][g] = [CLAIMED] * len(t)
        if all(t.is_bound for t in self.tables[r]):  # a claim of 0 tokens binds nothing
            self.note_owned(r)

    @property
    def prefix(self) -> bool:
        """Whether this implementation has prefix caching (semantics section 8)."""
        return hasattr(self.coord, "match_prefix")


def state_diff(a: State, b: State) -> list[str]:
    out: list[str] = []
    if a.pool != b.pool:
        out.append(f"pool {a.pool.compact()} vs {b.pool.compact()}")
        if a.pool.queue != b.pool.queue:
            out.append(f"free queue {shown(a.pool.queue)} vs {shown(b.pool.queue)}")
        if a.pool.refs != b.pool.refs:
            out.append(f"ref_counts {shown(a.pool.refs)} vs {shown(b.pool.refs)}")
        if a.pool.names != b.pool.names:
            diff = sorted(set(a.pool.names) ^ set(b.pool.names))
            out.append(f"names differ: {diff[:8]}")
        if (a.pool.cached, a.pool.cached_free) != (b.pool.cached, b.pool.cached_free):
            out.append(
                f"num_cached/num_cached_free {a.pool.cached}/{a.pool.cached_free} vs "
                f"{b.pool.cached}/{b.pool.cached_free}"
            )
    if a.held != b.held:
        out.append(f"detached pages {list(a.held)} vs {list(b.held)}")
    for r, (ra, rb) in enumerate(zip(a.tables, b.tables)):
        for g, (ta, tb) in enumerate(zip(ra, rb)):
            if ta != tb:
                out.append(
                    f"r{r}g{g} {ta.compact()} bound={ta.bound} vs {tb.compact()} bound={tb.bound}"
                )
    return out
