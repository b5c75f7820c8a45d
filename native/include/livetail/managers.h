// Managers (semantics section 5): policy objects. A manager holds only its geometry; every
// operation is handed the pool and table it acts on, so one manager serves all requests.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "livetail/geometry.h"
#include "livetail/pool.h"
#include "livetail/table.h"

namespace livetail {

// "full", "sliding", "state", "chunked".
const char* kind_name(GroupKind kind) noexcept;
// Throws std::invalid_argument naming `kind` for anything else.
GroupKind parse_kind(std::string_view kind);

// One class for the three kinds: behaviour follows from (kind, B, W, A) alone, so the
// coordinator keeps its managers in a flat vector with no virtual dispatch.
class Manager {
 public:
  GroupKind kind() const noexcept { return kind_; }
  int64_t block_size() const noexcept { return B_; }
  int64_t sliding_window() const noexcept { return W_; }  // 0 for full, 2 for state
  int64_t live_alloc_alignment() const noexcept { return A_ > 0 ? A_ : 0; }
  // A state group with live tail (semantics 13.5: vLLM's Mamba "align" mode), with
  // checkpoints or not.
  bool live_tail_state() const noexcept { return A_ < 0; }
  bool checkpoints() const noexcept { return A_ == geometry::kCheckpoint; }
  int64_t attention_chunk_size() const noexcept { return C_; }  // 0 unless chunked

  // Public entry points: validate (std::invalid_argument naming the argument, nothing
  // changed), then run the trusting versions below.
  inline bool acquire(BlockPool& pool, BlockTable& table, int64_t num_tokens) const;
  inline int64_t blocks_needed_for(const BlockTable& table, int64_t num_tokens) const;
  inline int64_t blocks_needed_for_sequential(const BlockTable& table, int64_t first_tokens,
                                              int64_t extra_tokens) const;
  // The whole-prompt charge (semantics 13.1): the most pages, beyond those the table holds
  // once reclaimed at its extent, it holds at once while it computes num_tokens in chunks of
  // at most max_chunk_tokens (>= 1), reclaiming before each, then acquires decode_tokens.
  inline int64_t blocks_needed_for_prompt(const BlockTable& table, int64_t num_tokens,
                                          int64_t max_chunk_tokens, int64_t decode_tokens) const;
  // This group's part of Coordinator::blocks_needed_for_prompt_after_claim: a claim of
  // `pages` (and the slots `host_pages` serves) at a hit of T tokens, then the prompt's n
  // tokens in chunks of at most C (>= 1) and d decode tokens; `ref` the pool's holder counts.
  int64_t prompt_after_claim(int64_t T, std::span<const int32_t> pages,
                             std::span<const int32_t> host_pages, std::span<const int32_t> ref,
                             int64_t n, int64_t C, int64_t d) const;
  inline int64_t reclaim_expired(BlockPool& pool, BlockTable& table,
                                 int64_t num_computed_tokens) const;
  int64_t blocks_reclaimable_at(const BlockTable& table, int64_t num_computed_tokens,
                                bool count_uncached = true) const;
  // Returns how many pages re-entered the free queue.
  inline int64_t free(BlockPool& pool, BlockTable& table) const;

  // Checks, split out so the coordinator can run every group's before any group acts.
  // Inline tests; the messages are built out of line, only on failure.
  // `pool` nullptr: a query, which accepts a table bound to any pool.
  void check_table(const BlockPool* pool, const BlockTable& t) const {
    if (pool != nullptr && t.pool_ != nullptr && t.pool_ != pool) [[unlikely]]
      fail_other_pool();
    // A table belongs to one group: another page size would misread its slots.
    if (t.block_size_ != 0 && t.block_size_ != B_) [[unlikely]]
      fail_block_size(t.block_size_);
  }
  void check_fits(int64_t slots, int64_t tail, int64_t n, const char* name) const {
    // n <= tail adds no slot, and every table of this page size already fits: skip the
    // divisions on the decode path.
    if (n > tail && !geometry::fits_int32(slots, tail, B_, n)) [[unlikely]]
      fail_fits(n, name);
  }
  void check_frontier(const BlockTable& t, int64_t f) const {
    check_count(f, "num_computed_tokens");
    if (f > geometry::extent(t.size(), t.tail_, B_)) [[unlikely]]
      fail_frontier(f, geometry::extent(t.size(), t.tail_, B_));
  }
  // A table with a pending load (semantics section 10) is reclaimed only once the load ends,
  // and freed only through its coordinator (which aborts the load).
  // A table a coordinator bound changes only through that coordinator or its own managers.
  void check_owner(const BlockTable& t) const {
    if (t.coordinator_ != 0 && t.coordinator_ != owner_) [[unlikely]]
      fail_owner();
  }
  static void check_no_load(const BlockTable& t) {
    if (t.load_ != 0) [[unlikely]]
      fail_load();
  }
  static void check_count(int64_t value, const char* name) {
    if (value < 0) [[unlikely]]
      fail_count(value, name);
  }
  static void check_chunk(int64_t value) {
    if (value < 1) [[unlikely]]
      fail_chunk(value);
  }

  // Trusting versions: the arguments passed the checks above.
  [[gnu::always_inline]] int64_t needed_unchecked(const BlockTable& t, int64_t n) const noexcept {
    return geometry::blocks_needed(t.size(), t.tail_, n, W_, B_, A_);
  }
  // Makes the next acquire of n tokens allocation-free (may throw std::bad_alloc; changes
  // nothing observable).
  void reserve_unchecked(BlockTable& t, int64_t n) const {
    if (n <= t.tail_) return;  // no new slot (a decode step mostly)
    const int64_t end = geometry::slots_after(t.size(), t.tail_, B_, n);
    if (static_cast<size_t>(end) > t.slots_.capacity()) [[unlikely]]
      grow(t, end);
  }
  // n > 0 and pool.num_free() >= needed_unchecked(t, n). Throws only std::bad_alloc when
  // new slots do not fit the table's capacity (then nothing changed; see reserve_unchecked).
  [[gnu::always_inline]] void acquire_unchecked(BlockPool& pool, BlockTable& t, int64_t n) const {
    if (n > t.tail_) append_slots(pool, t, n);  // a decode step mostly fills tail room
    t.tail_ = geometry::tail_after(t.tail_, B_, n);
    t.pool_ = &pool;
    t.block_size_ = B_;
  }
  [[gnu::always_inline]] int64_t reclaim_unchecked(BlockPool& pool, BlockTable& t,
                                                   int64_t f) const noexcept {
    if (kind_ == GroupKind::full) return 0;
    // A chunked group's bound is its own (semantics section 13.2).
    const int64_t b = kind_ == GroupKind::chunked
                          ? geometry::chunked_reclaim_bound(f, t.size(), C_, B_)
                          : geometry::reclaim_bound(f, t.size(), W_, B_);
    return b > t.floor_ ? punch_band(pool, t, b) : 0;  // mostly nothing new slid out
  }
  // Releases every page, empties and unbinds the table.
  int64_t free_unchecked(BlockPool& pool, BlockTable& t) const noexcept;

 protected:
  // Throws std::invalid_argument for a page size, window or alignment out of range.
  Manager(GroupKind kind, int64_t block_size, int64_t sliding_window, int64_t live_alloc_alignment);

 private:
  [[noreturn, gnu::cold]] static void fail_count(int64_t value, const char* name);
  [[noreturn, gnu::cold]] static void fail_chunk(int64_t value);
  [[noreturn, gnu::cold]] static void fail_other_pool();
  [[noreturn, gnu::cold]] void fail_block_size(int64_t table_block_size) const;
  [[noreturn, gnu::cold]] static void fail_fits(int64_t n, const char* name);
  [[noreturn, gnu::cold]] static void fail_frontier(int64_t f, int64_t extent);
  [[noreturn, gnu::cold]] static void fail_load();
  [[noreturn, gnu::cold]] static void fail_owner();
  // acquire past its fast path: every check, then the trusting version.
  bool acquire_checked(BlockPool& pool, BlockTable& t, int64_t num_tokens) const;
  static void grow(BlockTable& t, int64_t slots);
  // Appends the slots of an acquire of n > tail tokens, real or hole (tail_ still the old one).
  void append_slots(BlockPool& pool, BlockTable& t, int64_t n) const;
  // Punches the real slots in [floor, b) and raises the floor to b > floor.
  static int64_t punch_band(BlockPool& pool, BlockTable& t, int64_t b) noexcept;

  int64_t B_, W_, A_;
  GroupKind kind_;
  uint64_t owner_ = 0;  // the id of the coordinator whose group this is; 0: made on its own
  int64_t C_ = 0;       // a chunked group's attention_chunk_size; 0 for the other kinds
  friend class ChunkedLocalAttentionManager;
  friend class Coordinator;
};

class FullAttentionManager : public Manager {
 public:
  explicit FullAttentionManager(int64_t block_size);
};

class SlidingWindowManager : public Manager {
 public:
  // live_alloc_alignment: 0 = live tail off, else a multiple of block_size.
  SlidingWindowManager(int64_t block_size, int64_t sliding_window,
                       int64_t live_alloc_alignment = 0);
};

// Mamba/SSM state: a sliding group with W = 2 and A = 0. With live tail (semantics 13.5) an
// acquire makes real only its last new slot (A = geometry::kRunning), with checkpoints its
// last two (A = geometry::kCheckpoint).
class StateManager : public Manager {
 public:
  // Throws std::invalid_argument for checkpoints without live_tail.
  explicit StateManager(int64_t block_size, bool live_tail = false, bool checkpoints = false);
};

// Chunked local attention (semantics section 13.2): the query at t reads
// [floor(t / C) * C, t]. Every slot allocated (no live tail); reclaim at f releases the slots
// below floor(f / C) * C / B.
class ChunkedLocalAttentionManager : public Manager {
 public:
  // attention_chunk_size: a positive multiple of block_size.
  ChunkedLocalAttentionManager(int64_t block_size, int64_t attention_chunk_size);
};

inline bool Manager::acquire(BlockPool& pool, BlockTable& t, int64_t num_tokens) const {
  // A decode step mostly fills tail room of a table of this pool and group: every check
  // below passes and no page or slot is added, so only the tail changes.
  if (num_tokens > 0 && num_tokens <= t.tail_ && t.pool_ == &pool && t.block_size_ == B_ &&
      t.coordinator_ == owner_)
      [[likely]] {
    t.tail_ = geometry::tail_after(t.tail_, B_, num_tokens);
    return true;
  }
  return acquire_checked(pool, t, num_tokens);  // out of line: the fast path stays small
}

inline int64_t Manager::blocks_needed_for(const BlockTable& t, int64_t num_tokens) const {
  check_count(num_tokens, "num_tokens");
  check_table(nullptr, t);
  check_fits(t.size(), t.tail_, num_tokens, "num_tokens");
  return needed_unchecked(t, num_tokens);
}

inline int64_t Manager::blocks_needed_for_sequential(const BlockTable& t, int64_t first_tokens,
                                                     int64_t extra_tokens) const {
  check_count(first_tokens, "first_tokens");
  check_count(extra_tokens, "extra_tokens");
  check_table(nullptr, t);
  const int64_t slots = t.size(), tail = t.tail_;
  check_fits(slots, tail, first_tokens, "first_tokens");
  // The limit applies to the shape after both acquires.
  check_fits(geometry::slots_after(slots, tail, B_, first_tokens),
             geometry::tail_after(tail, B_, first_tokens), extra_tokens, "extra_tokens");
  return geometry::blocks_needed_sequential(slots, tail, first_tokens, extra_tokens, W_, B_, A_);
}

inline int64_t Manager::blocks_needed_for_prompt(const BlockTable& t, int64_t num_tokens,
                                                 int64_t max_chunk_tokens,
                                                 int64_t decode_tokens) const {
  check_count(num_tokens, "num_tokens");
  check_chunk(max_chunk_tokens);
  check_count(decode_tokens, "decode_tokens");
  check_table(nullptr, t);
  const int64_t slots = t.size(), tail = t.tail_;
  // Both counts are int32-limited by now, so their sum cannot overflow.
  check_fits(slots, tail, num_tokens, "num_tokens");
  check_fits(slots, tail, decode_tokens, "decode_tokens");
  check_fits(slots, tail, num_tokens + decode_tokens, "num_tokens + decode_tokens");
  return geometry::prompt_charge(kind_, slots, tail, num_tokens, max_chunk_tokens, decode_tokens,
                                 W_, B_, A_, C_);
}

inline int64_t Manager::reclaim_expired(BlockPool& pool, BlockTable& t,
                                        int64_t num_computed_tokens) const {
  check_table(&pool, t);
  check_owner(t);
  check_no_load(t);
  check_frontier(t, num_computed_tokens);
  return reclaim_unchecked(pool, t, num_computed_tokens);
}

inline int64_t Manager::free(BlockPool& pool, BlockTable& t) const {
  check_table(&pool, t);
  check_owner(t);
  check_no_load(t);
  if (!t.is_bound()) return 0;  // nothing to give back
  return free_unchecked(pool, t);
}

}  // namespace livetail
