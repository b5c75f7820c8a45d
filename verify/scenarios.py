"""Targeted scenarios: crafted op sequences the campaign runs before its random examples.

The random examples of the differential machines reach some situations only now and then:
a table that shrinks (a reclaim after a long acquire, again after each chunk), a prefix hit
whose tables have holes (a live-tail table named, reclaimed and claimed while its owner
still holds it), a page shared by several requests of a step plan under pool pressure, a
need that equals the free pages exactly, a host round trip whose load lands while another
request's offload allocates host pages.  A wrong spec there needs the right example out of
many; a scenario builds the situation outright, on several geometries, and every step is
checked by the same oracles as a random example (``Lockstep`` and ``HostWorld``).

A scenario is a script over a ``Driver``: it reads the reference side's state where a
frontier or a size depends on it (as the machines' rules do) and runs ops one at a time;
the first failing step stops it.  ``SCENARIOS`` lists (name, tier, geometry, script) in the
order the campaign runs them (``campaign.run_scenarios``); the ops run become a trace like
any example's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .machine.host import HostWorld
from .machine.host_rules import LAYOUTS, layout_groups
from .machine.lockstep import Lockstep
from .machine.side import Impl
from .trace import Geometry, GroupGeometry, Op


class Stop(Exception):
    """A step failed: the world holds the failure."""


class Driver:
    """Runs ops on a world (``Lockstep`` or ``HostWorld``); raises ``Stop`` on a failure."""

    def __init__(self, world: Lockstep | HostWorld) -> None:
        self.world = world
        self.geometry = world.geometry

    def run(self, op: Op) -> None:
        if not self.world.run(op).ok:
            raise Stop

    # -- sizes of the geometry -----------------------------------------------------------

    @property
    def lcm(self) -> int:
        return self.geometry.lcm

    @property
    def window(self) -> int:
        return max(g.sliding_window or 1 for g in self.geometry.groups)

    @property
    def long(self) -> int:
        """A chunk that slides most slots of a live group out of its window: holes."""
        return 4 * self.lcm + self.window + 1


class DeviceDriver(Driver):
    world: Lockstep

    def tables(self, r: int) -> Sequence[Any]:
        return self.world.state().tables[r]

    def low(self, r: int) -> int:
        return int(min(t.extent for t in self.tables(r)))

    def free_pages(self) -> int:
        return int(self.world.state().pool.num_free)

    def need(self, r: int, n: int) -> int | None:
        """blocks_needed_for as the reference side answers it (None if it raises)."""
        ref = self.world.reference
        try:
            return int(ref.coord.blocks_needed_for(ref.tables[r], n))
        except Exception:  # a wrong variant may raise; the checks report it
            return None

    def exact(self, r: int, limit: int = 0) -> int | None:
        """The fewest tokens (>= 1) whose need for request r equals the free pages."""
        free = self.free_pages()
        for n in range(1, limit or 8 * self.lcm + 2 * self.window + 8):
            need = self.need(r, n)
            if need is None or need > free:
                return None
            if need == free:
                return n
        return None

    # -- ops --------------------------------------------------------------------------

    def acquire(self, r: int, n: int) -> None:
        self.run({"op": "acquire", "request": r, "tokens": n})

    def decode(self, r: int) -> None:
        self.run({"op": "decode", "request": r})

    def reclaim(self, r: int, f: int | None = None) -> None:
        self.run({"op": "reclaim", "request": r, "frontier": self.low(r) if f is None else f})

    def cache(self, r: int, doc: int, with_tokens: bool = False) -> None:
        op: Op = {"op": "cache", "request": r, "doc": doc, "tokens": self.low(r)}
        if with_tokens:
            op["with_tokens"] = True
        self.run(op)

    def step(self, r: int, n: int, doc: int) -> None:
        """An engine's forward step: acquire, name what is computed, reclaim."""
        self.acquire(r, n)
        self.cache(r, doc)
        self.reclaim(r)

    def claim(self, r: int, doc: int, n: int, between: tuple[int, int] | None = None) -> None:
        op: Op = {"op": "claim", "request": r, "doc": doc, "tokens": n}
        if between is not None:
            op["between_request"], op["between_tokens"] = between
        self.run(op)

    def plan(self, mask: int, first: int, n: int, between: tuple[int, int] | None = None) -> None:
        op: Op = {"op": "plan", "mask": mask, "first": first, "tokens": n}
        if between is not None:
            op["between_request"], op["between_tokens"] = between
        self.run(op)

    def free(self, r: int) -> None:
        if self.world.state().split(r):
            for g in range(len(self.geometry.groups)):
                self.run({"op": "group_free", "request": r, "group": g})
        else:
            self.run({"op": "free", "request": r})

    def free_all(self) -> None:
        for r in range(self.geometry.num_requests):
            self.free(r)


class HostDriver(Driver):
    world: HostWorld

    def op(self, kind: str, **fields: int) -> None:
        self.run({"op": kind, **fields})

    def compute(self, r: int, n: int) -> None:
        self.op("host_compute", request=r, tokens=n)

    def offload(self, r: int, n: int | None = None, complete: bool = True) -> None:
        """Plan an offload up to n tokens (all computed ones), then complete or abort it."""
        self.op("host_offload", request=r, tokens=self.world.computed[r] if n is None else n)
        if self.world.reference.offloads:
            kind = "host_complete_offload" if complete else "host_abort_offload"
            self.op(kind, plan=0)

    def claim(self, r: int, doc: int, tokens: int) -> None:
        if self.world.fresh(r):
            self.op("host_claim", request=r, doc=doc, tokens=tokens)

    def load(self, r: int) -> None:
        if self.world.pending_load(r):
            self.op("host_complete_load", request=r)


# --- device scenarios -------------------------------------------------------------------


def shrinking_tables(d: DeviceDriver) -> None:
    """Reclaims after long acquires, again after each chunk, behind the floor, per group."""
    lcm, B0 = d.lcm, d.geometry.groups[0].block_size
    d.step(0, d.long, 0)
    for n in (lcm + 1, 1, max(B0 - 1, 1), 2 * lcm - 1, d.window + lcm):
        d.step(0, n, 0)
    d.reclaim(0, 0)
    d.reclaim(0, d.low(0) // 2)
    for g in range(len(d.geometry.groups)):
        d.run({"op": "group_acquire", "request": 1, "group": g, "tokens": d.long})
        ext = d.tables(1)[g].extent
        for f in (ext // 2, ext - 1, ext):
            d.run({"op": "group_reclaim", "request": 1, "group": g, "frontier": max(f, 0)})
    d.free(1)
    d.run({"op": "admit", "request": 2, "chunk": d.long, "reserve": 2, "reclaim_between": True})
    for _ in range(lcm + 2):
        d.decode(2)
        d.reclaim(2)
    d.free_all()


def hits_with_holes(d: DeviceDriver) -> None:
    """Prefix hits on live-tail tables with holes, claimed while the owner holds them, grown
    and reclaimed; a claim after the owner freed; a claim whose match goes stale."""
    lcm = d.lcm
    d.step(0, d.long, 0)
    d.step(0, lcm + 1, 0)
    e = d.low(0)
    d.claim(1, 0, e)
    d.step(1, lcm + 1, 0)
    d.step(1, d.long, 0)
    d.reclaim(0)
    d.free(0)
    d.claim(2, 0, e + lcm)
    d.step(2, d.long, 0)
    d.free(1)
    d.claim(1, 0, e, between=(0, d.long))
    d.decode(1)
    d.reclaim(1)
    d.free_all()


def shared_plans(d: DeviceDriver) -> None:
    """Step plans over requests sharing a claimed prefix, under pool pressure, in every
    priority order and over subsets (pages shared with requests outside the plan)."""
    lcm = d.lcm
    for first in (0, 2):
        for mask in (7, 6):
            for tokens in (d.long,):
                d.free_all()
                d.step(0, 2 * lcm + d.window, 0)
                e = d.low(0)
                d.claim(1, 0, e)
                d.claim(2, 0, e)
                d.acquire(2, lcm)
                d.plan(mask, first, tokens)
    d.free_all()


def exact_fits(d: DeviceDriver) -> None:
    """Needs that equal the free pages: an acquire, a plan, an admission; acquires of one
    group past the free pages; decodes until the pool runs dry."""
    d.step(0, d.long, 0)
    for kind in ("acquire", "plan", "admit"):
        n = d.exact(1)
        if n is not None:
            if kind == "acquire":
                d.acquire(1, n)
            elif kind == "plan":
                d.plan(3, 1, n)
            else:
                d.run({"op": "admit", "request": 1, "chunk": n, "reserve": 0})
            d.free(1)
    for g, gg in enumerate(d.geometry.groups):
        beyond = (d.free_pages() + 2) * gg.block_size
        d.run({"op": "group_acquire", "request": 2, "group": g, "tokens": beyond})
        d.run({"op": "group_free", "request": 2, "group": g})
    for _ in range(2 * d.geometry.num_blocks):
        before = d.tables(1)
        d.decode(1)
        if d.tables(1) == before:
            break
        d.reclaim(1)
    d.plan(7, 0, 1)
    d.free_all()


def evictions(d: DeviceDriver) -> None:
    """Names evicted by other requests' allocations, hits that shrink, names dropped, a
    request detached and released while another claims its prefix."""
    lcm = d.lcm
    d.step(0, d.long, 0)
    e = d.low(0)
    d.cache(0, 0, with_tokens=True)
    d.free(0)
    d.acquire(1, d.free_pages() * lcm // 2)
    d.claim(2, 0, e)
    d.free(1)
    d.step(0, 2 * lcm + 1, 1)
    d.claim(1, 1, 2 * lcm)
    d.run({"op": "detach", "request": 0})
    d.claim(0, 1, 2 * lcm)  # the prefix the handle still holds
    d.run({"op": "release_detached", "handle": 0})
    d.run({"op": "evict_names", "pages": [p for p, _ in d.world.state().pool.names][:4]})
    d.run({"op": "reset_names"})
    d.free_all()


def forks(d: DeviceDriver) -> None:
    """A prompt forked into two samples (semantics 13.6): tail copies, one short of pages,
    decodes and reclaims, the source freed while the forks still hold its pages."""
    d.step(0, 2 * d.lcm + 1, 0)
    d.run({"op": "fork", "request": 0, "into": 1})
    d.run({"op": "fork", "request": 0, "into": 2})
    d.run({"op": "copy_tail", "request": 1})
    d.decode(1)
    d.reclaim(1)
    n = d.exact(1)
    if n is not None:
        d.acquire(1, n)  # the pool's last pages: request 2's copies are short
    d.run({"op": "copy_tail", "request": 2})
    d.free(1)
    d.run({"op": "copy_tail", "request": 2})
    d.free(0)  # request 2 holds the prompt's pages alone now
    d.decode(2)
    d.reclaim(2)
    d.free_all()


def _live(B: int, W: int) -> GroupGeometry:
    return GroupGeometry("sliding", B, W, True)


# Live-tail groups beside groups of other page sizes (periods with holes), a live group
# alone, plain sliding beside state and full groups, W = 1, a live-tail state group.
DEVICE_GROUPS: list[tuple[GroupGeometry, ...]] = [
    (_live(2, 3), GroupGeometry("full", 4)),
    (_live(1, 3), GroupGeometry("full", 2)),
    (_live(4, 5),),
    (_live(3, 7), GroupGeometry("full", 2)),
    (GroupGeometry("sliding", 2, 4), GroupGeometry("state", 4), GroupGeometry("full", 1)),
    (_live(2, 1), GroupGeometry("state", 2)),
    (_live(8, 12), GroupGeometry("full", 16)),
    # Mamba "align" mode (section 13.5): a live-tail state group with checkpoints.
    (GroupGeometry("state", 4, None, True, None, True), GroupGeometry("full", 2)),
]
# (script, pool pages, the DEVICE_GROUPS it runs on): roomy pools for the shapes, tight
# ones for the pressure; each script on the layouts where its situation has the most
# variety.
DEVICE_SCRIPTS: list[tuple[Callable[[DeviceDriver], None], int, tuple[int, ...]]] = [
    (shrinking_tables, 64, (0, 3, 4, 6, 7)),
    (hits_with_holes, 48, (0, 1, 3, 5, 7)),
    (exact_fits, 14, (0, 3, 5)),
    (shared_plans, 16, (0, 3, 4)),
    (evictions, 20, (0, 4)),
    (forks, 24, (0, 4, 6)),
]


# --- host-tier scenarios --------------------------------------------------------------------


def host_round_trips(d: HostDriver) -> None:
    """Compute, offload, free, evict, come back through loads while another request's offload
    allocates host pages; loads completed, every free device page reused, then computed
    past; a partial offload aborted."""
    lcm, base = d.lcm, d.geometry.base
    for n in (2 * lcm, 3 * lcm + 1):
        d.compute(0, n)
        d.offload(0)
        d.op("host_free", request=0)
        d.op("host_evict", tokens=256)
        d.claim(0, 0, (n // base) * base)
        d.compute(1, 4 * lcm)
        d.offload(1)
        d.load(0)
        d.op("host_evict", tokens=256)  # every free device page reused: loaded pages held
        d.compute(0, lcm + 1)
        d.offload(0, lcm, complete=False)
        d.op("host_free", request=1)
        d.claim(2, 0, 8 * lcm)
        d.load(2)
        d.compute(2, 1)
        d.op("host_free", request=0)
        d.op("host_free", request=2)


HOST_GEOMETRIES: list[tuple[int, int]] = [(16, 5), (24, 4), (40, 8)]


# --- the list -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    tier: str
    geometry: Geometry
    script: Callable[[Any], None]

    def run(self, impls: Sequence[Impl]) -> Lockstep | HostWorld:
        """The world after the script ran (stopped at its first failing step)."""
        if self.tier == "host":
            world: Lockstep | HostWorld = HostWorld(self.geometry, impls)
            driver: Driver = HostDriver(world)
        else:
            world = Lockstep(self.geometry, impls)
            driver = DeviceDriver(world)
        with contextlib.suppress(Stop):
            self.script(driver)
        return world


def _scenarios() -> list[Scenario]:
    out = []
    for script, pages, layouts in DEVICE_SCRIPTS:
        for k in layouts:
            geometry = Geometry(DEVICE_GROUPS[k], pages, 3)
            out.append(Scenario(f"{script.__name__}/{k}", "device", geometry, script))
    for k, layout in enumerate(LAYOUTS):
        groups = layout_groups(layout)
        for device, host in HOST_GEOMETRIES:
            out.append(
                Scenario(
                    f"host_round_trips/{k}/{device}/{host}",
                    "host",
                    Geometry(groups, device, 3, host),
                    host_round_trips,
                )
            )
    return out


SCENARIOS: list[Scenario] = _scenarios()


def scenarios(tier: str) -> list[Scenario]:
    """The scenarios of one machine, in the order the campaign runs them."""
    return [s for s in SCENARIOS if s.tier == tier]
