"""The wrong variant of the whole-prompt charge (semantics 13.1), registered in
``variants.VARIANTS``; ``prompt-charge-bounds-every-chunk-bounded`` rejects it."""

from __future__ import annotations

from typing import Any

from livetail.spec import geometry as geo
from livetail.spec.geometry import Arith, Num


def _largest_chunk(f: Num, C: Num, N: Num, B: Num, ar: Arith = geo.INT) -> Num:
    # Wrong: the chunk from f peaks at its largest end; with live tail a shorter chunk can
    # hold more (slid_out(F) grows with F and punches holes).
    return ar.min(f + C, N)


def variants(variant: Any) -> dict[str, Any]:
    """The prompt-charge variant, built with ``variants.Variant`` (passed in: no import circle)."""
    name = "prompt-charge-largest-chunk"
    return {
        name: variant(
            name,
            "blocks_needed_for_prompt charges each chunk at its largest end only",
            geo,
            "chunk_peak_end",
            _largest_chunk,
        )
    }
