// Sliding-window geometry (semantics section 4): a line-by-line mirror of spec/geometry.py.
//
// Every function has the name, argument order and branch structure of its Python twin
// (minus the `ar` parameter), and every intermediate value is an int64_t, so the Z3 range
// proofs over the Python expression trees also bound this arithmetic. `ar.div`, `ar.mod`,
// `ar.min`, `ar.max` are the functions below of the same names; `ar.cond(c, a, b)` is
// `c ? a : b` and `ar.either(a, b)` is `a || b`.
// Inner helpers: callers validate the inputs (managers.h); nothing here checks.
#pragma once

#include <cstdint>
#include <span>

#define LIVETAIL_INLINE [[gnu::always_inline]] inline constexpr

namespace livetail {
enum class GroupKind : uint8_t { full, sliding, state, chunked };
}  // namespace livetail

namespace livetail::geometry {

// Largest token count a table may span: len(slots) * B <= INT32_MAX.
inline constexpr int64_t INT32_MAX_TOKENS = 2147483647;

// --- IntArith ----------------------------------------------------------------------

// Floor division and modulo for a >= 0, b >= 1 (the only operands they ever see). Page sizes
// and periods are nearly always powers of two, where a shift and a mask give the same
// result as a divide at a fraction of its latency (~3 ns each, in dependent chains here).
LIVETAIL_INLINE int64_t div(int64_t a, int64_t b) {
  return (b & (b - 1)) == 0 ? a >> __builtin_ctzll(static_cast<uint64_t>(b)) : a / b;
}
LIVETAIL_INLINE int64_t mod(int64_t a, int64_t b) {
  return (b & (b - 1)) == 0 ? a & (b - 1) : a % b;
}
LIVETAIL_INLINE int64_t min(int64_t a, int64_t b) { return a <= b ? a : b; }
LIVETAIL_INLINE int64_t max(int64_t a, int64_t b) { return a >= b ? a : b; }

// --- basic quantities -------------------------------------------------------------

// ceil(a / b) for a >= 0, b >= 1, without forming a + b - 1 (which overflows int32).
LIVETAIL_INLINE int64_t ceil_div(int64_t a, int64_t b) {
  return div(a, b) + (mod(a, b) > 0 ? 1 : 0);
}

// R = ceil((W-1)/B): the pages behind a boundary that hold its last W-1 tokens.
LIVETAIL_INLINE int64_t resume_pages(int64_t W, int64_t B) { return ceil_div(W - 1, B); }

// Pages [0, slid_out(f)) are wholly outside the window of the next query after f tokens.
LIVETAIL_INLINE int64_t slid_out(int64_t f, int64_t W, int64_t B) {
  const int64_t d = f - W + 1;
  return d > 0 ? div(d, B) : 0;
}

// The live alignments of a state group with live tail (semantics 13.5, spec RUNNING and
// CHECKPOINT): an acquire makes real its last new slot (and with checkpoints the one
// before it), no resume pages.
inline constexpr int64_t kRunning = -1;
inline constexpr int64_t kCheckpoint = -2;

// The window placement reads: W, or W + B for a checkpointed state group (A < -1).
LIVETAIL_INLINE int64_t placement_window(int64_t W, int64_t B, int64_t A) {
  return A < -1 ? W + B : W;
}

// m = A / B slots per alignment block (1 when live tail is off).
LIVETAIL_INLINE int64_t period(int64_t A, int64_t B) { return A > 0 ? div(A, B) : 1; }

// R' = min(R, m): resume slots kept in each alignment block (1 = every slot when off).
LIVETAIL_INLINE int64_t kept_per_period(int64_t W, int64_t B, int64_t A) {
  return A > 0 ? min(resume_pages(W, B), div(A, B)) : 1;
}

// Tokens a table of this shape covers.
LIVETAIL_INLINE int64_t extent(int64_t slots, int64_t tail, int64_t B) { return slots * B - tail; }

// --- liveness: the slot-by-slot definition ------------------------------------------

// Is slot s, created by an acquire that ends at frontier f, given a real page? Real when
// live tail is off, when s is still inside the window at f, or when s is one of the last R
// slots of its A-token block (a resume page of the boundary A * (s // m + 1)).
LIVETAIL_INLINE bool live(int64_t s, int64_t f, int64_t W, int64_t B, int64_t A) {
  if (A < 0) return s >= slid_out(f, placement_window(W, B, A), B);
  return A > 0
             ? (s >= slid_out(f, W, B) || mod(s, period(A, B)) >= period(A, B) - resume_pages(W, B))
             : true;
}

// --- liveness: the closed forms -----------------------------------------------------

// g(x): how many s < x have s mod m >= m - kept (kept <= m).
LIVETAIL_INLINE int64_t resume_count_below(int64_t x, int64_t m, int64_t kept) {
  return div(x, m) * kept + max(0, mod(x, m) - (m - kept));
}

// Number of live slots among [first, first+new) at frontier f, in O(1) (A >= 0).
LIVETAIL_INLINE int64_t live_count(int64_t first, int64_t new_, int64_t f, int64_t W, int64_t B,
                                   int64_t A) {
  const int64_t m = period(A, B);
  const int64_t kept = kept_per_period(W, B, A);
  const int64_t h = min(max(slid_out(f, W, B), first), first + new_);
  return (first + new_ - h) + resume_count_below(h, m, kept) - resume_count_below(first, m, kept);
}

// Real slots among an acquire's `new_` slots when live tail is off (A = 0: all) or for a
// state group with live tail (A = kRunning or kCheckpoint: its last one or two, -A), which
// is the spec's live_count with the window W + B or W and no resume slot.
LIVETAIL_INLINE int64_t state_take(int64_t new_, int64_t A) {
  return A < 0 ? min(new_, -A) : new_;
}

// --- acquire arithmetic -------------------------------------------------------------

// Slots an acquire of n tokens appends to a table with `tail` tokens of room.
LIVETAIL_INLINE int64_t new_slots(int64_t tail, int64_t B, int64_t n) {
  return n > tail ? ceil_div(n - tail, B) : 0;
}

// tail_available after an acquire of n tokens.
LIVETAIL_INLINE int64_t tail_after(int64_t tail, int64_t B, int64_t n) {
  if (n > tail) {  // spill()
    const int64_t r = mod(n - tail, B);
    return r > 0 ? B - r : 0;
  }
  return tail - n;
}

// After acquiring n tokens, len(slots) * B <= INT32_MAX (compared without multiplying).
LIVETAIL_INLINE bool fits_int32(int64_t slots, int64_t tail, int64_t B, int64_t n) {
  return new_slots(tail, B, n) <= div(INT32_MAX_TOKENS, B) - slots;
}

// Pages acquire(n) takes on a table of shape (slots, tail): O(1).
// A = 0 means every new slot is real (full and state groups, sliding without live tail).
LIVETAIL_INLINE int64_t blocks_needed(int64_t slots, int64_t tail, int64_t n, int64_t W, int64_t B,
                                      int64_t A) {
  if (n > tail) {  // take()
    const int64_t new_ = ceil_div(n - tail, B);
    const int64_t f = extent(slots, tail, B) + n;
    return A > 0 ? live_count(slots, new_, f, W, B, A) : state_take(new_, A);
  }
  return 0;
}

// Pages acquire(first) then acquire(extra) take together: the admission charge.
LIVETAIL_INLINE int64_t blocks_needed_sequential(int64_t slots, int64_t tail, int64_t first,
                                                 int64_t extra, int64_t W, int64_t B, int64_t A) {
  const int64_t slots1 = slots + new_slots(tail, B, first);
  const int64_t tail1 = tail_after(tail, B, first);
  return blocks_needed(slots, tail, first, W, B, A) + blocks_needed(slots1, tail1, extra, W, B, A);
}

// b = min(slid_out(f), slots): reclaim releases every real slot in [floor, b).
LIVETAIL_INLINE int64_t reclaim_bound(int64_t f, int64_t slots, int64_t W, int64_t B) {
  return min(slid_out(f, W, B), slots);
}


// --- the whole-prompt charge (semantics 13.1) ------------------------------------------
// Mirrors of spec/geometry.py's section of the same name; the argument for the candidate
// frontiers is there and in docs/decisions.md.

// Pages a reclaiming group's table holds after reclaim_expired(f) then acquire(F - f).
LIVETAIL_INLINE int64_t held_after_chunk(int64_t f, int64_t F, int64_t W, int64_t B, int64_t A) {
  const int64_t v = ceil_div(f, B);
  const int64_t q = ceil_div(F, B);
  const int64_t kept = v - slid_out(f, W, B);
  return kept + (A > 0 ? live_count(v, q - v, F, W, B, A) : state_take(q - v, A));
}

// The chunk end F in (f, min(f + C, N)] with the most pages held after the chunk from f.
LIVETAIL_INLINE int64_t chunk_peak_end(int64_t f, int64_t C, int64_t N, int64_t B) {
  const int64_t last = ceil_div(min(f + C, N), B);
  return max(f + 1, (last - 1) * B + 1);
}

// The least y >= x with y = r (mod B), for x >= 0 and r in [1, B].
LIVETAIL_INLINE int64_t first_at_or_after(int64_t x, int64_t r, int64_t B) {
  return x + mod(r + B - mod(x, B), B);
}

// The greatest y <= x with y = r (mod B), for x >= 0 and r in [1, B].
LIVETAIL_INLINE int64_t last_at_or_before(int64_t x, int64_t r, int64_t B) {
  return x - mod(mod(x, B) + B - r, B);
}

// held_after_chunk(f, chunk_peak_end(f)): the most a chunk from frontier f holds.
LIVETAIL_INLINE int64_t peak_held(int64_t f, int64_t C, int64_t N, int64_t W, int64_t B,
                                   int64_t A) {
  return held_after_chunk(f, chunk_peak_end(f, C, N, B), W, B, A);
}

// The most a chunk of the full C tokens holds from a frontier f = r (mod B), e <= f <= b1.
LIVETAIL_INLINE int64_t residue_peak(int64_t e, int64_t b1, int64_t r, int64_t C, int64_t N,
                                      int64_t W, int64_t B, int64_t A) {
  const int64_t lo = first_at_or_after(max(e, W - 1), r, B);
  const int64_t hi = last_at_or_before(b1, r, B);
  const int64_t m = period(A, B);
  int64_t at_lo = 0;
  if (lo <= b1) {  // from_lo()
    const int64_t p = slid_out(chunk_peak_end(lo, C, N, B), W, B);
    const int64_t fp = lo + mod(m - mod(p, m), m) * B;
    const int64_t at_peak = fp <= b1 ? peak_held(fp, C, N, W, B, A) : 0;
    at_lo = max(peak_held(lo, C, N, W, B, A), at_peak);
  }
  const int64_t at_hi = hi >= e ? peak_held(hi, C, N, W, B, A) : 0;
  return max(at_lo, at_hi);
}

// The whole-prompt charge of a reclaiming (sliding or state) group, in O(1).
LIVETAIL_INLINE int64_t blocks_needed_prompt(int64_t slots, int64_t tail, int64_t n, int64_t C,
                                             int64_t decode, int64_t W, int64_t B, int64_t A) {
  const int64_t e = extent(slots, tail, B);
  const int64_t N = e + n;
  const int64_t c = min(C, n);
  int64_t during = 0;
  if (n > 0) {  // chunks()
    const int64_t b1 = N - c;
    const int64_t a2 = max(e, b1);
    const int64_t a2p = first_at_or_after(a2, 1, B);
    const int64_t z = min(N - 1, W + B - 2);
    const int64_t last =
        max(max(peak_held(e, c, N, W, B, A), peak_held(a2, c, N, W, B, A)),
            max(a2p <= N - 1 ? peak_held(a2p, c, N, W, B, A) : 0,
                z >= a2 ? peak_held(z, c, N, W, B, A) : 0));
    int64_t full = 0;
    if (b1 >= e) {  // full_chunks()
      const int64_t r2 = mod(B - mod(c, B), B) + 1;
      full = max(residue_peak(e, b1, 1, c, N, W, B, A), residue_peak(e, b1, r2, c, N, W, B, A));
    }
    during = max(last, full);
  }
  const int64_t after = decode > 0 ? held_after_chunk(N, N + decode, W, B, A) : 0;
  const int64_t held_now = slots - slid_out(e, W, B);
  return max(0, max(during, after) - held_now);
}


// --- native hot paths ---------------------------------------------------------------
// Named steps of acquire's placement loop (managers.cpp), so the range proofs cover them.

// The frontier an acquire of n tokens leaves: extent + n.
LIVETAIL_INLINE int64_t frontier_after(int64_t slots, int64_t tail, int64_t B, int64_t n) {
  return extent(slots, tail, B) + n;
}

// len(slots) after an acquire of n tokens.
LIVETAIL_INLINE int64_t slots_after(int64_t slots, int64_t tail, int64_t B, int64_t n) {
  return slots + new_slots(tail, B, n);
}

// h in [first, end]: new slots [h, end) are inside the window at f, so all real.
LIVETAIL_INLINE int64_t first_live_slot(int64_t first, int64_t end, int64_t f, int64_t W,
                                        int64_t B) {
  return min(max(slid_out(f, W, B), first), end);
}

// First slot of the m-slot period holding slot x.
LIVETAIL_INLINE int64_t period_start(int64_t x, int64_t m) { return x - mod(x, m); }

// First new slot of period p0's resume run: its last `kept` slots, none before first.
LIVETAIL_INLINE int64_t resume_run_begin(int64_t p0, int64_t m, int64_t kept, int64_t first) {
  return max(p0 + m - kept, first);
}

// End of period p0's resume run: the period's end, or h where the window starts.
LIVETAIL_INLINE int64_t resume_run_end(int64_t p0, int64_t m, int64_t h) { return min(p0 + m, h); }

// First slot of the period after p0's.
LIVETAIL_INLINE int64_t next_period(int64_t p0, int64_t m) { return p0 + m; }

// --- chunked local attention (semantics section 13.2) ---------------------------------
// The query at position t reads [floor(t / C) * C, t]; C is a positive multiple of B.

// floor(t / C) * C: the first key the query at position t reads.
LIVETAIL_INLINE int64_t chunk_start(int64_t t, int64_t C) { return div(t, C) * C; }

// b = min(chunk_start(f) / B, slots): after f tokens no later query reads a slot below b.
LIVETAIL_INLINE int64_t chunked_reclaim_bound(int64_t f, int64_t slots, int64_t C, int64_t B) {
  return min(div(chunk_start(f, C), B), slots);
}

// The whole-prompt charge of a chunked group (section 13.1; spec: blocks_needed_prompt_chunked):
// the chunk from the last frontier of the extent's chunk-of-C, or the decode acquire, at its
// largest, beyond the pages held once reclaimed at the extent.
LIVETAIL_INLINE int64_t blocks_needed_prompt_chunked(int64_t slots, int64_t tail, int64_t n,
                                                     int64_t L, int64_t decode, int64_t C,
                                                     int64_t B) {
  const int64_t e = extent(slots, tail, B);
  const int64_t N = e + n;
  const int64_t k0 = chunk_start(e, C);
  const int64_t held = ceil_div(e, B) - min(div(k0, B), slots);
  const int64_t chunks = n > 0 ? ceil_div(min(C - 1 + L, N - k0), B) : 0;
  const int64_t dec = decode > 0 ? ceil_div(N + decode, B) - div(chunk_start(N, C), B) : 0;
  return max(int64_t{0}, max(chunks, dec) - held);
}

// Slots behind the boundary of b slots that a request resuming there reads: b mod (C / B).
LIVETAIL_INLINE int64_t chunked_resume_pages(int64_t b, int64_t C, int64_t B) {
  return mod(b, div(C, B));
}


// --- the whole-prompt charge, one dispatch per kind (semantics 13.1) ----------------------
// Mirrors of spec/geometry.py's section of the same name: every caller reaches a kind's
// closed form through these. K is a chunked group's attention_chunk_size.

// The whole-prompt charge of a group of this kind on a table of shape (slots, tail).
LIVETAIL_INLINE int64_t prompt_charge(GroupKind kind, int64_t slots, int64_t tail, int64_t n,
                                      int64_t C, int64_t decode, int64_t W, int64_t B, int64_t A,
                                      int64_t K) {
  if (kind == GroupKind::full) return blocks_needed(slots, tail, n + decode, W, B, 0);
  if (kind == GroupKind::chunked)
    return blocks_needed_prompt_chunked(slots, tail, n, C, decode, K, B);
  return blocks_needed_prompt(slots, tail, n, C, decode, W, B, A);
}

// Pages a table of extent x holds once reclaimed at x (what the charge counts from).
LIVETAIL_INLINE int64_t prompt_held_at(GroupKind kind, int64_t x, int64_t W, int64_t B,
                                       int64_t K) {
  const int64_t v = ceil_div(x, B);
  if (kind == GroupKind::full) return v;
  if (kind == GroupKind::chunked) return v - min(div(chunk_start(x, K), B), v);
  return v - slid_out(x, W, B);
}

// The least frontier at which reclaim releases slot j (its bound passes j); -1: never.
LIVETAIL_INLINE int64_t release_frontier(GroupKind kind, int64_t j, int64_t W, int64_t B,
                                         int64_t K) {
  if (kind == GroupKind::full) return -1;
  if (kind == GroupKind::chunked) return ceil_div((j + 1) * B, K) * K;
  return (j + 1) * B + W - 1;
}

// The most pages a table holds at once from frontier x <= N on (reclaimed at x).
LIVETAIL_INLINE int64_t prompt_peak_from(GroupKind kind, int64_t x, int64_t N, int64_t C,
                                         int64_t decode, int64_t W, int64_t B, int64_t A,
                                         int64_t K) {
  const int64_t slots = ceil_div(x, B);
  const int64_t held = prompt_held_at(kind, x, W, B, K);
  return held + prompt_charge(kind, slots, slots * B - x, N - x, C, decode, W, B, A, K);
}

// The most free pages one group takes at once, counted before its claim of a T-token hit
// (which takes `taken` free pages; `shared`, ascending: the claimed slots another holder
// pins), then n tokens in chunks of at most C and a decode acquire. O(shared.size()).
LIVETAIL_INLINE int64_t prompt_charge_after_claim(GroupKind kind, int64_t T,
                                                  std::span<const int64_t> shared, int64_t taken,
                                                  int64_t n, int64_t C, int64_t decode, int64_t W,
                                                  int64_t B, int64_t A, int64_t K) {
  const int64_t N = T + n;
  const auto S = static_cast<int64_t>(shared.size());
  int64_t best = max(taken, prompt_peak_from(kind, T, N, C, decode, W, B, A, K) - S);
  for (int64_t i = 0; i < S; ++i) {
    const int64_t r = release_frontier(kind, shared[static_cast<size_t>(i)], W, B, K);
    if (r < 0 || r > N) break;  // this slot and every one above it are held to the end
    const int64_t x = max(T, r);
    const int64_t held_shared = S - (i + 1);
    best = max(best, prompt_peak_from(kind, x, N, C, decode, W, B, A, K) - held_shared);
  }
  return best;
}

}  // namespace livetail::geometry
