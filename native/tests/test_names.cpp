// Semantics section 12 on the pool: name(page), reset_names(), evict_names(pages), with
// exact queue orders, counters and events, and bad input leaving the pool unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>

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

namespace livetail::testing {
namespace {

// full B=4 and a live-tail sliding group B=2, W=3 (lcm 4): 16 tokens take pages 1-4 and
// 5-8 (sliding slots 1, 3, 5, 7), all named.
struct Mixed {
  Mixed()
      : pool(40, true, true),
        c({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true)}, pool),
        toks(tokens(116)),
        keys(page_keys(std::vector<uint32_t>(toks.begin() + 100, toks.end()), 2)) {}
  BlockPool pool;
  Coordinator c;
  std::vector<uint32_t> toks;  // 0..115: the prompt is toks[100..116)
  std::vector<Key> keys;
  std::span<const uint32_t> prompt() const { return {toks.data() + 100, 16}; }
};

TEST(Detach, HoldsEveryReferenceAndReleasesAsFreeWould) {
  Pages after[2];
  for (int deferred = 0; deferred < 2; ++deferred) {
    Mixed m;
    Request r(2), other(2);
    ASSERT_TRUE(m.c.acquire(r.ptrs, 16));
    EXPECT_EQ(m.c.cache_full_blocks(r.ptrs, m.keys, 16), 8);
    ASSERT_TRUE(m.c.acquire(other.ptrs, 8));
    if (deferred) {
      const Pages queue = queue_of(m.pool);
      const uint64_t version = m.pool.version();
      DetachedTables h = m.c.detach(r.ptrs);
      EXPECT_EQ(h.num_pages(), 8);
      EXPECT_FALSE(h.released());
      EXPECT_EQ(queue_of(m.pool), queue);
      EXPECT_EQ(m.pool.version(), version);
      EXPECT_EQ(m.pool.num_pinned(), 12);
      EXPECT_EQ(m.c.pinned_pages(0), 6);
      EXPECT_EQ(m.c.pinned_pages(1), 6);
      for (BlockTable& t : r.tables) {
        EXPECT_EQ(t.size(), 0);
        EXPECT_FALSE(t.is_bound());
      }
      EXPECT_EQ(m.c.release_detached(h), 8);
      EXPECT_TRUE(h.released());
      const Pages q = queue_of(m.pool);
      EXPECT_INVALID_UNCHANGED(queue_of(m.pool), m.c.release_detached(h));
      EXPECT_EQ(q, queue_of(m.pool));
    } else {
      EXPECT_EQ(m.c.free(r.ptrs), 8);
    }
    m.c.free(other.ptrs);
    after[deferred] = queue_of(m.pool);
    EXPECT_EQ(m.c.pinned_pages(0), 0);
    EXPECT_EQ(m.c.pinned_pages(1), 0);
  }
  EXPECT_EQ(after[0], after[1]);
  EXPECT_EQ(after[1], concat({{11, 12, 9, 10}, iota(13, 40), {4, 3, 2, 1, 8, 7, 6, 5}}));
}

TEST(Detach, AHandleOfAnotherCoordinatorIsRejected) {
  Mixed a, b;
  Request r(2);
  ASSERT_TRUE(a.c.acquire(r.ptrs, 16));
  DetachedTables h = a.c.detach(r.ptrs);
  EXPECT_THROW(b.c.release_detached(h), std::invalid_argument);
  EXPECT_FALSE(h.released());
  EXPECT_EQ(a.c.release_detached(h), 8);
}

TEST(Tokens, NamesKeepTheirSlotsTokenIdsAndStoredEventsCarryThem) {
  Mixed m;
  Request r(2);
  ASSERT_TRUE(m.c.acquire(r.ptrs, 16));
  const std::vector<uint32_t> short_ids(15, 1);
  EXPECT_INVALID_UNCHANGED(state_of(m.pool), m.c.cache_full_blocks(r.ptrs, m.keys, 16, short_ids));
  EXPECT_EQ(m.c.cache_full_blocks(r.ptrs, m.keys, 16, m.prompt()), 8);
  EXPECT_EQ(m.pool.name_tokens(1).size(), 4u);
  EXPECT_EQ(m.pool.name_tokens(4)[0], 112u);
  EXPECT_EQ(m.pool.name_tokens(8).size(), 2u);
  EXPECT_EQ(m.pool.name_tokens(8)[1], 115u);
  const auto& ev = m.pool.events();
  ASSERT_EQ(ev.size(), 5u);  // full 0-3; sliding 1, 3, 5, 7 (holes split the runs)
  EXPECT_TRUE(ev[0].has_tokens);
  EXPECT_EQ(ev[0].key_count, 4u);
  EXPECT_EQ(ev[0].token_count, 16u);
  EXPECT_EQ(m.pool.event_tokens()[ev[0].token_begin], 100u);
  EXPECT_EQ(ev[4].first_slot, 7);
  EXPECT_EQ(ev[4].token_count, 2u);
  EXPECT_EQ(m.pool.event_tokens()[ev[4].token_begin], 114u);
  // Dropped names leave their token ids behind: compaction keeps the live ones right.
  m.c.free(r.ptrs);
  size_t most = 0;
  for (int round = 0; round < 6; ++round) {
    Request again(2);
    ASSERT_TRUE(m.c.acquire(again.ptrs, 16));
    m.c.cache_full_blocks(again.ptrs, m.keys, 16, m.prompt());
    std::vector<int64_t> full;  // every page carrying a full-group name
    for (int32_t p = 1; p < 40; ++p) {
      const auto t = m.pool.name_tokens(p);
      if (!m.pool.is_cached(p)) {
        EXPECT_TRUE(t.empty());
        continue;
      }
      int32_t g = 0;
      Key k{};
      ASSERT_TRUE(m.pool.name(p, g, k));
      const auto j = static_cast<size_t>(std::find(m.keys.begin(), m.keys.end(), k) - m.keys.begin());
      const size_t B = g == 0 ? 4 : 2;
      const size_t slot = (j + 1) * 2 / B - 1;  // the slot the name covers
      ASSERT_EQ(t.size(), B);
      EXPECT_EQ(t[0], 100 + slot * B) << "page " << p << " round " << round;
      if (g == 0) full.push_back(p);
    }
    // The full group's names go (their token ids become garbage), the sliding group's stay.
    EXPECT_EQ(m.pool.evict_names(full), static_cast<int64_t>(full.size()));
    EXPECT_EQ(m.pool.num_names(), 4);
    most = std::max(most, PoolTestAccess::tokens_held(m.pool));
    m.c.free(again.ptrs);
  }
  // 16 new full-group ids a round (rounds 1-5) on top of the first 24: 104 without compaction,
  // which runs once the dropped ids outweigh twice the live ones plus a call's reservation.
  EXPECT_EQ(most, 56u);
}

// Semantics 13.4 and 13.9: a sliding group B=8 W=12 (R = 2) at alignment 32 (4 pages per
// boundary) names only slots s with s mod 4 >= 2; at the lcm (8) every full slot.
std::vector<int64_t> named_slots(const BlockPool& pool, const BlockTable& t) {
  std::vector<int64_t> out;
  int32_t g;
  Key k;
  for (size_t j = 0; j < t.page_ids().size(); ++j)
    if (t.page_ids()[j] != 0 && pool.name(t.page_ids()[j], g, k)) out.push_back(static_cast<int64_t>(j));
  return out;
}

TEST(SparseNaming, ALiveGroupAtAlignment32NamesTheSlotsBehindItsMultiples) {
  BlockPool pool(64);
  Coordinator c({GroupSpec(GroupKind::sliding, 8, 12, true)}, pool, nullptr, 32);
  EXPECT_EQ(c.alignment(), 32);
  Request r(1);
  const std::vector<Key> keys = page_keys(tokens(200), 8);
  ASSERT_TRUE(c.acquire(r.ptrs, 200));
  EXPECT_EQ(pool.num_pinned(), 13);  // 12 resume pages and slot 24, in the window at 200
  EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 200), 12);
  EXPECT_EQ(named_slots(pool, r[0]),
            (std::vector<int64_t>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23}));
  EXPECT_EQ(c.match_prefix(keys).num_tokens(), 192);
}

TEST(SparseNaming, AtTheDefaultAlignmentEveryFullSlotIsNamed) {
  BlockPool pool(64);
  Coordinator c({GroupSpec(GroupKind::sliding, 8, 12, true)}, pool);
  EXPECT_EQ(c.alignment(), 8);
  Request r(1);
  const std::vector<Key> keys = page_keys(tokens(200), 8);
  ASSERT_TRUE(c.acquire(r.ptrs, 200));
  EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 200), 25);
  std::vector<int64_t> all(25);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(named_slots(pool, r[0]), all);
  EXPECT_EQ(c.match_prefix(keys).num_tokens(), 200);
}

TEST(SparseNaming, FreedUnnamedPagesJoinTheFrontAndNamedOnesTheBack) {
  BlockPool pool(40);
  Coordinator c({GroupSpec(GroupKind::sliding, 8, 12, false)}, pool, nullptr, 32);
  Request r(1);
  const std::vector<Key> keys = page_keys(tokens(200), 8);
  ASSERT_TRUE(c.acquire(r.ptrs, 200));
  EXPECT_EQ(slots_of(r[0]), iota(1, 26));
  EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 200), 12);
  c.free(r.ptrs);
  const Pages unnamed{1, 2, 5, 6, 9, 10, 13, 14, 17, 18, 21, 22, 25};
  const Pages named{24, 23, 20, 19, 16, 15, 12, 11, 8, 7, 4, 3};
  EXPECT_EQ(queue_of(pool), concat({unnamed, iota(26, 40), named}));
}

TEST(SparseNaming, AnAlignmentOffTheLcmIsRefusedByName) {
  BlockPool pool(8);
  for (int64_t a : {int64_t{12}, int64_t{-8}, int64_t{1} << 31}) {
    try {
      Coordinator c({GroupSpec(GroupKind::sliding, 8, 12, true)}, pool, nullptr, a);
      ADD_FAILURE() << "alignment " << a << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("alignment ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace livetail::testing
