"""Group layouts (vLLM's spec kinds -> the rules of semantics section 8), tiers, and an
engine's record in the index."""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

INT32_MAX = 2**31 - 1

# vLLM's kv_cache_spec_kind values -> the rule of section 8 they follow.
GROUP_KINDS = {
    "full_attention": "full",
    "mla_attention": "full",
    "sliding_window": "sliding",
    "sliding_window_mla": "sliding",
    "mamba": "state",
    "chunked_local_attention": "chunked",
}
# Tiers that count (section 10), as bits of the presence matrix. A missing medium (events
# of engines older than the field) is the device.
_TIER_BITS = {"GPU": 1, "CPU": 2, None: 1}
_ALL_TIERS = 3
_MAX_GROUPS = 1024

# One group's layout: (block_size, kind, sliding window or None), kind as in GROUP_KINDS; a
# chunked group's third field is its attention_chunk_size (None while unknown: vLLM's events
# carry none, so an engine with a chunked group is answered once its layout is registered).
GroupLayout = tuple[int, str, "int | None"]


def _as_layout(group: object, where: str) -> GroupLayout:
    """(block_size, kind, window) from a tuple of livetail.events.group_layout or a GroupSpec."""
    if hasattr(group, "block_size") and hasattr(group, "kind"):
        kind = {
            "full": "full_attention",
            "sliding": "sliding_window",
            "state": "mamba",
            "chunked": "chunked_local_attention",
        }.get(group.kind, group.kind)
        window = getattr(group, "sliding_window", None)
        if kind == "chunked_local_attention":
            window = getattr(group, "attention_chunk_size", None)
        group = (group.block_size, kind, window)
    if not isinstance(group, (tuple, list)) or len(group) != 3:
        raise TypeError(f"{where} must be (block_size, kind, sliding_window) or a GroupSpec")
    size, kind, window = group
    if type(size) is not int or size < 1:
        raise ValueError(f"{where}: block_size must be an int >= 1, got {size!r}")
    if kind not in GROUP_KINDS:
        raise ValueError(f"{where}: unknown kv_cache_spec_kind {kind!r}")
    rule = GROUP_KINDS[kind]
    if rule == "sliding":
        if type(window) is not int or window < 1:
            raise ValueError(
                f"{where}: a sliding group needs a sliding window >= 1, got {window!r}"
            )
        return (size, rule, window)
    if rule == "chunked":
        if window is not None and (type(window) is not int or window < 1 or window % size):
            raise ValueError(
                f"{where}: a chunked group's attention_chunk_size must be a positive multiple "
                f"of its block_size {size}, got {window!r}"
            )
        return (size, rule, window)
    return (size, rule, None)


def _resume(layout: GroupLayout) -> int:
    """Slots behind a boundary the group needs: -1 (every slot) for full groups."""
    size, rule, window = layout
    if rule == "full":
        return -1
    if rule == "state":
        return 1
    if rule == "chunked":
        return 0  # per boundary: _chunk
    assert window is not None
    return (window - 1 + size - 1) // size


def _chunk(layout: GroupLayout) -> int:
    """A chunked group's slots per chunk (C / B): behind the boundary of b slots it needs the
    b mod (C / B) slots of the chunk holding them (section 13.2); 0 for the other kinds."""
    size, rule, window = layout
    return window // size if rule == "chunked" and window is not None else 0


def _known(layout: GroupLayout) -> bool:
    """Is the group's rule known? A chunked group's needs its chunk size."""
    return not (layout[1] == "chunked" and layout[2] is None)


class _Engine:
    __slots__ = (
        "id", "groups", "cols", "expected", "gaps", "fixed", "base", "lcm", "ready", "rules",
        "alignment",
    )  # fmt: skip

    def __init__(self, engine_id: Hashable) -> None:
        self.id = engine_id
        self.groups: list[GroupLayout | None] = []  # per group index, None while unknown
        self.cols: list[int] = []  # column of the presence matrix per group, -1 none yet
        self.expected = 0  # next sequence number
        self.gaps: list[tuple[int, int]] = []  # lost batches not recovered since a clear
        self.fixed = False  # layout given up front: events may not add groups
        self.base = 0
        self.lcm = 0
        self.ready = False  # every group's layout known
        self.rules: np.ndarray | None = None  # (block size, resume, column) per group, cached
        # The engine coordinator's alignment (semantics 13.9), given with its layout; None:
        # the lcm, all that an event stream tells.
        self.alignment: int | None = None

    @property
    def align(self) -> int:
        """Boundaries the engine's match_prefix lands on are multiples of this."""
        return self.lcm if self.alignment is None else self.alignment

    def relayout(self) -> None:
        self.rules = None
        known = [g for g in self.groups if g is not None]
        self.ready = (
            bool(known) and len(known) == len(self.groups) and all(map(_known, known))
        )
        base, lcm = 0, 1
        for size, _, _ in known:
            base = math.gcd(base, size)
            lcm = lcm * size // math.gcd(lcm, size)
        self.base, self.lcm = base, lcm
