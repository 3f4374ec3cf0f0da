// moesim search's screening (sim/search/search.hpp): which short runs each layout gets, and the
// line through them that stands for the full batch.
#include <gtest/gtest.h>

#include "sim/search/search.hpp"

namespace moesim::search {
namespace {

Layout at(int pp, int vp = 1) {
  Layout l;
  l.pp = pp;
  l.vp = vp;
  return l;
}

SearchPlan plan_of(std::vector<Layout> layouts, std::vector<int> microbatches, int global_batch) {
  SearchPlan p;
  p.fitting = std::move(layouts);
  p.microbatches = std::move(microbatches);
  p.global_batch = global_batch;
  p.cpu_seconds.assign(p.fitting.size(), 1);
  return p;
}

TEST(Search, ScreeningRunsTwoShortBatchesOrTheWholeOne) {
  // Global batch 4096. PP 4 × VP 4 at 64 microbatches (DP 64, micro-batch 1): the interleaved
  // schedule's steady state needs 2·PP = 8, so 8 and 16 microbatches, batches of 512 and 1024.
  // PP 8 without VP at 128 microbatches (DP 32): 8 and 16 (256, 512). PP 1 at 4 microbatches: 2
  // and 4 would be the whole batch, so it runs once, whole.
  const SearchPlan p = plan_of({at(4, 4), at(8), at(1)}, {64, 128, 4}, 4096);
  const Screening s = screening(p);
  EXPECT_EQ(s.layout, (std::vector<std::size_t>{0, 0, 1, 1, 2}));
  EXPECT_EQ(s.microbatches, (std::vector<int>{8, 16, 8, 16, 4}));
  EXPECT_EQ(s.global_batch, (std::vector<int>{512, 1024, 256, 512, 4096}));
}

TEST(Search, TheLineThroughTheShortRunsGivesTheFullIteration) {
  // Layout 0: 8 microbatches in 100 ms, 16 in 180 ms: 10 ms a microbatch beyond an intercept of
  // 20 ms, so 64 take 20 + 640 = 660 ms. Its 8 microbatches moved 8000 tokens/s × 0.1 s = 800
  // tokens, 64 move 6400: 6400 / 0.66 s. Peak memory: the larger of the two runs'. Layout 1 ran
  // whole (its figures stand); layout 2's second run was refused, and says why.
  const SearchPlan p = plan_of({at(4, 4), at(1), at(2)}, {64, 4, 32}, 4096);
  const Screening s = screening(p);
  ASSERT_EQ(s.layout, (std::vector<std::size_t>{0, 0, 1, 2, 2}));
  const std::vector<Figures> rows{{true, 8000, 100, 5e9, ""},
                                  {true, 8888.9, 180, 6e9, ""},
                                  {true, 123, 45, 7e9, ""},
                                  {true, 1000, 10, 1e9, ""},
                                  {false, 0, 0, 0, "out of memory"}};
  const auto f = extrapolate(p, s, rows);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_TRUE(f[0].ok);
  EXPECT_DOUBLE_EQ(f[0].iteration_ms, 660);
  EXPECT_DOUBLE_EQ(f[0].tokens_per_second, 6400 / 0.66);
  EXPECT_DOUBLE_EQ(f[0].peak_memory_bytes, 6e9);
  EXPECT_DOUBLE_EQ(f[1].iteration_ms, 45);
  EXPECT_FALSE(f[2].ok);
  EXPECT_EQ(f[2].note, "out of memory");
}

}  // namespace
}  // namespace moesim::search
