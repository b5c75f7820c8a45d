"""Which wrong spec variants the quick and the default differential campaigns catch.

    python benchmarks/quick_campaign_catch.py [--jobs 2] [--only NAME ...] [--sizes N ...]

For every wrong variant of ``verify/variants.py`` (``VARIANTS`` and ``HOST_VARIANTS``) and a
few more bugs written here (``EXTRA``, patched into the spec the same way), runs the
campaign on the spec alone with the spec's own run check off (``_Manager.check_runs =
False``: the machines' oracles alone must see the bug), at the campaign's seed (0, what
``livetail verify --quick`` uses), on both machines as ``livetail verify`` does: the
targeted scenarios (``verify/scenarios.py``), and apart from them the random examples of
each size in ``--sizes`` (default: the quick size, 25 and the default size).  One row per
variant:

- ``random N``: N random examples per machine alone caught it (``random 25`` is the quick
  campaign before it had scenarios);
- ``scenarios``: the first scenario that caught it;
- ``quick`` / ``default``: what ``livetail verify --quick`` / ``livetail verify`` run now,
  the scenarios then ``QUICK_EXAMPLES`` / ``DEFAULT_EXAMPLES`` random examples per machine
  (a size left out of ``--sizes`` counts as not catching);
- ``first random``: the machine and the number of the random example that failed first,
  per size.

Hypothesis' shrink phase is skipped (a catch is decided in its generate phase); nothing is
written.  The script exits 1 if ``quick`` misses a variant that ``default`` catches.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from hypothesis import Phase, settings
from livetail.spec import coordinator as spec_coordinator
from livetail.spec import runs
from livetail.spec.coordinator import Coordinator
from livetail.spec.managers import _Manager
from livetail.spec.plan import StepPlan, _check_requests
from livetail.spec.pool import BlockPool
from livetail.spec.table import BlockTable
from livetail.verify import variants
from livetail.verify.campaign import run_differential, run_scenarios
from livetail.verify.cli import DEFAULT_EXAMPLES, QUICK_EXAMPLES
from livetail.verify.machine import implementations
from livetail.verify.scenarios import scenarios
from livetail.verify.variants import Variant

SEED = 0
BEFORE = 25  # the quick campaign's random examples before it had scenarios
TIERS = ("device", "host")

# --- more realistic bugs, patched like verify/variants.py's ------------------------------


def _reclaim_skips_after_hole(self: _Manager, pool: BlockPool, table: BlockTable, f: int) -> int:
    # Wrong: the scan steps over the slot below each hole it meets.
    b = self._reclaim_bound(table, f)
    lo, hi = runs.reclaim_band(table.reclaim_floor, b)
    released = []
    s = hi - 1
    while s >= lo:
        if table.slots[s] != 0:
            released.append(table.slots[s])
            table.slots[s] = 0
            s -= 1
        else:
            s -= 2
    table.reclaim_floor = runs.floor_after(table.reclaim_floor, b)
    return pool._release(released)


def _claim_floor_plus_one(b: Any, g: runs.Group, resume: Any, ar: Any = runs.INT) -> Any:
    # Wrong: the claimed table's floor is one slot above b - R.
    floor = ar.cond(resume < 0, lambda: 0, lambda: ar.max(0, b - resume + 1))
    return runs.TableState(b, 0, floor, (runs.Run(0, b, b * g.B),))


def _plan_counts_shared(c: Coordinator, requests: object) -> StepPlan:
    # Wrong: a page the preempted suffix holds counts as released even when a stepped
    # request shares it.
    rs = _check_requests(c, requests)
    needs = [sum(m.blocks_needed_for(t, n) for m, t in zip(c._managers, ts)) for ts, n in rs]
    free = c.pool.num_free

    def released_from(k: int) -> int:
        return len({p for ts, _ in rs[k:] for t in ts for p in t.slots if p})

    k = int(runs.plan_stepped(needs, free, released_from))
    prefix, released = sum(needs[:k]), released_from(k)
    return StepPlan(c, rs, k, prefix, released, free + released - prefix, k > 0 or not rs)


EXTRA: dict[str, Variant] = {
    v.name: v
    for v in [
        Variant(
            "x-reclaim-skips-after-hole",
            "reclaim's scan steps over the slot below each hole",
            _Manager,
            "_reclaim",
            _reclaim_skips_after_hole,
        ),
        Variant(
            "x-claim-floor-plus-one",
            "a claimed table's floor is b - R + 1",
            runs,
            "claim_run",
            _claim_floor_plus_one,
        ),
        Variant(
            "x-plan-counts-shared",
            "plan_step counts a shared page of the preempted as released",
            spec_coordinator,
            "plan_step",
            _plan_counts_shared,
        ),
    ]
}


@contextlib.contextmanager
def patched(name: str) -> Iterator[str | None]:
    """(the variant name run_differential takes, or None) with `name` patched in."""
    if name not in EXTRA:
        yield name
        return
    with variants.patched(EXTRA[name]):
        yield None


# --- the measurement -------------------------------------------------------------------


def measure(name: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    """Where the scenarios and the random examples of each size catch `name`."""
    _Manager.check_runs = False
    spec = implementations("spec")
    quiet = settings(phases=[Phase.explicit, Phase.generate])
    out: dict[str, Any] = {"name": name, "scenario": None}
    t0 = time.process_time()
    with patched(name) as variant:
        for tier in TIERS:
            s = run_scenarios(spec, tier=tier, variant=variant, traces_dir=None, minimize=False)
            if s.failed and out["scenario"] is None:
                out["scenario"] = scenarios(tier)[s.examples - 1].name
            for size in sizes:
                r = run_differential(
                    spec,
                    examples=size,
                    seed=SEED,
                    variant=variant,
                    tier=tier,
                    traces_dir=None,
                    minimize=False,
                    parent=quiet,
                )
                out[f"{tier}{size}"] = r.examples if r.failed else None
    out["cpu"] = time.process_time() - t0
    return out


def caught(row: dict[str, Any], size: int) -> bool:
    return any(row.get(f"{t}{size}") is not None for t in TIERS)


def first(row: dict[str, Any], size: int) -> str:
    hits = [(row[f"{t}{size}"], t) for t in TIERS if row.get(f"{t}{size}") is not None]
    return f"{min(hits)[1]} {min(hits)[0]}" if hits else "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument(
        "--sizes", nargs="*", type=int, default=[QUICK_EXAMPLES, BEFORE, DEFAULT_EXAMPLES]
    )
    args = p.parse_args()
    names = args.only or [*variants.VARIANTS, *variants.HOST_VARIANTS, *EXTRA]
    sizes = tuple(sorted(set(args.sizes)))
    cols = [f"random {n}" for n in sizes]
    print(
        f"{'variant':30s} "
        + " ".join(f"{c:>10s}" for c in cols)
        + f" {'quick':>6s} {'default':>7s}  {'scenarios':22s} first random ("
        + ", ".join(map(str, sizes))
        + ")",
        flush=True,
    )
    missed: list[str] = []
    rows = []
    with ProcessPoolExecutor(args.jobs) as ex:
        for r in ex.map(measure, names, [sizes] * len(names)):
            rows.append(r)
            yes = {True: "yes", False: "no"}
            quick = r["scenario"] is not None or caught(r, QUICK_EXAMPLES)
            default = r["scenario"] is not None or caught(r, DEFAULT_EXAMPLES)
            if default and not quick:
                missed.append(r["name"])
            print(
                f"{r['name']:30s} "
                + " ".join(f"{yes[caught(r, n)]:>10s}" for n in sizes)
                + f" {yes[quick]:>6s} {yes[default]:>7s}  {r['scenario'] or '-':22s} "
                + " / ".join(first(r, n) for n in sizes)
                + f"   ({r['cpu']:.0f} s)",
                flush=True,
            )
    total = sum(r["cpu"] for r in rows)
    print(f"CPU of the measurement: {total:.0f} s; quick misses what default catches: {missed}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
