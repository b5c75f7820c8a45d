"""Section 7.7 for the native hot paths: every arithmetic expression fits its C++ type.

Two kinds of coverage (``docs/theorems.md`` lists every site):

- **routed**: acquire's placement loop and the other geometry of the hot paths call
  ``geometry.h`` functions that mirror ``spec/geometry.py`` functions written over
  ``Arith`` (``slots_after``, ``frontier_after``, ``first_live_slot``, ``period_start``,
  ``next_period``, ``resume_run_begin``, ``resume_run_end``); their expression trees are
  evaluated here on tracked numbers under the checks the native code runs first, exactly
  as ``native-arithmetic-fits-int64`` does for the closed forms;
- **sites**: counters, scans, sums over groups and the prefix arithmetic, each a C++
  expression copied verbatim into ``sites/managers.py`` or ``sites/coordinator.py`` (a test
  keeps the copies equal to the source), evaluated on tracked numbers under the loop
  condition and invariant that hold where it runs.
"""

from __future__ import annotations

import ast
import re
import time
from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import geometry as geo

from ..z3arith import Z3, RangeArith, Tracked, Tracker
from .prover.obligations import I32, check_obligations, inputs, plain
from .prover.prover import Prover, Step, StepFailed
from .prover.query import CORE_FIRST
from .prover.terms import model_values
from .prover.theorem import theorem
from .sites import coordinator as coordinator_sites
from .sites import managers as manager_sites
from .sites import prefix as prefix_sites
from .sites.managers import CONSTANTS, Site

SITES: list[Site] = [*manager_sites.SITES, *coordinator_sites.SITES, *prefix_sites.SITES]

WIDTHS = {
    "int64": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1),
    "uint32": (0, 2**32 - 1),
}


# --- sites: verbatim C++ expressions ------------------------------------------------------


def python_expr(site: Site) -> str:
    """The site's C++ text as a Python expression over plain names."""
    code = site.expr or site.code
    for cpp, name in site.subst:
        code = code.replace(cpp, name)
    code = re.sub(r"static_cast<[\w:]+>", "", code)
    code = code.replace("geometry::", "").replace("std::", "")
    code = re.sub(r"(\w+)(?:\.|->)(\w+)\(\)", r"\1_\2", code)
    code = re.sub(r"(\w+)(?:\.|->)(\w+)", r"\1_\2", code)
    if m := re.fullmatch(r"(\+\+|--)(\w+)|(\w+)(\+\+|--)", code):
        var, op = (m.group(2), m.group(1)) if m.group(2) else (m.group(3), m.group(4))
        return f"{var} {op[0]} 1"
    if m := re.fullmatch(r"(\w+) ([-+])= (.+)", code):
        return f"{m.group(1)} {m.group(2)} ({m.group(3)})"
    return code


class _Divisions(ast.NodeTransformer):
    """``a / b`` and ``a % b`` (C++ integer division) become ``_div(a, b)``, ``_mod(a, b)``."""

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        self.generic_visit(node)
        fn = {ast.Div: "_div", ast.FloorDiv: "_div", ast.Mod: "_mod"}.get(type(node.op))
        if fn is None:
            return node
        return ast.copy_location(
            ast.Call(ast.Name(fn, ast.Load()), [node.left, node.right], []), node
        )


def _names(text: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(text, mode="eval")) if isinstance(n, ast.Name)}


def _conds(text: str, env: dict[str, Any]) -> list[Any]:
    return [eval(c, {}, env) for c in text.split(",") if c.strip()]  # noqa: S307


def prove_site(p: Prover, site: Site) -> int:
    """Every operation of the site fits `site.width` under its hypotheses; returns how many."""
    t0 = time.monotonic()
    expr = python_expr(site)
    names = (_names(expr) | _names(site.hyps.replace(",", " and ") or "0")) - {"min", "max"}
    var = {n: CONSTANTS[n] if n in CONSTANTS else z3.Int(n) for n in sorted(names)}
    hyps = _conds(site.hyps, dict(var))
    tr = Tracker(label=site.code)
    ar = RangeArith(tr)
    env: dict[str, Any] = {n: (v if isinstance(v, int) else ar.num(v)) for n, v in var.items()}
    env.update(_div=ar.div, _mod=ar.mod, min=ar.min, max=ar.max)
    tree = ast.fix_missing_locations(_Divisions().visit(ast.parse(expr, mode="eval")))
    value = plain(eval(compile(tree, site.code, "eval"), {}, env))  # noqa: S307
    where = f"{site.file.rsplit('/', 1)[-1]} {site.function}: {site.code}"
    s = p._solver()
    s.add(*hyps)
    if s.check() != z3.sat:
        raise StepFailed("unknown", where, f"{where}: hypotheses unsatisfiable (vacuous)")
    lo, hi = WIDTHS[site.width]
    claims = []
    for ob in tr.obligations:
        holds = ob.holds if ob.holds is not None else z3.And(ob.value >= lo, ob.value <= hi)
        claims.append((f"{ob.kind} of '{ob.op}'", z3.Implies(ob.guard, holds)))
    if site.post:
        v = value if not isinstance(value, int) else z3.IntVal(value)
        claims.append(("post", z3.And(*_conds(site.post, {**var, "v": v}))))
    # One query for the whole site (any claim failing); unsat proves them all, otherwise
    # each claim is decided on its own so a failure names it.
    s.push()
    s.add(*tr.facts, z3.Or(*[z3.Not(claim) for _, claim in claims]))
    batch = s.check()
    s.pop()
    for what, claim in [] if batch == z3.unsat else claims:
        s.push()
        s.add(*tr.facts, z3.Not(claim))
        r = s.check()
        if r != z3.unsat:
            p.steps.append(
                Step(f"{where}: {what}", "counterexample" if r == z3.sat else "unknown", 0)
            )
            if r == z3.sat:
                values = model_values(s.model(), {"value": value})
                raise StepFailed("counterexample", where, f"{where}: {what} fails", values)
            raise StepFailed("unknown", where, f"{where}: {what}: z3 returned {r}")
        s.pop()
    p.steps.append(
        Step(f"{where}: {len(claims)} claims ({site.width})", "proved", time.monotonic() - t0)
    )
    return len(claims)


# --- routed: the geometry.h functions of the hot paths ---------------------------------------


def fits_fact(p: Prover, inp: Any) -> Any:
    """What a passed fits_int32(slots, tail, B, n) gives the placement loop, proved once."""
    new = geo.new_slots(inp.tail, inp.B, inp.n, Z3)
    fact = z3.Implies(
        geo.fits_int32(inp.slots, inp.tail, inp.B, inp.n, Z3),
        z3.And(
            new >= 0,
            inp.slots + new <= I32,
            geo.extent(inp.slots, inp.tail, inp.B) + inp.n <= I32,
        ),
    )
    p.prove("fits_int32(slots, tail, B, n) bounds the slots and frontier after", fact, inp.hyps)
    return fact


def routed(p: Prover) -> None:
    """The placement loop's geometry calls, under the checks acquire runs first."""
    inp = inputs(True, 2**63 - 1)
    facts = [fits_fact(p, inp)]
    tr = Tracker()
    ar = RangeArith(tr)
    B, W, slots, tail, n = (ar.num(x) for x in (inp.B, inp.W, inp.slots, inp.tail, inp.n))
    A = Tracked(inp.A, tr)
    fits = geo.fits_int32(inp.slots, inp.tail, inp.B, inp.n, Z3)
    # check_fits(slots, tail, n) passed: n <= tail (no slot added) or fits_int32.
    fit_n = z3.Or(inp.n <= inp.tail, fits)
    end = geo.slots_after(inp.slots, inp.tail, inp.B, inp.n, Z3)
    f = geo.frontier_after(inp.slots, inp.tail, inp.B, inp.n)
    h = geo.first_live_slot(inp.slots, end, f, inp.W, inp.B, Z3)
    m = geo.period(inp.A, inp.B, Z3)
    kept = geo.kept_per_period(inp.W, inp.B, inp.A, Z3)
    p0, i = z3.Ints("p0 i")

    def under(label: str, conds: list[Any], run: Any) -> None:
        tr.label = label
        tr.path.extend(conds)
        try:
            run()
        finally:
            del tr.path[len(tr.path) - len(conds) :]

    spill = [fits, inp.n > inp.tail]
    under("slots_after(slots, tail, B, n)", [fit_n], lambda: geo.slots_after(slots, tail, B, n, ar))
    under("frontier_after(slots, tail, B, n)", spill, lambda: geo.frontier_after(slots, tail, B, n))
    under("frontier_after(slots, tail, B, 1)", [], lambda: geo.frontier_after(slots, tail, B, 1))
    # Wp = placement_window(W, B, A): W, or W + B for a state group with checkpoints
    # (section 13.5), whose loop visits no resume run (A < 0).
    for a in (inp.A, geo.CHECKPOINT):
        under("placement_window(W, B, A)", spill, lambda a=a: geo.placement_window(W, B, a, ar))
        under(
            "first_live_slot(slots, end, f, Wp, B)",
            spill,
            lambda a=a: geo.first_live_slot(
                slots, ar.num(end), ar.num(f), geo.placement_window(W, B, a, ar), B, ar
            ),
        )
    under("period(A, B)", spill, lambda: geo.period(A, B, ar))
    under("kept_per_period(W, B, A)", spill, lambda: geo.kept_per_period(W, B, A, ar))
    under("period_start(slots, m)", spill, lambda: geo.period_start(slots, ar.num(m), ar))
    loop = [*spill, p0 >= 0, p0 < h]
    mm, hh, kk = ar.num(m), ar.num(h), ar.num(kept)
    under("next_period(p0, m)", loop, lambda: geo.next_period(ar.num(p0), mm))
    under("resume_run_end(p0, m, h)", loop, lambda: geo.resume_run_end(ar.num(p0), mm, hh, ar))
    under(
        "resume_run_begin(p0, m, kept, slots)",
        loop,
        lambda: geo.resume_run_begin(ar.num(p0), mm, kk, slots, ar),
    )
    scan = [i >= 0, i <= I32]
    under("period_start(i, kScanBlock)", scan, lambda: geo.period_start(ar.num(i), 16, ar))
    t0 = time.monotonic()
    check_obligations(p, inp, tr.obligations, "int64", facts=[*tr.facts, *facts])
    p.steps.append(
        Step(
            f"routed geometry.h calls: {len(tr.obligations)} obligations fit int64",
            "proved",
            time.monotonic() - t0,
        )
    )
    # What the loop's memory accesses need: its bounds stay inside the new slots.
    p.prove(
        "placement loop: slots <= h <= end, period_start(slots, m) >= 0",
        z3.And(inp.slots <= h, h <= end, geo.period_start(inp.slots, m, Z3) >= 0),
        [*inp.hyps, *facts, *spill],
    )
    p.prove(
        "placement loop: every slot it fills is in [slots, end)",
        z3.And(
            geo.resume_run_begin(p0, m, kept, inp.slots, Z3) >= inp.slots,
            geo.resume_run_end(p0, m, h, Z3) <= end,
            geo.next_period(p0, m) >= 0,
        ),
        [*inp.hyps, *facts, *loop],
    )


@theorem(
    "native-hot-paths-fit-int64",
    """Every arithmetic expression of the native hot paths outside the closed forms fits
    its C++ type, inside the limits the module enforces (those of
    native-arithmetic-fits-int64, plus at most 2^31-1 groups per coordinator). Acquire's
    placement loop, decode_step's frontier check and free's scan start call geometry.h
    functions mirroring spec/geometry.py (slots_after, frontier_after, first_live_slot,
    period_start, next_period, resume_run_begin, resume_run_end): their expression trees
    are evaluated in Int-range form under the fits checks acquire runs first, and every
    slot the loop fills lies in [slots, end). Every other site (reclaim's and free's scans,
    coordinator sums over groups, decode_step's indexing, cache_full_blocks' and
    match_prefix's key indices, claim's floor, the pool counters), copied verbatim from the
    source, is evaluated in Int-range form under the loop condition and invariant stated
    with it (sums: a per-group count in [0, 2^31-1] over at most 2^31-1 groups), with
    every divisor >= 1 and dividend >= 0, and key indices proved inside the keys; a
    claim's new reference stays within int32 because claim rejects a page whose count is
    already 2^31-1. The hypotheses not enforced by the module are marked as assumed: the
    lifetime statistics counters stay below 2^63-1 and the version, event and load-plan id
    counters below 2^64-1 (each grows by at most one call's pages or tokens). decode_step's
    batch-size check is proved equivalent to len(tables) = requests * groups without
    forming the product. Unbounded, in Int-range form.""",
    """No counter, index or sum on the acquire, reclaim, free, decode and prefix paths can
    wrap inside the documented limits; the exceptions (lifetime statistics counters) are
    named as assumptions.""",
    cost=1,
    rlimit=2_000_000,
    refute_first=False,
)
def native_hot_paths(p: Prover) -> None:
    p.core_first = CORE_FIRST
    routed(p)
    n, r, g = z3.Ints("n r g")
    # decode_step's check, by division, means len(tables) == requests * groups.
    p.prove(
        "decode_step: n == r * g implies n / g == r and n % g == 0",
        z3.And(n / g == r, n % g == 0),
        [g >= 1, r >= 0, n == r * g],
    )
    p.prove(
        "decode_step: n / g == r and n % g == 0 imply n == r * g",
        n == r * g,
        [g >= 1, n >= 0, r >= 0, n / g == r, n % g == 0],
    )
    claims = sum(prove_site(p, site) for site in SITES)
    assumed = [f"{s.function}: {s.code}" for s in SITES if s.assumed]
    p.note("sites", f"{len(SITES)} sites, {claims} claims; assumed: {'; '.join(assumed)}")


# --- the inventory (docs/theorems.md quotes it; a test keeps it equal to the source) ----------

ROUTED = [
    ("geometry::slots_after(slots, tail, B_, n)", "managers.cpp Manager::append_slots"),
    ("geometry::frontier_after(slots, tail, B_, n)", "managers.cpp Manager::append_slots"),
    ("geometry::placement_window(W_, B_, A_)", "managers.cpp Manager::append_slots"),
    ("geometry::first_live_slot(slots, end, f, Wp, B_)", "managers.cpp Manager::append_slots"),
    ("geometry::first_live_slot(slots, end, f, W_, B_)", "managers.cpp Manager::append_slots"),
    ("geometry::period_start(slots, m)", "managers.cpp Manager::append_slots"),
    ("geometry::next_period(p0, m)", "managers.cpp Manager::append_slots"),
    ("geometry::resume_run_end(p0, m, h)", "managers.cpp Manager::append_slots"),
    ("geometry::resume_run_begin(p0, m, kept, slots)", "managers.cpp Manager::append_slots"),
    ("geometry::period_start(i, kScanBlock)", "managers.cpp Manager::free_unchecked"),
    ("geometry::slots_after(t.size(), t.tail_, B_, n)", "managers.h reserve_unchecked"),
    (
        "geometry::slots_after(slots, tail, B_, first_tokens)",
        "managers.h Manager::blocks_needed_for_sequential",
    ),
    (
        "geometry::frontier_after(t->size(), t->tail_, m.block_size(), 1)",
        "coordinator.cpp Coordinator::decode_step",
    ),
]


# The closed forms the hot paths call, evaluated by native-arithmetic-fits-int64 (arithmetic.py).
CLOSED_FORMS = [
    ("geometry::fits_int32", "managers.h check_fits"),
    ("geometry::extent", "managers.h check_frontier; table.h extent; coordinator.cpp"),
    ("geometry::blocks_needed", "managers.h needed_unchecked"),
    ("geometry::blocks_needed_sequential", "managers.h Manager::blocks_needed_for_sequential"),
    ("geometry::tail_after", "managers.h acquire_unchecked, blocks_needed_for_sequential"),
    ("geometry::reclaim_bound", "managers.h reclaim_unchecked; managers.cpp"),
    ("geometry::chunked_reclaim_bound", "managers.h reclaim_unchecked; managers.cpp"),
    ("geometry::resume_pages", "coordinator.cpp Coordinator::resume"),
]


def inventory_markdown() -> str:
    """Every hot-path arithmetic expression outside the closed forms, and what covers it."""
    rows = [
        "| expression | file: function | covered by | how |",
        "|---|---|---|---|",
    ]
    for call, where in CLOSED_FORMS:
        rows.append(
            f"| `{call}(...)` | {where} | native-arithmetic-fits-int64 | closed form: an entry"
            " point of that theorem |"
        )
    for call, where in ROUTED:
        rows.append(
            f"| `{call}` | {where} | native-hot-paths-fit-int64 | routed: its spec/geometry.py"
            " twin evaluated in Int-range form, int64 |"
        )
    for s in SITES:
        how = f"site, {s.width}, given {s.hyps}: {s.why}"
        how += " (ASSUMED, not enforced)" if s.assumed else ""
        how += f"; then {s.post}" if s.post else ""
        where = f"{s.file.rsplit('/', 1)[-1]} {s.function}"
        rows.append(f"| `{s.code}` | {where} | native-hot-paths-fit-int64 | {how} |")
    return "\n".join(rows)
