// Chunked local attention (semantics section 13.2): the group spec, the manager's reclaim
// bound, the coordinator's hit rule and claim floor. B = 16, C = 64: the query at t reads
// [floor(t / 64) * 64, t].
#include <gtest/gtest.h>

#include "helpers.h"

namespace livetail::testing {
namespace {

constexpr int64_t kB = 16, kC = 64;

std::vector<Key> keys_of(int64_t n) {
  std::vector<uint32_t> t(static_cast<size_t>(n));
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint32_t>(i);
  return page_keys(t, kB);
}

Pages pages_of(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

TEST(Chunked, GroupSpecChecksItsChunkSize) {
  const GroupSpec s(GroupKind::chunked, kB, {}, false, kC);
  EXPECT_EQ(s.attention_chunk_size, kC);
  EXPECT_STREQ(kind_name(GroupKind::chunked), "chunked");
  EXPECT_EQ(parse_kind("chunked"), GroupKind::chunked);
  EXPECT_THROW(GroupSpec(GroupKind::chunked, kB), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::chunked, kB, {}, false, 24), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::chunked, kB, {}, false, 0), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::chunked, kB, {}, true, kC), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::chunked, kB, 8, false, kC), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::sliding, kB, 8, false, kC), std::invalid_argument);
  EXPECT_THROW(GroupSpec(GroupKind::full, kB, {}, false, kC), std::invalid_argument);
  EXPECT_THROW(ChunkedLocalAttentionManager(kB, 24), std::invalid_argument);
  EXPECT_THROW(ChunkedLocalAttentionManager(kB, 0), std::invalid_argument);
  EXPECT_EQ(ChunkedLocalAttentionManager(kB, kC).attention_chunk_size(), kC);
}

TEST(Chunked, GeometryMirrorsTheSpec) {
  EXPECT_EQ(geometry::chunk_start(200, kC), 192);
  EXPECT_EQ(geometry::chunked_reclaim_bound(200, 13, kC, kB), 12);
  EXPECT_EQ(geometry::chunked_reclaim_bound(191, 13, kC, kB), 8);
  EXPECT_EQ(geometry::chunked_reclaim_bound(200, 5, kC, kB), 5);  // capped by the slots
  EXPECT_EQ(geometry::chunked_resume_pages(11, kC, kB), 3);      // T = 176: slots 8..10
  EXPECT_EQ(geometry::chunked_resume_pages(12, kC, kB), 0);      // T = 192: none
  EXPECT_EQ(geometry::chunked_reclaim_bound(99, 7, 48, 16), 6);   // C not a power of two
  EXPECT_EQ(geometry::chunked_reclaim_bound(99, 5, 48, 16), 5);
}

TEST(Chunked, PrefillAllocatesEverySlotAndReclaimReleasesTheEarlierChunks) {
  BlockPool pool(100);
  const ChunkedLocalAttentionManager m(kB, kC);
  BlockTable t;
  EXPECT_EQ(m.blocks_needed_for(t, 200), 13);
  EXPECT_EQ(m.blocks_needed_for_sequential(t, 200, 9), 14);
  ASSERT_TRUE(m.acquire(pool, t, 200));
  EXPECT_EQ(slots_of(t), iota(1, 14));
  EXPECT_EQ(m.blocks_reclaimable_at(t, 200), 12);
  EXPECT_EQ(m.blocks_reclaimable_at(t, 127), 4);
  EXPECT_EQ(m.blocks_reclaimable_at(t, 63), 0);
  EXPECT_EQ(m.reclaim_expired(pool, t, 127), 4);
  EXPECT_EQ(m.reclaim_expired(pool, t, 200), 8);
  EXPECT_EQ(m.reclaim_expired(pool, t, 200), 0);
  EXPECT_EQ(slots_of(t), concat({Pages(12, 0), Pages{13}}));
  EXPECT_EQ(t.reclaim_floor(), 12);
}

TEST(Chunked, MatchNeedsTheSlotsOfTheChunkBehindTheBoundary) {
  BlockPool pool(100);
  Coordinator c({GroupSpec(GroupKind::chunked, kB, {}, false, kC), GroupSpec(GroupKind::full, kB)},
                pool);
  Request r(2);
  const std::vector<Key> keys = keys_of(200);
  ASSERT_TRUE(c.acquire(r.ptrs, 200));
  EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 200), 12 + 9);  // sparse: chunked j mod 4 != 3
  const Pages chunk = slots_of(r[0]);
  EXPECT_EQ(c.reclaim_expired(r.ptrs, 200), 12);  // named pages keep their names when free
  const std::vector<Key> eleven(keys.begin(), keys.begin() + 11);
  const PrefixMatch m = c.match_prefix(eleven);
  EXPECT_EQ(m.num_tokens(), 176);
  EXPECT_EQ(pages_of(m.pages(0)), concat({Pages(8, 0), Pages(chunk.begin() + 8, chunk.begin() + 11)}));
  EXPECT_EQ(c.blocks_consumed_by_claim(m), 3);
  Request fresh(2);
  EXPECT_FALSE(c.claim(fresh.ptrs, m).has_value());
  EXPECT_EQ(fresh[0].reclaim_floor(), 8);
  EXPECT_EQ(fresh[0].num_real_pages(), 3);
  EXPECT_EQ(fresh[1].reclaim_floor(), 0);
  // A boundary on a multiple of C needs no chunked page.
  const std::vector<Key> twelve(keys.begin(), keys.begin() + 12);
  const PrefixMatch at192 = c.match_prefix(twelve);
  EXPECT_EQ(at192.num_tokens(), 192);
  EXPECT_EQ(pages_of(at192.pages(0)), Pages(12, 0));
}

}  // namespace
}  // namespace livetail::testing
