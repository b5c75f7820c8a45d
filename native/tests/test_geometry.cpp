// geometry.h (semantics section 4): the reference figures, and every closed form against its
// slot-by-slot definition on a grid.
#include <gtest/gtest.h>

#include "livetail/geometry.h"

namespace livetail::geometry {
namespace {

TEST(Geometry, DivAndModAgreeForPowerOfTwoAndOtherDivisors) {
  EXPECT_EQ(div(17, 8), 2);
  EXPECT_EQ(mod(17, 8), 1);
  EXPECT_EQ(div(17, 3), 5);
  EXPECT_EQ(mod(17, 3), 2);
  EXPECT_EQ(div(0, 1), 0);
  EXPECT_EQ(min(3, 4), 3);
  EXPECT_EQ(max(3, 4), 4);
}

TEST(Geometry, CeilDivRoundsUpWithoutInt32Overflow) {
  EXPECT_EQ(ceil_div(16, 8), 2);
  EXPECT_EQ(ceil_div(17, 8), 3);
  EXPECT_EQ(ceil_div(0, 8), 0);
  // (a + B - 1) would pass 2**31 - 1 here.
  EXPECT_EQ(ceil_div(2147483645, 3), 715827882);
}

TEST(Geometry, ResumePagesHoldTheLastWMinusOneTokens) {
  EXPECT_EQ(resume_pages(12, 8), 2);
  EXPECT_EQ(resume_pages(9, 8), 1);
  EXPECT_EQ(resume_pages(1, 8), 0);
  EXPECT_EQ(resume_pages(511, 128), 4);
}

TEST(Geometry, SlidOutCountsPagesWhollyBehindTheNextQuery) {
  EXPECT_EQ(slid_out(0, 12, 8), 0);
  EXPECT_EQ(slid_out(11, 12, 8), 0);  // f - W + 1 = 0
  EXPECT_EQ(slid_out(17, 12, 8), 0);
  EXPECT_EQ(slid_out(19, 12, 8), 1);
  EXPECT_EQ(slid_out(8192, 12, 8), 1022);
  EXPECT_EQ(reclaim_bound(8192, 1000, 12, 8), 1000);
  EXPECT_EQ(reclaim_bound(8192, 1024, 12, 8), 1022);
}

TEST(Geometry, PeriodAndKeptDegenerateToEverySlotWhenLiveTailIsOff) {
  EXPECT_EQ(period(0, 8), 1);
  EXPECT_EQ(kept_per_period(12, 8, 0), 1);
  EXPECT_EQ(period(256, 8), 32);
  EXPECT_EQ(kept_per_period(12, 8, 256), 2);
  EXPECT_EQ(kept_per_period(100, 8, 16), 2);  // R = 13 > m = 2: every slot live
}

TEST(Geometry, ReferenceChunkOf8192TokensKeepsSixtyFourPages) {
  // B=8, W=12, A=256: slots 1022, 1023 and every slot with s mod 32 >= 30.
  EXPECT_EQ(new_slots(0, 8, 8192), 1024);
  EXPECT_EQ(blocks_needed(0, 0, 8192, 12, 8, 256), 64);
  EXPECT_TRUE(live(30, 8192, 12, 8, 256));
  EXPECT_FALSE(live(29, 8192, 12, 8, 256));
  EXPECT_TRUE(live(1022, 8192, 12, 8, 256));
  EXPECT_FALSE(live(1021, 8192, 12, 8, 256));
  EXPECT_EQ(live_count(0, 1024, 8192, 12, 8, 256), 64);
}

TEST(Geometry, DemandIsNotMonotoneSoTheSequentialChargeIsLarger) {
  EXPECT_EQ(blocks_needed(0, 0, 17, 12, 8, 256), 3);
  EXPECT_EQ(blocks_needed(0, 0, 19, 12, 8, 256), 2);
  EXPECT_EQ(blocks_needed_sequential(0, 0, 17, 2, 12, 8, 256), 3);
  EXPECT_EQ(blocks_needed_sequential(0, 0, 0, 19, 12, 8, 256), 2);
  EXPECT_EQ(blocks_needed_sequential(0, 0, 17, 2, 0, 8, 0), 3);  // not live: = combined
}

TEST(Geometry, WindowOfOneEndingOnAPageBoundaryTakesNoPage) {
  EXPECT_EQ(blocks_needed(0, 0, 16, 1, 8, 16), 0);
  EXPECT_EQ(blocks_needed(2, 0, 3, 1, 8, 16), 1);
}

TEST(Geometry, TailAndNewSlotsFollowTheSpill) {
  EXPECT_EQ(tail_after(0, 8, 17), 7);
  EXPECT_EQ(tail_after(7, 8, 2), 5);
  EXPECT_EQ(tail_after(7, 8, 15), 0);
  EXPECT_EQ(new_slots(7, 8, 7), 0);
  EXPECT_EQ(new_slots(7, 8, 8), 1);
  EXPECT_EQ(extent(3, 5, 8), 19);
  EXPECT_EQ(blocks_needed(3, 5, 5, 12, 8, 256), 0);  // fills tail room only
}

TEST(Geometry, Int32LimitIsOnSlotsTimesPageSize) {
  EXPECT_TRUE(fits_int32(0, 0, 1, 2147483647));
  EXPECT_FALSE(fits_int32(1, 0, 1, 2147483647));
  EXPECT_TRUE(fits_int32(0, 0, 2, 2147483646));
  EXPECT_FALSE(fits_int32(0, 0, 2, 2147483647));  // 2**30 slots of 2 tokens
}

TEST(Geometry, ResumeCountBelowMatchesItsDefinition) {
  EXPECT_EQ(resume_count_below(10, 4, 2), 4);  // s = 2, 3, 6, 7
  for (int64_t m = 1; m <= 6; ++m)
    for (int64_t kept = 0; kept <= m; ++kept) {
      int64_t n = 0;
      for (int64_t x = 0; x <= 40; ++x) {
        EXPECT_EQ(resume_count_below(x, m, kept), n) << "x=" << x << " m=" << m << " kept=" << kept;
        n += x % m >= m - kept;
      }
    }
}

TEST(Geometry, LiveCountAndBlocksNeededMatchTheSlotBySlotDefinition) {
  for (int64_t B = 1; B <= 4; ++B)
    for (int64_t W = 1; W <= 12; ++W)
      for (int64_t m = 0; m <= 4; ++m) {
        const int64_t A = m * B;
        for (int64_t slots = 0; slots <= 10; ++slots)
          for (int64_t tail = 0; tail < B; ++tail) {
            if (slots == 0 && tail != 0) continue;
            for (int64_t n = 0; n <= 12 * B; ++n) {
              const int64_t add = new_slots(tail, B, n);
              const int64_t f = extent(slots, tail, B) + n;
              int64_t real = 0;
              for (int64_t s = slots; s < slots + add; ++s) real += live(s, f, W, B, A);
              ASSERT_EQ(blocks_needed(slots, tail, n, W, B, A), real)
                  << "B=" << B << " W=" << W << " A=" << A << " slots=" << slots << " tail=" << tail
                  << " n=" << n;
            }
          }
      }
}

// The whole-prompt charge (semantics 13.1): the greatest held_after_chunk over every chunk
// (f, F) a chunking reaches and the decode, minus what the table holds at e.
int64_t prompt_by_enumeration(int64_t e, int64_t n, int64_t C, int64_t d, int64_t W, int64_t B,
                              int64_t A) {
  const int64_t N = e + n;
  int64_t best = 0;
  for (int64_t f = e; f < N; ++f)
    for (int64_t F = f + 1; F <= min(f + C, N); ++F)
      best = max(best, held_after_chunk(f, F, W, B, A));
  if (d > 0) best = max(best, held_after_chunk(N, N + d, W, B, A));
  return max(0, best - (ceil_div(e, B) - slid_out(e, W, B)));
}

TEST(Geometry, PromptChargeIsTheWorstReachableChunk) {
  for (int64_t B = 1; B <= 5; ++B)
    for (int64_t W = 1; W <= 13; W += 2)
      for (int64_t m = 0; m <= 3; ++m)
        for (int64_t e : {int64_t{0}, int64_t{1}, B + 2})
          for (int64_t n = 0; n <= 24; n += 2)
            for (int64_t C = 1; C <= 9; C += 2)
              for (int64_t d = 0; d <= 2; ++d) {
                const int64_t slots = ceil_div(e, B), tail = slots * B - e;
                ASSERT_EQ(blocks_needed_prompt(slots, tail, n, C, d, W, B, m * B),
                          prompt_by_enumeration(e, n, C, d, W, B, m * B))
                    << "B=" << B << " W=" << W << " m=" << m << " e=" << e << " n=" << n
                    << " C=" << C << " d=" << d;
              }
}

TEST(Geometry, PromptChargeReferenceFigures) {
  // gpt-oss's sliding group (W=128, B=16), 3000 tokens in 512-token chunks: vLLM's cap.
  EXPECT_EQ(blocks_needed_prompt(0, 0, 3000, 512, 0, 128, 16, 0), 41);
  // A prompt of one chunk: its own pages.
  EXPECT_EQ(blocks_needed_prompt(0, 0, 100, 512, 0, 128, 16, 0), 7);
  // B=8, W=12, A=256, 8192-token chunks: 3 + 64 + 3 with live tail, 1027 without.
  EXPECT_EQ(blocks_needed_prompt(0, 0, 100000, 8192, 1, 12, 8, 256), 70);
  EXPECT_EQ(blocks_needed_prompt(0, 0, 100000, 8192, 1, 12, 8, 0), 1027);
}

}  // namespace
}  // namespace livetail::geometry
