// Semantics section 12 on the pool: name(page), reset_names(), evict_names(pages), with
// exact queue orders, counters and events, and bad input leaving the pool unchanged.
#include <gtest/gtest.h>

#include "helpers.h"
#include "livetail/coordinator.h"
#include "livetail/prefix.h"

namespace livetail::testing {
namespace {

std::vector<uint32_t> tokens(int64_t n) {
  std::vector<uint32_t> t(static_cast<size_t>(n));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint32_t>(i);
  return t;
}

// Pool of 8, one full group of 4 tokens: 12 tokens take pages 1, 2, 3; pages 1 and 2 named.
struct Named {
  explicit Named(bool retention = true)
      : pool(8, retention, true), c({GroupSpec(GroupKind::full, 4)}, pool), keys(page_keys(tokens(8), 4)) {
    EXPECT_TRUE(c.acquire(r.ptrs, 12));
    EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 12), 2);
    pool.clear_events();
  }
  BlockPool pool;
  Coordinator c;
  std::vector<Key> keys;
  Request r{1};
};

struct Ev {
  BlockPool::EventKind kind;
  int32_t group;
  std::vector<Key> keys;
  bool operator==(const Ev&) const = default;
};

std::vector<Ev> drain(BlockPool& pool) {
  std::vector<Ev> out;
  for (const BlockPool::Event& e : pool.events()) {
    EXPECT_EQ(e.token_count, 0u);
    out.push_back({e.kind, e.group,
                   {pool.event_keys().begin() + static_cast<ptrdiff_t>(e.key_begin),
                    pool.event_keys().begin() + static_cast<ptrdiff_t>(e.key_begin + e.key_count)}});
  }
  pool.clear_events();
  return out;
}

using K = BlockPool::EventKind;

TEST(Names, NameIsGroupAndKeyOfANamedPage) {
  Named n;
  int32_t g = -5;
  Key k{};
  EXPECT_TRUE(n.pool.name(1, g, k));
  EXPECT_EQ(g, 0);
  EXPECT_EQ(k, n.keys[0]);
  EXPECT_TRUE(n.pool.name(2, g, k));
  EXPECT_EQ(k, n.keys[1]);
  EXPECT_FALSE(n.pool.name(3, g, k));
  EXPECT_FALSE(n.pool.name(0, g, k));
  EXPECT_FALSE(n.pool.name(7, g, k));
  EXPECT_THROW(n.pool.name(8, g, k), std::invalid_argument);
  EXPECT_THROW(n.pool.name(-1, g, k), std::invalid_argument);
}

TEST(Names, ResetRefusesWhileANamedPageIsPinned) {
  Named n;
  const uint64_t version = n.pool.version();
  const PoolState before = state_of(n.pool);
  EXPECT_FALSE(n.pool.reset_names());
  EXPECT_TRUE(before == state_of(n.pool));
  EXPECT_EQ(n.pool.version(), version);
  EXPECT_TRUE(n.pool.events().empty());
}

TEST(Names, ResetDropsEveryNameAndKeepsQueueAndCounts) {
  Named n;
  n.c.free(n.r.ptrs);
  EXPECT_EQ(queue_of(n.pool), (Pages{3, 4, 5, 6, 7, 2, 1}));
  const uint64_t version = n.pool.version();
  EXPECT_TRUE(n.pool.reset_names());
  EXPECT_EQ(queue_of(n.pool), (Pages{3, 4, 5, 6, 7, 2, 1}));
  EXPECT_EQ(refs_of(n.pool), Pages(8, 0));
  EXPECT_EQ(n.pool.version(), version);
  EXPECT_EQ(n.pool.num_cached(), 0);
  EXPECT_EQ(n.pool.num_cached_free(), 0);
  EXPECT_EQ(n.pool.num_names(), 0);
  EXPECT_EQ(n.pool.stats().pages_evicted, 2);
  EXPECT_EQ(n.pool.stats().names_removed, 2);
  EXPECT_EQ(drain(n.pool), (std::vector<Ev>{{K::cleared, -1, {}}}));
  EXPECT_EQ(n.c.match_prefix(n.keys).num_tokens(), 0);
  EXPECT_TRUE(n.pool.reset_names());  // empty: succeeds, one cleared event again
  EXPECT_EQ(drain(n.pool), (std::vector<Ev>{{K::cleared, -1, {}}}));
  // Names registered after a reset work as before.
  Request r2(1);
  ASSERT_TRUE(n.c.acquire(r2.ptrs, 8));
  EXPECT_EQ(slots_of(r2[0]), (Pages{3, 4}));
  EXPECT_EQ(n.c.cache_full_blocks(r2.ptrs, n.keys, 8), 2);
  EXPECT_EQ(n.pool.num_names(), 2);
  EXPECT_EQ(drain(n.pool), (std::vector<Ev>{{K::stored, 0, {n.keys[0], n.keys[1]}}}));
}

TEST(Names, EvictMovesFreePagesToTheFrontInListOrder) {
  Named n;
  n.c.free(n.r.ptrs);
  const uint64_t version = n.pool.version();
  const std::vector<int64_t> pages{1, 2};
  EXPECT_EQ(n.pool.evict_names(pages), 2);
  EXPECT_EQ(queue_of(n.pool), (Pages{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_GT(n.pool.version(), version);
  EXPECT_EQ(n.pool.num_cached(), 0);
  EXPECT_EQ(n.pool.num_cached_free(), 0);
  EXPECT_EQ(drain(n.pool), (std::vector<Ev>{{K::removed, 0, {n.keys[0], n.keys[1]}}}));
}

TEST(Names, EvictSkipsUnnamedPagesAndCountsRepeatsOnce) {
  Named n;
  n.c.free(n.r.ptrs);
  const std::vector<int64_t> pages{2, 5, 2, 3};
  EXPECT_EQ(n.pool.evict_names(pages), 1);
  EXPECT_EQ(queue_of(n.pool), (Pages{2, 3, 4, 5, 6, 7, 1}));
  EXPECT_EQ(n.pool.num_cached_free(), 1);
  EXPECT_EQ(drain(n.pool), (std::vector<Ev>{{K::removed, 0, {n.keys[1]}}}));
  const uint64_t version = n.pool.version();
  EXPECT_EQ(n.pool.evict_names(pages), 0);
  EXPECT_EQ(n.pool.version(), version);
  EXPECT_TRUE(n.pool.events().empty());
}

TEST(Names, EvictingAPinnedPageKeepsItPinnedAndUnnamed) {
  Named n;
  const uint64_t version = n.pool.version();
  const std::vector<int64_t> pages{2};
  EXPECT_EQ(n.pool.evict_names(pages), 1);
  EXPECT_EQ(n.pool.version(), version);  // the queue did not change
  EXPECT_EQ(queue_of(n.pool), (Pages{4, 5, 6, 7}));
  EXPECT_EQ(n.pool.ref_count(2), 1);
  EXPECT_FALSE(n.pool.is_cached(2));
  n.c.free(n.r.ptrs);  // page 2 is unnamed now: the front
  EXPECT_EQ(queue_of(n.pool), (Pages{2, 3, 4, 5, 6, 7, 1}));
  EXPECT_EQ(n.pool.num_cached_free(), 1);
}

TEST(Names, ANameSeveralPagesCarryIsRemovedWithItsLastPage) {
  Named n;
  Request r2(1);
  ASSERT_TRUE(n.c.acquire(r2.ptrs, 12));  // pages 4, 5, 6
  EXPECT_EQ(n.c.cache_full_blocks(r2.ptrs, n.keys, 12), 2);
  EXPECT_TRUE(n.pool.events().empty());
  EXPECT_EQ(n.pool.evict_names(std::vector<int64_t>{1}), 1);
  EXPECT_TRUE(n.pool.events().empty());
  EXPECT_EQ(n.pool.evict_names(std::vector<int64_t>{4, 5}), 2);
  EXPECT_EQ(drain(n.pool), (std::vector<Ev>{{K::removed, 0, {n.keys[0]}}}));
  EXPECT_EQ(n.pool.num_cached(), 1);
  EXPECT_EQ(n.pool.num_names(), 1);
}

TEST(Names, EvictRejectsBadIdsAndChangesNothing) {
  Named n;
  n.c.free(n.r.ptrs);
  for (const std::vector<int64_t>& bad :
       {std::vector<int64_t>{1, 0}, std::vector<int64_t>{1, 8}, std::vector<int64_t>{2, -3}})
    EXPECT_INVALID_UNCHANGED(state_of(n.pool), n.pool.evict_names(bad));
  EXPECT_TRUE(n.pool.events().empty());
  EXPECT_EQ(n.pool.stats().pages_evicted, 0);
}

TEST(Names, WithoutRetentionAnEvictedFreePageStaysInPlace) {
  Named n(false);
  n.c.free(n.r.ptrs);
  EXPECT_EQ(queue_of(n.pool), (Pages{4, 5, 6, 7, 3, 2, 1}));
  EXPECT_EQ(n.pool.evict_names(std::vector<int64_t>{1, 2}), 2);
  EXPECT_EQ(queue_of(n.pool), (Pages{4, 5, 6, 7, 3, 2, 1}));
  // Unnamed, they are reused like any page: an allocation of all evicts nothing.
  Pages out(7);
  ASSERT_TRUE(n.pool.allocate(7, out.data()));
  EXPECT_EQ(out, (Pages{4, 5, 6, 7, 3, 2, 1}));
  EXPECT_EQ(n.pool.stats().pages_evicted, 2);
}

}  // namespace
}  // namespace livetail::testing
