"""What live tail saves at each alignment (semantics 13.9): the README's figures.

One 8192-token prompt computed as one chunk on {full B=16, sliding B=16 W=128}, with live
tail off and on, at alignments 16 (the lcm: every group at one page size), 256 and 1024.
For each: the sliding group's pages during the chunk (after its acquire, before the
reclaim), the pages that carry names after cache_full_blocks (sparse naming, 13.4: the
same with live tail on or off), and the sliding pages still pinned after the reclaim.

    python benchmarks/live_tail_alignment.py      # prints the README's table
"""

from __future__ import annotations

from typing import Any

import livetail

PROMPT = 8192
B, W = 16, 128
ALIGNMENTS = (16, 256, 1024)


def run(alignment: int, live: bool) -> dict[str, int]:
    specs = [
        livetail.GroupSpec("full", B),
        livetail.GroupSpec("sliding", B, sliding_window=W, live_tail_alloc=live),
    ]
    c = livetail.Coordinator(specs, livetail.BlockPool(2 * PROMPT // B + 2), alignment=alignment)
    tables = c.new_tables()
    keys = livetail.page_keys(list(range(PROMPT)), B)
    assert c.acquire(tables, PROMPT)
    chunk = int(c.stats()["pinned_pages"][1])
    c.cache_full_blocks(tables, keys, PROMPT)
    named = sum(1 for p in tables[1].page_ids() if p and c.pool.name(int(p)) is not None)
    c.reclaim_expired(tables, PROMPT)
    return {"chunk": chunk, "named": named, "kept": int(c.stats()["pinned_pages"][1])}


def figures() -> list[dict[str, Any]]:
    rows = []
    for a in ALIGNMENTS:
        off, on = run(a, False), run(a, True)
        assert off["named"] == on["named"] and off["kept"] == on["kept"]
        rows.append(
            {
                "A": a,
                "off": off["chunk"],
                "on": on["chunk"],
                "named": on["named"],
                "kept": on["kept"],
            }
        )
    return rows


def table() -> str:
    lines = [
        "| alignment A | sliding pages during the chunk, live tail off | live tail on "
        "| named sliding pages | sliding pages kept after reclaim |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in figures():
        lines.append(f"| {r['A']} | {r['off']} | {r['on']} | {r['named']} | {r['kept']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
