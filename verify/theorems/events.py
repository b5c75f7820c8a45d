"""Section 7.12 per name: replaying the event stream gives the names a pool holds.

The pool decides its stored and removed events by the rules of ``spec/slots.py``
(``stores``, ``removes``); this theorem runs them on one name carried by a symbolic number
of pages and replays the events as section 11 defines them.
"""

from __future__ import annotations

import z3  # type: ignore[import-untyped]
from livetail.spec import slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.slot_traces import events_candidates, slot_traces
from .prover.theorem import theorem


@theorem(
    "events-replay-to-the-names",
    """Executes the pool's event rules (spec/slots.py stores and removes, which the model's
    naming, eviction and evict_names decide by) on one name (group, key) carried by a
    symbolic number c >= 0 of pages, and replays the events as section 11 defines them (a
    stored event adds the name, a removed event drops it, a cleared event drops every
    name). Inductively: if the replayed set holds the name exactly when some page carries
    it (c > 0), it still does after naming one more page with it, after one of its pages
    loses it (eviction by an allocation, or evict_names), and after reset_names (every
    name dropped, one cleared event). The same rules serve the device pool and the host
    pool. Unbounded in the number of pages that share the name.""",
    """A router that replays an engine's event stream from the start holds exactly the names
    the engine holds, after every operation, however many copies of a prefix exist.""",
    kills=("removes-while-copies-remain",),
    cost=1,
    rlimit=2_000_000,
    executes=("slots.stores", "slots.removes"),
    trace=slot_traces("events-replay-to-the-names", events_candidates),
)
def events_replay(p: Prover) -> None:
    c = z3.Int("holders")
    held = z3.Bool("held")
    hyps = [c >= 0, held == (c > 0)]
    show = {"holders": c, "held": held}
    stored = slots.stores(c, Z3)
    p.prove(
        "naming one more page keeps replay = names",
        z3.Or(held, stored) == (c + 1 > 0),
        hyps,
        show,
    )
    removed = slots.removes(c - 1, Z3)
    p.prove(
        "a page losing the name keeps replay = names",
        z3.And(held, z3.Not(removed)) == (c - 1 > 0),
        [*hyps, c >= 1],
        show,
    )
    p.prove("reset_names keeps replay = names", z3.BoolVal(False) == (z3.IntVal(0) > 0), hyps, show)
