// Token routing: Zipf popularity, capacity drops and the per-source multinomial draws.
#include <gtest/gtest.h>

#include <numeric>

#include "sim/core/rng.hpp"
#include "sim/workload/routing.hpp"

using namespace moesim;
using namespace moesim::workload;

TEST(Routing, ZipfPopularityIsNormalisedAndPermutedPerLayer) {
  RoutingConfig c;
  c.kind = RoutingKind::Zipf;
  c.zipf_exponent = 1.0;
  RoutingModel r(c, 4, 7);
  const auto p0 = r.popularity(0, 0);
  // 1, 1/2, 1/3, 1/4 normalised by 25/12: the largest share is 12/25.
  EXPECT_NEAR(std::accumulate(p0.begin(), p0.end(), 0.0), 1.0, 1e-12);
  EXPECT_NEAR(*std::max_element(p0.begin(), p0.end()), 12.0 / 25.0, 1e-12);
  bool moved = false;
  for (int layer = 1; layer < 8; ++layer) moved |= r.popularity(0, layer) != p0;
  EXPECT_TRUE(moved);
  EXPECT_EQ(r.popularity(3, 2), r.popularity(3, 2));
}

TEST(Routing, CapacityKeepsAtMostCeilFkTOverE) {
  // 1000 tokens, top-2, 4 experts, f = 1.1: capacity ceil(1.1·2000/4) = 550. Shares 0.4, 0.3,
  // 0.2, 0.1 want 800, 600, 400, 200: 250 + 50 copies dropped.
  const auto plan = plan_dispatch({0.4, 0.3, 0.2, 0.1}, 1000, 2, 1.1);
  EXPECT_DOUBLE_EQ(plan.capacity, 550);
  EXPECT_DOUBLE_EQ(plan.dropped, 300);
  EXPECT_DOUBLE_EQ(plan.kept, 1700);
  EXPECT_DOUBLE_EQ(plan.kept_per_expert[0], 550);
}

TEST(Routing, SampledCopiesSumExactlyAndAverageToThePopularity) {
  // 2000 draws of 5000 copies over shares 0.5, 0.25, 0.15, 0.1: each draw sums to 5000; the mean
  // per expert is within 3 standard errors of 5000·p (σ/√2000 with σ = √(5000·p·(1−p))).
  const std::vector<double> p{0.5, 0.25, 0.15, 0.1};
  Rng rng(42);
  std::vector<double> sum(4, 0.0);
  const int draws = 2000;
  for (int i = 0; i < draws; ++i) {
    const auto x = sample_copies(p, 5000, rng);
    EXPECT_DOUBLE_EQ(std::accumulate(x.begin(), x.end(), 0.0), 5000);
    for (int e = 0; e < 4; ++e) sum[e] += x[e];
  }
  for (int e = 0; e < 4; ++e) {
    const double mean = sum[e] / draws, sigma = std::sqrt(5000 * p[e] * (1 - p[e]));
    EXPECT_NEAR(mean, 5000 * p[e], 3 * sigma / std::sqrt(draws)) << "expert " << e;
  }
  // Small means use inversion: 10 copies over 64 experts still sum exactly.
  const auto small = sample_copies(std::vector<double>(64, 1.0 / 64), 10, rng);
  EXPECT_DOUBLE_EQ(std::accumulate(small.begin(), small.end(), 0.0), 10);
}
