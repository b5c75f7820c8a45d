"""Counters and events in the lockstep machine (semantics section 11, section 7 item 12).

After every op each side drains its pool's events and reads its coordinator's stats; both
go into the step's facts, so the machine's agreement check compares the event streams and
the counters of every implementation. Each side also replays its stream from the start
into a router-like index of names, (group, key), which must equal the names its pool holds
after every operation (item 12).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

NameSet = set[tuple[int, bytes]]


class EventReplay:
    """A cluster router's view of one pool: the names its events say the pool holds."""

    def __init__(self) -> None:
        self.names: NameSet = set()
        self.errors: list[str] = []

    def apply(self, events: Iterable[Sequence[Any]]) -> None:
        for ev in events:
            kind, tier, group, keys = ev[0], ev[1], ev[2], ev[3]
            if tier != "GPU":
                self.errors.append(f"event tier {tier!r} from the device pool")
            if kind == "stored":
                for k in keys:
                    if (group, k) in self.names:
                        self.errors.append(f"stored a name already held: group {group}")
                    self.names.add((group, k))
            elif kind == "removed":
                for k in keys:
                    if (group, k) not in self.names:
                        self.errors.append(f"removed a name never stored: group {group}")
                    self.names.discard((group, k))
            elif kind == "cleared":
                self.names.clear()
            else:
                self.errors.append(f"unknown event kind {kind!r}")


def pool_names(pool: Any) -> NameSet | None:
    """The names a pool holds, where the implementation shows them (the spec does)."""
    named = getattr(pool, "_pages_named", None)
    return None if named is None else set(named)


def observe(side: Any, facts: dict[str, Any]) -> None:
    """Drain the side's events into facts["events"] and its replay; stats into facts."""
    events = [tuple(e) for e in side.pool.take_events()]
    facts["events"] = events
    facts["stats"] = side.coord.stats()
    replay = getattr(side, "replay", None)
    if replay is None:
        replay = side.replay = EventReplay()
    replay.apply(events)


def check(side: Any) -> tuple[bool, str]:
    """Item 12 and the counters' identities, for the side's state after an op."""
    replay: EventReplay = side.replay
    if replay.errors:
        return False, "; ".join(replay.errors[:3])
    pool = side.pool
    names = pool_names(pool)
    if names is not None and names != replay.names:
        extra = len(replay.names - names)
        missing = len(names - replay.names)
        return False, f"replayed names differ: {extra} not held, {missing} held but not stored"
    st = pool.stats()
    if len(replay.names) != st["num_names"]:
        return False, f"replay holds {len(replay.names)} names, the pool {st['num_names']}"
    pinned = st["pages_allocated"] + st["pages_claimed_free"] - st["pages_released"]
    if pinned != st["num_pinned"]:
        return False, f"allocated + claimed free - released = {pinned} != pinned {st['num_pinned']}"
    if st["names_stored"] - st["names_removed"] != st["num_names"]:
        return False, "names stored - removed != names held"
    if st["pages_named"] - st["pages_evicted"] != st["num_cached"]:
        return False, "pages named - evicted != pages named now"
    return True, ""
