"""Sliding-window geometry (semantics section 4), written once.

Every closed form here takes an ``Arith``: the handful of operations whose meaning
differs between Python ints and Z3 terms (floor division, modulo, min, max, a lazy
if-then-else, a logical or).  ``+``, ``-``, ``*`` and comparisons are written as plain
operators, which both kinds of number support.  The model runs these functions on ints
(``INT``); ``livetail.verify`` runs the very same functions on Z3 terms, so what it
proves is the code the model executes.  ``native/include/livetail/geometry.h`` mirrors
each function expression for expression (same names, same branches), so the range
proofs over these expression trees cover the C++ arithmetic too.

Names: ``B`` page size, ``W`` window, ``A`` live alignment (0 = live tail off),
``slots``/``tail`` the table shape (slot count, unused token room in the last slot),
``n`` a token count, ``f`` a frontier (tokens computed).
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

# A number is a Python int in the model and a Z3 arithmetic term in livetail.verify.
Num = Any
Bool = Any

INT32_MAX = 2**31 - 1
"""Largest token count a table may span: ``len(slots) * B <= INT32_MAX``."""


class Arith(Protocol):
    """The operations whose int and Z3 spellings differ.

    Division and modulo are only ever applied to a non-negative dividend and a
    divisor >= 1, where Python's floor, Z3's Euclidean and C++'s truncating
    division agree.
    """

    def div(self, a: Num, b: Num) -> Num: ...

    def mod(self, a: Num, b: Num) -> Num: ...

    def min(self, a: Num, b: Num) -> Num: ...

    def max(self, a: Num, b: Num) -> Num: ...

    def cond(self, c: Bool, then: Callable[[], Num], otherwise: Callable[[], Num]) -> Num:
        """``then()`` if ``c`` else ``otherwise()``; only the taken branch runs on ints."""
        ...

    def either(self, a: Bool, b: Bool) -> Bool: ...


class IntArith:
    """``Arith`` over Python ints: the model's arithmetic."""

    def div(self, a: int, b: int) -> int:
        return a // b

    def mod(self, a: int, b: int) -> int:
        return a % b

    def min(self, a: int, b: int) -> int:
        return a if a <= b else b

    def max(self, a: int, b: int) -> int:
        return a if a >= b else b

    def cond(self, c: bool, then: Callable[[], int], otherwise: Callable[[], int]) -> int:
        return then() if c else otherwise()

    def either(self, a: bool, b: bool) -> bool:
        return bool(a) or bool(b)


INT = IntArith()


# --- memo on ints -------------------------------------------------------------------
# The model calls the closed forms below on a few small ints over and over; evaluated on
# ints, each is a pure function of its numbers (given this module's functions), so a call
# with the int Arith and plain int arguments is answered from a memo.  Any other call (a Z3
# or range Arith, a non-int number, keywords) runs the function itself.  Setting an
# attribute of this module (a test's or a variant's patch of a closed form) clears every
# memo, so a patched function is what the model sees from then on.

_F = TypeVar("_F", bound=Callable[..., Any])
_MEMOS: list[Any] = []


def _memo_on_ints(fn: _F) -> _F:
    memo = functools.lru_cache(maxsize=1 << 16)(fn)
    _MEMOS.append(memo)
    arity = len(inspect.signature(fn).parameters)  # the numbers, then ar

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        nums = args[:-1] if len(args) == arity and args[-1] is INT else args
        if kwargs or len(nums) != arity - 1:
            return fn(*args, **kwargs)
        for a in nums:
            if type(a) is not int:
                return fn(*args)
        return memo(*nums)

    return cast(_F, call)


class _Geometry(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        for memo in _MEMOS:
            memo.cache_clear()


sys.modules[__name__].__class__ = _Geometry


# --- basic quantities -------------------------------------------------------------


def ceil_div(a: Num, b: Num, ar: Arith = INT) -> Num:
    """ceil(a / b) for a >= 0, b >= 1, without forming ``a + b - 1`` (which overflows int32)."""
    return ar.div(a, b) + ar.cond(ar.mod(a, b) > 0, lambda: 1, lambda: 0)


def resume_pages(W: Num, B: Num, ar: Arith = INT) -> Num:
    """R = ceil((W-1)/B): the pages behind a boundary that hold its last W-1 tokens."""
    return ceil_div(W - 1, B, ar)


def slid_out(f: Num, W: Num, B: Num, ar: Arith = INT) -> Num:
    """Pages [0, slid_out(f)) are wholly outside the window of the next query after f tokens."""
    d = f - W + 1
    return ar.cond(d > 0, lambda: ar.div(d, B), lambda: 0)


RUNNING = -1
"""The live alignment ``A`` of a state group with live tail (section 13.5, vLLM's Mamba
"align" mode): an acquire makes real only its last new slot, the running state at its
frontier, and keeps no resume pages; reclaim is the state group's (``W = 2``)."""
CHECKPOINT = -2
"""The same with checkpoints (vLLM's ``num_prefill_checkpoint_blocks``): an acquire makes
real its last two new slots, the running state and the checkpoint one page behind it. In
the forms below it places like live tail with the window ``W + B`` and no resume slot."""


def live_state(A: Num) -> bool:
    """Is A a state group's live alignment (RUNNING or CHECKPOINT)? Those are always the
    constants (a group's kind is never symbolic); a symbolic A is a live-tail sliding
    alignment or 0, never negative, so the forms below branch on it in Python and the
    theorems over a symbolic A see the forms of sections 4 and 5 unchanged."""
    return isinstance(A, int) and A < 0


def placement_window(W: Num, B: Num, A: Num, ar: Arith = INT) -> Num:
    """The window placement reads: W, or W + B for a checkpointed state group."""
    return W + B if isinstance(A, int) and A == CHECKPOINT else W


def state_take(new: Num, A: Num, ar: Arith = INT) -> Num:
    """Real slots among an acquire's ``new`` slots with live tail off (A = 0: all) or for a
    state group with live tail: its last one (RUNNING) or two (CHECKPOINT), which is
    ``live_count`` over a run's slots with the window W or W + B and no resume slot
    (native geometry.h's shortcut; tests/test_spec_geometry.py holds the two together)."""
    return ar.min(new, -A) if live_state(A) else new


def period(A: Num, B: Num, ar: Arith = INT) -> Num:
    """m = A / B slots per alignment block (1 when live tail is off)."""
    return ar.cond(A > 0, lambda: ar.div(A, B), lambda: 1)


@_memo_on_ints
def kept_per_period(W: Num, B: Num, A: Num, ar: Arith = INT) -> Num:
    """R' = min(R, m): resume slots kept in each alignment block (1 = every slot when off,
    0 for a checkpointed state group)."""
    if live_state(A):
        return 0
    return ar.cond(A > 0, lambda: ar.min(resume_pages(W, B, ar), ar.div(A, B)), lambda: 1)


def extent(slots: Num, tail: Num, B: Num) -> Num:
    """Tokens a table of this shape covers."""
    return slots * B - tail


# --- liveness: the slot-by-slot definition ------------------------------------------


@_memo_on_ints
def live(s: Num, f: Num, W: Num, B: Num, A: Num, ar: Arith = INT) -> Bool:
    """Is slot s, created by an acquire that ends at frontier f, given a real page?

    Real when live tail is off, when s is still inside the window at f, or when s is
    one of the last R slots of its A-token block (a resume page of the boundary
    A * (s // m + 1)). A live-tail state group (A = RUNNING) makes real the slots inside its
    window, a checkpointed one (A = CHECKPOINT) from one page behind: s >= slid_out(f, W + B).
    """
    if live_state(A):
        return s >= slid_out(f, placement_window(W, B, A, ar), B, ar)
    return ar.cond(
        A > 0,
        lambda: ar.either(
            s >= slid_out(f, W, B, ar),
            ar.mod(s, period(A, B, ar)) >= period(A, B, ar) - resume_pages(W, B, ar),
        ),
        lambda: True,
    )


def live_slots_by_definition(first: int, new: int, f: int, W: int, B: int, A: int) -> list[bool]:
    """live(s, f) for each new slot s in [first, first+new), one by one."""
    return [bool(live(s, f, W, B, A)) for s in range(first, first + new)]


# --- liveness: the closed forms -----------------------------------------------------


def resume_count_below(x: Num, m: Num, kept: Num, ar: Arith = INT) -> Num:
    """g(x): how many s < x have s mod m >= m - kept (kept <= m)."""
    return ar.div(x, m) * kept + ar.max(0, ar.mod(x, m) - (m - kept))


@_memo_on_ints
def live_count(first: Num, new: Num, f: Num, W: Num, B: Num, A: Num, ar: Arith = INT) -> Num:
    """Number of live slots among [first, first+new) at frontier f, in O(1)."""
    m = period(A, B, ar)
    kept = kept_per_period(W, B, A, ar)
    h = ar.min(ar.max(slid_out(f, placement_window(W, B, A, ar), B, ar), first), first + new)
    return (
        (first + new - h)
        + resume_count_below(h, m, kept, ar)
        - resume_count_below(first, m, kept, ar)
    )


# --- acquire arithmetic -------------------------------------------------------------


@_memo_on_ints
def new_slots(tail: Num, B: Num, n: Num, ar: Arith = INT) -> Num:
    """Slots an acquire of n tokens appends to a table with `tail` tokens of room."""
    return ar.cond(n > tail, lambda: ceil_div(n - tail, B, ar), lambda: 0)


@_memo_on_ints
def tail_after(tail: Num, B: Num, n: Num, ar: Arith = INT) -> Num:
    """tail_available after an acquire of n tokens."""

    def spill() -> Num:
        r = ar.mod(n - tail, B)
        return ar.cond(r > 0, lambda: B - r, lambda: 0)

    return ar.cond(n > tail, spill, lambda: tail - n)


@_memo_on_ints
def fits_int32(slots: Num, tail: Num, B: Num, n: Num, ar: Arith = INT) -> Bool:
    """After acquiring n tokens, len(slots) * B <= INT32_MAX (compared without multiplying)."""
    return new_slots(tail, B, n, ar) <= ar.div(INT32_MAX, B) - slots


@_memo_on_ints
def blocks_needed(slots: Num, tail: Num, n: Num, W: Num, B: Num, A: Num, ar: Arith = INT) -> Num:
    """Pages acquire(n) takes on a table of shape (slots, tail): O(1).

    A = 0 means every new slot is real (full and state groups, sliding without live tail).
    """

    def take() -> Num:
        new = ceil_div(n - tail, B, ar)
        f = extent(slots, tail, B) + n
        if live_state(A):
            return live_count(slots, new, f, W, B, A, ar)
        return ar.cond(A > 0, lambda: live_count(slots, new, f, W, B, A, ar), lambda: new)

    return ar.cond(n > tail, take, lambda: 0)


@_memo_on_ints
def blocks_needed_sequential(
    slots: Num, tail: Num, first: Num, extra: Num, W: Num, B: Num, A: Num, ar: Arith = INT
) -> Num:
    """Pages acquire(first) then acquire(extra) take together: the admission charge."""
    slots1 = slots + new_slots(tail, B, first, ar)
    tail1 = tail_after(tail, B, first, ar)
    return blocks_needed(slots, tail, first, W, B, A, ar) + blocks_needed(
        slots1, tail1, extra, W, B, A, ar
    )


@_memo_on_ints
def reclaim_bound(f: Num, slots: Num, W: Num, B: Num, ar: Arith = INT) -> Num:
    """b = min(slid_out(f), slots): reclaim releases every real slot in [floor, b)."""
    return ar.min(slid_out(f, W, B, ar), slots)


# --- native hot paths ----------------------------------------------------------------
# Named steps of acquire's placement loop in native/src/managers.cpp, so the C++ calls the
# mirror of a function the range proofs evaluate (verify/theorems/hot_paths.py).


def frontier_after(slots: Num, tail: Num, B: Num, n: Num) -> Num:
    """The frontier an acquire of n tokens leaves: extent + n."""
    return extent(slots, tail, B) + n


def slots_after(slots: Num, tail: Num, B: Num, n: Num, ar: Arith = INT) -> Num:
    """len(slots) after an acquire of n tokens."""
    return slots + new_slots(tail, B, n, ar)


def first_live_slot(first: Num, end: Num, f: Num, W: Num, B: Num, ar: Arith = INT) -> Num:
    """h in [first, end]: new slots [h, end) are inside the window at f, so all real."""
    return ar.min(ar.max(slid_out(f, W, B, ar), first), end)


def period_start(x: Num, m: Num, ar: Arith = INT) -> Num:
    """First slot of the m-slot period holding slot x."""
    return x - ar.mod(x, m)


def resume_run_begin(p0: Num, m: Num, kept: Num, first: Num, ar: Arith = INT) -> Num:
    """First new slot of period p0's resume run: its last `kept` slots, none before first."""
    return ar.max(p0 + m - kept, first)


def resume_run_end(p0: Num, m: Num, h: Num, ar: Arith = INT) -> Num:
    """End of period p0's resume run: the period's end, or h where the window starts."""
    return ar.min(p0 + m, h)


def next_period(p0: Num, m: Num) -> Num:
    """First slot of the period after p0's."""
    return p0 + m


# --- the whole-prompt charge (semantics 13.1) ------------------------------------------
# A request computes n tokens from its extent e (taken as the computed frontier) in chunks
# of at most C tokens, reclaiming at the computed frontier before every chunk, then acquires
# `decode` tokens (reclaimed at N = e + n first).  A chunk from f to F holds, after its
# acquire, exactly held_after_chunk(f, F) pages (the slots [slid_out(f), ceil(f/B)) the
# reclaim left, all real, plus the new slots real at F).  The charge is the greatest of these
# over every (f, F) a chunking can reach: e <= f < F <= min(f + C, N) (every frontier is
# reachable).  It is found without a loop from a fixed set of candidate frontiers f, each
# paired with its best end chunk_peak_end(f); docs/decisions.md gives the argument for the
# set, tests/test_prompt_charge.py checks it against every (f, F) and every chunking.


@_memo_on_ints
def held_after_chunk(f: Num, F: Num, W: Num, B: Num, A: Num, ar: Arith = INT) -> Num:
    """Pages a reclaiming group's table holds after reclaim_expired(f) then acquire(F - f).

    The table's extent is f (F >= f); its slots [slid_out(f), ceil(f/B)) are real after the
    reclaim, the acquire appends [ceil(f/B), ceil(F/B)), real where live at F.
    """
    v = ceil_div(f, B, ar)
    q = ceil_div(F, B, ar)
    kept = v - slid_out(f, W, B, ar)
    if live_state(A):
        return kept + live_count(v, q - v, F, W, B, A, ar)
    return kept + ar.cond(A > 0, lambda: live_count(v, q - v, F, W, B, A, ar), lambda: q - v)


def chunk_peak_end(f: Num, C: Num, N: Num, B: Num, ar: Arith = INT) -> Num:
    """The chunk end F in (f, min(f + C, N)] with the most pages held after the chunk from f.

    The first frontier of the last page the chunk can reach: held grows (weakly) by a page's
    step in F, and within one page of F it only loses pages as slid_out(F) grows.
    """
    last = ceil_div(ar.min(f + C, N), B, ar)
    return ar.max(f + 1, (last - 1) * B + 1)


def first_at_or_after(x: Num, r: Num, B: Num, ar: Arith = INT) -> Num:
    """The least y >= x with y = r (mod B), for x >= 0 and r in [1, B]."""
    return x + ar.mod(r + B - ar.mod(x, B), B)


def last_at_or_before(x: Num, r: Num, B: Num, ar: Arith = INT) -> Num:
    """The greatest y <= x with y = r (mod B), for x >= 0 and r in [1, B]."""
    return x - ar.mod(ar.mod(x, B) + B - r, B)


def peak_held(f: Num, C: Num, N: Num, W: Num, B: Num, A: Num, ar: Arith = INT) -> Num:
    """held_after_chunk(f, chunk_peak_end(f)): the most a chunk from frontier f holds."""
    return held_after_chunk(f, chunk_peak_end(f, C, N, B, ar), W, B, A, ar)


def residue_peak(
    e: Num, b1: Num, r: Num, C: Num, N: Num, W: Num, B: Num, A: Num, ar: Arith = INT
) -> Num:
    """The most a chunk of the full C tokens holds from a frontier f = r (mod B), e <= f <= b1.

    From f >= W - 1 on, every such f holds the same pages but for the holes between
    ceil(f/B) and slid_out(F), a window of a fixed number of slots whose resume pages repeat
    every m slots: the first and last f, and the first f whose window ends on an alignment
    boundary (the most resume pages, fewest holes), are enough. Below W - 1 a page more of f
    never holds less, so the last f covers those.
    """
    lo = first_at_or_after(ar.max(e, W - 1), r, B, ar)
    hi = last_at_or_before(b1, r, B, ar)
    m = period(A, B, ar)

    def from_lo() -> Num:
        p = slid_out(chunk_peak_end(lo, C, N, B, ar), W, B, ar)
        fp = lo + ar.mod(m - ar.mod(p, m), m) * B
        at_peak = ar.cond(fp <= b1, lambda: peak_held(fp, C, N, W, B, A, ar), lambda: 0)
        return ar.max(peak_held(lo, C, N, W, B, A, ar), at_peak)

    at_lo = ar.cond(lo <= b1, from_lo, lambda: 0)
    at_hi = ar.cond(hi >= e, lambda: peak_held(hi, C, N, W, B, A, ar), lambda: 0)
    return ar.max(at_lo, at_hi)


@_memo_on_ints
def blocks_needed_prompt(
    slots: Num, tail: Num, n: Num, C: Num, decode: Num, W: Num, B: Num, A: Num, ar: Arith = INT
) -> Num:
    """The whole-prompt charge of a reclaiming (sliding or state) group, in O(1).

    The most pages the table holds at once, beyond the slots [slid_out(e), ceil(e/B)) it
    holds once reclaimed at its extent e, while it computes n tokens in chunks of at most C
    (reclaiming at the frontier before each) and then acquires `decode` tokens. Exact: some
    chunking reaches it.
    """
    e = extent(slots, tail, B)
    N = e + n
    c = ar.min(C, n)  # no chunk is longer than n

    def chunks() -> Num:
        b1 = N - c  # frontiers from which a chunk of the full c tokens ends by N
        a2 = ar.max(e, b1)  # frontiers from which every chunk ends at N at the latest

        def full_chunks() -> Num:
            r2 = ar.mod(B - ar.mod(c, B), B) + 1  # f = r2 (mod B): ceil((f + c)/B) steps up
            return ar.max(
                residue_peak(e, b1, 1, c, N, W, B, A, ar),
                residue_peak(e, b1, r2, c, N, W, B, A, ar),
            )

        a2p = first_at_or_after(a2, 1, B, ar)  # the first page start from a2 on
        z = ar.min(N - 1, W + B - 2)  # the last frontier with nothing slid out
        last = ar.max(
            ar.max(peak_held(e, c, N, W, B, A, ar), peak_held(a2, c, N, W, B, A, ar)),
            ar.max(
                ar.cond(a2p <= N - 1, lambda: peak_held(a2p, c, N, W, B, A, ar), lambda: 0),
                ar.cond(z >= a2, lambda: peak_held(z, c, N, W, B, A, ar), lambda: 0),
            ),
        )
        return ar.max(last, ar.cond(b1 >= e, full_chunks, lambda: 0))

    during = ar.cond(n > 0, chunks, lambda: 0)
    after = ar.cond(decode > 0, lambda: held_after_chunk(N, N + decode, W, B, A, ar), lambda: 0)
    held_now = slots - slid_out(e, W, B, ar)
    return ar.max(0, ar.max(during, after) - held_now)
# --- chunked local attention (semantics section 13.2) ---------------------------------
# A chunked group with chunk size C (a positive multiple of B): the query at position t
# reads the keys [floor(t / C) * C, t].  No live tail: every slot an acquire creates is
# real (A = 0 above), so only reclaim's bound and the resume pages behind a boundary differ.


def chunk_start(t: Num, C: Num, ar: Arith = INT) -> Num:
    """floor(t / C) * C: the first key the query at position t reads."""
    return ar.div(t, C) * C


@_memo_on_ints
def chunked_reclaim_bound(f: Num, slots: Num, C: Num, B: Num, ar: Arith = INT) -> Num:
    """b = min(chunk_start(f) / B, slots): after f tokens no later query reads a slot below b.

    Every later query is at a position t >= f and reads from chunk_start(t) >= chunk_start(f).
    """
    return ar.min(ar.div(chunk_start(f, C, ar), B), slots)


def chunked_resume_pages(b: Num, C: Num, B: Num, ar: Arith = INT) -> Num:
    """Slots behind the boundary of b slots (T = b * B) that a request resuming there reads:
    those of [chunk_start(T), T), i.e. b mod (C / B); none when T is a multiple of C."""
    return ar.mod(b, ar.div(C, B))


@_memo_on_ints
def blocks_needed_prompt_chunked(
    slots: Num, tail: Num, n: Num, L: Num, decode: Num, C: Num, B: Num, ar: Arith = INT
) -> Num:
    """The whole-prompt charge (section 13.1) of a chunked group, in O(1).

    After a reclaim at frontier f the table holds the slots [chunk_start(f) / B, ceil(f / B)),
    all real (no live tail); a chunk from f to F adds the slots up to ceil(F / B). For a fixed
    f the longest chunk holds the most, and within one chunk-of-C the last f does: so the
    chunk from the last frontier of the extent's own chunk-of-C (or from N - 1) is the
    worst, and the decode acquire from N the other candidate. Counted beyond the pages held
    once reclaimed at the extent, as for the other kinds.
    """
    e = extent(slots, tail, B)
    N = e + n
    k0 = chunk_start(e, C, ar)
    held = ceil_div(e, B, ar) - ar.min(ar.div(k0, B), slots)
    chunks = ar.cond(n > 0, lambda: ceil_div(ar.min(C - 1 + L, N - k0), B, ar), lambda: 0)
    dec = ar.cond(
        decode > 0,
        lambda: ceil_div(N + decode, B, ar) - ar.div(chunk_start(N, C, ar), B),
        lambda: 0,
    )
    return ar.max(0, ar.max(chunks, dec) - held)


# --- the whole-prompt charge, one dispatch per kind (semantics 13.1) ----------------------
# Every caller (the managers, the claim charge below, the theorem) reaches a kind's closed
# form through these, so the kind is branched on once. ``kind`` is a plain string (a
# constant even when the numbers are Z3 terms); ``K`` is a chunked group's
# attention_chunk_size (unused by the other kinds).


def prompt_charge(
    kind: str, slots: Num, tail: Num, n: Num, C: Num, decode: Num, W: Num, B: Num, A: Num,
    K: Num, ar: Arith = INT,
) -> Num:
    """The whole-prompt charge of a group of this kind on a table of shape (slots, tail)."""
    if kind == "full":  # reclaims nothing: the pages of the whole n + decode
        return blocks_needed(slots, tail, n + decode, W, B, 0, ar)
    if kind == "chunked":
        return blocks_needed_prompt_chunked(slots, tail, n, C, decode, K, B, ar)
    return blocks_needed_prompt(slots, tail, n, C, decode, W, B, A, ar)


def prompt_held_at(kind: str, x: Num, W: Num, B: Num, K: Num, ar: Arith = INT) -> Num:
    """Pages a table of extent x holds once reclaimed at x (what the charge counts from)."""
    v = ceil_div(x, B, ar)
    if kind == "full":
        return v
    if kind == "chunked":
        return v - ar.min(ar.div(chunk_start(x, K, ar), B), v)
    return v - slid_out(x, W, B, ar)


def release_frontier(kind: str, j: Num, W: Num, B: Num, K: Num, ar: Arith = INT) -> Num:
    """The least frontier at which reclaim releases slot j (its bound passes j); -1: never."""
    if kind == "full":
        return -1
    if kind == "chunked":  # chunk_start(f) >= (j + 1) * B
        return ceil_div((j + 1) * B, K, ar) * K
    return (j + 1) * B + W - 1  # slid_out(f) >= j + 1


def prompt_peak_from(
    kind: str, x: Num, N: Num, C: Num, decode: Num, W: Num, B: Num, A: Num, K: Num,
    ar: Arith = INT,
) -> Num:
    """The most pages a table holds at once from frontier x on (reclaimed at x, x <= N):
    what it holds at x, or the worst chunk from a frontier in [x, N) and the decode."""
    slots = ceil_div(x, B, ar)
    held = prompt_held_at(kind, x, W, B, K, ar)
    return held + prompt_charge(kind, slots, slots * B - x, N - x, C, decode, W, B, A, K, ar)


def prompt_charge_after_claim(
    kind: str, T: Num, shared: list[int], taken: Num, n: Num, C: Num, decode: Num, W: Num,
    B: Num, A: Num, K: Num, ar: Arith = INT,
) -> Num:
    """The most free pages one group takes at once, counted before its claim, while a request
    claims a hit of T tokens into a fresh table, then computes n tokens in chunks of at most
    C (reclaiming at the frontier before each), then acquires ``decode`` tokens.

    The claim takes ``taken`` free pages (its pages nobody held, and one per slot loaded from
    the host); ``shared`` lists, ascending, the claimed slots whose page another holder
    pins, which give the pool nothing back when reclaim releases them. After the reclaim at
    a frontier f the pool has given up what the table holds less the shared pages it still
    holds; between two consecutive release frontiers of shared slots that count is fixed,
    so the worst moment is the worst chunk from one of those frontiers on (prompt_peak_from)
    less the shared pages held there. O(len(shared)).
    """
    N = T + n
    best = ar.max(taken, prompt_peak_from(kind, T, N, C, decode, W, B, A, K, ar) - len(shared))
    for i, j in enumerate(shared):
        r = release_frontier(kind, j, W, B, K, ar)
        if r < 0 or r > N:  # this slot and every one above it are held to the end
            break
        x = ar.max(T, r)
        held_shared = len(shared) - (i + 1)
        best = ar.max(best, prompt_peak_from(kind, x, N, C, decode, W, B, A, K, ar) - held_shared)
    return best
