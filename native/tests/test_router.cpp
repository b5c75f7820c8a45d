// livetail::router (the native loops of livetail.router.PrefixIndex): table probes with
// colliding hashes, a full table, and section 8's greatest boundary for full, sliding and
// state groups, with exact values.
#include <gtest/gtest.h>

#include <vector>

#include "livetail/router.h"

namespace livetail::router {
namespace {

constexpr int kBits = 3;  // 8 slots

size_t slot_of(uint64_t h) { return static_cast<size_t>((h * kRouterMul) >> (64 - kBits)); }

// Two hashes whose first slot is the same (the second probes past the first).
std::pair<uint64_t, uint64_t> colliding() {
  for (uint64_t b = 2;; ++b)
    if (slot_of(b) == slot_of(1)) return {1, b};
}

std::vector<int32_t> lookup_all(const std::vector<uint64_t>& table,
                                const std::vector<uint64_t>& hashes) {
  std::vector<int32_t> rows(hashes.size(), -1);
  lookup(table, kBits, hashes, rows);
  return rows;
}

TEST(RouterTable, PlacedHashesAreFoundAndOthersAreRowZero) {
  const auto [a, b] = colliding();
  std::vector<uint64_t> table(2 << kBits, 0);
  const std::vector<uint64_t> hs{a, b, 1000};
  ASSERT_TRUE(place(table, kBits, hs, std::vector<int32_t>{5, 6, 7, 0}));
  EXPECT_EQ(table[2 * slot_of(a)], a);
  EXPECT_EQ(table[2 * slot_of(a) + 1], 5u);
  EXPECT_EQ(table[2 * ((slot_of(a) + 1) % 8)], b);  // the collision went to the next slot
  EXPECT_EQ(lookup_all(table, {b, a, 1000, 999, 0}), (std::vector<int32_t>{6, 5, 7, 0, 0}));
  EXPECT_EQ(lookup_all(table, {}), std::vector<int32_t>{});
}

TEST(RouterTable, PlaceReportsAFullTable) {
  std::vector<uint64_t> table(2 << kBits, 0);
  std::vector<uint64_t> hs;
  std::vector<int32_t> rows;
  for (uint64_t h = 1; h <= 8; ++h) {
    hs.push_back(h * 7919);
    rows.push_back(static_cast<int32_t>(h));
  }
  ASSERT_TRUE(place(table, kBits, hs, rows));
  EXPECT_FALSE(place(table, kBits, std::vector<uint64_t>{1}, std::vector<int32_t>{9}));
  EXPECT_EQ(lookup_all(table, hs), rows);
}

// Presence of one column per group; key i of the prompt has row i + 1 (row 0: the null row).
struct Prompt {
  Prompt(size_t keys, size_t groups) : width(groups), presence((keys + 1) * groups, 0) {
    for (size_t i = 0; i < keys; ++i) rows.push_back(static_cast<int32_t>(i + 1));
  }
  void set(size_t key, size_t group) { presence[(key + 1) * width + group] = 1; }
  Longest run(int64_t base, int64_t lcm, const std::vector<GroupRule>& rules) const {
    return longest(presence, width, rows, base, lcm, rules);
  }
  size_t width;
  std::vector<uint8_t> presence;
  std::vector<int32_t> rows;
};

TEST(RouterLongest, FullGroupStopsAtTheFirstMissingSlot) {
  Prompt p(6, 1);
  for (size_t k : {0, 1, 2, 4, 5}) p.set(k, 0);
  const Longest got = p.run(16, 16, {{16, -1, 0, 0}});
  EXPECT_EQ(got.num_tokens, 48);
  EXPECT_FALSE(got.full_through);
  p.set(3, 0);
  const Longest all = p.run(16, 16, {{16, -1, 0, 0}});
  EXPECT_EQ(all.num_tokens, 96);
  EXPECT_TRUE(all.full_through);
  // A full group of two base pages per slot: slot j is key 2j + 1; lcm 32.
  EXPECT_EQ(p.run(16, 32, {{32, -1, 0, 0}}).num_tokens, 96);
  EXPECT_EQ(p.run(16, 16, {{16, -1, -1, 0}}).num_tokens, 0);  // never named a page
}

TEST(RouterLongest, SlidingSupportIsNotMonotone) {
  // Base 1, lcm 2: a full group B=1 holding every key, a sliding group B=2 with R=1 (its slot
  // j is key 2j + 1) holding slots 1 and 3 of 4: boundaries 4 and 8 are supported, 2 and 6
  // are not.
  Prompt p(8, 2);
  for (size_t k = 0; k < 8; ++k) p.set(k, 0);
  p.set(3, 1);
  p.set(7, 1);
  const std::vector<GroupRule> rules{{1, -1, 0, 0}, {2, 1, 1, 0}};
  EXPECT_EQ(p.run(1, 2, rules).num_tokens, 8);
  EXPECT_TRUE(p.run(1, 2, rules).full_through);
  Prompt q = p;
  q.presence[(7 + 1) * 2 + 1] = 0;  // slot 3 gone: 6 fails, 4 still holds
  EXPECT_EQ(q.run(1, 2, rules).num_tokens, 4);
  // R = 2: boundary 8 needs slots 2 and 3, 4 needs slots 0 and 1.
  p.set(5, 1);
  EXPECT_EQ(p.run(1, 2, {{1, -1, 0, 0}, {2, 2, 1, 0}}).num_tokens, 8);
  EXPECT_EQ(q.run(1, 2, {{1, -1, 0, 0}, {2, 2, 1, 0}}).num_tokens, 0);
}

TEST(RouterLongest, ChunkedGroupNeedsTheSlotsOfItsChunkBehindTheBoundary) {
  // Base 1, lcm 1: a full group holding every key and a chunked group B=1, C=4 (4 slots per
  // chunk) holding slots 4 and 5 of 8: boundary 6 needs slots 4, 5 (held), 7 needs 4..6 (6
  // missing), 8 a multiple of C needs none.
  Prompt p(8, 2);
  for (size_t k = 0; k < 8; ++k) p.set(k, 0);
  p.set(4, 1);
  p.set(5, 1);
  const std::vector<GroupRule> rules{{1, -1, 0, 0}, {1, 0, 1, 4}};
  EXPECT_EQ(p.run(1, 1, rules).num_tokens, 8);
  Prompt seven(7, 2);
  for (size_t k = 0; k < 7; ++k) seven.set(k, 0);
  seven.set(4, 1);
  seven.set(5, 1);
  EXPECT_EQ(seven.run(1, 1, rules).num_tokens, 6);  // 7 misses slot 6
  // Never named a page: only a multiple of C (4) is supported.
  EXPECT_EQ(seven.run(1, 1, {{1, -1, 0, 0}, {1, 0, -1, 4}}).num_tokens, 4);
}

TEST(RouterLongest, StateAndWindowOneGroups) {
  // No full group: full_through is false; a state group needs the slot ending at T.
  Prompt p(5, 2);
  p.set(2, 0);
  EXPECT_EQ(p.run(4, 4, {{4, 1, 0, 0}}).num_tokens, 12);
  EXPECT_FALSE(p.run(4, 4, {{4, 1, 0, 0}}).full_through);
  // A sliding group with W = 1 (resume 0) supports every boundary even without a column.
  EXPECT_EQ(p.run(4, 4, {{4, 1, 0, 0}, {4, 0, -1, 0}}).num_tokens, 12);
  EXPECT_EQ(p.run(4, 4, {{4, 1, 0, 0}, {4, 1, -1, 0}}).num_tokens, 0);
  // A state group B=8 (lcm 8): slot 0 is key 1, slot 1 is key 3.
  p.set(3, 1);
  EXPECT_EQ(p.run(4, 8, {{4, 1, 0, 0}, {8, 1, 1, 0}}).num_tokens, 0);  // 16 needs key 3 in group 0
  p.set(3, 0);
  EXPECT_EQ(p.run(4, 8, {{4, 1, 0, 0}, {8, 1, 1, 0}}).num_tokens, 16);
}

TEST(RouterLongest, BoundariesStopAtTwoToTheThirtyOneTokens) {
  Prompt p(3, 1);
  for (size_t k = 0; k < 3; ++k) p.set(k, 0);
  // 3 keys of 2^30 tokens: at most 2^31 - 1 tokens, so one boundary of 2^30.
  EXPECT_EQ(p.run(int64_t{1} << 30, int64_t{1} << 30, {{int64_t{1} << 30, -1, 0, 0}}).num_tokens,
            int64_t{1} << 30);
}

}  // namespace
}  // namespace livetail::router
