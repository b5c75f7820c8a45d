"""GroupSpec: one KV-cache group's kind and geometry (semantics sections 5, 6 and 13.2)."""

from __future__ import annotations

from ._args import bounded, instance
from .managers import chunk_size_of

KINDS = ("full", "sliding", "state", "chunked")


class GroupSpec:
    """One KV-cache group: kind, page size, window (sliding only), live tail (sliding, state).

    On a state group live_tail_alloc=True is section 13.5's state group of vLLM's Mamba
    "align" mode: StateManager(block_size, live_tail=True, checkpoints=checkpoints), an
    acquire making real only the running state's slot (and with checkpoints=True the slot
    one page behind it).

    live_tail_alloc=True gives a hole (page 0) to every slot of a chunk that is out of the
    window at the chunk's end and is no resume page. Safe only for a group whose kernels never
    read the current chunk's own entries from the pool during that chunk's forward:

    - conv (W = kernel width): the kernel reads the chunk from the packed activations and only
      the last W - 1 earlier tokens from pages: safe;
    - sliding attention with a ragged + paged prefill (the chunk's K/V from activations, only
      earlier context from pages): safe;
    - sliding attention whose prefill writes the chunk into its pages and reads it back: keep
      live tail off, or it reads holes.

    A chunked group (section 13.2) takes attention_chunk_size, a positive multiple of
    block_size, and no window; it refuses live_tail_alloc (every slot allocated).
    """

    def __init__(
        self,
        kind: str,
        block_size: int,
        sliding_window: int | None = None,
        live_tail_alloc: bool = False,
        attention_chunk_size: int | None = None,
        checkpoints: bool = False,
    ) -> None:
        instance("kind", kind, str)
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        instance("live_tail_alloc", live_tail_alloc, bool)
        instance("checkpoints", checkpoints, bool)
        if checkpoints and not (kind == "state" and live_tail_alloc):
            raise ValueError("checkpoints is only for state groups with live_tail_alloc=True")
        self.block_size = bounded("block_size", block_size, 1)
        if kind == "sliding":
            if sliding_window is None:
                raise ValueError("a sliding group needs a sliding_window")
            self.sliding_window: int | None = bounded("sliding_window", sliding_window, 1)
        else:
            if sliding_window is not None:
                raise ValueError(f"sliding_window is only for sliding groups, not {kind!r}")
            if live_tail_alloc and kind != "state":
                raise ValueError(
                    f"live_tail_alloc is only for sliding and state groups, not {kind!r}"
                )
            self.sliding_window = None
        self.kind = kind
        self.live_tail_alloc = live_tail_alloc
        self.checkpoints = checkpoints
        self.attention_chunk_size = chunk_size_of(kind, attention_chunk_size, self.block_size)

    def __repr__(self) -> str:
        C = self.attention_chunk_size
        chunk = "" if C is None else f", attention_chunk_size={C}"
        if self.checkpoints:
            chunk += ", checkpoints=True"
        return (
            f"GroupSpec({self.kind!r}, {self.block_size}, sliding_window={self.sliding_window}, "
            f"live_tail_alloc={self.live_tail_alloc}{chunk})"
        )
