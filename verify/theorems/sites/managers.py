"""The arithmetic of the native hot paths outside geometry.h, as it is written in the source.

Each ``Site`` is one C++ expression, copied verbatim from the function it lives in (the
test ``tests/test_native_arith_inventory.py`` fails unless the text is still there, and
unless every arithmetic operator of every hot-path function is covered by a site or sits
inside a geometry.h call).  ``native-hot-paths-fit-int64`` evaluates each site in
Int-range form under ``hyps``: the loop condition and the state invariant that hold where
the expression runs, written in the site (``why`` says where each comes from).  ``post``
is an extra claim about the value ``v`` (an index staying in bounds, a loop invariant
carried to the next iteration).  ``assumed`` marks a hypothesis the module does not
enforce.
"""

from __future__ import annotations

from dataclasses import dataclass

I32 = 2**31 - 1
I64 = 2**63 - 1
CONSTANTS = {
    "I32": I32,
    "I64": I64,
    "U64": 2**64 - 1,
    "INT32_MAX_TOKENS": I32,
    "kScanBlock": 16,
    "kAhead": 8,
    # Longest arrays an address space of 2^63 bytes can hold, by element size.
    "SPAN8": 2**60,  # pointers, int64 frontiers
    "SPAN32": 2**58,  # 32-byte keys
}

MGR = "native/src/managers.cpp"
COORD = "native/src/coordinator.cpp"
POOL = "native/include/livetail/pool.h"

SUM = "0 <= i, i < g, g <= I32, 0 <= x, x <= I32"
COUNTER = "0 <= c, 0 <= x, c + x <= I64"
COUNTER_WHY = (
    "a statistics counter summed over the pool's life stays below 2^63 - 1 (at one page or"
    " token per nanosecond that takes 292 years)"
)
VERSION = "0 <= c, 0 <= x, x <= 1, c < U64"
VERSION_WHY = (
    "an operation counter that grows by at most 1 per call stays below 2^64 - 1 (584 years"
    " at one call per nanosecond; unsigned, so it would wrap, not trap)"
)
SUM_WHY = (
    "a sum over g <= 2^31 - 1 groups (the Coordinator constructor's limit) of per-group"
    " counts in [0, 2^31 - 1]; the post carries the loop invariant to the next group"
)


@dataclass(frozen=True)
class Site:
    file: str
    function: str
    code: str  # verbatim C++ (whitespace-normalized)
    hyps: str  # comma-separated Z3/Python conditions over the names in `expr`
    why: str
    expr: str = ""  # the expression evaluated, when `code` alone is not one ("x +=")
    subst: tuple[tuple[str, str], ...] = ()  # C++ subterm -> a name in hyps
    post: str = ""
    width: str = "int64"
    assumed: bool = False


def _s(file: str, function: str, code: str, hyps: str, why: str, **kw: object) -> Site:
    return Site(file, function, code, hyps, why, **kw)  # type: ignore[arg-type]


SITES: list[Site] = [
    # --- acquire's placement loop (the loop bounds are geometry.h calls) ---------------
    _s(
        MGR,
        "Manager::append_slots",
        "++i",
        "0 <= i, i < end, end <= I32",
        "i < hi <= h <= end or i < end; end = slots_after <= 2^31 - 1 after the fits check",
    ),
    _s(
        MGR,
        "Manager::append_slots",
        "t.real_ += take.done()",
        "0 <= t_real_, t_real_ <= slots, 0 <= x, x <= end - slots, end <= I32",
        "real_ counts real slots (<= slots); the pages taken fill new slots only",
        subst=(("take.done()", "x"),),
        post="v <= end",
    ),
    # --- reclaim's band: punch_band scans [floor, b), b = reclaim_bound <= slots ---------
    _s(
        MGR,
        "Manager::punch_band",
        "i + kScanBlock",
        "0 <= i, i <= b, b <= I32",
        "i starts at floor < b and grows by 16 only while i + 16 <= b",
    ),
    _s(
        MGR,
        "Manager::punch_band",
        "i += kScanBlock",
        "0 <= i, i + kScanBlock <= b, b <= I32",
        "the loop condition",
        post="v <= b",
    ),
    _s(
        MGR,
        "Manager::punch_band",
        "s + i",
        "0 <= i, i + kScanBlock <= b, b <= size, size <= I32",
        "16 slots read from s + i stay inside the table",
        subst=(("s", "0"),),
        post="v + kScanBlock <= size",
    ),
    _s(
        MGR,
        "Manager::punch_band",
        "m - 1",
        "1 <= m, m <= 65535",
        "a nonzero 16-lane mask (uint32)",
        width="uint32",
    ),
    _s(
        MGR,
        "Manager::punch_band",
        "i + __builtin_ctz(m)",
        "0 <= i, i + kScanBlock <= b, b <= I32, 0 <= c, c <= 15",
        "a lane of the 16 scanned",
        subst=(("__builtin_ctz(m)", "c"),),
        post="v < b",
    ),
    _s(
        MGR,
        "Manager::punch_band",
        "--t.real_",
        "1 <= t_real_, t_real_ <= I32",
        "the slot punched is real, so real_ counts it",
        post="v >= 0",
    ),
    _s(MGR, "Manager::punch_band", "++i", "0 <= i, i < b, b <= I32", "the loop condition"),
    # --- free: scans [floor, size) downwards ----------------------------------------------
    _s(
        MGR,
        "Manager::free_unchecked",
        "--i",
        "0 <= floor, floor < i, i <= I32",
        "i > top >= floor or i > floor",
        post="v >= 0",
    ),
    _s(
        MGR,
        "Manager::free_unchecked",
        "i - kScanBlock",
        "0 <= floor, floor <= i, i <= I32",
        "floor <= i <= size",
    ),
    _s(
        MGR,
        "Manager::free_unchecked",
        "i -= kScanBlock",
        "0 <= floor, i - kScanBlock >= floor, i <= I32",
        "the loop condition",
        post="v >= floor",
    ),
    _s(
        MGR,
        "Manager::free_unchecked",
        "s + i - kScanBlock",
        "0 <= floor, i - kScanBlock >= floor, i <= size, size <= I32",
        "16 slots read from there stay inside the table",
        subst=(("s", "0"),),
        post="v >= 0, v + kScanBlock <= size",
    ),
    _s(
        MGR,
        "Manager::free_unchecked",
        "31 - __builtin_clz(m)",
        "16 <= c, c <= 31",
        "m is a nonzero 16-lane mask",
        subst=(("__builtin_clz(m)", "c"),),
        post="0 <= v, v <= 15",
        width="int32",
    ),
    # --- blocks_reclaimable_at ---------------------------------------------------------
    _s(
        MGR,
        "Manager::blocks_reclaimable_at",
        "++i",
        "0 <= i, i < b, b <= I32",
        "the loop condition; b = reclaim_bound <= slots",
    ),
    _s(
        MGR,
        "Manager::blocks_reclaimable_at",
        "++n",
        "0 <= floor, floor <= i, i < b, b <= I32, 0 <= n, n <= i - floor",
        "at most one count per slot scanned",
        post="v <= i + 1 - floor",
    ),
    # --- pool counters (taken and released by the loops above) --------------------------------
    _s(
        POOL,
        "Taker::pop",
        "fresh_++",
        "1 <= fresh_, fresh_ < end_, end_ <= I32",
        "the never-used range [fresh, num_blocks) is not empty",
        post="v <= I32",
    ),
    _s(
        POOL,
        "Taker::pop",
        "++taken_",
        "0 <= taken_, taken_ < free, free <= I32",
        "the caller checked num_free >= the pages it pops",
        post="v <= free",
    ),
    _s(
        POOL,
        "Taker::done",
        "pool_.num_free_ -= taken_",
        "0 <= taken_, taken_ <= num_free_, num_free_ <= I32",
        "as above",
        subst=(("pool_.num_free_", "num_free_"),),
        post="v >= 0",
    ),
    _s(
        POOL,
        "Releaser::release",
        "--ref_[page]",
        "1 <= ref, ref <= I32",
        "the page is pinned",
        subst=(("ref_[page]", "ref"),),
        post="v >= 0",
        width="int32",
    ),
    _s(
        POOL,
        "Releaser::release",
        "++released_",
        "0 <= released_, released_ < I32",
        "each counted page was pinned: fewer than num_blocks <= 2^31 - 1",
    ),
    _s(
        POOL,
        "Releaser::done",
        "pool_.num_free_ += released_",
        "0 <= num_free_, 0 <= released_, num_free_ + released_ <= I32",
        "conservation: free + pinned = num_blocks - 1",
        subst=(("pool_.num_free_", "num_free_"),),
    ),
    _s(
        POOL,
        "Taker::done",
        "pool_.stats_.pages_allocated += taken_",
        COUNTER,
        COUNTER_WHY,
        subst=(("pool_.stats_.pages_allocated", "c"), ("taken_", "x")),
        assumed=True,
    ),
    _s(
        POOL,
        "Taker::done",
        "pool_.event_op_ += evicted_",
        VERSION,
        VERSION_WHY,
        subst=(("pool_.event_op_", "c"), ("evicted_", "x")),
        width="uint64",
        assumed=True,
    ),
    _s(
        POOL,
        "Taker::done",
        "pool_.version_ += taken_ != 0",
        VERSION,
        VERSION_WHY,
        expr="c + x",
        width="uint64",
        assumed=True,
    ),
    _s(
        POOL,
        "Releaser::release",
        "named_released_ += named",
        "0 <= nr, nr <= released_, released_ < I32, 0 <= x, x <= 1",
        "a page counted as named is also counted in released_ (incremented next)",
        expr="nr + x",
        post="v <= released_ + 1",
    ),
    _s(
        POOL,
        "Releaser::done",
        "pool_.named_free_ += named_released_",
        "0 <= nf, 0 <= nr, nf + nr <= I32",
        "named free pages are free pages: at most num_blocks - 1 after the releases",
        subst=(("pool_.named_free_", "nf"), ("named_released_", "nr")),
    ),
    _s(
        POOL,
        "Releaser::done",
        "pool_.stats_.pages_released += released_",
        COUNTER,
        COUNTER_WHY,
        subst=(("pool_.stats_.pages_released", "c"), ("released_", "x")),
        assumed=True,
    ),
    _s(
        POOL,
        "Releaser::done",
        "pool_.version_ += changed_",
        VERSION,
        VERSION_WHY,
        subst=(("pool_.version_", "c"), ("changed_", "x")),
        width="uint64",
        assumed=True,
    ),
    _s(POOL, "BlockPool::take", "++i", "0 <= i, i < k, k <= I32", "the loop condition"),
    _s(
        POOL,
        "take_shared",
        "--num_free_",
        "1 <= num_free_, num_free_ <= I32",
        "the page was queued",
        post="v >= 0",
    ),
    _s(
        POOL,
        "take_shared",
        "++ref_[page]",
        "0 <= ref, ref < I32",
        "Coordinator::claim, the only caller, rejects a match holding a page whose count is"
        " already 2^31 - 1 (std::invalid_argument, nothing changed)",
        subst=(("ref_[page]", "ref"),),
        width="int32",
    ),
    _s(
        POOL,
        "take_shared",
        "++stats_.pages_claimed_free",
        "0 <= c, c < I64",
        COUNTER_WHY,
        expr="c + 1",
        assumed=True,
    ),
    _s(
        POOL,
        "take_shared",
        "--named_free_",
        "1 <= named_free_, named_free_ <= I32",
        "the page was queued and named, so counted in named_free_",
        post="v >= 0",
    ),
    _s(
        POOL,
        "take_shared",
        "++stats_.pages_claimed",
        "0 <= c, c < I64",
        COUNTER_WHY,
        expr="c + 1",
        assumed=True,
    ),
    _s(
        POOL,
        "take_shared",
        "++version_",
        VERSION,
        VERSION_WHY,
        expr="c + 1",
        width="uint64",
        assumed=True,
    ),
]
