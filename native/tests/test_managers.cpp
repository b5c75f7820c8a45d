// table.h and managers.h (semantics sections 3 and 5): table shape, acquire, the queries,
// reclaim, free, the unchecked paths the coordinator uses, and every usage error.
#include <gtest/gtest.h>

#include "helpers.h"

namespace livetail::testing {
namespace {

constexpr int64_t kInt32Max = 2147483647;

TEST(Table, FreshTableIsEmptyAndUnbound) {
  BlockTable t;
  EXPECT_EQ(t.size(), 0);
  EXPECT_TRUE(t.page_ids().empty());
  EXPECT_EQ(t.tail_available(), 0);
  EXPECT_EQ(t.reclaim_floor(), 0);
  EXPECT_EQ(t.num_real_pages(), 0);
  EXPECT_EQ(t.extent(), 0);
  EXPECT_FALSE(t.is_bound());
  EXPECT_EQ(t.pool(), nullptr);
  EXPECT_EQ(t.block_size(), 0);
  EXPECT_TRUE(t.is_fresh());
  EXPECT_EQ(t.named_upto(), 0);
}

TEST(Table, MoveTransfersSlotsAndBindingAndLeavesTheSourceFresh) {
  BlockPool pool(10);
  FullAttentionManager m(4);
  BlockTable a;
  ASSERT_TRUE(m.acquire(pool, a, 10));
  BlockTable b(std::move(a));
  EXPECT_TRUE(a.is_fresh());
  EXPECT_EQ(a.tail_available(), 0);
  EXPECT_EQ(slots_of(b), (Pages{1, 2, 3}));
  EXPECT_EQ(b.tail_available(), 2);
  EXPECT_EQ(b.pool(), &pool);
  EXPECT_EQ(b.block_size(), 4);
  EXPECT_EQ(m.free(pool, b), 3);
  EXPECT_EQ(pool.num_free(), 9);
}

TEST(Managers, KindsNameAndParse) {
  EXPECT_STREQ(kind_name(GroupKind::full), "full");
  EXPECT_STREQ(kind_name(GroupKind::sliding), "sliding");
  EXPECT_STREQ(kind_name(GroupKind::state), "state");
  EXPECT_EQ(parse_kind("full"), GroupKind::full);
  EXPECT_EQ(parse_kind("sliding"), GroupKind::sliding);
  EXPECT_EQ(parse_kind("state"), GroupKind::state);
  EXPECT_THROW(parse_kind("Full"), std::invalid_argument);
  EXPECT_THROW(parse_kind(""), std::invalid_argument);
}

TEST(Managers, AccessorsReportTheGeometry) {
  const FullAttentionManager full(4);
  EXPECT_EQ(full.kind(), GroupKind::full);
  EXPECT_EQ(full.block_size(), 4);
  EXPECT_EQ(full.sliding_window(), 0);
  EXPECT_EQ(full.live_alloc_alignment(), 0);
  const SlidingWindowManager sliding(8, 12, 256);
  EXPECT_EQ(sliding.kind(), GroupKind::sliding);
  EXPECT_EQ(sliding.sliding_window(), 12);
  EXPECT_EQ(sliding.live_alloc_alignment(), 256);
  const StateManager state(4);
  EXPECT_EQ(state.kind(), GroupKind::state);
  EXPECT_EQ(state.sliding_window(), 2);
  EXPECT_EQ(state.live_alloc_alignment(), 0);
}

TEST(Managers, ConstructorsRejectGeometryOutOfRange) {
  EXPECT_THROW(FullAttentionManager(0), std::invalid_argument);
  EXPECT_THROW(FullAttentionManager(kInt32Max + 1), std::invalid_argument);
  EXPECT_THROW(SlidingWindowManager(4, 0), std::invalid_argument);
  EXPECT_THROW(SlidingWindowManager(4, kInt32Max + 1), std::invalid_argument);
  EXPECT_THROW(SlidingWindowManager(4, 8, 6), std::invalid_argument);  // not a multiple of B
  EXPECT_THROW(SlidingWindowManager(4, 8, -4), std::invalid_argument);
  EXPECT_THROW(StateManager(-1), std::invalid_argument);
}

TEST(Managers, FullAcquireAppendsRealSlotsAndTracksTailRoom) {
  BlockPool pool(10);
  const FullAttentionManager m(4);
  BlockTable t;
  EXPECT_EQ(m.blocks_needed_for(t, 10), 3);
  ASSERT_TRUE(m.acquire(pool, t, 10));
  EXPECT_EQ(slots_of(t), (Pages{1, 2, 3}));
  EXPECT_EQ(t.tail_available(), 2);
  EXPECT_EQ(t.extent(), 10);
  EXPECT_EQ(t.num_real_pages(), 3);
  EXPECT_TRUE(t.is_bound());
  EXPECT_EQ(t.pool(), &pool);
  EXPECT_EQ(t.block_size(), 4);
  EXPECT_EQ(m.blocks_needed_for(t, 2), 0);
  ASSERT_TRUE(m.acquire(pool, t, 2));  // tail room: no page
  EXPECT_EQ(slots_of(t), (Pages{1, 2, 3}));
  EXPECT_EQ(t.tail_available(), 0);
  ASSERT_TRUE(m.acquire(pool, t, 1));
  EXPECT_EQ(slots_of(t), (Pages{1, 2, 3, 4}));
  EXPECT_EQ(t.tail_available(), 3);
  EXPECT_EQ(queue_of(pool), (Pages{5, 6, 7, 8, 9}));
}

TEST(Managers, AcquireOfZeroTokensSucceedsAndBindsNothing) {
  BlockPool pool(4);
  const FullAttentionManager m(4);
  BlockTable t;
  EXPECT_TRUE(m.acquire(pool, t, 0));
  EXPECT_TRUE(t.is_fresh());
  EXPECT_EQ(pool.num_free(), 3);
}

TEST(Managers, ReferenceChunkGetsRealPagesOnlyOnResumeSlotsAndTheTail) {
  BlockPool pool(100);
  const SlidingWindowManager m(8, 12, 256);
  BlockTable t;
  EXPECT_EQ(m.blocks_needed_for(t, 8192), 64);
  ASSERT_TRUE(m.acquire(pool, t, 8192));
  ASSERT_EQ(t.size(), 1024);
  EXPECT_EQ(t.num_real_pages(), 64);
  EXPECT_EQ(t.tail_available(), 0);
  Pages expected(1024, 0);
  int32_t next = 1;
  for (size_t s = 0; s < 1024; ++s)
    if (s % 32 >= 30 || s >= 1022) expected[s] = next++;
  EXPECT_EQ(slots_of(t), expected);
  EXPECT_EQ(pool.num_free(), 99 - 64);
}

TEST(Managers, SequentialChargeExceedsTheCombinedOneForLiveTail) {
  BlockPool pool(10);
  const SlidingWindowManager m(8, 12, 256);
  BlockTable t;
  EXPECT_EQ(m.blocks_needed_for(t, 17), 3);
  EXPECT_EQ(m.blocks_needed_for(t, 19), 2);
  EXPECT_EQ(m.blocks_needed_for_sequential(t, 17, 2), 3);
  EXPECT_EQ(m.blocks_needed_for_sequential(t, 0, 19), 2);
  EXPECT_EQ(m.blocks_needed_for_sequential(t, 19, 0), 2);
  ASSERT_TRUE(m.acquire(pool, t, 17));
  EXPECT_EQ(slots_of(t), (Pages{1, 2, 3}));
  ASSERT_TRUE(m.acquire(pool, t, 2));
  EXPECT_EQ(pool.num_pinned(), 3);  // what the sequential charge said
  const FullAttentionManager full(8);
  BlockTable u;
  EXPECT_EQ(full.blocks_needed_for_sequential(u, 17, 2), full.blocks_needed_for(u, 19));
}

TEST(Managers, WindowOfOneChunkEndingOnABoundaryIsAllHoles) {
  BlockPool pool(4);
  const SlidingWindowManager m(8, 1, 16);
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 16));
  EXPECT_EQ(slots_of(t), (Pages{0, 0}));
  EXPECT_TRUE(t.is_bound());
  EXPECT_EQ(t.extent(), 16);
  EXPECT_EQ(pool.num_free(), 3);
  ASSERT_TRUE(m.acquire(pool, t, 3));
  EXPECT_EQ(slots_of(t), (Pages{0, 0, 1}));
}

TEST(Managers, AcquireShortfallChangesNothingAndBindsNothing) {
  BlockPool pool(3);
  const FullAttentionManager m(4);
  BlockTable t;
  const World before = state_of(pool, {&t});
  EXPECT_FALSE(m.acquire(pool, t, 12));
  EXPECT_EQ(state_of(pool, {&t}), before);
  EXPECT_TRUE(t.is_fresh());
}

TEST(Managers, ReclaimPunchesSlidOutPagesOnceInAscendingOrder) {
  BlockPool pool(20);
  const SlidingWindowManager m(4, 6);
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 20));
  EXPECT_EQ(m.blocks_reclaimable_at(t, 20), 3);         // slid_out(20) = 15 // 4
  EXPECT_EQ(m.blocks_reclaimable_at(t, 20, false), 0);  // no page is named
  EXPECT_EQ(m.reclaim_expired(pool, t, 20), 3);
  EXPECT_EQ(slots_of(t), (Pages{0, 0, 0, 4, 5}));
  EXPECT_EQ(t.reclaim_floor(), 3);
  EXPECT_EQ(t.num_real_pages(), 2);
  // Released 1, 2, 3 (the batch [3, 2, 1] freed in reverse).
  EXPECT_EQ(queue_of(pool), concat({{3, 2, 1}, iota(6, 20)}));
  EXPECT_EQ(m.reclaim_expired(pool, t, 20), 0);  // a repeat frees nothing
  EXPECT_EQ(m.reclaim_expired(pool, t, 5), 0);   // behind the floor
  EXPECT_EQ(t.reclaim_floor(), 3);
}

TEST(Managers, ReclaimScansPastHolesAndKeepsOnlyTheWindow) {
  BlockPool pool(100);
  const SlidingWindowManager m(8, 12, 256);
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 8192));
  EXPECT_EQ(m.blocks_reclaimable_at(t, 8192), 62);
  EXPECT_EQ(m.reclaim_expired(pool, t, 8192), 62);
  Pages expected(1024, 0);
  expected[1022] = 63;
  expected[1023] = 64;
  EXPECT_EQ(slots_of(t), expected);
  EXPECT_EQ(t.reclaim_floor(), 1022);
  EXPECT_EQ(t.num_real_pages(), 2);
  EXPECT_EQ(pool.num_free(), 97);
}

TEST(Managers, StateKeepsOnlyItsLastPageOnceReclaimed) {
  BlockPool pool(10);
  const StateManager m(4);
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 10));
  EXPECT_EQ(slots_of(t), (Pages{1, 2, 3}));  // allocated like a plain sliding group
  EXPECT_EQ(m.reclaim_expired(pool, t, 10), 2);
  EXPECT_EQ(slots_of(t), (Pages{0, 0, 3}));
}

TEST(Managers, FullGroupsReclaimNothingAndKeepTheirFloor) {
  BlockPool pool(10);
  const FullAttentionManager m(4);
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 16));
  EXPECT_EQ(m.blocks_reclaimable_at(t, 16), 0);
  EXPECT_EQ(m.reclaim_expired(pool, t, 16), 0);
  EXPECT_EQ(t.reclaim_floor(), 0);
  EXPECT_EQ(slots_of(t), (Pages{1, 2, 3, 4}));
}

TEST(Managers, FreeReleasesEverySlotLastSlotFirstAndEmptiesTheTable) {
  BlockPool pool(10);
  const FullAttentionManager m(4);
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 10));
  EXPECT_EQ(m.free(pool, t), 3);
  EXPECT_TRUE(t.is_fresh());
  EXPECT_EQ(t.tail_available(), 0);
  EXPECT_EQ(t.reclaim_floor(), 0);
  EXPECT_EQ(t.block_size(), 0);
  EXPECT_EQ(queue_of(pool), concat({{1, 2, 3}, iota(4, 10)}));
  EXPECT_EQ(m.free(pool, t), 0);  // unbound: nothing to give back
}

TEST(Managers, FreeAfterReclaimSkipsTheHolesBelowTheFloor) {
  BlockPool pool(100);
  const SlidingWindowManager m(2, 3, 32);  // 16 slots per period, R = 1
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 80));  // 40 slots: 15, 31 (resume pages) and 39 real
  Pages expected(40, 0);
  expected[15] = 1;
  expected[31] = 2;
  expected[39] = 3;
  EXPECT_EQ(slots_of(t), expected);
  EXPECT_EQ(m.reclaim_expired(pool, t, 40), 1);  // slid_out(40) = 19: slot 15
  EXPECT_EQ(t.reclaim_floor(), 19);
  EXPECT_EQ(m.free(pool, t), 2);
  // Reclaim released 1; free released the batch [2, 3] in reverse: 3, then 2.
  EXPECT_EQ(queue_of(pool), concat({{2, 3, 1}, iota(4, 100)}));
}

TEST(Managers, UncheckedPathsAgreeWithTheCheckedOnes) {
  BlockPool pool(40);
  const SlidingWindowManager m(8, 12, 256);
  BlockTable t;
  EXPECT_EQ(m.needed_unchecked(t, 300), 4);  // slots 30, 31 (resume), 36, 37 (window)
  EXPECT_EQ(m.blocks_needed_for(t, 300), 4);
  m.reserve_unchecked(t, 300);
  m.acquire_unchecked(pool, t, 300);
  EXPECT_EQ(t.size(), 38);
  EXPECT_EQ(t.num_real_pages(), 4);
  EXPECT_EQ(t.tail_available(), 4);
  EXPECT_EQ(m.reclaim_unchecked(pool, t, 300), 2);  // slid_out(300) = 36
  EXPECT_EQ(m.free_unchecked(pool, t), 2);
  EXPECT_TRUE(t.is_fresh());
  EXPECT_EQ(pool.num_free(), 39);
}

TEST(Managers, ChecksThrowForEachKindOfBadArgument) {
  BlockPool pool(10), other(10);
  const FullAttentionManager m(4);
  BlockTable t;
  ASSERT_TRUE(m.acquire(pool, t, 5));
  EXPECT_THROW(Manager::check_count(-1, "n"), std::invalid_argument);
  EXPECT_NO_THROW(Manager::check_count(0, "n"));
  EXPECT_THROW(m.check_table(&other, t), std::invalid_argument);
  EXPECT_NO_THROW(m.check_table(nullptr, t));
  EXPECT_THROW(FullAttentionManager(8).check_table(nullptr, t), std::invalid_argument);
  EXPECT_THROW(m.check_frontier(t, 6), std::invalid_argument);
  EXPECT_NO_THROW(m.check_frontier(t, 5));
  EXPECT_THROW(m.check_fits(0, 0, kInt32Max, "n"), std::invalid_argument);
  EXPECT_NO_THROW(m.check_fits(0, 0, kInt32Max - 3, "n"));
}

TEST(Managers, EveryUsageErrorThrowsAndChangesNothing) {
  BlockPool pool(10), other(10);
  const FullAttentionManager m(4);
  const SlidingWindowManager s(1, 4);
  BlockTable t, u;
  ASSERT_TRUE(m.acquire(pool, t, 5));
  ASSERT_TRUE(s.acquire(pool, u, 1));
  auto observe = [&] { return state_of(pool, {&t, &u}); };
  EXPECT_INVALID_UNCHANGED(observe(), m.acquire(pool, t, -1));
  EXPECT_INVALID_UNCHANGED(observe(), s.acquire(pool, u, kInt32Max));  // 1 + 2**31 - 1 slots
  EXPECT_INVALID_UNCHANGED(observe(), m.acquire(other, t, 1));         // bound elsewhere
  EXPECT_INVALID_UNCHANGED(observe(), m.acquire(other, t, 0));         // checked even for 0
  EXPECT_INVALID_UNCHANGED(observe(), FullAttentionManager(8).acquire(pool, t, 4));
  EXPECT_INVALID_UNCHANGED(observe(), m.blocks_needed_for(t, -1));
  EXPECT_INVALID_UNCHANGED(observe(), s.blocks_needed_for(u, kInt32Max));
  EXPECT_INVALID_UNCHANGED(observe(), m.blocks_needed_for_sequential(t, -1, 0));
  EXPECT_INVALID_UNCHANGED(observe(), m.blocks_needed_for_sequential(t, 0, -1));
  EXPECT_INVALID_UNCHANGED(observe(), s.blocks_needed_for_sequential(u, 10, kInt32Max - 10));
  EXPECT_INVALID_UNCHANGED(observe(), m.reclaim_expired(pool, t, 6));  // above the extent
  EXPECT_INVALID_UNCHANGED(observe(), m.reclaim_expired(pool, t, -1));
  EXPECT_INVALID_UNCHANGED(observe(), m.reclaim_expired(other, t, 0));
  EXPECT_INVALID_UNCHANGED(observe(), m.blocks_reclaimable_at(t, 6));
  EXPECT_INVALID_UNCHANGED(observe(), m.free(other, t));
  EXPECT_INVALID_UNCHANGED(observe(), FullAttentionManager(2).free(pool, t));
}

}  // namespace
}  // namespace livetail::testing
