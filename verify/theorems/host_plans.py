"""Section 7, property 11 (host tier): ending a copy plan names its pages and drops its pins.

The model completes or aborts an offload or a load entry by entry through the host-tier
rules of ``spec/slots.py`` (``ends_entry``, ``copy_target``, ``copy_name``, ``drops_device``,
``drops_host``; ``spec/host.py``'s ``_end_plan`` is the glue, the pool's ``_release`` drops
each reference by ``runs.drop_reference`` and sends the page where ``joins_front`` says).
``copy-plans-name-their-pages`` executes them on a symbolic plan, by induction over the
entries the glue visits.

The arrays of the state (page -> name, page -> count) and of the plan (entry -> page, name)
appear only at the index terms a step reads: one Int per index (``Cells``), equal wherever
two indices are.  That is the theory of arrays for those reads, written out; it keeps each
formula in integer arithmetic, which the small-domain search decides over bit-vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import z3  # type: ignore[import-untyped]
from livetail.spec import runs, slots

from ..z3arith import Z3
from .host_traces import plan_end_traces
from .prover.prover import Prover
from .prover.symbols import Term
from .prover.theorem import theorem


class Cells:
    """An unbounded array seen at finitely many index terms: one Int per index term."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._at: dict[str, tuple[Term, Term]] = {}

    def __getitem__(self, index: Term) -> Term:
        key = str(index)
        if key not in self._at:
            self._at[key] = (index, z3.Int(f"{self.name}[{key}]"))
        return self._at[key][1]

    def consistent(self) -> list[Term]:
        """Equal indices hold equal values: the array's reads at the indices seen."""
        seen = list(self._at.values())
        return [
            z3.Implies(a == b, x == y) for n, (a, x) in enumerate(seen) for b, y in seen[n + 1 :]
        ]


ENDS = (
    ("complete load", True, True),
    ("abort load", True, False),
    ("complete offload", False, True),
    ("abort offload", False, False),
)
"""(label, load, completed): complete_load, a load aborted by free (abort_load_on_free),
complete_offload, abort_offload."""

ARRAYS = ("device names", "device counts", "host names", "host counts")


def _within(e: Term, upto: Term) -> Term:
    return z3.And(0 <= e, e < upto)


@dataclass
class Plan:
    """A symbolic plan of k entries ending, and the state it ends in.

    Entry e copies between device page D[e] and host page H[e] and carries name N[e] >= 1;
    ED and EH map a device or host page back to its entry (so the plan's pages are distinct,
    and a page x is the plan's iff 0 <= ED[x] < k).  The state before the plan ends:
    page -> name (0: none) and page -> count, per tier (the ``before`` cells).
    """

    load: bool
    completed: bool
    i: Term = field(default_factory=lambda: z3.Int("i"))  # the entry a step visits
    j: Term = field(default_factory=lambda: z3.Int("j"))  # any entry
    k: Term = field(default_factory=lambda: z3.Int("k"))  # the plan's entries
    page: Term = field(default_factory=lambda: z3.Int("page"))  # any page of the tier
    D: Cells = field(default_factory=lambda: Cells("D"))
    H: Cells = field(default_factory=lambda: Cells("H"))
    N: Cells = field(default_factory=lambda: Cells("N"))
    ED: Cells = field(default_factory=lambda: Cells("ED"))
    EH: Cells = field(default_factory=lambda: Cells("EH"))
    cells: dict[str, Cells] = field(default_factory=dict)  # the state's arrays, before

    def __post_init__(self) -> None:
        for what in ARRAYS:
            self.cells[what] = Cells(what.replace(" ", "_") + "_0")

    def index(self, what: str) -> tuple[Cells, Cells]:
        """The plan's pages of an array's tier, entry -> page, and its inverse."""
        return (self.D, self.ED) if what.startswith("device") else (self.H, self.EH)

    def want(self, what: str, e: Term) -> Term:
        """Section 10: what entry e's page of this array holds once the plan has ended."""
        P, _ = self.index(what)
        before = self.cells[what][P[e]]
        if what.endswith("names"):
            target = "device" if self.load else "host"
            if not what.startswith(target):
                return before
            return self.N[e] if self.completed else 0
        if what == "device counts" and self.load:
            return before  # a loaded page stays held by its slot
        return before - 1  # an offload's copy reference, an offload's host page, a load's pin

    def entry(self, e: Term) -> list[Term]:
        """Entry e of the plan as the model makes it: pages, name, counts and names before."""
        D, H, N = self.D, self.H, self.N
        dn, hn = self.cells["device names"], self.cells["host names"]
        dc, hc = self.cells["device counts"], self.cells["host counts"]
        return [
            D[e] >= 1,
            H[e] >= 1,
            N[e] >= 1,
            self.ED[D[e]] == e,
            self.EH[H[e]] == e,
            # The copy's target is a fresh page (unnamed); its source carries the name.
            dn[D[e]] == (0 if self.load else N[e]),
            hn[H[e]] == (N[e] if self.load else 0),
            dc[D[e]] >= 1,  # a load's slot holds it, an offload's copy reference
            hc[H[e]] >= 1,  # a load's pin, an offload's allocation
        ]

    def visit(self, what: str, now: Cells) -> tuple[Term, Term, Term]:
        """The glue's write at entry i, by the rules: (whether, at which page, what value)."""
        i, load, completed = self.i, self.load, self.completed
        ends = slots.ends_entry(i, self.k, Z3)
        if what.endswith("names"):
            if what.startswith("device") != load:
                return z3.BoolVal(False), self.page, now[self.page]  # the other tier: no copy
            name = slots.copy_name(self.N[i], completed, Z3)
            at = slots.copy_target(self.D[i], self.H[i], load, Z3)
            return runs.both(ends, name != 0, Z3), at, name
        P, _ = self.index(what)
        drops = slots.drops_device if what.startswith("device") else slots.drops_host
        left, _ = runs.drop_reference(now[P[i]], Z3)
        return runs.both(ends, drops(load, completed, Z3), Z3), P[i], left

    def consistent(self, *more: Cells) -> list[Term]:
        every = [self.D, self.H, self.N, self.ED, self.EH, *self.cells.values(), *more]
        return [c for cells in every for c in cells.consistent()]


def _array_step(p: Prover, label: str, load: bool, completed: bool, what: str) -> None:
    """Inductive step over the entries: entry i's visit keeps the invariant for entry i + 1.

    Invariant after the entries before i: each of them holds what section 10 says (``want``),
    every page that is not one of theirs holds what it held before the plan ended.
    """
    pl = Plan(load, completed)
    i, j, k, page = pl.i, pl.j, pl.k, pl.page
    P, E = pl.index(what)
    before = pl.cells[what]
    now = Cells(what.replace(" ", "_") + "_i")  # the array before entry i is visited
    w, at, value = pl.visit(what, now)

    def after(x: Term) -> Term:
        return z3.If(z3.And(w, x == at), value, now[x])

    hyps = [0 <= i, i < k, *pl.entry(i), z3.Implies(_within(j, k), z3.And(*pl.entry(j)))]
    hyps.append(z3.Implies(_within(j, i), now[P[j]] == pl.want(what, j)))
    for x in (page, P[i]):
        hyps.append(z3.Implies(z3.Not(_within(E[x], i)), now[x] == before[x]))
    claim = z3.And(
        z3.Implies(_within(j, i + 1), after(P[j]) == pl.want(what, j)),
        z3.Implies(z3.Not(_within(E[page], i + 1)), after(page) == before[page]),
    )
    show = {"written": w, "at": at, "value": value}
    hyps += pl.consistent(now)
    p.prove(
        f"[{label}] {what}: entry i keeps each visited entry's page as section 10 says and "
        "every other page as it was",
        claim,
        hyps,
        show,
    )


def _released(p: Prover, label: str, load: bool, completed: bool) -> None:
    """Once every entry is visited, a page whose count reached 0 joins the queue's back
    when named (still matchable), the front when not (``joins_front``, retention on)."""
    pl = Plan(load, completed)
    j, k = pl.j, pl.k
    end = {what: Cells(what.replace(" ", "_") + "_k") for what in ARRAYS}
    hyps = [_within(j, k), *pl.entry(j)]
    for what in ARRAYS:
        P, _ = pl.index(what)
        hyps.append(end[what][P[j]] == pl.want(what, j))
    hyps += pl.consistent(*end.values())
    host_front = not load and not completed  # an aborted offload's host page: unnamed
    claims = [
        z3.Implies(
            end["host counts"][pl.H[j]] == 0,
            slots.joins_front(end["host names"][pl.H[j]] != 0, True, Z3) == host_front,
        )
    ]
    if not load:  # a device page whose request was freed meanwhile: named, to the back
        claims.append(
            z3.Implies(
                end["device counts"][pl.D[j]] == 0,
                slots.joins_front(end["device names"][pl.D[j]] != 0, True, Z3) == False,  # noqa: E712
            )
        )
    where = "the front" if host_front else "the back"
    p.prove(f"[{label}] a host page let go joins {where} of the host queue", z3.And(*claims), hyps)


@theorem(
    "copy-plans-name-their-pages",
    """Executes the host tier's plan-end rules (spec/slots.py ends_entry, copy_target,
    copy_name, drops_device, drops_host, with runs.drop_reference and joins_front, which
    the model's complete_offload, abort_offload, complete_load and the abort of a load on
    free run entry by entry) on a symbolic plan of k entries (k unbounded; entry -> device
    page, host page and name, the device and host names and reference counts of every page
    are unbounded arrays; the plan's pages are distinct, each target page fresh and
    unnamed, each source page named by its entry). By induction over the entries the model
    visits (the step for a symbolic entry i and any entry j and page): complete_load leaves
    every device page of the plan carrying its entry's name and every host pin dropped by
    one, every device count and host name as it was; a load aborted by free names nothing
    and drops the pins; complete_offload names every host page with its device page's name
    and drops each device copy reference and host page reference by one; abort_offload
    leaves the host pages unnamed and drops the same references; no page outside the plan
    changes, in either tier. Then a host page whose count reached 0 joins the back of the
    host queue (named, still matchable), except after an aborted offload, the front
    (unnamed); an offload's device page whose count reached 0 joins the back (named).
    Unbounded.""",
    """After complete_load every loaded page carries the name of what was copied into it and
    no host page stays pinned; after complete_offload the host holds every copied name; an
    aborted plan names nothing, so no name ever points at a page the engine did not
    write.""",
    kills=("load-names-host-page", "aborted-plan-names-pages", "load-releases-device-page"),
    cost=3,
    rlimit=2_000_000,
    executes=(
        "slots.ends_entry",
        "slots.copy_target",
        "slots.copy_name",
        "slots.drops_device",
        "slots.drops_host",
        "drop_reference",
        "slots.joins_front",
    ),
    trace=plan_end_traces("copy-plans-name-their-pages"),
)
def plan_ends(p: Prover) -> None:
    for label, load, completed in ENDS:
        for what in ARRAYS:
            _array_step(p, label, load, completed, what)
        _released(p, label, load, completed)
