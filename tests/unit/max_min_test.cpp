// The max-min solver (sim/network/max_min.hpp) against the round-by-round progressive filling it
// replaced (every round rescans every link and flow), kept here as the reference, a case derived
// by hand with three saturation levels and a tie, and the property the flow executor's partial
// re-solve rests on (a flow leaving leaves the slower flows' rates as they were).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/rng.hpp"
#include "sim/network/max_min.hpp"

using namespace moesim;
using namespace moesim::network;

namespace {

// The scanning progressive filling (Bertsekas & Gallager §6.5) as max_min.cpp had it: each round
// raises every unfrozen flow by the smallest increment that saturates a link, then freezes the
// flows crossing any link whose residual is within 1e-9 of its capacity.
std::vector<double> rescan(const std::vector<std::vector<LinkDemand>>& shares, const std::vector<double>& capacity,
                           std::size_t* rounds = nullptr) {
  const std::size_t flows = shares.size(), links = capacity.size();
  std::vector<double> rates(flows, 0.0), residual(capacity), weight(links, 0.0);
  std::vector<std::uint32_t> users(links, 0), touched;  // links in order of first appearance
  for (const auto& s : shares)
    for (const LinkDemand& d : s) {
      if (users[d.link] == 0) touched.push_back(d.link);
      weight[d.link] += d.bytes, ++users[d.link];
    }
  std::vector<char> frozen(flows, 0);
  std::size_t unfrozen = flows, round = 0;
  while (unfrozen > 0) {
    double step = std::numeric_limits<double>::infinity();
    std::size_t bottleneck = links;
    for (std::uint32_t l : touched)
      if (users[l] > 0 && weight[l] > 0) {
        const double s = std::max(0.0, residual[l]) / weight[l];
        if (s < step) step = s, bottleneck = l;
      }
    if (bottleneck == links) break;
    ++round;
    for (std::size_t f = 0; f < flows; ++f)
      if (!frozen[f]) rates[f] += step;
    for (std::uint32_t l : touched)
      if (users[l] > 0) residual[l] -= step * weight[l];
    residual[bottleneck] = 0;
    for (std::size_t f = 0; f < flows; ++f) {
      if (frozen[f]) continue;
      bool saturated = false;
      for (const LinkDemand& d : shares[f]) saturated = saturated || residual[d.link] <= 1e-9 * capacity[d.link];
      if (!saturated) continue;
      frozen[f] = 1;
      --unfrozen;
      for (const LinkDemand& d : shares[f]) weight[d.link] -= d.bytes, --users[d.link];
    }
  }
  if (rounds) *rounds = round;
  return rates;
}

std::vector<double> solve(const std::vector<std::vector<LinkDemand>>& shares, const std::vector<double>& capacity,
                          std::size_t* rounds = nullptr) {
  std::vector<const std::vector<LinkDemand>*> ptrs;
  for (const auto& s : shares) ptrs.push_back(&s);
  MaxMinSolver solver(capacity.size());
  std::vector<double> rates;
  solver.solve(ptrs, capacity, rates);
  // A second solve on the same solver (its per-link state reused) gives the same rates.
  std::vector<double> again;
  solver.solve(ptrs, capacity, again);
  EXPECT_EQ(rates, again);
  if (rounds) *rounds = solver.rounds();
  return rates;
}

}  // namespace

TEST(MaxMin, ThreeLevelsAndATieByHand) {
  // L0 (4): A, B.  L1 (9): B at a = 0.5, C, D.  L2 (20): C at a = 0.5, D, E.  L3 (6): F, G.  L4 (3): H.
  // Level 2: L0 saturates (4 / 2): A = B = 2. L1 then has 9 − 2.5·2 = 4 left for C, D: 2 more each.
  // Level 3: L3 (6 / 2) and L4 (3 / 1) saturate together, one round: F = G = H = 3.
  // Level 4: L1 saturates: C = D = 4. L2 has 20 − 2.5·4 = 10 left for E alone: E = 4 + 10 = 14.
  const std::vector<std::vector<LinkDemand>> shares{
      {{0, 1}},                  // A
      {{0, 1}, {1, 0.5}},        // B
      {{1, 1}, {2, 0.5}},        // C
      {{1, 1}, {2, 1}},          // D
      {{2, 1}},                  // E
      {{3, 1}},                  // F
      {{3, 1}},                  // G
      {{4, 1}},                  // H
  };
  const std::vector<double> capacity{4, 9, 20, 6, 3};
  std::size_t rounds = 0;
  const auto rates = solve(shares, capacity, &rounds);
  const std::vector<double> want{2, 2, 4, 4, 14, 3, 3, 3};
  EXPECT_EQ(rates, want);
  EXPECT_EQ(rounds, 4u);
  EXPECT_EQ(rescan(shares, capacity), want);
}

TEST(MaxMin, AgreesWithTheRescanOnRandomInstances) {
  // 200 flows over 50 links, paths of 1 to 8 links (a link may repeat), uneven fractions a on all
  // but one link of each flow; capacities from a few values, so that links tie, or all distinct.
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Rng rng(seed);
    const std::size_t links = 50, flows = 200;
    std::vector<std::vector<LinkDemand>> shares(flows);
    for (auto& s : shares) {
      const auto path = 1 + rng.below(8);
      for (std::uint64_t i = 0; i < path; ++i) {
        const double a = i == 0 ? 1.0 : seed % 3 == 0 ? 1.0 : 0.05 + 0.95 * rng.uniform();
        s.push_back({static_cast<std::uint32_t>(rng.below(links)), a});
      }
    }
    std::vector<double> capacity(links);
    for (auto& c : capacity) c = seed % 2 ? 1e9 * (1 + rng.below(4)) : 1e8 + 1e10 * rng.uniform();
    std::size_t rounds = 0, want_rounds = 0;
    const auto rates = solve(shares, capacity, &rounds);
    const auto want = rescan(shares, capacity, &want_rounds);
    ASSERT_EQ(rates.size(), want.size());
    for (std::size_t f = 0; f < flows; ++f)
      EXPECT_NEAR(rates[f], want[f], 1e-9 * want[f]) << "seed " << seed << " flow " << f;
    EXPECT_EQ(rounds, want_rounds) << "seed " << seed;
  }
}

TEST(MaxMin, OneOrTwoRoundsGiveTheRescansBits) {
  // The executor's common solves take one or two rounds; there the rates are bit for bit the
  // rescan's (so that integer picosecond finish times do not move).
  int checked = 0;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    const std::size_t links = 6, flows = 2 + rng.below(6);
    std::vector<std::vector<LinkDemand>> shares(flows);
    for (auto& s : shares)
      for (std::uint64_t i = 0, path = 1 + rng.below(3); i < path; ++i)
        s.push_back({static_cast<std::uint32_t>(rng.below(links)), i == 0 ? 1.0 : 0.1 + 0.9 * rng.uniform()});
    std::vector<double> capacity(links);
    for (auto& c : capacity) c = 1.25e9 * (1 + rng.below(3)) / 3;
    std::size_t rounds = 0;
    const auto rates = solve(shares, capacity, &rounds);
    if (rounds <= 2) {
      EXPECT_EQ(rates, rescan(shares, capacity)) << "seed " << seed;
      ++checked;
    }
  }
  EXPECT_GE(checked, 50);
}

TEST(MaxMin, FlowsWithoutLinksAndEmptyInput) {
  std::vector<double> rates{1, 2};
  MaxMinSolver solver(2);
  solver.solve({}, {1, 1}, rates);
  EXPECT_TRUE(rates.empty());
  // A flow crossing no link is never stopped: it keeps the level the others reached.
  const std::vector<LinkDemand> a{{0, 1}}, none;
  solver.solve({&a, &none}, {5, 1}, rates);
  EXPECT_EQ(rates, (std::vector<double>{5, 5}));
}

TEST(MaxMin, LongPathsThatTieEndInOneRoundOrTwo) {
  // A pipeline's transfers over an NVLink domain: each flow crosses 64 links. Flows 0 and 1 share
  // links 0–63 (a = 1: weight 2); flow 2 crosses 64–127 at a = 1, flow 3 crosses 64–95 at a = 1 and
  // 96–127 at a = 0.5 (weights 2 and 1.5). All links 100 GB/s: links 0–95 saturate together at
  // 1e11 / 2 = 5e10, one round, every rate 5e10 (96–127 would need 6.67e10).
  std::vector<std::vector<LinkDemand>> shares(4);
  for (std::uint32_t l = 0; l < 64; ++l) {
    shares[0].push_back({l, 1});
    shares[1].push_back({l, 1});
    shares[2].push_back({64 + l, 1});
    shares[3].push_back({64 + l, l < 32 ? 1.0 : 0.5});
  }
  std::vector<double> capacity(128, 1e11);
  std::size_t rounds = 0;
  EXPECT_EQ(solve(shares, capacity, &rounds), (std::vector<double>(4, 5e10)));
  EXPECT_EQ(rounds, 1u);
  // Links 64–127 at 200 GB/s: 64–95 saturate only at 2e11 / 2 = 1e11, a second round (96–127 at
  // 2e11 / 1.5 = 1.33e11 do not): flows 0, 1 at 5e10, flows 2, 3 at 1e11, the rescan's bits.
  std::fill(capacity.begin() + 64, capacity.end(), 2e11);
  const auto rates = solve(shares, capacity, &rounds);
  EXPECT_EQ(rates, (std::vector<double>{5e10, 5e10, 1e11, 1e11}));
  EXPECT_EQ(rounds, 2u);
  EXPECT_EQ(rates, rescan(shares, capacity));
}

TEST(MaxMin, OneSolverAcrossShallowAndDeepSolves) {
  // The executor keeps one solver: a deep solve (its heaps built) followed by one-round solves
  // (heaps never built) and the deep one again give what a fresh solver gives each time.
  std::vector<std::vector<std::vector<LinkDemand>>> instances;
  std::vector<std::vector<double>> capacities;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    Rng rng(seed);
    const std::size_t links = 40, flows = seed % 2 ? 100 : 2;  // odd seeds deep, even ones shallow
    std::vector<std::vector<LinkDemand>> shares(flows);
    for (auto& s : shares)
      for (std::uint64_t i = 0, path = 1 + rng.below(6); i < path; ++i)
        s.push_back({static_cast<std::uint32_t>(rng.below(links)), i == 0 ? 1.0 : 0.2 + 0.8 * rng.uniform()});
    std::vector<double> capacity(links);
    for (auto& c : capacity) c = 1e8 + 1e10 * rng.uniform();
    instances.push_back(std::move(shares));
    capacities.push_back(std::move(capacity));
  }
  MaxMinSolver shared(40);
  std::size_t deep = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t i = 0; i < instances.size(); ++i) {
      std::vector<const std::vector<LinkDemand>*> ptrs;
      for (const auto& s : instances[i]) ptrs.push_back(&s);
      std::vector<double> rates;
      shared.solve(ptrs, capacities[i], rates);
      deep += shared.rounds() > 2;
      std::size_t rounds = 0;
      EXPECT_EQ(rates, solve(instances[i], capacities[i], &rounds)) << "instance " << i << " pass " << pass;
      EXPECT_EQ(shared.rounds(), rounds);
    }
  EXPECT_GE(deep, 6u);  // the deep instances do build and use the heaps
}

TEST(MaxMin, AFlowLeavingChangesOnlyTheRatesAtOrAboveItsOwn) {
  // What FlowExecutor::reschedule relies on: take one flow out of a max-min allocation and the
  // flows slower than it keep their rates; the others, filled alone on what the slower ones leave
  // of each link, get what filling every remaining flow anew gives them. Seeded random flows, each
  // taken out in turn; equal to 1e-12 (the fillings add their levels' increments in other orders).
  int partial = 0;
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    Rng rng(seed);
    const std::size_t links = 48, flows = 6 + rng.below(30);
    std::vector<std::vector<LinkDemand>> shares(flows);
    for (auto& s : shares)
      for (int i = 0; i < 4; ++i)
        s.push_back({static_cast<std::uint32_t>(rng.below(links)), i == 0 ? 1.0 : 0.25 + 0.75 * rng.uniform()});
    std::vector<double> capacity(links);
    for (auto& c : capacity) c = 1e9 * (1 + rng.below(8));
    const auto rates = solve(shares, capacity);
    for (std::size_t out = 0; out < flows; ++out) {
      std::vector<std::vector<LinkDemand>> rest, faster;
      std::vector<std::size_t> faster_at;  // each faster flow's place in `rest`
      std::vector<double> left = capacity;
      for (std::size_t f = 0; f < flows; ++f) {
        if (f == out) continue;
        if (rates[f] < rates[out]) {
          for (const auto& d : shares[f]) left[d.link] -= d.bytes * rates[f];
        } else {
          faster.push_back(shares[f]);
          faster_at.push_back(rest.size());
        }
        rest.push_back(shares[f]);
      }
      const auto anew = solve(rest, capacity);
      for (std::size_t f = 0, i = 0; f < flows; ++f) {
        if (f == out) continue;
        if (rates[f] < rates[out]) {
          EXPECT_NEAR(rates[f], anew[i], 1e-12 * anew[i]) << seed << " " << f;
        }
        ++i;
      }
      const auto refilled = solve(faster, left);
      for (std::size_t j = 0; j < faster.size(); ++j)
        EXPECT_NEAR(refilled[j], anew[faster_at[j]], 1e-12 * anew[faster_at[j]]) << seed << " " << j;
      partial += faster.size() < rest.size() && !faster.empty();
    }
  }
  EXPECT_GT(partial, 50);  // most removals keep some rates and re-solve others
}
