// Small helpers shared by the C++ tests: state read-outs and "nothing changed" snapshots.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "livetail/coordinator.h"

namespace livetail {
// The pool's private state some tests need to reach.
struct PoolTestAccess {
  // Puts a page's reference count where 2^31 - 1 holders would (no test can make that many).
  static void set_ref(BlockPool& pool, int32_t page, int32_t count) { pool.ref_[page] = count; }
  // Token ids the pool's flat array holds, live and dropped (semantics section 12).
  static size_t tokens_held(const BlockPool& pool) { return pool.tokens_.size(); }
};
}  // namespace livetail

namespace livetail::testing {

using Pages = std::vector<int32_t>;

inline Pages queue_of(const BlockPool& pool) {
  Pages q(static_cast<size_t>(pool.num_free()));
  pool.copy_free_queue(q.data());
  return q;
}

inline Pages refs_of(const BlockPool& pool) {
  Pages r(static_cast<size_t>(pool.num_blocks()));
  pool.copy_ref_counts(r.data());
  return r;
}

inline Pages slots_of(const BlockTable& t) { return {t.page_ids().begin(), t.page_ids().end()}; }

// [lo, hi)
inline Pages iota(int32_t lo, int32_t hi) {
  Pages p(static_cast<size_t>(hi - lo));
  std::iota(p.begin(), p.end(), lo);
  return p;
}

inline Pages concat(std::initializer_list<Pages> parts) {
  Pages out;
  for (const Pages& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

struct TableState {
  Pages slots;
  int64_t tail, floor, real, named_upto, block_size;
  const BlockPool* pool;
  bool operator==(const TableState&) const = default;
};

inline TableState state_of(const BlockTable& t) {
  return {slots_of(t),    t.tail_available(), t.reclaim_floor(), t.num_real_pages(),
          t.named_upto(), t.block_size(),     t.pool()};
}

struct PoolState {
  Pages queue, refs;
  std::vector<bool> cached;
  int64_t num_free, num_cached;
  bool operator==(const PoolState&) const = default;
};

inline PoolState state_of(const BlockPool& p) {
  std::vector<bool> cached;
  for (int64_t i = 0; i < p.num_blocks(); ++i) cached.push_back(p.is_cached(i));
  return {queue_of(p), refs_of(p), cached, p.num_free(), p.num_cached()};
}

// Everything a call could change: the pool and every table given.
struct World {
  PoolState pool;
  std::vector<TableState> tables;
  bool operator==(const World&) const = default;
};

inline World state_of(const BlockPool& p, std::initializer_list<const BlockTable*> tables) {
  World w{state_of(p), {}};
  for (const BlockTable* t : tables) w.tables.push_back(state_of(*t));
  return w;
}

inline World state_of(const BlockPool& p, const std::vector<BlockTable*>& tables) {
  World w{state_of(p), {}};
  for (const BlockTable* t : tables) w.tables.push_back(state_of(*t));
  return w;
}

// The call throws std::invalid_argument and the state read by `observe` is unchanged.
#define EXPECT_INVALID_UNCHANGED(observe, call)                   \
  do {                                                            \
    const auto before_ = (observe);                               \
    EXPECT_THROW(static_cast<void>(call), std::invalid_argument); \
    EXPECT_TRUE(before_ == (observe)) << "changed by " #call;     \
  } while (0)

// Owns a request's tables, one per group, and the pointer list the coordinator takes.
struct Request {
  explicit Request(size_t groups) : tables(groups) {
    for (BlockTable& t : tables) ptrs.push_back(&t);
  }
  std::vector<BlockTable> tables;
  std::vector<BlockTable*> ptrs;
  BlockTable& operator[](size_t g) { return tables[g]; }
};

}  // namespace livetail::testing
