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
CONSTANTS = {
    "I32": I32,
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
    # --- coordinator sums over groups -----------------------------------------------------
    *[
        _s(COORD, fn, "++i", "0 <= i, i < g, g <= I32", "the loop condition", width="uint64")
        for fn in (
            "Coordinator::acquire",
            "Coordinator::blocks_needed_for",
            "Coordinator::blocks_needed_for_sequential",
            "Coordinator::reclaim_expired",
            "Coordinator::free",
            "Coordinator::decode_step",
            "Coordinator::cache_full_blocks",
            "Coordinator::match_prefix",
            "Coordinator::claim",
        )
    ],
    _s(
        COORD,
        "Coordinator::acquire",
        "need += m[i].needed_unchecked(t, num_tokens)",
        f"{SUM}, 0 <= need, need <= i * I32",
        "needed <= new_slots <= 2^31 - 1 after the fits check; " + SUM_WHY,
        subst=(("m[i].needed_unchecked(t, num_tokens)", "x"),),
        post="v <= (i + 1) * I32",
    ),
    _s(
        COORD,
        "Coordinator::blocks_needed_for",
        "need += managers_[i].needed_unchecked(t, num_tokens)",
        f"{SUM}, 0 <= need, need <= i * I32",
        "needed <= new_slots <= 2^31 - 1 after the fits check; " + SUM_WHY,
        subst=(("managers_[i].needed_unchecked(t, num_tokens)", "x"),),
        post="v <= (i + 1) * I32",
    ),
    _s(
        COORD,
        "Coordinator::blocks_needed_for_sequential",
        "need += managers_[i].blocks_needed_for_sequential(*tables[i], first_tokens, extra_tokens)",
        f"{SUM}, 0 <= need, need <= i * I32",
        "the charge <= slots after both acquires <= 2^31 - 1 (both fits checks); " + SUM_WHY,
        subst=(
            (
                "managers_[i].blocks_needed_for_sequential(*tables[i], first_tokens, extra_tokens)",
                "x",
            ),
        ),
        post="v <= (i + 1) * I32",
    ),
    _s(
        COORD,
        "Coordinator::reclaim_expired",
        "reentered += managers_[i].reclaim_unchecked(*pool_, *tables[i], num_computed_tokens)",
        f"{SUM}, 0 <= reentered, reentered <= i * I32",
        "a reclaim releases at most its band's slots <= 2^31 - 1; " + SUM_WHY,
        subst=(("managers_[i].reclaim_unchecked(*pool_, *tables[i], num_computed_tokens)", "x"),),
        post="v <= (i + 1) * I32",
    ),
    _s(
        COORD,
        "Coordinator::free",
        "reentered += managers_[i].free_unchecked(*pool_, *tables[i])",
        f"{SUM}, 0 <= reentered, reentered <= i * I32",
        "a free releases at most its table's slots <= 2^31 - 1; " + SUM_WHY,
        subst=(("managers_[i].free_unchecked(*pool_, *tables[i])", "x"),),
        post="v <= (i + 1) * I32",
    ),
    # --- decode_step --------------------------------------------------------------------
    _s(
        COORD,
        "Coordinator::decode_step",
        "tables.size() / g",
        "0 <= n, n <= SPAN8, 1 <= g, g <= I32",
        "g >= 1: the constructor requires a group",
        subst=(("tables.size()", "n"),),
        width="uint64",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "tables.size() % g",
        "0 <= n, n <= SPAN8, 1 <= g, g <= I32",
        "as above",
        subst=(("tables.size()", "n"),),
        width="uint64",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "i / g",
        "0 <= i, i < n, n <= SPAN8, 1 <= g",
        "the validation loop over the n tables",
        width="uint64",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "i % g",
        "0 <= i, i < n, n <= SPAN8, 1 <= g",
        "the validation and reserve loops over the n tables",
        width="uint64",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "++res.stepped",
        "0 <= res_stepped, res_stepped < r, r <= SPAN8",
        "the loop condition",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "tables.data() + static_cast<size_t>(res.stepped) * g",
        "0 <= res_stepped, res_stepped < r, 1 <= g, g <= I32, n == r * g, n <= SPAN8",
        "after the check, the n tables are r requests of g",
        subst=(("tables.data()", "0"),),
        post="v + g <= n",
        width="uint64",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "++k",
        "0 <= k, k < g, g <= I32",
        "the loop condition",
        width="uint64",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "need += m[k].needed_unchecked(*ts[k], 1)",
        "0 <= k, k < g, g <= I32, 0 <= need, need <= k, 0 <= x, x <= 1",
        "one token adds at most one slot per group",
        subst=(("m[k].needed_unchecked(*ts[k], 1)", "x"),),
        post="v <= k + 1",
    ),
    _s(
        COORD,
        "Coordinator::decode_step",
        "res.reclaimed += m[k].reclaim_unchecked(*pool_, *ts[k], f)",
        "0 <= res_reclaimed, 0 <= x, res_reclaimed + x <= pinned + taken, 0 <= pinned,"
        " pinned <= I32, 0 <= taken, taken <= n, n <= SPAN8",
        "conservation: a page re-enters the queue only after it was pinned at the start or"
        " taken by this call (at most one page per table)",
        subst=(("m[k].reclaim_unchecked(*pool_, *ts[k], f)", "x"),),
    ),
    # --- prefix arithmetic: cache_full_blocks -------------------------------------------------
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "num_tokens / B",
        "0 <= num_tokens, num_tokens <= I32, 1 <= B, B <= I32",
        "num_tokens <= extent <= 2^31 - 1 (checked for every group first)",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "nkeys / (B / base_)",
        "0 <= nkeys, nkeys <= SPAN32, 1 <= base_, base_ <= B, B <= I32",
        "base = gcd of the page sizes <= B",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "B / base_",
        "1 <= base_, base_ <= B, B <= I32",
        "base = gcd of the page sizes <= B",
        post="v >= 1",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "nkeys / k",
        "0 <= nkeys, nkeys <= SPAN32, 1 <= k",
        "k = B / base >= 1",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "extra +=",
        f"{SUM}, 0 <= extra, extra <= i * I32",
        "names a group may add: 1, or covered - named_upto <= 2^31 - 1; " + SUM_WHY,
        expr="extra + x",
        post="v <= (i + 1) * I32",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "covered - t.named_upto_",
        "0 <= covered, covered <= I32, 0 <= t_named_upto_, t_named_upto_ <= I32",
        "covered <= num_tokens / B; named_upto <= slots",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "named +=",
        "0 <= named, named < I32 * I32, 0 <= x, x <= 1",
        "at most one name per (group, slot) visited: g * 2^31 in all",
        expr="named + x",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "(j + 1) * k - 1",
        "0 <= j, j < covered, covered <= nkeys / k, 1 <= k, nkeys <= SPAN32",
        "j < covered <= len(keys) / k",
        post="0 <= v, v < nkeys",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "num_tokens / B - 1",
        "0 <= num_tokens, num_tokens <= I32, 1 <= B, B <= I32",
        "as num_tokens / B",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "num_tokens % B",
        "0 <= num_tokens, num_tokens <= I32, 1 <= B, B <= I32",
        "as num_tokens / B",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "++j",
        "0 <= j, j < covered, covered <= I32",
        "the loop condition",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "j + kAhead",
        "0 <= j, j < covered, covered <= I32",
        "the loop condition",
    ),
    _s(
        COORD,
        "Coordinator::cache_full_blocks",
        "(a + 1) * k - 1",
        "0 <= a, a < covered, covered <= nkeys / k, 1 <= k, nkeys <= SPAN32",
        "a < covered <= len(keys) / k",
        post="0 <= v, v < nkeys",
    ),
    # --- prefix arithmetic: match_prefix -------------------------------------------------------
    _s(
        COORD,
        "Coordinator::match_prefix",
        "lcm_ / base_",
        "1 <= base_, base_ <= lcm_, lcm_ <= I32",
        "base divides lcm",
        post="v >= 1",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "static_cast<int64_t>(keys.size()) / per",
        "0 <= nkeys, nkeys <= SPAN32, 1 <= per",
        "per = lcm / base >= 1",
        subst=(("keys.size()", "nkeys"),),
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "geometry::INT32_MAX_TOKENS / lcm_",
        "1 <= lcm_, lcm_ <= I32",
        "lcm >= 1",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "(j + 1) * (managers_[i].block_size() / base_) - 1",
        "1 <= base_, B / base_ == c, lcm_ / B == a, 1 <= a, 1 <= c, 0 <= j, j < t * a,"
        " 0 <= t, t * (a * c) <= nkeys, nkeys <= SPAN32",
        "j < t * (lcm / B) slots of group i with t * (lcm / base) <= len(keys) (t <= top;"
        " B divides lcm and base divides B)",
        subst=(("managers_[i].block_size()", "B"),),
        post="0 <= v, v < nkeys",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "lcm_ / managers_[i].block_size()",
        "1 <= B, B <= lcm_, lcm_ <= I32",
        "B divides lcm",
        subst=(("managers_[i].block_size()", "B"),),
        post="v >= 1",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "top * slots_per",
        "0 <= top, top <= I32, 1 <= slots_per, slots_per <= I32",
        "top <= 2^31 - 1 / lcm",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "++j",
        "0 <= j, j < cap, cap <= I32 * I32",
        "j < cap = top * slots_per, or j < b <= 2^31 - 1",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "static_cast<int64_t>(full_recs.size() - full_at[i]) / slots_per",
        "0 <= at, at <= nrecs, nrecs - at <= I32 * I32, 1 <= slots_per",
        "full_at[i] was full_recs.size() before this group pushed at most cap records",
        subst=(("full_recs.size()", "nrecs"), ("full_at[i]", "at")),
        post="v >= 0",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "--t",
        "1 <= t, t <= I32",
        "the loop condition",
        post="v >= 0",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "t * (lcm_ / managers_[i].block_size())",
        "0 <= t, t <= I32, 1 <= B, B <= lcm_, lcm_ <= I32",
        "t <= top <= 2^31 - 1",
        subst=(("managers_[i].block_size()", "B"),),
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "b - R",
        "0 <= b, b <= I32, 0 <= R, R <= I32",
        "R = resume_pages <= 2^31 - 1 (R < 0 takes the other branch)",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "t * lcm_",
        "0 <= t, t <= INT32_MAX_TOKENS / lcm_, 1 <= lcm_, lcm_ <= I32",
        "t <= top",
        post="v <= I32",
    ),
    _s(COORD, "Coordinator::match_prefix", "g + 1", "1 <= g, g <= I32", "g groups", width="uint64"),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "slots += b",
        f"{SUM}, 0 <= slots, slots <= i * I32",
        "b <= 2^31 - 1 slots per group; " + SUM_WHY,
        subst=(("b", "x"),),
        post="v <= (i + 1) * I32",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "real +=",
        f"{SUM}, 0 <= real, real <= i * I32",
        "b or min(b, R) <= 2^31 - 1 per group; " + SUM_WHY,
        expr="real + x",
        post="v <= (i + 1) * I32",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "i + 1",
        "0 <= i, i < g, g <= I32",
        "i < g",
        width="uint64",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "out.begin_[i + 1] - out.begin_[i]",
        "0 <= lo, lo <= hi, hi <= I32 * I32",
        "begin_ is a running sum of slot counts",
        subst=(("out.begin_[i + 1]", "hi"), ("out.begin_[i]", "lo")),
        post="v >= 0",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "out.pages_.data() + out.begin_[i]",
        "0 <= lo, lo <= total, total <= I32 * I32",
        "an offset into pages_ (total slots)",
        subst=(("out.pages_.data()", "0"), ("out.begin_[i]", "lo")),
        post="v <= total",
    ),
    _s(
        COORD,
        "Coordinator::match_prefix",
        "full_at[i] + static_cast<size_t>(j)",
        "0 <= at, 0 <= j, at + j < nrecs, nrecs <= SPAN8",
        "j < b <= the records group i pushed",
        subst=(("full_at[i]", "at"),),
        post="v < nrecs",
        width="uint64",
    ),
    # --- claim -------------------------------------------------------------------------------
    _s(
        COORD,
        "Coordinator::blocks_consumed_by_claim",
        "n +=",
        "0 <= n, n < nnamed, nnamed <= SPAN32, 0 <= x, x <= 1",
        "one count per matched page",
        expr="n + x",
        post="v <= nnamed",
    ),
    _s(
        COORD,
        "Coordinator::claim",
        "b - R",
        "0 <= b, b <= I32, 0 <= R, R <= I32",
        "b = num_tokens / B <= 2^31 - 1; R = resume_pages (R < 0 takes the other branch)",
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
        "fewer than 2^31 - 1 tables share the page (not enforced: a page held by 2^31 - 1"
        " slots would wrap its int32 count)",
        subst=(("ref_[page]", "ref"),),
        width="int32",
        assumed=True,
    ),
]
