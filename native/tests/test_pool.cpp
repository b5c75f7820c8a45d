// pool.h (semantics section 2): queue order, all-or-nothing allocation, batch release order,
// reference counts, and every usage error leaving the pool unchanged.
#include <gtest/gtest.h>

#include "helpers.h"
#include "livetail/pool.h"

namespace livetail::testing {
namespace {

TEST(Pool, NewPoolQueuesEveryPageButTheNullPageInIdOrder) {
  BlockPool pool(6);
  EXPECT_EQ(pool.num_blocks(), 6);
  EXPECT_EQ(pool.num_free(), 5);
  EXPECT_EQ(pool.num_pinned(), 0);
  EXPECT_EQ(queue_of(pool), (Pages{1, 2, 3, 4, 5}));
  EXPECT_EQ(refs_of(pool), (Pages{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_EQ(pool.num_cached_free(), 0);
  EXPECT_FALSE(pool.is_cached(0));
  EXPECT_FALSE(pool.is_cached(-1));
  EXPECT_FALSE(pool.is_cached(6));
}

TEST(Pool, PoolOfOneHasOnlyTheNullPage) {
  BlockPool pool(1);
  EXPECT_EQ(pool.num_free(), 0);
  int32_t out[1] = {-7};
  EXPECT_FALSE(pool.allocate(1, out));
  EXPECT_EQ(out[0], -7);
  EXPECT_TRUE(pool.allocate(0, out));
  EXPECT_THROW(static_cast<void>(pool.allocate(-1, out)), std::invalid_argument);
  EXPECT_EQ(out[0], -7);
  EXPECT_EQ(pool.ref_count(0), 0);
}

TEST(Pool, AllocateTakesTheQueueFrontInOrderWithCountOne) {
  BlockPool pool(6);
  Pages out(3);
  ASSERT_TRUE(pool.allocate(3, out.data()));
  EXPECT_EQ(out, (Pages{1, 2, 3}));
  EXPECT_EQ(queue_of(pool), (Pages{4, 5}));
  EXPECT_EQ(refs_of(pool), (Pages{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(pool.num_free() + pool.num_pinned(), 5);
  EXPECT_EQ(pool.num_pinned(), 3);
}

TEST(Pool, AllocateShortfallChangesNothing) {
  BlockPool pool(6);
  Pages out(6, -1);
  const PoolState before = state_of(pool);
  EXPECT_FALSE(pool.allocate(6, out.data()));
  EXPECT_EQ(state_of(pool), before);
  EXPECT_EQ(out, Pages(6, -1));
}

TEST(Pool, FreeReleasesTheBatchLastPageFirst) {
  BlockPool pool(6);
  Pages out(5);
  ASSERT_TRUE(pool.allocate(5, out.data()));
  const Pages batch{2, 4, 1};
  EXPECT_EQ(pool.free(batch), 3);
  // Released 1, then 4, then 2.
  EXPECT_EQ(queue_of(pool), (Pages{2, 4, 1}));
  EXPECT_EQ(refs_of(pool), (Pages{0, 0, 0, 1, 0, 1}));
}

TEST(Pool, FreedPagesJoinAQueueThatStillHoldsPages) {
  BlockPool pool(8);
  Pages out(4);
  ASSERT_TRUE(pool.allocate(4, out.data()));
  EXPECT_EQ(pool.free(Pages{1, 2}), 2);
  EXPECT_EQ(queue_of(pool), (Pages{1, 2, 5, 6, 7}));
  // The next allocation takes the front.
  Pages again(2);
  ASSERT_TRUE(pool.allocate(2, again.data()));
  EXPECT_EQ(again, (Pages{1, 2}));
}

TEST(Pool, WithoutRetentionEveryFreedPageJoinsTheBack) {
  BlockPool pool(8, false);
  EXPECT_FALSE(pool.retention());
  EXPECT_TRUE(BlockPool(2).retention());  // on by default
  Pages out(4);
  ASSERT_TRUE(pool.allocate(4, out.data()));
  EXPECT_EQ(pool.free(Pages{2, 4, 1}), 3);
  EXPECT_EQ(queue_of(pool), (Pages{5, 6, 7, 1, 4, 2}));
}

TEST(Pool, VersionGrowsWithEveryChangeAndOnlyThen) {
  BlockPool pool(6);
  Pages out(5);
  const uint64_t v0 = pool.version();
  ASSERT_FALSE(pool.allocate(6, out.data()));
  ASSERT_TRUE(pool.allocate(0, out.data()));
  static_cast<void>(queue_of(pool));
  EXPECT_EQ(pool.version(), v0);
  ASSERT_TRUE(pool.allocate(2, out.data()));
  const uint64_t v1 = pool.version();
  EXPECT_GT(v1, v0);
  EXPECT_THROW(pool.free(Pages{1, 1}), std::invalid_argument);
  EXPECT_EQ(pool.version(), v1);
  EXPECT_EQ(pool.free(Pages{1}), 1);
  EXPECT_GT(pool.version(), v1);
}

TEST(Pool, UncheckedTakeAndReleaseFollowTheSameQueue) {
  BlockPool pool(4);
  int32_t out[2];
  pool.take(2, out);
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 2);
  EXPECT_TRUE(pool.release(2));
  EXPECT_EQ(queue_of(pool), (Pages{2, 3}));
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(Pool, ConstructorRejectsSizesOutsideOneToInt32Max) {
  EXPECT_THROW(BlockPool(0), std::invalid_argument);
  EXPECT_THROW(BlockPool(-5), std::invalid_argument);
  EXPECT_THROW(BlockPool(int64_t{1} << 31), std::invalid_argument);
}

TEST(Pool, RefCountRejectsPagesOutsideThePool) {
  BlockPool pool(4);
  EXPECT_THROW(static_cast<void>(pool.ref_count(-1)), std::invalid_argument);
  EXPECT_THROW(static_cast<void>(pool.ref_count(4)), std::invalid_argument);
  EXPECT_EQ(pool.ref_count(3), 0);
}

TEST(Pool, AllocateRejectsANegativeCount) {
  BlockPool pool(4);
  EXPECT_INVALID_UNCHANGED(state_of(pool), pool.allocate(-1, nullptr));
}

TEST(Pool, FreeOfABadBatchChangesNothing) {
  BlockPool pool(6);
  Pages out(3);
  ASSERT_TRUE(pool.allocate(3, out.data()));
  EXPECT_INVALID_UNCHANGED(state_of(pool), pool.free(Pages{1, 0}));        // the null page
  EXPECT_INVALID_UNCHANGED(state_of(pool), pool.free(Pages{2, 6}));        // out of range
  EXPECT_INVALID_UNCHANGED(state_of(pool), pool.free(Pages{-1}));          // out of range
  EXPECT_INVALID_UNCHANGED(state_of(pool), pool.free(Pages{4}));           // queued: count 0
  EXPECT_INVALID_UNCHANGED(state_of(pool), pool.free(Pages{3, 1, 2, 1}));  // 1 released twice
  EXPECT_EQ(refs_of(pool), (Pages{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(pool.free(Pages{}), 0);
}

}  // namespace
}  // namespace livetail::testing
