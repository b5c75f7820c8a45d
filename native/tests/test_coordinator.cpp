// coordinator.h (semantics section 6): group specs, several groups on one pool, the
// reference figures, all-or-nothing across groups, the batched decode step, usage errors.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "helpers.h"

namespace livetail::testing {
namespace {

constexpr int64_t kInt32Max = 2147483647;

std::vector<GroupSpec> reference_groups() {
  return {GroupSpec(GroupKind::full, 256), GroupSpec(GroupKind::sliding, 128, 511),
          GroupSpec(GroupKind::sliding, 8, 12, true)};
}

TEST(GroupSpec, RejectsWindowsAndLiveTailOutsideSlidingAndStateGroups) {
  EXPECT_THROW(GroupSpec(GroupKind::sliding, 8), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::full, 8, 4), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::state, 8, 4), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::full, 8, {}, true), std::invalid_argument);
  // A state group takes live tail (Mamba "align" mode, semantics 13.5); checkpoints only
  // with it.
  EXPECT_NO_THROW(GroupSpec(GroupKind::state, 8, {}, true));
  EXPECT_NO_THROW(GroupSpec(GroupKind::state, 8, {}, true, {}, true));
  EXPECT_THROW(GroupSpec(GroupKind::state, 8, {}, false, {}, true), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::sliding, 8, 12, true, {}, true), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::full, 0), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::full, kInt32Max + 1), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::sliding, 8, 0), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::sliding, 8, kInt32Max + 1), std::invalid_argument);
  EXPECT_NO_THROW(GroupSpec(GroupKind::sliding, 8, 12, true));
}

TEST(GroupSpec, CheckCatchesFieldsChangedAfterConstructionAndEqualityComparesAllFields) {
  GroupSpec s(GroupKind::sliding, 8, 12, true);
  EXPECT_EQ(s, GroupSpec(GroupKind::sliding, 8, 12, true));
  EXPECT_NE(s, GroupSpec(GroupKind::sliding, 8, 12, false));
  EXPECT_NE(s, GroupSpec(GroupKind::sliding, 8, 13, true));
  s.sliding_window.reset();
  EXPECT_THROW(s.check(), std::invalid_argument);
  BlockPool pool(4);
  EXPECT_THROW(Coordinator({s}, pool), std::invalid_argument);
  GroupSpec f(GroupKind::full, 4);
  f.block_size = 0;
  EXPECT_THROW(Coordinator({f}, pool), std::invalid_argument);
}

TEST(Coordinator, RejectsNoGroupsAndAnLcmAboveInt32) {
  BlockPool pool(4);
  EXPECT_THROW(Coordinator({}, pool), std::invalid_argument);
  EXPECT_THROW(
      Coordinator(
          {GroupSpec(GroupKind::full, kInt32Max), GroupSpec(GroupKind::full, kInt32Max - 1)}, pool),
      std::invalid_argument);
}

TEST(Coordinator, LiveTailGroupsAlignToTheLcmOfPageSizes) {
  BlockPool pool(200);
  const Coordinator c(reference_groups(), pool);
  EXPECT_EQ(c.num_groups(), 3);
  EXPECT_EQ(c.base_block_size(), 8);
  EXPECT_EQ(c.lcm_block_size(), 256);
  EXPECT_EQ(&c.pool(), &pool);
  EXPECT_EQ(c.specs(), reference_groups());
  ASSERT_EQ(c.managers().size(), 3u);
  EXPECT_EQ(c.managers()[0].kind(), GroupKind::full);
  EXPECT_EQ(c.managers()[1].live_alloc_alignment(), 0);
  EXPECT_EQ(c.managers()[2].live_alloc_alignment(), 256);
  EXPECT_EQ(c.managers()[2].sliding_window(), 12);
  const Coordinator d(reference_groups(), pool);
  EXPECT_NE(c.id(), d.id());
}

TEST(Coordinator, ReferenceRequestOf8192TokensTakes32Plus64Plus64Pages) {
  BlockPool pool(200);
  Coordinator c(reference_groups(), pool);
  Request r(3);
  EXPECT_EQ(c.blocks_needed_for(r.ptrs, 8192), 160);
  ASSERT_TRUE(c.acquire(r.ptrs, 8192));
  EXPECT_EQ(r[0].size(), 32);
  EXPECT_EQ(r[1].size(), 64);
  EXPECT_EQ(r[2].size(), 1024);
  // Groups act in ascending index, each taking the queue's front.
  EXPECT_EQ(slots_of(r[0]), iota(1, 33));
  EXPECT_EQ(slots_of(r[1]), iota(33, 97));
  EXPECT_EQ(slots_of(r[2])[30], 97);
  EXPECT_EQ(slots_of(r[2])[1023], 160);
  EXPECT_EQ(r[2].num_real_pages(), 64);
  EXPECT_EQ(pool.num_free(), 39);
  // sliding 128/511: slid_out(8192) = 60; live 8/12: every real slot below 1022.
  EXPECT_EQ(c.reclaim_expired(r.ptrs, 8192), 60 + 62);
  EXPECT_EQ(c.free(r.ptrs), 32 + 4 + 2);
  EXPECT_EQ(pool.num_free(), 199);
  for (const BlockTable& t : r.tables) EXPECT_TRUE(t.is_fresh());
}

TEST(Coordinator, ShortfallInAnyGroupChangesNoGroup) {
  BlockPool pool(100);
  Coordinator c(reference_groups(), pool);
  Request r(3);
  const World before = state_of(pool, r.ptrs);
  EXPECT_FALSE(c.acquire(r.ptrs, 8192));
  EXPECT_EQ(state_of(pool, r.ptrs), before);
}

TEST(Coordinator, SequentialChargeIsWhatChunkThenDecodeTake) {
  BlockPool pool(40);
  Coordinator c({GroupSpec(GroupKind::full, 256), GroupSpec(GroupKind::sliding, 8, 12, true)},
                pool);
  Request r(2);
  const int64_t charge = c.blocks_needed_for_sequential(r.ptrs, 17, 2);
  EXPECT_EQ(charge, 4);
  EXPECT_EQ(c.blocks_needed_for(r.ptrs, 19), 3);  // the combined charge under-counts
  const int64_t chunk = c.blocks_needed_for(r.ptrs, 17);
  EXPECT_EQ(chunk, 4);
  ASSERT_TRUE(c.acquire(r.ptrs, 17));
  EXPECT_EQ(c.blocks_needed_for(r.ptrs, 2), charge - chunk);  // the decode hold-back
  ASSERT_TRUE(c.acquire(r.ptrs, 2));
  EXPECT_EQ(pool.num_pinned(), charge);
}

TEST(Coordinator, ReclaimAndFreeReleaseGroupAfterGroup) {
  BlockPool pool(10);
  Coordinator c({GroupSpec(GroupKind::full, 2), GroupSpec(GroupKind::sliding, 2, 2)}, pool);
  Request r(2);
  ASSERT_TRUE(c.acquire(r.ptrs, 6));
  EXPECT_EQ(slots_of(r[0]), (Pages{1, 2, 3}));
  EXPECT_EQ(slots_of(r[1]), (Pages{4, 5, 6}));
  EXPECT_EQ(c.reclaim_expired(r.ptrs, 6), 2);  // sliding: slid_out(6) = 2
  EXPECT_EQ(queue_of(pool), (Pages{5, 4, 7, 8, 9}));
  EXPECT_EQ(c.free(r.ptrs), 4);
  EXPECT_EQ(queue_of(pool), (Pages{6, 1, 2, 3, 5, 4, 7, 8, 9}));
}

TEST(Coordinator, EveryUsageErrorThrowsAndChangesNoGroup) {
  BlockPool pool(40), other(40);
  Coordinator c({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true)}, pool);
  Request r(2), elsewhere(2);
  ASSERT_TRUE(c.acquire(r.ptrs, 10));
  ASSERT_TRUE(c.managers()[0].acquire(other, elsewhere[0], 4));
  ASSERT_TRUE(c.managers()[1].acquire(pool, r[1], 2));  // group 1 runs ahead: extent 12 vs 10
  auto observe = [&] { return state_of(pool, {&r[0], &r[1], &elsewhere[0], &elsewhere[1]}); };
  const std::vector<BlockTable*> one{&r[0]};
  const std::vector<BlockTable*> three{&r[0], &r[1], &elsewhere[1]};
  const std::vector<BlockTable*> twice{&r[0], &r[0]};
  const std::vector<BlockTable*> null{&r[0], nullptr};
  const std::vector<BlockTable*> foreign{&elsewhere[0], &elsewhere[1]};
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(one, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(three, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(twice, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(null, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(foreign, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(r.ptrs, -1));
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(r.ptrs, kInt32Max));
  EXPECT_INVALID_UNCHANGED(observe(), c.blocks_needed_for(twice, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.blocks_needed_for(r.ptrs, -1));
  EXPECT_INVALID_UNCHANGED(observe(), c.blocks_needed_for_sequential(r.ptrs, 1, -1));
  EXPECT_INVALID_UNCHANGED(observe(), c.blocks_needed_for_sequential(r.ptrs, 1, kInt32Max));
  EXPECT_INVALID_UNCHANGED(observe(), c.blocks_needed_for_sequential(one, 1, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.reclaim_expired(r.ptrs, 11));  // above group 0's extent
  EXPECT_INVALID_UNCHANGED(observe(), c.reclaim_expired(r.ptrs, -1));
  EXPECT_INVALID_UNCHANGED(observe(), c.reclaim_expired(foreign, 0));
  EXPECT_INVALID_UNCHANGED(observe(), c.free(twice));
  EXPECT_INVALID_UNCHANGED(observe(), c.free(foreign));
}

// Three requests on a pool of 4 free pages: request 0 fills tail room and reclaims, request 1
// takes the last two pages, request 2 finds the pool short.
struct DecodeWorld {
  DecodeWorld()
      : pool(5), c({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::state, 2)}, pool) {
    EXPECT_TRUE(c.acquire(reqs[0].ptrs, 3));
    for (Request& q : reqs) all.insert(all.end(), q.ptrs.begin(), q.ptrs.end());
  }
  BlockPool pool;
  Coordinator c;
  std::array<Request, 3> reqs{Request(2), Request(2), Request(2)};
  std::vector<BlockTable*> all;
};

TEST(Coordinator, DecodeStepEqualsTheLoopOfSingleCallsAndStopsAtTheFirstShortfall) {
  DecodeWorld a, b;
  const std::vector<int64_t> fronts{4, 1, 1};
  const DecodeResult res = a.c.decode_step(a.all, fronts);
  EXPECT_EQ(res.stepped, 2);
  EXPECT_EQ(res.reclaimed, 1);  // request 0's state group: slid_out(4) = 1
  int64_t reclaimed = 0, stepped = 0;
  for (; stepped < 3; ++stepped) {
    auto& ts = b.reqs[static_cast<size_t>(stepped)].ptrs;
    if (!b.c.acquire(ts, 1)) break;
    reclaimed += b.c.reclaim_expired(ts, fronts[static_cast<size_t>(stepped)]);
  }
  EXPECT_EQ(stepped, res.stepped);
  EXPECT_EQ(reclaimed, res.reclaimed);
  EXPECT_EQ(state_of(a.pool), state_of(b.pool));
  for (size_t i = 0; i < a.all.size(); ++i) {
    TableState ta = state_of(*a.all[i]), tb = state_of(*b.all[i]);
    EXPECT_EQ(ta.pool == nullptr, tb.pool == nullptr);
    ta.pool = tb.pool = nullptr;  // each bound to its own world's pool
    EXPECT_EQ(ta, tb) << "table " << i;
  }
  EXPECT_TRUE(a.reqs[2][0].is_fresh() && a.reqs[2][1].is_fresh());
  EXPECT_EQ(a.pool.num_free(), 0);
}

TEST(Coordinator, DecodeStepChecksEveryRequestBeforeAnyActs) {
  DecodeWorld w;
  auto observe = [&] { return state_of(w.pool, w.all); };
  const std::vector<int64_t> fronts{4, 1, 1};
  const std::vector<BlockTable*> short_list(w.all.begin(), w.all.end() - 1);
  EXPECT_INVALID_UNCHANGED(observe(), w.c.decode_step(short_list, fronts));
  std::vector<BlockTable*> repeated = w.all;
  repeated[5] = repeated[0];  // request 2 names request 0's table
  EXPECT_INVALID_UNCHANGED(observe(), w.c.decode_step(repeated, fronts));
  // The frontier may reach the new token (extent + 1), not beyond; request 2 is checked too.
  EXPECT_INVALID_UNCHANGED(observe(), w.c.decode_step(w.all, std::vector<int64_t>{4, 1, 2}));
  EXPECT_INVALID_UNCHANGED(observe(), w.c.decode_step(w.all, std::vector<int64_t>{-1, 1, 1}));
  BlockPool other(5);
  Request foreign(2);
  ASSERT_TRUE(w.c.managers()[1].acquire(other, foreign[1], 1));
  std::vector<BlockTable*> mixed = w.all;
  mixed[5] = &foreign[1];
  EXPECT_INVALID_UNCHANGED(observe(), w.c.decode_step(mixed, fronts));
}


// One request's tables (semantics sections 3 and 6): all of one extent, none bound by another
// coordinator over the same pool. Either fault throws at the boundary, nothing changed.
std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no throw)";
}

TEST(Coordinator, TablesOfTwoRequestsThrowInEveryCallTakingTables) {
  BlockPool pool(64);
  HostPool host(16);
  Coordinator c({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 4, 4)}, pool, &host);
  Request a(2), b(2);
  ASSERT_TRUE(c.acquire(a.ptrs, 8));
  ASSERT_TRUE(c.acquire(b.ptrs, 12));
  const std::vector<BlockTable*> mixed{&a[0], &b[1]};
  auto observe = [&] {
    return std::make_pair(state_of(pool, {&a[0], &a[1], &b[0], &b[1]}),
                          std::vector<int64_t>{c.pinned_pages(0), c.pinned_pages(1)});
  };
  const std::vector<uint32_t> tokens = {0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<Key> keys = page_keys(tokens, 4);
  ASSERT_EQ(c.cache_full_blocks(a.ptrs, keys, 8), 4);
  ASSERT_EQ(c.match_prefix(keys).num_tokens(), 8);
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(mixed, 4));
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(mixed, 0));
  EXPECT_INVALID_UNCHANGED(observe(), c.blocks_needed_for(mixed, 4));
  EXPECT_INVALID_UNCHANGED(observe(), c.blocks_needed_for_sequential(mixed, 4, 1));
  EXPECT_INVALID_UNCHANGED(observe(), c.reclaim_expired(mixed, 0));
  EXPECT_INVALID_UNCHANGED(observe(), c.free(mixed));
  EXPECT_INVALID_UNCHANGED(observe(), c.detach(mixed));
  EXPECT_INVALID_UNCHANGED(observe(), c.cache_full_blocks(mixed, keys, 0));
  EXPECT_INVALID_UNCHANGED(observe(), c.cache_full_blocks(mixed, keys, 0, tokens));
  EXPECT_INVALID_UNCHANGED(observe(), c.plan_offload(mixed, 0));
  EXPECT_INVALID_UNCHANGED(observe(), c.claim(mixed, c.match_prefix(keys)));
  EXPECT_INVALID_UNCHANGED(observe(), c.decode_step(mixed, std::vector<int64_t>{0}));
  EXPECT_INVALID_UNCHANGED(observe(), c.plan_step(mixed, std::vector<int64_t>{1}));
  EXPECT_EQ(message_of([&] { c.free(mixed); }),
            "tables[1] has extent 12, tables[0] 8: one request's tables cover the same tokens");
  EXPECT_EQ(message_of([&] { c.decode_step(mixed, std::vector<int64_t>{0}); }),
            "requests[0][1]: table has extent 12, the request's first table 8: one request's "
            "tables cover the same tokens");
  // A fresh table beside a used one is no request either.
  BlockTable fresh;
  const std::vector<BlockTable*> half{&a[0], &fresh};
  EXPECT_INVALID_UNCHANGED(observe(), c.acquire(half, 4));
  // Each request alone is fine.
  EXPECT_EQ(c.free(a.ptrs), 4);
  EXPECT_EQ(c.free(b.ptrs), 6);
  EXPECT_EQ(c.pinned_pages(0) + c.pinned_pages(1), 0);
}

TEST(Coordinator, ASecondCoordinatorOverThePoolCannotFreeTheFirstOnesTables) {
  BlockPool pool(32);
  const std::vector<GroupSpec> specs{GroupSpec(GroupKind::full, 4),
                                     GroupSpec(GroupKind::sliding, 4, 4)};
  Coordinator first(specs, pool), twin(specs, pool);
  Request r(2);
  ASSERT_TRUE(first.acquire(r.ptrs, 8));
  auto observe = [&] {
    return std::make_pair(state_of(pool, {&r[0], &r[1]}),
                          std::vector<int64_t>{first.pinned_pages(0), first.pinned_pages(1),
                                               twin.pinned_pages(0), twin.pinned_pages(1)});
  };
  EXPECT_INVALID_UNCHANGED(observe(), twin.free(r.ptrs));
  EXPECT_INVALID_UNCHANGED(observe(), twin.acquire(r.ptrs, 1));
  EXPECT_INVALID_UNCHANGED(observe(), twin.reclaim_expired(r.ptrs, 8));
  EXPECT_INVALID_UNCHANGED(observe(), twin.blocks_needed_for(r.ptrs, 1));
  EXPECT_INVALID_UNCHANGED(observe(), twin.detach(r.ptrs));
  EXPECT_INVALID_UNCHANGED(observe(), twin.decode_step(r.ptrs, std::vector<int64_t>{0}));
  EXPECT_INVALID_UNCHANGED(observe(), twin.plan_step(r.ptrs, std::vector<int64_t>{1}));
  EXPECT_EQ(message_of([&] { twin.free(r.ptrs); }),
            "tables[0] is bound to another coordinator (a table is used only through the "
            "coordinator that bound it, until it is freed)");
  EXPECT_EQ(first.pinned_pages(0), 2);
  EXPECT_EQ(first.pinned_pages(1), 2);
  // Freed, the tables belong to no coordinator: the twin may bind them, and then owns them.
  EXPECT_EQ(first.free(r.ptrs), 4);
  ASSERT_TRUE(twin.acquire(r.ptrs, 4));
  EXPECT_THROW(first.free(r.ptrs), std::invalid_argument);
  EXPECT_EQ(twin.free(r.ptrs), 2);
  EXPECT_EQ(first.pinned_pages(0) + first.pinned_pages(1), 0);
  EXPECT_EQ(twin.pinned_pages(0) + twin.pinned_pages(1), 0);
  // Tables a manager bound belong to no coordinator until an acquire of a coordinator.
  for (size_t g = 0; g < 2; ++g) ASSERT_TRUE(first.managers()[g].acquire(pool, r[g], 4));
  EXPECT_EQ(twin.blocks_needed_for(r.ptrs, 4), 2);
  ASSERT_TRUE(first.acquire(r.ptrs, 0));  // binds nothing
  ASSERT_TRUE(twin.acquire(r.ptrs, 4));
  EXPECT_THROW(first.acquire(r.ptrs, 4), std::invalid_argument);
  twin.free(r.ptrs);
  EXPECT_EQ(pool.num_free(), 31);
}

}  // namespace
}  // namespace livetail::testing
