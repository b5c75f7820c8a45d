"""Wrong variants of the chunked kind's closed forms (semantics section 13.2), registered in
``variants.VARIANTS``; the theorems of ``verify/theorems/chunked.py`` reject them."""

from __future__ import annotations

from typing import Any

from livetail.spec import geometry as geo
from livetail.spec.geometry import Arith, Num


def _chunked_bound_late(f: Num, slots: Num, C: Num, B: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: reclaims one chunk too far, the chunk the next query still reads.
    return ar.min(ar.div(geo.chunk_start(f, C, ar) + C, B), slots)


def _chunked_bound_early(f: Num, slots: Num, C: Num, B: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: keeps one chunk more than needed (the chunk before the current one).
    return ar.min(ar.max(0, ar.div(geo.chunk_start(f, C, ar), B) - ar.div(C, B)), slots)


def _chunked_whole_chunk(b: Num, C: Num, B: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: a hit demands a whole chunk of pages behind every boundary.
    return ar.min(b, ar.div(C, B))


def _chunked_one_short(b: Num, C: Num, B: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: a hit demands one slot fewer than the chunk behind the boundary holds.
    return ar.max(0, ar.mod(b, ar.div(C, B)) - 1)


def variants(variant: Any) -> dict[str, Any]:
    """The variants, built with ``variants.Variant`` (passed in: no import cycle)."""
    return {
        v.name: v
        for v in [
            variant(
                "chunked-reclaim-one-chunk-late",
                "a chunked group's reclaim bound is one chunk past floor(f / C) * C",
                geo,
                "chunked_reclaim_bound",
                _chunked_bound_late,
            ),
            variant(
                "chunked-reclaim-one-chunk-early",
                "a chunked group's reclaim bound keeps the chunk before floor(f / C) * C",
                geo,
                "chunked_reclaim_bound",
                _chunked_bound_early,
            ),
            variant(
                "chunked-hit-demands-whole-chunk",
                "a chunked hit demands C / B named slots behind every boundary",
                geo,
                "chunked_resume_pages",
                _chunked_whole_chunk,
            ),
            variant(
                "chunked-hit-one-slot-short",
                "a chunked hit demands one slot fewer than [floor(T / C) * C, T) holds",
                geo,
                "chunked_resume_pages",
                _chunked_one_short,
            ),
        ]
    }
