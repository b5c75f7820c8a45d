// prefix.h and the coordinator's prefix caching (semantics sections 2 and 8): SHA-256 and
// page keys, naming, match, claim, sharing, eviction, retention, and every usage error.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>

#include "helpers.h"

namespace livetail::testing {
namespace {

std::string hex(const Key& k) {
  std::string s;
  char b[3];
  for (uint8_t x : k) std::snprintf(b, sizeof b, "%02x", x), s += b;
  return s;
}

std::vector<uint32_t> tokens(int64_t n, uint32_t first = 0) {
  std::vector<uint32_t> t(static_cast<size_t>(n));
  for (size_t i = 0; i < t.size(); ++i) t[i] = first + static_cast<uint32_t>(i);
  return t;
}

std::vector<Key> keys_of(int64_t n, int64_t base, uint32_t first = 0) {
  return page_keys(tokens(n, first), base);
}

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc", 3)),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two_blocks.data(), two_blocks.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, PiecewiseUpdatesAndBothCompressionFunctionsAgree) {
  std::vector<uint8_t> data(1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  const std::string expected = "785b0751fc2c53dc14a4ce3d800e69ef9ce1009eb327ccf458afe09c242c26c9";
  for (bool accelerated : {false, true}) {
    Sha256 h(accelerated);
    size_t at = 0;
    for (size_t piece : {size_t{1}, size_t{63}, size_t{0}, size_t{64}, size_t{65}, size_t{200}}) {
      h.update(data.data() + at, piece);
      at += piece;
    }
    h.update(data.data() + at, data.size() - at);
    EXPECT_EQ(hex(h.digest()), expected) << "accelerated=" << accelerated;
  }
  const std::string impl = Sha256::implementation();
  EXPECT_TRUE(impl == "sha-ni" || impl == "portable");
}

TEST(PageKeys, ChainOverLittleEndianTokensDroppingAPartialPage) {
  const auto keys = page_keys(tokens(9), 4);  // 2 full pages; token 8 is a partial page
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(hex(keys[0]), "baed642339816affb3fe8719792d0e4ce82f12db72b7373d244eaa65445800fe");
  EXPECT_EQ(hex(keys[1]), "01414b052706d93bd0f1f1646c0e8ca2fa8ef5efd7bcc99f7a1cee8eb11ad052");
  const std::string salt = "lora";
  const auto salted =
      page_keys(tokens(4), 4, {reinterpret_cast<const uint8_t*>(salt.data()), salt.size()});
  EXPECT_EQ(hex(salted[0]), "ae1013286fa6f70bbfff3c973d06fed5646fb8bab2818aea521f293b8380d3ed");
  EXPECT_TRUE(page_keys({}, 4).empty());
  EXPECT_THROW(page_keys(tokens(4), 0), std::invalid_argument);
  EXPECT_THROW(page_keys(tokens(4), int64_t{1} << 31), std::invalid_argument);
}

TEST(PageKeys, CheckKeysRejectsARepeatedKey) {
  auto keys = keys_of(64, 1);
  EXPECT_NO_THROW(check_keys(keys));
  EXPECT_NO_THROW(check_keys({}));
  keys[40] = keys[3];
  EXPECT_THROW(check_keys(keys), std::invalid_argument);
}

TEST(PrefixMatch, DefaultMatchIsEmptyAndNoCoordinatorAcceptsIt) {
  const PrefixMatch none;
  EXPECT_EQ(none.num_tokens(), 0);
  EXPECT_EQ(none.num_groups(), 0);
  EXPECT_EQ(none.num_real_pages(), 0);
  BlockPool pool(4);
  Coordinator c({GroupSpec(GroupKind::full, 2)}, pool);
  Request r(1);
  EXPECT_INVALID_UNCHANGED(state_of(pool, r.ptrs), c.blocks_consumed_by_claim(none));
  EXPECT_INVALID_UNCHANGED(state_of(pool, r.ptrs), c.claim(r.ptrs, none));
}

// Groups {full 4; sliding 2, W=3, live; state 4} on 29 free pages (base 2, lcm 4): request 0
// computes 16 tokens, names them, reclaims, frees.
struct Mixed {
  Mixed()
      : pool(30),
        c({GroupSpec(GroupKind::full, 4), GroupSpec(GroupKind::sliding, 2, 3, true),
           GroupSpec(GroupKind::state, 4)},
          pool),
        keys(keys_of(18, 2)) {}
  BlockPool pool;
  Coordinator c;
  std::vector<Key> keys;  // 9 keys: one base page more than the 16 tokens computed
  std::array<Request, 4> r{Request(3), Request(3), Request(3), Request(3)};
};

TEST(Prefix, NamingCoversRealFullPagesOnlyAndIsIdempotent) {
  Mixed m;
  ASSERT_TRUE(m.c.acquire(m.r[0].ptrs, 16));
  EXPECT_EQ(slots_of(m.r[0][0]), (Pages{1, 2, 3, 4}));
  EXPECT_EQ(slots_of(m.r[0][1]), (Pages{0, 5, 0, 6, 0, 7, 0, 8}));
  EXPECT_EQ(slots_of(m.r[0][2]), (Pages{9, 10, 11, 12}));
  const World before = state_of(m.pool, m.r[0].ptrs);
  // full: 4 pages; sliding: its 4 real slots (holes skipped); state: the slot ending at 16.
  EXPECT_EQ(m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 16), 9);
  EXPECT_EQ(m.pool.num_cached(), 9);
  for (int32_t p : {1, 2, 3, 4, 5, 6, 7, 8, 12}) EXPECT_TRUE(m.pool.is_cached(p)) << p;
  for (int32_t p : {9, 10, 11, 13}) EXPECT_FALSE(m.pool.is_cached(p)) << p;
  EXPECT_EQ(m.r[0][0].named_upto(), 4);
  EXPECT_EQ(m.r[0][1].named_upto(), 8);
  EXPECT_EQ(queue_of(m.pool), before.pool.queue);  // naming moves no page
  EXPECT_EQ(refs_of(m.pool), before.pool.refs);
  EXPECT_EQ(m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 16), 0);
  EXPECT_EQ(m.pool.num_cached(), 9);
}

TEST(Prefix, NamingStopsAtTheLastKeyGiven) {
  BlockPool pool(10);
  Coordinator c({GroupSpec(GroupKind::full, 2)}, pool);
  Request r(1);
  ASSERT_TRUE(c.acquire(r.ptrs, 8));
  const auto keys = keys_of(4, 2);  // 2 keys for 4 slots
  EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 8), 2);
  EXPECT_TRUE(pool.is_cached(2));
  EXPECT_FALSE(pool.is_cached(3));
}

TEST(Prefix, ReclaimablePagesCountNamedOnesSeparately) {
  Mixed m;
  ASSERT_TRUE(m.c.acquire(m.r[0].ptrs, 16));
  ASSERT_EQ(m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 16), 9);
  const Manager& sliding = m.c.managers()[1];
  const Manager& state = m.c.managers()[2];
  EXPECT_EQ(sliding.blocks_reclaimable_at(m.r[0][1], 16), 3);
  EXPECT_EQ(sliding.blocks_reclaimable_at(m.r[0][1], 16, false), 3);
  EXPECT_EQ(state.blocks_reclaimable_at(m.r[0][2], 16), 3);
  EXPECT_EQ(state.blocks_reclaimable_at(m.r[0][2], 16, false), 0);  // slots 0..2 unnamed
}

TEST(Prefix, NamedPagesStayMatchableInTheQueueAndAClaimTakesThemOut) {
  Mixed m;
  ASSERT_TRUE(m.c.acquire(m.r[0].ptrs, 16));
  ASSERT_EQ(m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 16), 9);
  EXPECT_EQ(m.c.reclaim_expired(m.r[0].ptrs, 16), 6);
  // sliding 5, 6, 7 (named), state 9, 10, 11 (unnamed), in ascending slot order.
  EXPECT_EQ(queue_of(m.pool), concat({{11, 10, 9}, iota(13, 30), {5, 6, 7}}));
  EXPECT_EQ(m.c.free(m.r[0].ptrs), 6);
  EXPECT_EQ(queue_of(m.pool), concat({{11, 10, 9}, iota(13, 30), {5, 6, 7, 4, 3, 2, 1, 8, 12}}));
  EXPECT_EQ(m.pool.num_cached(), 9);
  EXPECT_EQ(m.pool.num_cached_free(), 9);

  const World before = state_of(m.pool, m.r[1].ptrs);
  const PrefixMatch match = m.c.match_prefix(m.keys);
  EXPECT_EQ(state_of(m.pool, m.r[1].ptrs), before);  // read-only
  EXPECT_EQ(match.num_tokens(), 16);  // the greatest lcm multiple within 9 keys * 2 tokens
  EXPECT_EQ(match.num_groups(), 3);
  EXPECT_EQ(Pages(match.pages(0).begin(), match.pages(0).end()), (Pages{1, 2, 3, 4}));
  EXPECT_EQ(Pages(match.pages(1).begin(), match.pages(1).end()), (Pages{0, 0, 0, 0, 0, 0, 0, 8}));
  EXPECT_EQ(Pages(match.pages(2).begin(), match.pages(2).end()), (Pages{0, 0, 0, 12}));
  EXPECT_EQ(match.num_real_pages(), 6);
  EXPECT_EQ(m.c.blocks_consumed_by_claim(match), 6);

  m.c.claim(m.r[1].ptrs, match);
  EXPECT_EQ(m.pool.num_free(), 29 - 6);
  EXPECT_EQ(queue_of(m.pool), concat({{11, 10, 9}, iota(13, 30), {5, 6, 7}}));
  const BlockTable& full = m.r[1][0];
  const BlockTable& sliding = m.r[1][1];
  const BlockTable& state = m.r[1][2];
  EXPECT_EQ(slots_of(full), (Pages{1, 2, 3, 4}));
  EXPECT_EQ(slots_of(sliding), (Pages{0, 0, 0, 0, 0, 0, 0, 8}));
  EXPECT_EQ(slots_of(state), (Pages{0, 0, 0, 12}));
  EXPECT_EQ(full.reclaim_floor(), 0);
  EXPECT_EQ(sliding.reclaim_floor(), 7);  // b - R = 8 - 1
  EXPECT_EQ(state.reclaim_floor(), 3);
  for (const BlockTable* t : {&full, &sliding, &state}) {
    EXPECT_EQ(t->tail_available(), 0);
    EXPECT_EQ(t->pool(), &m.pool);
    EXPECT_EQ(t->extent(), 16);
    EXPECT_EQ(t->named_upto(), t->size());
  }
  EXPECT_EQ(full.num_real_pages(), 4);
  EXPECT_EQ(sliding.num_real_pages(), 1);
  for (int32_t p : {1, 2, 3, 4, 8, 12}) EXPECT_EQ(m.pool.ref_count(p), 1);

  // A second request shares the pages in use: no free page is spent.
  const PrefixMatch again = m.c.match_prefix(m.keys);
  EXPECT_EQ(m.c.blocks_consumed_by_claim(again), 0);
  m.c.claim(m.r[2].ptrs, again);
  EXPECT_EQ(m.pool.num_free(), 23);
  for (int32_t p : {1, 2, 3, 4, 8, 12}) EXPECT_EQ(m.pool.ref_count(p), 2);
  // A shared page re-enters the queue only with its last holder.
  EXPECT_EQ(m.c.free(m.r[1].ptrs), 0);
  EXPECT_EQ(m.c.free(m.r[2].ptrs), 6);
}

TEST(Prefix, ClaimedTablesAcquireOnFromTheBoundary) {
  Mixed m;
  ASSERT_TRUE(m.c.acquire(m.r[0].ptrs, 16));
  ASSERT_EQ(m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 16), 9);
  ASSERT_EQ(m.c.free(m.r[0].ptrs), 12);
  m.c.claim(m.r[1].ptrs, m.c.match_prefix(m.keys));
  EXPECT_EQ(m.c.blocks_needed_for(m.r[1].ptrs, 1), 3);  // one new slot in each group
  ASSERT_TRUE(m.c.acquire(m.r[1].ptrs, 1));
  EXPECT_EQ(m.r[1][1].size(), 9);
  EXPECT_NE(slots_of(m.r[1][1])[8], 0);
  EXPECT_EQ(m.c.reclaim_expired(m.r[1].ptrs, 17), 1);  // state: slid_out(17) = 4 > floor 3
}

TEST(Prefix, AnEvictionMakesAMatchStaleAndItsClaimChangesNothing) {
  Mixed m;
  ASSERT_TRUE(m.c.acquire(m.r[0].ptrs, 16));
  ASSERT_EQ(m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 16), 9);
  ASSERT_EQ(m.c.free(m.r[0].ptrs), 12);
  const PrefixMatch match = m.c.match_prefix(m.keys);
  ASSERT_EQ(match.num_tokens(), 16);
  Pages all(static_cast<size_t>(m.pool.num_free()));
  ASSERT_TRUE(m.pool.allocate(m.pool.num_free(), all.data()));  // evicts every name
  EXPECT_EQ(m.pool.num_cached(), 0);
  auto observe = [&] { return state_of(m.pool, m.r[1].ptrs); };
  EXPECT_INVALID_UNCHANGED(observe(), m.c.blocks_consumed_by_claim(match));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.claim(m.r[1].ptrs, match));
  const PrefixMatch none = m.c.match_prefix(m.keys);
  EXPECT_EQ(none.num_tokens(), 0);
  EXPECT_EQ(none.pages(0).size(), 0u);
  m.c.claim(m.r[1].ptrs, none);  // a match of 0 tokens changes nothing
  for (const BlockTable& t : m.r[1].tables) EXPECT_TRUE(t.is_fresh());
  EXPECT_EQ(m.pool.free(all), 29);
}

TEST(Prefix, AClaimOfAPageWhoseCountIsFullThrowsAndChangesNothing) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  BlockPool pool(10);
  Coordinator c({GroupSpec(GroupKind::full, 2)}, pool);
  Request r0(1), r1(1);
  ASSERT_TRUE(c.acquire(r0.ptrs, 4));
  const auto keys = keys_of(4, 2);
  ASSERT_EQ(c.cache_full_blocks(r0.ptrs, keys, 4), 2);
  const PrefixMatch match = c.match_prefix(keys);
  ASSERT_EQ(match.num_tokens(), 4);
  ASSERT_EQ(slots_of(r0[0]), (Pages{1, 2}));
  PoolTestAccess::set_ref(pool, 2, kMax);  // page 2 already has 2^31 - 1 holders
  EXPECT_INVALID_UNCHANGED(state_of(pool, {&r0[0], &r1[0]}), c.claim(r1.ptrs, match));
  EXPECT_TRUE(r1[0].is_fresh());
  EXPECT_EQ(c.pinned_pages(0), 2);
  PoolTestAccess::set_ref(pool, 2, kMax - 1);  // room for exactly one more holder
  c.claim(r1.ptrs, match);
  EXPECT_EQ(slots_of(r1[0]), (Pages{1, 2}));
  EXPECT_EQ(pool.ref_count(1), 2);
  EXPECT_EQ(pool.ref_count(2), kMax);
  EXPECT_EQ(c.pinned_pages(0), 2);  // both pages were pinned already
  PoolTestAccess::set_ref(pool, 2, 2);  // back to its two holders before the tables go
}

TEST(Prefix, EveryUsageErrorThrowsAndChangesNothing) {
  Mixed m;
  ASSERT_TRUE(m.c.acquire(m.r[0].ptrs, 16));
  ASSERT_EQ(m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 8), 5);
  BlockPool other_pool(30);
  Coordinator other(m.c.specs(), other_pool);
  const PrefixMatch foreign = other.match_prefix(m.keys);
  const PrefixMatch match = m.c.match_prefix(m.keys);
  ASSERT_EQ(match.num_tokens(), 8);
  auto observe = [&] { return state_of(m.pool, {&m.r[0][0], &m.r[0][1], &m.r[0][2], &m.r[1][0]}); };
  std::vector<Key> repeated = m.keys;
  repeated[5] = repeated[2];
  const std::vector<BlockTable*> twice{&m.r[0][0], &m.r[0][1], &m.r[0][1]};
  EXPECT_INVALID_UNCHANGED(observe(),
                           m.c.cache_full_blocks(m.r[0].ptrs, m.keys, 17));  // past extent
  EXPECT_INVALID_UNCHANGED(observe(), m.c.cache_full_blocks(m.r[0].ptrs, m.keys, -1));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.cache_full_blocks(m.r[0].ptrs, repeated, 16));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.cache_full_blocks(twice, m.keys, 16));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.match_prefix(repeated));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.blocks_consumed_by_claim(foreign));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.claim(m.r[1].ptrs, foreign));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.claim(m.r[0].ptrs, match));  // not fresh
  ASSERT_TRUE(m.c.managers()[0].acquire(m.pool, m.r[1][0], 4));
  EXPECT_INVALID_UNCHANGED(observe(), m.c.claim(m.r[1].ptrs, match));  // one table not fresh
  EXPECT_INVALID_UNCHANGED(observe(), m.c.claim(twice, match));
}

TEST(Prefix, LookupPrefersACopyInUseThenTheEarliestRegistered) {
  BlockPool pool(10);
  Coordinator c({GroupSpec(GroupKind::full, 2)}, pool);
  Request a(1), b(1), d(1);
  const auto keys = keys_of(4, 2);
  ASSERT_TRUE(c.acquire(a.ptrs, 4));
  ASSERT_TRUE(c.acquire(b.ptrs, 4));
  EXPECT_EQ(c.cache_full_blocks(a.ptrs, keys, 4), 2);
  EXPECT_EQ(c.cache_full_blocks(b.ptrs, keys, 4), 2);  // a second copy of each name
  EXPECT_EQ(pool.num_cached(), 4);
  ASSERT_EQ(c.free(a.ptrs), 2);
  PrefixMatch match = c.match_prefix(keys);
  EXPECT_EQ(Pages(match.pages(0).begin(), match.pages(0).end()), (Pages{3, 4}));
  EXPECT_EQ(c.blocks_consumed_by_claim(match), 0);
  ASSERT_EQ(c.free(b.ptrs), 2);
  match = c.match_prefix(keys);
  EXPECT_EQ(Pages(match.pages(0).begin(), match.pages(0).end()), (Pages{1, 2}));
  EXPECT_EQ(c.blocks_consumed_by_claim(match), 2);
  c.claim(d.ptrs, match);
  EXPECT_EQ(slots_of(d[0]), (Pages{1, 2}));
}

TEST(Prefix, AllocationEvictsNamesOnlyWhenNoUnnamedPageIsFree) {
  BlockPool pool(6);
  Coordinator c({GroupSpec(GroupKind::full, 2)}, pool);
  Request named(1), plain(1);
  ASSERT_TRUE(c.acquire(named.ptrs, 4));  // pages 1, 2
  ASSERT_TRUE(c.acquire(plain.ptrs, 4));  // pages 3, 4
  ASSERT_EQ(c.cache_full_blocks(named.ptrs, keys_of(4, 2), 4), 2);
  ASSERT_EQ(c.free(named.ptrs), 2);
  ASSERT_EQ(c.free(plain.ptrs), 2);
  EXPECT_EQ(queue_of(pool), (Pages{3, 4, 5, 2, 1}));
  Pages out(3);
  ASSERT_TRUE(pool.allocate(3, out.data()));
  EXPECT_EQ(out, (Pages{3, 4, 5}));
  EXPECT_EQ(pool.num_cached(), 2);
  // The oldest name goes first once only named pages are left.
  Pages one(1);
  ASSERT_TRUE(pool.allocate(1, one.data()));
  EXPECT_EQ(one[0], 2);
  EXPECT_EQ(pool.num_cached(), 1);
}

TEST(Prefix, WithoutRetentionUnnamedPagesQueueBehindNamedOnesAndTheirNamesGo) {
  BlockPool pool(6, false);
  Coordinator c({GroupSpec(GroupKind::full, 2)}, pool);
  Request named(1), plain(1);
  ASSERT_TRUE(c.acquire(named.ptrs, 4));
  ASSERT_TRUE(c.acquire(plain.ptrs, 4));
  ASSERT_EQ(c.cache_full_blocks(named.ptrs, keys_of(4, 2), 4), 2);
  ASSERT_EQ(c.free(named.ptrs), 2);
  ASSERT_EQ(c.free(plain.ptrs), 2);
  EXPECT_EQ(queue_of(pool), (Pages{5, 2, 1, 4, 3}));
  Pages out(3);
  ASSERT_TRUE(pool.allocate(3, out.data()));
  EXPECT_EQ(out, (Pages{5, 2, 1}));
  EXPECT_EQ(pool.num_cached(), 0);  // both names evicted while unnamed pages were free
}

TEST(Prefix, StateSupportIsNotMonotoneSoTheSearchTriesEveryBoundary) {
  BlockPool pool(10);
  Coordinator c({GroupSpec(GroupKind::state, 2)}, pool);
  Request r(1);
  const auto keys = keys_of(10, 2);
  ASSERT_TRUE(c.acquire(r.ptrs, 4));
  EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 4), 1);  // slot 1
  ASSERT_TRUE(c.acquire(r.ptrs, 4));
  EXPECT_EQ(c.cache_full_blocks(r.ptrs, keys, 8), 1);  // slot 3
  ASSERT_TRUE(c.acquire(r.ptrs, 2));                   // 10 tokens, no snapshot named at 10
  EXPECT_EQ(slots_of(r[0]), (Pages{1, 2, 3, 4, 5}));
  // Boundaries 2 and 6 are unsupported, 4 and 8 supported, 10 not.
  PrefixMatch match = c.match_prefix(keys);
  EXPECT_EQ(match.num_tokens(), 8);
  EXPECT_EQ(Pages(match.pages(0).begin(), match.pages(0).end()), (Pages{0, 0, 0, 4}));
  match = c.match_prefix(std::span(keys).first(3));
  EXPECT_EQ(match.num_tokens(), 4);
  EXPECT_EQ(Pages(match.pages(0).begin(), match.pages(0).end()), (Pages{0, 2}));
  EXPECT_EQ(c.match_prefix(std::span(keys).first(1)).num_tokens(), 0);
}

TEST(Prefix, WindowOfOneSupportsEveryBoundaryWithoutAPage) {
  BlockPool pool(4);
  Coordinator c({GroupSpec(GroupKind::sliding, 2, 1)}, pool);
  Request r(1);
  const PrefixMatch match = c.match_prefix(keys_of(8, 2));
  EXPECT_EQ(match.num_tokens(), 8);
  EXPECT_EQ(match.num_real_pages(), 0);
  EXPECT_EQ(c.blocks_consumed_by_claim(match), 0);
  c.claim(r.ptrs, match);
  EXPECT_EQ(slots_of(r[0]), (Pages{0, 0, 0, 0}));
  EXPECT_EQ(r[0].reclaim_floor(), 4);
  EXPECT_TRUE(r[0].is_bound());
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_EQ(c.free(r.ptrs), 0);
  EXPECT_TRUE(r[0].is_fresh());
}

}  // namespace
}  // namespace livetail::testing
