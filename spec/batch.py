"""Batched calls of the native module, as loops of the single calls they equal.

``Coordinator.decode_step`` (one decode token for many requests, then each request's
reclaim) and ``page_ids_batch`` (many tables' page ids as one padded grid) exist natively to
save a call per request; here they are written as the loops the native docstrings state,
with every argument checked before anything changes, so engine code that uses them runs
against the spec too and the two are compared (tests/test_spec_batch.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._args import count, instance
from .table import BlockTable

if TYPE_CHECKING:
    from .coordinator import Coordinator


def _sequence(name: str, value: object) -> list[Any]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"{name} must be a sequence, not {type(value).__name__}")
    return list(value)


def decode_step(
    coord: Coordinator, requests: object, num_computed_tokens: object
) -> tuple[int, int]:
    """``coord.acquire(tables, 1)`` then ``coord.reclaim_expired(tables, f)`` per request, in
    order, stopping at the first request the pool cannot serve; ``(stepped, reclaimed)``.

    Checked first, changing nothing when one fails: one frontier per request, each a count;
    each request a list or tuple of one table per group; every table distinct in the batch,
    usable by its group (page size, pool, no pending load, within the int32 limit after one
    more token); each frontier at most the extent its acquire leaves (``extent + 1``).
    """
    reqs = _sequence("requests", requests)
    given = _sequence("num_computed_tokens", num_computed_tokens)
    fronts = [count("num_computed_tokens", f) for f in given]
    if len(fronts) != len(reqs):
        raise ValueError(
            f"num_computed_tokens must hold one frontier per request ({len(reqs)}), "
            f"got {len(fronts)}"
        )
    managers = coord.managers
    seen: set[int] = set()
    batch: list[list[BlockTable]] = []
    for r, ts in enumerate(reqs):
        at = f"requests[{r}]"
        if not isinstance(ts, (list, tuple)):
            kind = type(ts).__name__
            raise TypeError(f"{at} must be a list or tuple of BlockTable, not {kind}")
        if len(ts) != len(managers):
            raise ValueError(f"{at} must hold one table per group ({len(managers)}), got {len(ts)}")
        for t in ts:
            instance(at, t, BlockTable)
        batch.append(list(ts))
    for r, (ts, f) in enumerate(zip(batch, fronts)):
        for g, (m, t) in enumerate(zip(managers, ts)):
            try:
                if id(t) in seen:
                    raise ValueError("table appears twice in the batch")
                seen.add(id(t))
                m._check_table(t)
                m._check_pool(coord.pool, t)
                coord._check_member(t, ts[0], "table", "the request's first table")
                if t.load is not None:
                    raise ValueError("table has a pending load: complete_load first")
                m._check_fits(t, "num_tokens", 1)
                if f > m._extent(t) + 1:
                    raise ValueError(
                        f"num_computed_tokens = {f} is above the extent the acquire leaves"
                    )
            except ValueError as e:
                raise ValueError(f"requests[{r}][{g}]: {e}") from None
    stepped = reclaimed = 0
    for ts, f in zip(batch, fronts):
        if not coord.acquire(ts, 1):
            break
        reclaimed += coord.reclaim_expired(ts, f)
        stepped += 1
    return stepped, reclaimed


def page_ids_batch(tables: object, width: object = None) -> list[list[int]]:
    """Each table's page ids as one row, padded with 0 (a hole) to ``width`` columns
    (default: the longest table; a smaller width is a ValueError)."""
    if not isinstance(tables, (list, tuple)):
        kind = type(tables).__name__
        raise TypeError(f"tables must be a list or tuple of BlockTable, not {kind}")
    want = None if width is None else count("width", width)
    ts = [instance("tables[i]", t, BlockTable) for t in tables]
    w = max((len(t) for t in ts), default=0)
    if want is not None:
        if want < w:
            raise ValueError(f"width = {want} is below the longest table ({w})")
        w = want
    return [t.page_ids() + [0] * (w - len(t)) for t in ts]
