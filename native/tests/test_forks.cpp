// Forks (semantics 13.6) and partial write-back (13.7) in the C++ API: fork into
// caller-provided fresh tables, copy_tail, plan_offload with max_pages; the paths the Python
// binding never reaches (bad `into` tables, a full reference count).
#include <gtest/gtest.h>

#include <limits>
#include <optional>

#include "helpers.h"

namespace livetail::testing {
namespace {

Pages span_of(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

struct Forked {
  BlockPool pool{40};
  Coordinator c{{GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true)}, pool};
  BlockTable a0, a1, f0, f1;
  std::vector<BlockTable*> a{&a0, &a1}, f{&f0, &f1};
  Forked() { EXPECT_TRUE(c.acquire(a, 10)); }
};

TEST(Forks, ForkSharesEveryPageAndNamesThePartialTail) {
  Forked s;
  EXPECT_EQ(s.c.fork(s.a, s.f), (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(slots_of(s.f0), (Pages{1, 2, 3}));
  EXPECT_EQ(slots_of(s.f1), (Pages{0, 4, 0, 5, 6}));
  EXPECT_EQ(s.f0.tail_available(), 2);
  EXPECT_EQ(s.f0.extent(), 10);
  EXPECT_EQ(s.f1.num_real_pages(), 3);
  EXPECT_EQ(refs_of(s.pool)[3], 2);
  EXPECT_EQ(s.pool.num_free(), 33);
  std::optional<std::vector<Coordinator::TailCopy>> copies = s.c.copy_tail(s.f);
  ASSERT_TRUE(copies);
  EXPECT_EQ(*copies, (std::vector<Coordinator::TailCopy>{{0, 3, 7}}));
  EXPECT_EQ(slots_of(s.f0), (Pages{1, 2, 7}));
  EXPECT_EQ(s.c.pinned_pages(0), 4);
  EXPECT_TRUE(s.c.copy_tail(s.a)->empty());
  s.c.free(s.a);
  s.c.free(s.f);
  EXPECT_EQ(s.pool.num_free(), 39);
}

TEST(Forks, BadIntoTablesAndAFullCountThrowAndChangeNothing) {
  Forked s;
  const Pages refs = refs_of(s.pool);
  BlockTable g0;
  std::vector<BlockTable*> one{&g0};
  EXPECT_THROW(s.c.fork(s.a, one), std::invalid_argument);
  std::vector<BlockTable*> self{&s.a0, &s.f1};
  EXPECT_THROW(s.c.fork(s.a, self), std::invalid_argument);
  std::vector<BlockTable*> twice{&s.f0, &s.f0};
  EXPECT_THROW(s.c.fork(s.a, twice), std::invalid_argument);
  PoolTestAccess::set_ref(s.pool, 5, std::numeric_limits<int32_t>::max());
  EXPECT_THROW(s.c.fork(s.a, s.f), std::invalid_argument);
  PoolTestAccess::set_ref(s.pool, 5, 1);
  EXPECT_EQ(refs_of(s.pool), refs);
  EXPECT_TRUE(s.f0.is_fresh());
  EXPECT_TRUE(s.f1.is_fresh());
  ASSERT_EQ(s.c.fork(s.a, s.f).size(), 2u);
  EXPECT_THROW(s.c.fork(s.a, s.f), std::invalid_argument);  // not fresh any more
}

TEST(PartialWriteBack, FourPagesThreeFreeHostPages) {
  BlockPool pool(20);
  HostPool host(4);
  Coordinator c({GroupSpec(GroupKind::full, 4)}, pool, &host);
  BlockTable t;
  std::vector<BlockTable*> a{&t};
  ASSERT_TRUE(c.acquire(a, 16));
  std::vector<uint32_t> toks(16);
  for (uint32_t i = 0; i < 16; ++i) toks[i] = i;
  EXPECT_EQ(c.cache_full_blocks(a, page_keys(toks, 4), 16), 4);
  EXPECT_FALSE(c.plan_offload(a, 16));
  std::optional<OffloadPlan> plan = c.plan_offload(a, 16, host.num_free());
  ASSERT_TRUE(plan);
  EXPECT_EQ(span_of(plan->slots()), (Pages{0, 1, 2}));
  EXPECT_EQ(span_of(plan->device_pages()), (Pages{1, 2, 3}));
  EXPECT_THROW(c.plan_offload(a, 16, -2), std::invalid_argument);
  c.abort_offload(*plan);
}

}  // namespace
}  // namespace livetail::testing
