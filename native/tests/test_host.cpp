// host.h and the coordinator's host tier (semantics section 10): offload plans, the match
// across tiers, claim with loads, load completion, loads aborted by free, usage errors.
// The worked sequence of tests/test_host.py: groups {full B=4; sliding B=2 W=3 live tail},
// lcm 4, R = 1; device pool 20 pages, host pool 10; request A acquires 16 tokens.
#include <gtest/gtest.h>

#include <optional>

#include "helpers.h"

namespace livetail::testing {
namespace {

std::vector<Key> keys16() {
  std::vector<uint32_t> t(16);
  for (uint32_t i = 0; i < 16; ++i) t[i] = i;
  return page_keys(t, 2);
}

Pages span_of(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

struct Worked {
  BlockPool pool{20, true, true};
  HostPool host{10, true};
  Coordinator c{
      {GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true)}, pool, &host};
  std::vector<Key> keys = keys16();
  BlockTable a0, a1;
  std::vector<BlockTable*> a{&a0, &a1};

  Worked() {
    EXPECT_TRUE(c.acquire(a, 16));
    EXPECT_EQ(c.cache_full_blocks(a, keys, 16), 8);
  }
  // A offloaded and freed, then request C (32 tokens) evicts device pages 4, 3, 2, 1, 8.
  void offload_free_and_evict(BlockTable& c0, BlockTable& c1) {
    std::optional<OffloadPlan> plan = c.plan_offload(a, 16);
    c.complete_offload(*plan);
    c.free(a);
    std::vector<BlockTable*> tc{&c0, &c1};
    EXPECT_TRUE(c.acquire(tc, 32));
    EXPECT_EQ(queue_of(pool), (Pages{7, 6, 5}));
  }
};

TEST(HostTier, OffloadPlansTheReachableNamedPagesAndHoldsTheDevicePages) {
  Worked s;
  std::optional<OffloadPlan> plan = s.c.plan_offload(s.a, 16);
  ASSERT_TRUE(plan);
  EXPECT_EQ(span_of(plan->groups()), (Pages{0, 0, 0, 0, 1, 1, 1, 1}));
  EXPECT_EQ(span_of(plan->slots()), (Pages{0, 1, 2, 3, 1, 3, 5, 7}));
  EXPECT_EQ(span_of(plan->device_pages()), iota(1, 9));
  EXPECT_EQ(span_of(plan->host_pages()), iota(1, 9));
  EXPECT_EQ(refs_of(s.pool)[1], 2);
  s.c.complete_offload(*plan);
  EXPECT_EQ(queue_of(s.host), (Pages{9, 8, 7, 6, 5, 4, 3, 2, 1}));
  EXPECT_EQ(s.host.num_cached(), 8);
  EXPECT_EQ(s.host.pages_offloaded(), 8);
  EXPECT_EQ(refs_of(s.pool)[1], 1);
  EXPECT_EQ(s.c.plan_offload(s.a, 16)->num_pages(), 0);  // the host holds every name now
}

TEST(HostTier, OffloadShortOfHostPagesChangesNothing) {
  BlockPool pool(20);
  HostPool host(8);
  Coordinator c({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true)}, pool,
                &host);
  BlockTable t0, t1;
  std::vector<BlockTable*> a{&t0, &t1};
  ASSERT_TRUE(c.acquire(a, 16));
  c.cache_full_blocks(a, keys16(), 16);
  const World before = state_of(pool, {&t0, &t1});
  const PoolState host_before = state_of(host);
  EXPECT_FALSE(c.plan_offload(a, 16));
  EXPECT_EQ(state_of(pool, {&t0, &t1}), before);
  EXPECT_EQ(state_of(host), host_before);
}

TEST(HostTier, AbortOffloadReturnsHostPagesUnnamedToTheFront) {
  Worked s;
  std::optional<OffloadPlan> plan = s.c.plan_offload(s.a, 16);
  s.c.abort_offload(*plan);
  EXPECT_EQ(queue_of(s.host), iota(1, 10));
  EXPECT_EQ(s.host.num_cached(), 0);
  EXPECT_EQ(plan->state(), PlanState::aborted);
  EXPECT_THROW(s.c.complete_offload(*plan), std::invalid_argument);
  EXPECT_THROW(s.c.abort_offload(*plan), std::invalid_argument);
}

TEST(HostTier, MatchPrefersDeviceCopiesAndClaimLoadsIntoRealSlots) {
  Worked s;
  BlockTable c0, c1;
  s.offload_free_and_evict(c0, c1);
  const PrefixMatch m12 = s.c.match_prefix(std::span(s.keys).first(6));
  EXPECT_EQ(m12.num_tokens(), 12);
  EXPECT_EQ(span_of(m12.pages(1)), (Pages{0, 0, 0, 0, 0, 7}));
  EXPECT_EQ(span_of(m12.host_pages(0)), (Pages{1, 2, 3}));
  const PrefixMatch m = s.c.match_prefix(s.keys);
  EXPECT_EQ(span_of(m.host_pages(1)), (Pages{0, 0, 0, 0, 0, 0, 0, 8}));
  EXPECT_EQ(s.c.blocks_consumed_by_claim(m), 5);
  BlockTable d0, d1;
  std::vector<BlockTable*> d{&d0, &d1};
  const World before = state_of(s.pool, {&d0, &d1});
  EXPECT_THROW(s.c.claim(d, m), std::invalid_argument);  // 5 needed, 3 free
  EXPECT_EQ(state_of(s.pool, {&d0, &d1}), before);
  std::vector<BlockTable*> tc{&c0, &c1};
  s.c.free(tc);
  std::optional<LoadPlan> load = s.c.claim(d, m);
  ASSERT_TRUE(load);
  EXPECT_EQ(span_of(load->host_pages()), (Pages{1, 2, 3, 4, 8}));
  EXPECT_EQ(span_of(load->device_pages()), (Pages{17, 18, 19, 4, 3}));
  EXPECT_EQ(slots_of(d0), (Pages{17, 18, 19, 4}));
  EXPECT_EQ(slots_of(d1), (Pages{0, 0, 0, 0, 0, 0, 0, 3}));
  EXPECT_TRUE(d0.has_pending_load());
  EXPECT_EQ(refs_of(s.host), (Pages{0, 1, 1, 1, 1, 0, 0, 0, 1, 0}));
  EXPECT_THROW(s.c.reclaim_expired(d, 16), std::invalid_argument);
  s.c.complete_load(*load);
  EXPECT_EQ(s.c.load_state(*load), PlanState::completed);
  EXPECT_FALSE(d0.has_pending_load());
  EXPECT_EQ(queue_of(s.host), (Pages{9, 7, 6, 5, 8, 4, 3, 2, 1}));
  EXPECT_EQ(s.host.pages_loaded(), 5);
  const PrefixMatch again = s.c.match_prefix(s.keys);
  EXPECT_EQ(span_of(again.pages(0)), (Pages{17, 18, 19, 4}));
  EXPECT_EQ(again.num_host_pages(), 0);
  EXPECT_THROW(s.c.complete_load(*load), std::invalid_argument);
}

TEST(HostTier, FreeingARequestWithAPendingLoadAbortsIt) {
  Worked s;
  BlockTable c0, c1;
  s.offload_free_and_evict(c0, c1);
  const PrefixMatch m = s.c.match_prefix(s.keys);
  std::vector<BlockTable*> tc{&c0, &c1};
  s.c.free(tc);
  BlockTable d0, d1;
  std::vector<BlockTable*> d{&d0, &d1};
  std::optional<LoadPlan> load = s.c.claim(d, m);
  EXPECT_THROW(s.c.managers()[0].free(s.pool, d0), std::invalid_argument);
  s.c.free(d);
  EXPECT_EQ(s.c.load_state(*load), PlanState::aborted);
  const Pages queue = queue_of(s.pool);
  EXPECT_EQ(Pages(queue.begin(), queue.begin() + 5), (Pages{3, 17, 18, 19, 4}));
  EXPECT_EQ(refs_of(s.host), Pages(10, 0));
  const PoolState host_before = state_of(s.host);
  EXPECT_THROW(s.c.complete_load(*load), std::invalid_argument);
  EXPECT_EQ(state_of(s.host), host_before);
}

// {full B=4; state B=4}: request A names 8 tokens (full slots 0, 1; the state slot ending
// at 8), offloads them, is freed and evicted; request D claims them back from the host. While
// the load is pending, naming D's prefix names none of the loaded pages (the state slot
// included): they hold nothing yet, and a match must not find them on the device.
TEST(HostTier, AStateSlotWhoseLoadIsPendingIsNotNamedUntilTheLoadCompletes) {
  BlockPool pool{7, true, false};
  HostPool host{8, false};
  Coordinator c{{GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::state, 4)}, pool, &host};
  std::vector<uint32_t> tokens(8);
  for (uint32_t i = 0; i < 8; ++i) tokens[i] = i;
  const std::vector<Key> keys = page_keys(tokens, 4);
  BlockTable a0, a1, c0, c1, d0, d1;
  std::vector<BlockTable*> a{&a0, &a1}, tc{&c0, &c1}, d{&d0, &d1};
  ASSERT_TRUE(c.acquire(a, 8));
  EXPECT_EQ(c.cache_full_blocks(a, keys, 8), 3);
  std::optional<OffloadPlan> offload = c.plan_offload(a, 8);
  ASSERT_TRUE(offload);
  c.complete_offload(*offload);
  c.free(a);
  ASSERT_TRUE(c.acquire(tc, 12));
  EXPECT_EQ(pool.num_cached(), 0);
  c.free(tc);
  std::optional<LoadPlan> load = c.claim(d, c.match_prefix(keys));
  ASSERT_TRUE(load);
  EXPECT_EQ(span_of(load->groups()), (Pages{0, 0, 1}));
  EXPECT_EQ(span_of(load->slots()), (Pages{0, 1, 1}));
  EXPECT_EQ(c.cache_full_blocks(d, keys, 8), 0);
  EXPECT_EQ(pool.num_cached(), 0);
  const PrefixMatch pending = c.match_prefix(keys);
  EXPECT_EQ(span_of(pending.pages(1)), (Pages{0, 0}));
  EXPECT_EQ(span_of(pending.host_pages(1)), (Pages{0, load->host_pages()[2]}));
  c.complete_load(*load);
  EXPECT_EQ(pool.num_cached(), 3);
  const PrefixMatch done = c.match_prefix(keys);
  EXPECT_EQ(span_of(done.pages(1)), (Pages{0, load->device_pages()[2]}));
  EXPECT_EQ(done.num_host_pages(), 0);
}

TEST(HostTier, CallsWithoutHostPoolOrFromAnotherCoordinatorThrow) {
  Worked s;
  BlockPool pool(20);
  Coordinator bare({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true)},
                   pool);
  BlockTable t0, t1;
  std::vector<BlockTable*> t{&t0, &t1};
  EXPECT_THROW(bare.plan_offload(t, 0), std::invalid_argument);
  std::optional<OffloadPlan> plan = s.c.plan_offload(s.a, 16);
  EXPECT_THROW(bare.complete_offload(*plan), std::invalid_argument);
  HostPool host(10);
  BlockPool pool2(20);
  Coordinator other({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true)},
                    pool2, &host);
  EXPECT_THROW(other.complete_offload(*plan), std::invalid_argument);
  EXPECT_THROW(other.abort_offload(*plan), std::invalid_argument);
  EXPECT_EQ(plan->state(), PlanState::pending);
  EXPECT_THROW(s.c.plan_offload(s.a, 17), std::invalid_argument);
}

}  // namespace
}  // namespace livetail::testing
