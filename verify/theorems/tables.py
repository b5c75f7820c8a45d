"""The tables of the docs, generated from the registry, and the command that keeps them so.

``docs/theorems.md`` and ``README.md`` hold blocks between ``<!-- NAME:start -->`` and
``<!-- NAME:end -->`` markers; each is the output of one function here (``DOC_BLOCKS``):
the README's theorem table, the per-property table, the hot-path inventory, the legend of
the kill table's variants and the theorem list.  ``livetail theorems --docs DIR`` rewrites
them from the registry, ``--check`` fails when one is stale (``tests/test_theorem_tables.py``
runs the check).  Everything outside the markers is written by hand; the measured tables
(budgets, the kill table's cells) come from runs, not from the registry
(``livetail rlimits --markdown``, ``livetail verify --mutants``), and their tests compare
them with the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ..variants import VARIANTS
from .hot_paths import inventory_markdown
from .prover.theorem import Theorem
from .registry import NO_THEOREM, PROPERTY, SECTION7, THEOREMS, properties

MODEL_CALLS = frozenset(
    {
        "acquire",
        "coordinator_acquire",
        "run_real",
        "claim_run",
        "plan_stepped",
        "slots.reclaim_cell",
        "slots.punched",
        "slots.reclaimable_cell",
        "slots.claim_cell",
        "slots.reachable",
        "slots.offered",
        "slots.takes_name",
        "slots.stores",
        "slots.removes",
        "slots.clears",
        "slots.from_front",
        "slots.evicts",
        "slots.joins_front",
        "slots.claim_takes",
        "slots.ends_entry",
        "slots.copy_target",
        "slots.copy_name",
        "slots.drops_device",
        "slots.drops_host",
        "slots.freed",
        "drop_reference",
        "slots.forked",
        "slots.fork_cell",
        "slots.share",
        "slots.tail_slot",
        "slots.copies_tail",
        "slots.copy_tail_cell",
        "pool_state.take",
        "pool_state.release",
        "pool_state.share",
        "pool_state.requeue_unnamed",
        "pool_state.pin",
        "pool_state.set_name",
        "pool_state.drop_name",
        "pool_state.clear_names",
    }
)
"""Transitions the model's own classes call to change state (a test checks this against
spec/): spec/runs.py functions by bare name, spec/slots.py rules as ``slots.<name>``.  The
others a theorem may execute (``reclaim``, ``free_table``, ``reclaimable``) are run-level
versions the model never calls: its reclaim_expired, free and blocks_reclaimable_at write
and count slot by slot through spec/slots.py's rules, which the slot theorems execute and
tie to the run description those run-level versions act on."""

THROUGH = {"slots.freed": "slots.free_batch"}
"""Rules the model calls through a glue function of spec/slots.py (free calls free_batch,
whose batch is the slots ``freed`` lets go of); a test checks the glue calls the rule."""


def _qualified(function: str) -> str:
    name = function if "." in function else f"runs.{function}"
    return f"{name} (through {THROUGH[name]})" if name in THROUGH else name


def executed(th: Theorem) -> str:
    """The "executes" mark of a theorem: which transitions it runs on symbolic state, and
    whether the model calls them; a bounded theorem runs the model's classes on ints."""
    if th.bounded:
        return "model's classes, concrete runs"
    if not th.executes:
        return "closed forms only"
    called = [_qualified(f) for f in th.executes if f in MODEL_CALLS]
    parallel = [_qualified(f) for f in th.executes if f not in MODEL_CALLS]
    parts = []
    if called:
        parts.append(f"model's: {', '.join(called)}")
    if parallel:
        parts.append(f"parallel, not called by the model: {', '.join(parallel)}")
    return "; ".join(parts)


def domain(th: Theorem) -> str:
    """Unbounded, bounded (the bounds are in the statement) or witness (search bounds too)."""
    if th.bounded:
        return "bounded (bounds in the statement)"
    if th.expected == "witness":
        return "witness (search bounds in the statement)"
    return "unbounded"



def readme_table() -> str:
    """The README's table: theorem, domain, what it executes, section-7 property, guarantee."""
    lines = [
        "| theorem | domain | executes | establishes | what it guarantees an engine |",
        "|---|---|---|---|---|",
    ]
    for th in THEOREMS.values():
        dom = domain(th).split(" (")[0]
        lines.append(
            f"| `{th.name}` | {dom} | {executed(th)} | {PROPERTY[th.name]} | {th.guarantee} |"
        )
    return "\n".join(lines)


def property_table() -> str:
    """docs/theorems.md's table: per section-7 property, each theorem, domain, executes."""
    lines = [
        "| property (section 7) | theorem | domain | executes |",
        "|---|---|---|---|",
    ]
    for k, title in SECTION7.items():
        rows = [th for th in THEOREMS.values() if k in properties(th)]
        if not rows:
            lines.append(f"| {k}. {title} | - | {NO_THEOREM[k]} | - |")
        for th in rows:
            dom = domain(th).split(" (")[0]
            lines.append(f"| {k}. {title} | `{th.name}` | {dom} | {executed(th)} |")
    return "\n".join(lines)


def markdown() -> str:
    """The theorem list in plain words (docs/theorems.md quotes this)."""
    lines = []
    for th in THEOREMS.values():
        kind = "bounded, exhaustive" if th.bounded else "Z3"
        exp = "expected: a witness" if th.expected == "witness" else "expected: proved"
        kills = f"; rejects variant(s) {', '.join(th.kills)}" if th.kills else ""
        lines.append(f"### `{th.name}`\n")
        lines.append(f"*{kind}; {exp}{kills}.*\n")
        lines.append(f"*Domain: {domain(th)}. Establishes: {PROPERTY[th.name]}.*\n")
        lines.append(f"{th.statement}\n")
        lines.append(f"**What it guarantees an engine.** {th.guarantee}\n")
    return "\n".join(lines)


def variant_legend() -> str:
    """The kill table's legend: its columns, the wrong variants, numbered in registry order."""
    return "\n".join(
        f"{i}. `{name}`: {v.description}" for i, (name, v) in enumerate(VARIANTS.items(), 1)
    )


DOC_BLOCKS: dict[str, dict[str, Callable[[], str]]] = {
    "README.md": {"theorem-table": readme_table},
    "docs/theorems.md": {
        "properties": property_table,
        "hot-paths": inventory_markdown,
        "variants": variant_legend,
        "theorems": markdown,
    },
}
"""For each file (relative to the project root), its generated blocks by marker name."""


def refresh(text: str, blocks: Mapping[str, Callable[[], str]]) -> str:
    """``text`` with the content between each block's markers replaced by its generator's."""
    for name, generate in blocks.items():
        start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
        if text.count(start) != 1 or text.count(end) != 1:
            raise ValueError(f"expected one {start} and one {end} marker")
        head, rest = text.split(start)
        _, tail = rest.split(end)
        text = f"{head}{start}\n\n{generate().strip()}\n\n{end}{tail}"
    return text


def stale_docs(root: Path) -> list[str]:
    """The files under ``root`` whose generated blocks differ from the registry's."""
    return [
        rel
        for rel, blocks in DOC_BLOCKS.items()
        if (text := (root / rel).read_text()) != refresh(text, blocks)
    ]


def write_docs(root: Path) -> list[str]:
    """Rewrite every generated block under ``root``; the files that changed."""
    changed = stale_docs(root)
    for rel in changed:
        path = root / rel
        path.write_text(refresh(path.read_text(), DOC_BLOCKS[rel]))
    return changed
