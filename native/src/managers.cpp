#include "livetail/managers.h"

#include <algorithm>
#include <string>
#if defined(__SSE2__)
#include <emmintrin.h>
#include "fail.h"
#endif

namespace livetail {

using detail::fail;

namespace {

// Holes are common (live tail), so scans look at 16 slots at once and visit only the real
// ones: bit k of the mask is set iff slot s[k] holds a page.
constexpr int64_t kScanBlock = 16;

[[gnu::always_inline]] inline uint32_t real_mask(const int32_t* s) noexcept {
#if defined(__SSE2__)
  // Page ids are >= 0, so saturating packs keep every nonzero lane nonzero: 16 lanes to bytes.
  auto load = [s](ptrdiff_t q) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 4 * q));
  };
  const __m128i bytes =
      _mm_packs_epi16(_mm_packs_epi32(load(0), load(1)), _mm_packs_epi32(load(2), load(3)));
  const int holes = _mm_movemask_epi8(_mm_cmpeq_epi8(bytes, _mm_setzero_si128()));
  return ~static_cast<uint32_t>(holes) & 0xFFFFu;
#else
  uint32_t m = 0;
  for (int k = 0; k < kScanBlock; ++k) m |= static_cast<uint32_t>(s[k] != 0) << k;
  return m;
#endif
}

// Drops real slot s's reference and makes it a hole.
[[gnu::always_inline]] inline void punch(BlockPool::Releaser& r, int32_t& s) noexcept {
  r.release(s);
  s = 0;
}

void check_range(int64_t v, int64_t lo, const char* name) {
  if (v < lo || v > geometry::INT32_MAX_TOKENS)
    fail(name, "must be in [" + std::to_string(lo) + ", 2**31 - 1], got " + std::to_string(v));
}

}  // namespace

const char* kind_name(GroupKind kind) noexcept {
  switch (kind) {
    case GroupKind::full:
      return "full";
    case GroupKind::sliding:
      return "sliding";
    case GroupKind::state:
      return "state";
    case GroupKind::chunked:
      return "chunked";
  }
  return "?";
}

GroupKind parse_kind(std::string_view kind) {
  if (kind == "full") return GroupKind::full;
  if (kind == "sliding") return GroupKind::sliding;
  if (kind == "state") return GroupKind::state;
  if (kind == "chunked") return GroupKind::chunked;
  fail("kind",
       "must be 'full', 'sliding', 'state' or 'chunked', got '" + std::string(kind) + "'");
}

Manager::Manager(GroupKind kind, int64_t block_size, int64_t sliding_window,
                 int64_t live_alloc_alignment)
    : B_(block_size), W_(sliding_window), A_(live_alloc_alignment), kind_(kind) {
  check_range(block_size, 1, "block_size");
  if (kind != GroupKind::full && kind != GroupKind::chunked)
    check_range(sliding_window, 1, "sliding_window");
  check_range(live_alloc_alignment, 0, "live_alloc_alignment");
  if (live_alloc_alignment % block_size != 0)
    fail("live_alloc_alignment", "must be a multiple of block_size " + std::to_string(block_size) +
                                     ", got " + std::to_string(live_alloc_alignment));
}

FullAttentionManager::FullAttentionManager(int64_t block_size)
    : Manager(GroupKind::full, block_size, 0, 0) {}

SlidingWindowManager::SlidingWindowManager(int64_t block_size, int64_t sliding_window,
                                           int64_t live_alloc_alignment)
    : Manager(GroupKind::sliding, block_size, sliding_window, live_alloc_alignment) {}

StateManager::StateManager(int64_t block_size) : Manager(GroupKind::state, block_size, 2, 0) {}

ChunkedLocalAttentionManager::ChunkedLocalAttentionManager(int64_t block_size,
                                                           int64_t attention_chunk_size)
    : Manager(GroupKind::chunked, block_size, 0, 0) {
  check_range(attention_chunk_size, 1, "attention_chunk_size");
  if (attention_chunk_size % block_size != 0)
    fail("attention_chunk_size", "must be a multiple of block_size " + std::to_string(block_size) +
                                     ", got " + std::to_string(attention_chunk_size));
  C_ = attention_chunk_size;
}

// --- failures (cold: built only when a check fails) ------------------------------------

void Manager::fail_count(int64_t value, const char* name) {
  fail(name, "must be >= 0, got " + std::to_string(value));
}

void Manager::fail_chunk(int64_t value) {
  fail("max_chunk_tokens", "must be >= 1, got " + std::to_string(value));
}

void Manager::fail_other_pool() { fail("table", "is bound to another pool (free it there first)"); }

void Manager::fail_block_size(int64_t table_block_size) const {
  fail("table", "was filled by a group with block_size " + std::to_string(table_block_size) +
                    ", not " + std::to_string(B_));
}

void Manager::fail_fits(int64_t n, const char* name) {
  fail(name, "= " + std::to_string(n) + " would make the table span more than 2**31 - 1 tokens");
}

void Manager::fail_frontier(int64_t f, int64_t extent) {
  fail("num_computed_tokens",
       "= " + std::to_string(f) + " is above the table's extent " + std::to_string(extent));
}

void Manager::fail_owner() {
  fail("table",
       "is bound to a coordinator: act on it through that coordinator or its managers "
       "(coordinator.managers) until it is freed");
}

void Manager::fail_load() {
  fail("table", "has a pending load: complete_load first (freeing the request aborts it)");
}

void Manager::grow(BlockTable& t, int64_t slots) {
  // Geometric growth: an exact reserve per decode step would copy the table every time.
  t.slots_.reserve(std::max(static_cast<size_t>(slots), 2 * t.slots_.capacity()));
}

// --- slow paths of the hot operations --------------------------------------------------------

bool Manager::acquire_checked(BlockPool& pool, BlockTable& t, int64_t num_tokens) const {
  check_count(num_tokens, "num_tokens");
  check_table(&pool, t);
  check_owner(t);
  check_fits(t.size(), t.tail_, num_tokens, "num_tokens");
  if (num_tokens == 0) return true;  // binds nothing
  if (needed_unchecked(t, num_tokens) > pool.num_free()) return false;
  acquire_unchecked(pool, t, num_tokens);
  return true;
}

void Manager::append_slots(BlockPool& pool, BlockTable& t, int64_t n) const {
  const int64_t slots = t.size();
  const int64_t tail = t.tail_;
  const int64_t end = geometry::slots_after(slots, tail, B_, n);
  t.slots_.resize(static_cast<size_t>(end));  // new slots start as holes; the only throw
  int32_t* s = t.slots_.data();
  BlockPool::Taker take(pool);
  int64_t h = slots;  // [slots, h): live only if a resume page; [h, end): all live
  if (A_ > 0) {
    const int64_t f = geometry::frontier_after(slots, tail, B_, n);
    h = geometry::first_live_slot(slots, end, f, W_, B_);
    if (h > slots) {  // some new slots are outside the window already (not on a decode step)
      const int64_t m = geometry::period(A_, B_);
      const int64_t kept = geometry::kept_per_period(W_, B_, A_);
      // The resume pages are the last `kept` slots of each period: visit them, not the holes.
      for (int64_t p0 = geometry::period_start(slots, m); p0 < h;
           p0 = geometry::next_period(p0, m)) {
        const int64_t hi = geometry::resume_run_end(p0, m, h);
        for (int64_t i = geometry::resume_run_begin(p0, m, kept, slots); i < hi; ++i)
          s[i] = take.pop();
      }
    }
  }
  for (int64_t i = h; i < end; ++i) s[i] = take.pop();
  t.real_ += take.done();
}

int64_t Manager::punch_band(BlockPool& pool, BlockTable& t, int64_t b) noexcept {
  // The batch [page(b-1) .. page(floor)] freed in reverse = released in ascending slot order.
  int32_t* s = t.slots_.data();
  BlockPool::Releaser rel(pool);
  int64_t i = t.floor_;
  for (; i + kScanBlock <= b; i += kScanBlock)
    for (uint32_t m = real_mask(s + i); m != 0; m &= m - 1) {  // ascending
      punch(rel, s[i + __builtin_ctz(m)]);
      --t.real_;
    }
  for (; i < b; ++i)
    if (s[i] != 0) punch(rel, s[i]), --t.real_;
  t.floor_ = b;
  return rel.done();
}

int64_t Manager::free_unchecked(BlockPool& pool, BlockTable& t) const noexcept {
  // The batch [page(0) .. page(last)] freed in reverse: the last slot's page re-enters first.
  int32_t* s = t.slots_.data();
  BlockPool::Releaser rel(pool);
  // Reclaim left no real page below the floor, so the scan stops there.
  const int64_t floor = t.floor_;
  int64_t i = t.size();
  for (const int64_t top = geometry::max(geometry::period_start(i, kScanBlock), floor); i > top;)
    if (s[--i] != 0) punch(rel, s[i]);
  for (; i - kScanBlock >= floor; i -= kScanBlock) {
    int32_t* blk = s + i - kScanBlock;
    for (uint32_t m = real_mask(blk); m != 0;) {  // descending
      const int k = 31 - __builtin_clz(m);
      punch(rel, blk[k]);
      m &= ~(1u << k);
    }
  }
  while (i > floor)
    if (s[--i] != 0) punch(rel, s[i]);
  t.slots_.clear();  // keeps capacity for the next request
  t.tail_ = t.floor_ = t.real_ = t.named_upto_ = 0;
  t.pool_ = nullptr;
  t.block_size_ = 0;
  t.coordinator_ = 0;
  return rel.done();
}

// --- public entry points ------------------------------------------------------------------

int64_t Manager::blocks_reclaimable_at(const BlockTable& t, int64_t num_computed_tokens,
                                       bool count_uncached) const {
  check_table(nullptr, t);
  check_frontier(t, num_computed_tokens);
  if (kind_ == GroupKind::full || t.pool_ == nullptr) return 0;
  const int64_t f = num_computed_tokens;
  const int64_t b = kind_ == GroupKind::chunked
                        ? geometry::chunked_reclaim_bound(f, t.size(), C_, B_)
                        : geometry::reclaim_bound(f, t.size(), W_, B_);
  const BlockPool& pool = *t.pool_;
  int64_t n = 0;
  // Pages whose last reference is this slot (and, unless count_uncached, that carry a name).
  for (int64_t i = t.floor_; i < b; ++i) {
    const int32_t p = t.slots_[static_cast<size_t>(i)];
    if (p != 0 && pool.ref_count(p) == 1 && (count_uncached || pool.is_cached(p))) ++n;
  }
  return n;
}

}  // namespace livetail
