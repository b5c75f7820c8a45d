"""Section 7.12 per name: replaying the event stream gives the names a pool holds.

The pool decides its stored and removed events by the rules of ``spec/slots.py``
(``stores``, ``removes``); this theorem runs them on one name carried by a symbolic number
of pages and replays the events as section 11 defines them.
"""

from __future__ import annotations

from typing import Any

import z3  # type: ignore[import-untyped]
from livetail.spec import slots

from ..z3arith import Z3
from .prover.prover import Prover
from .prover.slot_traces import events_candidates, slot_traces
from .prover.theorem import theorem


@theorem(
    "events-replay-to-the-names",
    """Executes the pool's event rules (spec/slots.py stores and removes, which the model's
    naming, eviction and evict_names decide by, and clears, by which reset_names decides)
    on one name (group, key) carried by a symbolic number c >= 0 of pages, p of them
    pinned, and replays the events as section 11 defines them (a stored event adds the
    name, a removed event drops it, a cleared event drops every name), keeping besides the
    set the name's balance of stored minus removed events (what a router counting events,
    or the pool's names_stored - names_removed, holds for it). Inductively: if the
    replayed set holds the name exactly when some page carries it (c > 0) and the balance
    is 1 exactly then (else 0), both still hold after naming one more page with it, after
    one of its pages loses it (eviction by an allocation, or evict_names), and after
    reset_names, which, when it proceeds (one cleared event, every name dropped and
    counted removed), never drops the name of a pinned page: so every stored event
    announces a name new to the pool (the step fails with stores always true) and every
    removed event the last copy's loss. The same rules serve the device pool and the host
    pool. Unbounded in the number of pages that share the name.""",
    """A router that replays an engine's event stream from the start holds exactly the names
    the engine holds, after every operation, however many copies of a prefix exist, and
    never sees a name announced twice or dropped while a copy remains.""",
    kills=("removes-while-copies-remain",),
    cost=1,
    rlimit=2_000_000,
    executes=("slots.stores", "slots.removes", "slots.clears"),
    trace=slot_traces("events-replay-to-the-names", events_candidates),
)
def events_replay(p: Prover) -> None:
    c, pinned, others = z3.Ints("holders pinned pinned_elsewhere")
    held = z3.Bool("held")
    balance = z3.Int("balance")

    def one(b: Any) -> Any:
        return z3.If(b, 1, 0)

    hyps = [c >= 0, held == (c > 0), balance == one(c > 0), pinned >= 0, pinned <= c]
    show = {"holders": c, "held": held, "balance": balance}
    stored = slots.stores(c, Z3)
    p.prove(
        "naming one more page keeps replay = names and the balance",
        z3.And(z3.Or(held, stored) == (c + 1 > 0), balance + one(stored) == one(c + 1 > 0)),
        hyps,
        show,
    )
    removed = slots.removes(c - 1, Z3)
    p.prove(
        "a page losing the name keeps replay = names and the balance",
        z3.And(
            z3.And(held, z3.Not(removed)) == (c - 1 > 0),
            balance - one(removed) == one(c - 1 > 0),
        ),
        [*hyps, c >= 1],
        show,
    )
    # reset_names: the rule sees every named page's pin (this name's and the others').
    cleared = slots.clears(pinned + others, Z3)
    after = z3.If(cleared, 0, c)  # a cleared reset drops every name: the pages keep none
    p.prove(
        "reset_names keeps replay = names and the balance, and keeps a pinned page's name",
        z3.And(
            z3.If(cleared, False, held) == (after > 0),
            balance - one(z3.And(cleared, held)) == one(after > 0),
            z3.Implies(pinned > 0, after == c),
        ),
        [*hyps, others >= 0],
        show,
    )
