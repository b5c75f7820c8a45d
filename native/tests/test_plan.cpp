// plan.h and Coordinator::plan_step / apply_step (semantics section 9): the longest prefix
// that fits, exact takes and releases, preemption order, stale plans, usage errors.
#include <gtest/gtest.h>

#include "helpers.h"

namespace livetail::testing {
namespace {

std::vector<BlockTable*> all_of(std::initializer_list<Request*> requests) {
  std::vector<BlockTable*> out;
  for (Request* r : requests) out.insert(out.end(), r->ptrs.begin(), r->ptrs.end());
  return out;
}

TEST(Plan, StepsTheLongestPrefixThatFitsAndChangesNothing) {
  BlockPool pool(6);
  Coordinator c({GroupSpec(GroupKind::full, 4)}, pool);
  Request a(1), b(1);
  ASSERT_TRUE(c.acquire(a.ptrs, 8));  // pages 1, 2
  ASSERT_TRUE(c.acquire(b.ptrs, 8));  // pages 3, 4
  const auto tables = all_of({&a, &b});
  const World before = state_of(pool, tables);
  const uint64_t version = pool.version();
  const StepPlan plan = c.plan_step(tables, std::vector<int64_t>{4, 4});
  EXPECT_EQ(state_of(pool, tables), before);
  EXPECT_EQ(pool.version(), version);
  // Both need a page and one is free: a steps once b's two pages come back.
  EXPECT_EQ(plan.num_requests(), 2);
  EXPECT_EQ(plan.stepped(), 1);
  EXPECT_EQ(plan.preempted(), 1);
  EXPECT_EQ(plan.pages_taken(), 1);
  EXPECT_EQ(plan.pages_released(), 2);
  EXPECT_EQ(plan.free_after(), 2);
  EXPECT_TRUE(plan.top_fits());
  EXPECT_FALSE(plan.applied());
}

TEST(Plan, ApplyFreesThePreemptedLowestPriorityFirstThenAcquiresInOrder) {
  BlockPool pool(7);
  Coordinator c({GroupSpec(GroupKind::full, 4)}, pool);
  Request a(1), b(1), d(1);
  ASSERT_TRUE(c.acquire(a.ptrs, 4));  // page 1
  ASSERT_TRUE(c.acquire(b.ptrs, 8));  // pages 2, 3
  ASSERT_TRUE(c.acquire(d.ptrs, 8));  // pages 4, 5
  StepPlan plan = c.plan_step(all_of({&a, &b, &d}), std::vector<int64_t>{16, 0, 0});
  EXPECT_EQ(plan.stepped(), 1);
  EXPECT_EQ(plan.pages_taken(), 4);
  EXPECT_EQ(plan.pages_released(), 4);
  EXPECT_EQ(plan.free_after(), 1);
  c.apply_step(plan);
  EXPECT_TRUE(plan.applied());
  // d freed first (5, 4 to the front), then b (3, 2): the queue was [2, 3, 4, 5, 6].
  EXPECT_EQ(slots_of(a[0]), (Pages{1, 2, 3, 4, 5}));
  EXPECT_EQ(a[0].extent(), 20);
  EXPECT_TRUE(b[0].is_fresh());
  EXPECT_TRUE(d[0].is_fresh());
  EXPECT_EQ(queue_of(pool), (Pages{6}));
  EXPECT_EQ(pool.num_free(), plan.free_after());
}

TEST(Plan, TopRequestThatCannotFitAloneIsFlagged) {
  BlockPool pool(3);
  Coordinator c({GroupSpec(GroupKind::full, 4)}, pool);
  Request a(1);
  StepPlan plan = c.plan_step(a.ptrs, std::vector<int64_t>{12});
  EXPECT_EQ(plan.stepped(), 0);
  EXPECT_EQ(plan.preempted(), 1);
  EXPECT_FALSE(plan.top_fits());
  EXPECT_EQ(plan.pages_taken(), 0);
  EXPECT_EQ(plan.pages_released(), 0);
  EXPECT_EQ(plan.free_after(), 2);
  c.apply_step(plan);
  EXPECT_TRUE(a[0].is_fresh());
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(Plan, ASharedPageIsReleasedOnlyWhenEveryHolderIsPreempted) {
  BlockPool pool(6);
  Coordinator c({GroupSpec(GroupKind::full, 2)}, pool);
  Request x(1), y(1), z(1);
  const auto keys = page_keys(std::vector<uint32_t>{1, 2, 3, 4}, 2);
  ASSERT_TRUE(c.acquire(x.ptrs, 4));  // pages 1, 2
  ASSERT_EQ(c.cache_full_blocks(x.ptrs, keys, 4), 2);
  c.claim(y.ptrs, c.match_prefix(keys));  // y shares 1, 2
  ASSERT_TRUE(c.acquire(z.ptrs, 4));      // pages 3, 4; page 5 is free
  // z needs 2 pages: preempting y alone releases nothing (x still holds 1 and 2).
  const StepPlan alone = c.plan_step(all_of({&z, &y}), std::vector<int64_t>{4, 0});
  EXPECT_EQ(alone.stepped(), 0);
  EXPECT_EQ(alone.pages_released(), 2);  // z's own pages 3 and 4, not the shared ones
  EXPECT_EQ(alone.free_after(), 3);
  EXPECT_FALSE(alone.top_fits());
  StepPlan both = c.plan_step(all_of({&z, &y, &x}), std::vector<int64_t>{4, 0, 0});
  EXPECT_EQ(both.stepped(), 1);
  EXPECT_EQ(both.pages_released(), 2);
  EXPECT_EQ(both.pages_taken(), 2);
  EXPECT_EQ(both.free_after(), 1);
  c.apply_step(both);
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(z[0].size(), 4);
}

TEST(Plan, StaleReusedOrForeignPlansThrowAndChangeNothing) {
  BlockPool pool(10), other_pool(10);
  Coordinator c({GroupSpec(GroupKind::full, 4)}, pool);
  Coordinator other({GroupSpec(GroupKind::full, 4)}, other_pool);
  Request a(1), b(1);
  ASSERT_TRUE(c.acquire(a.ptrs, 3));  // tail room 1
  auto observe = [&] { return state_of(pool, {&a[0], &b[0]}); };
  StepPlan applied = c.plan_step(a.ptrs, std::vector<int64_t>{4});
  c.apply_step(applied);
  EXPECT_INVALID_UNCHANGED(observe(), c.apply_step(applied));  // applied once
  StepPlan stale = c.plan_step(a.ptrs, std::vector<int64_t>{4});
  Pages out(1);
  ASSERT_TRUE(pool.allocate(1, out.data()));
  EXPECT_INVALID_UNCHANGED(observe(), c.apply_step(stale));  // the pool changed
  StepPlan shape = c.plan_step(a.ptrs, std::vector<int64_t>{4});
  ASSERT_TRUE(c.managers()[0].acquire(pool, a[0], 1));       // fills tail room: no pool change
  EXPECT_INVALID_UNCHANGED(observe(), c.apply_step(shape));  // the table changed
  StepPlan foreign = other.plan_step(b.ptrs, std::vector<int64_t>{4});
  EXPECT_INVALID_UNCHANGED(observe(), c.apply_step(foreign));
}

TEST(Plan, PlanStepRejectsBadRequestsAndChangesNothing) {
  BlockPool pool(10), other_pool(10);
  Coordinator c({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::state, 2)}, pool);
  Request a(2), b(2), elsewhere(2);
  ASSERT_TRUE(c.acquire(a.ptrs, 4));
  ASSERT_TRUE(c.managers()[0].acquire(other_pool, elsewhere[0], 4));
  auto observe = [&] { return state_of(pool, {&a[0], &a[1], &b[0], &b[1]}); };
  const auto ab = all_of({&a, &b});
  EXPECT_INVALID_UNCHANGED(observe(), c.plan_step(ab, std::vector<int64_t>{1}));
  EXPECT_INVALID_UNCHANGED(observe(), c.plan_step(ab, std::vector<int64_t>{1, -1}));
  EXPECT_INVALID_UNCHANGED(observe(), c.plan_step(ab, std::vector<int64_t>{1, int64_t{1} << 40}));
  EXPECT_INVALID_UNCHANGED(observe(), c.plan_step(all_of({&a, &a}), std::vector<int64_t>{1, 1}));
  EXPECT_INVALID_UNCHANGED(observe(),
                           c.plan_step(all_of({&a, &elsewhere}), std::vector<int64_t>{1, 1}));
  const std::vector<BlockTable*> null{&a[0], nullptr};
  EXPECT_INVALID_UNCHANGED(observe(), c.plan_step(null, std::vector<int64_t>{1}));
  const StepPlan empty = c.plan_step({}, {});
  EXPECT_EQ(empty.num_requests(), 0);
  EXPECT_TRUE(empty.top_fits());
  EXPECT_EQ(empty.free_after(), pool.num_free());
}

}  // namespace
}  // namespace livetail::testing
