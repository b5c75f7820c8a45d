"""The wrong fork rule of ``verify/variants.py`` (semantics 13.6, spec/slots.py ``forked``)."""

from __future__ import annotations

from typing import Any

from livetail.spec import runs
from livetail.spec import slots as spec_slots
from livetail.spec.geometry import INT, Arith, Num


def _forked_skips_last(s: Num, page: Num, slots: Num, ar: Arith = INT) -> Any:
    # Wrong: fork takes one more reference to every real slot's page but the last slot's (an
    # off-by-one in the band), though the fork's last slot holds that page too: the tail page
    # re-enters the queue when the source lets go while the fork still holds it.
    return runs.both(spec_slots.in_band(s, 0, slots - 1, ar), page != 0, ar)


FORK_RULES: tuple[tuple[str, str, str, Any], ...] = (
    (
        "fork-skips-last-slot",
        "fork takes one more reference to every real slot's page but the last slot's",
        "forked",
        _forked_skips_last,
    ),
)
