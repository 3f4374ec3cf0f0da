// Token routing: Zipf popularity, capacity drops and the per-source multinomial draws.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "sim/core/rng.hpp"
#include "sim/workload/routing.hpp"

using namespace moesim;
using namespace moesim::workload;

TEST(Routing, ZipfPopularityIsNormalisedAndPermutedPerLayer) {
  RoutingConfig c;
  c.kind = RoutingKind::Zipf;
  c.zipf_exponent = 1.0;
  RoutingModel r(c, 4, 1, 1, 7);
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
  // The spread is the multinomial's too: expert 0 gets Binomial(5000, 0.5), variance 1250. The
  // sample variance over 2000 draws has a standard error of about 1250·√(2/1999) ≈ 40; allow 4 of them.
  {
    Rng again(7);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < draws; ++i) {
      const double x = sample_copies(p, 5000, again)[0];
      s1 += x;
      s2 += x * x;
    }
    const double var = (s2 - s1 * s1 / draws) / (draws - 1);
    EXPECT_NEAR(var, 1250, 160);
  }
  // Small means use inversion: 10 copies over 64 experts still sum exactly.
  const auto small = sample_copies(std::vector<double>(64, 1.0 / 64), 10, rng);
  EXPECT_DOUBLE_EQ(std::accumulate(small.begin(), small.end(), 0.0), 10);
}

TEST(Routing, StandardNormalsHaveUnitVarianceAndReplay) {
  // 200,000 polar-method normals: mean within 4/√n of 0, variance within 4·√(2/n) of 1 (the
  // standard errors of a sample mean and variance of N(0,1)); the same seed gives the same values.
  const int n = 200000;
  Rng a(11), b(11);
  double s1 = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double z = a.normal();
    ASSERT_EQ(z, b.normal());
    s1 += z;
    s2 += z * z;
  }
  EXPECT_NEAR(s1 / n, 0.0, 4 / std::sqrt(n));
  EXPECT_NEAR(s2 / n - (s1 / n) * (s1 / n), 1.0, 4 * std::sqrt(2.0 / n));
}

TEST(Routing, AliasDrawsFollowThePopularityInCategoryOrder) {
  // 15 copies over shares 0.5, 0.25, 0.125, 0.125 (fewer than 4 per category: one categorical
  // draw per copy), 4000 times. Each category's total is Binomial(60,000, p): within 5 standard
  // deviations of 60,000·p.
  const std::vector<double> p{0.5, 0.25, 0.125, 0.125};
  const GroupedAliasTable table(p);
  SparseCopySampler sampler(11);
  SparseCopies out;
  std::vector<double> sum(p.size(), 0.0);
  const double n = 15;  // < 4 × 4: one categorical draw per copy
  for (int round = 0; round < 4000; ++round) {
    sampler.draw(p, table, n, out);
    double total = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (i > 0) {
        EXPECT_LT(out[i - 1].first, out[i].first);  // category order
      }
      EXPECT_GT(out[i].second, 0);
      sum[out[i].first] += out[i].second;
      total += out[i].second;
    }
    EXPECT_EQ(total, n);
  }
  const double draws = 4000 * n;
  for (std::size_t e = 0; e < p.size(); ++e)
    EXPECT_NEAR(sum[e], draws * p[e], 5 * std::sqrt(draws * p[e] * (1 - p[e]))) << e;
  // A zero weight is never drawn.
  const AliasTable skip({0.5, 0.0, 0.5});
  Rng rng(11);
  FastBits bits(rng);
  for (int i = 0; i < 10000; ++i) EXPECT_NE(skip.sample(bits), 1u);
}

TEST(Routing, GroupedDrawsFollowThePopularityAcrossGroups) {
  // 200 categories: groups of 64 (0-63, 64-127, 128-191) and a last one of 8 (192-199), the
  // second group without weight. Weights Zipf(1) over the others. 150 copies a draw (< 4 × 200:
  // one group and one member draw per copy), 4000 draws: each category's total is Binomial(600,000,
  // p): within 5 standard deviations; no copy in the weightless group or past the last category.
  std::vector<double> p(200);
  double sum = 0;
  for (std::size_t e = 0; e < p.size(); ++e) sum += p[e] = e >= 64 && e < 128 ? 0.0 : 1.0 / static_cast<double>(e + 1);
  for (double& x : p) x /= sum;
  const GroupedAliasTable table(p);
  EXPECT_EQ(table.groups().size(), 4u);
  SparseCopySampler sampler(5);
  SparseCopies out;
  std::vector<double> total(p.size(), 0.0);
  const double n = 150;
  for (int round = 0; round < 4000; ++round) {
    sampler.draw(p, table, n, out);
    double copies = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (i > 0) {
        EXPECT_LT(out[i - 1].first, out[i].first);
      }
      ASSERT_LT(out[i].first, p.size());
      total[out[i].first] += out[i].second;
      copies += out[i].second;
    }
    EXPECT_EQ(copies, n);
  }
  const double draws = 4000 * n;
  for (std::size_t e = 0; e < p.size(); ++e)
    EXPECT_NEAR(total[e], draws * p[e], 5 * std::sqrt(draws * p[e] * (1 - p[e])) + 1e-9) << e;
}
