"""The wrong variants of the whole-prompt charge (semantics 13.1) and of a state group's
placement with live tail (13.5), registered in ``variants.VARIANTS``;
``prompt-charge-bounds-every-chunk-bounded`` and ``state-live-tail-keeps-written-states``
reject them."""

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


def _state_checkpoint_dropped(W: Num, B: Num, A: Num, ar: Arith = geo.INT) -> Num:  # noqa: ARG001
    # Wrong: a state group with checkpoints places like one without (no checkpoint page).
    return W


def variants_state(variant: Any) -> dict[str, Any]:
    """The state-placement variant (section 13.5), built with ``variants.Variant``."""
    name = "state-checkpoint-dropped"
    return {
        name: variant(
            name,
            "a state group with checkpoints keeps no checkpoint page (section 13.5)",
            geo,
            "placement_window",
            _state_checkpoint_dropped,
        )
    }
