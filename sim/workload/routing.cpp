#include "sim/workload/routing.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numeric>
#include <utility>

#include "sim/core/error.hpp"
#include "sim/core/rng.hpp"

namespace moesim::workload {

RoutingModel::RoutingModel(RoutingConfig config, int experts, int layers, int iterations, std::uint64_t seed)
    : config_(std::move(config)), experts_(experts), seed_(seed) {
  if (config_.kind == RoutingKind::Process)
    table_ = std::make_shared<const PopularityTable>(generate_popularity(config_.process, experts, layers, iterations, seed));
  if (config_.kind == RoutingKind::Trace) table_ = config_.trace;
  if (table_ && (table_->experts() != experts || table_->layers() < layers || table_->iterations() < iterations))
    invariant_failed("routing: the popularity table does not cover the run's experts, layers and iterations");
}

std::vector<double> RoutingModel::popularity(int iteration, int layer) const {
  if (table_) {
    const auto shares = table_->at(iteration, layer);
    return {shares.begin(), shares.end()};
  }
  if (config_.kind == RoutingKind::Uniform) return std::vector<double>(experts_, 1.0 / experts_);
  const std::vector<double> ranked = zipf_weights(static_cast<std::size_t>(experts_), config_.zipf_exponent);
  std::vector<int> order(experts_);
  std::iota(order.begin(), order.end(), 0);
  const int epoch = config_.resample_each_iteration ? iteration : 0;
  Rng rng = Rng::derive(seed_, "routing", (static_cast<std::uint64_t>(epoch) << 32) | static_cast<std::uint32_t>(layer));
  rng.shuffle(order);
  std::vector<double> p(experts_);
  for (int rank = 0; rank < experts_; ++rank) p[order[rank]] = ranked[rank];
  return p;
}

bool RoutingModel::sampled() const {
  return config_.sampling != RoutingSampling::Expected;
}

Rng RoutingModel::sampler(int iteration, int layer, int microbatch) const {
  return Rng::derive(seed_, "routing/sample",
                     (static_cast<std::uint64_t>(iteration) << 40) | (static_cast<std::uint64_t>(layer) << 20) |
                         static_cast<std::uint32_t>(microbatch));
}

namespace {

// Binomial(n, p) from the seeded stream.
double binomial(Rng& rng, double n, double p) {
  if (n <= 0 || p <= 0) return 0;
  if (p >= 1) return n;
  const double mean = n * p;
  if (mean < 30 || n * (1 - p) < 30) {
    if (p > 0.5) return n - binomial(rng, n, 1 - p);
    // Inversion: walk the pmf from 0; expected O(n·p) steps.
    double u = rng.uniform();
    double q = std::pow(1 - p, n);
    const double ratio = p / (1 - p);
    double k = 0;
    while (u > q && k < n) {
      u -= q;
      q *= (n - k) / (k + 1) * ratio;
      ++k;
    }
    return k;
  }
  // Normal approximation with continuity correction.
  const double z = rng.normal();
  return std::clamp(std::floor(mean + z * std::sqrt(mean * (1 - p)) + 0.5), 0.0, n);
}

}  // namespace

std::vector<double> sample_copies(const std::vector<double>& popularity, double copies, Rng& rng) {
  std::vector<double> out(popularity.size(), 0.0);
  double left = std::round(copies), mass = 1.0;
  for (std::size_t e = 0; e < popularity.size() && left > 0; ++e) {
    const double p = mass > 0 ? std::min(1.0, popularity[e] / mass) : 1.0;
    const double x = e + 1 == popularity.size() ? left : binomial(rng, left, p);
    out[e] = x;
    left -= x;
    mass -= popularity[e];
  }
  return out;
}

std::vector<double> expert_capacities(double copies, double capacity_factor, std::size_t experts,
                                      const std::vector<double>& shares) {
  if (!shares.empty() && shares.size() != experts) invariant_failed("capacity shares of another expert count");
  std::vector<double> out(experts, 0.0);
  if (capacity_factor <= 0) return out;
  for (std::size_t e = 0; e < experts; ++e) {
    const double share = shares.empty() ? 1.0 / static_cast<double>(experts) : shares[e];
    // f·copies/E written as GShard does, so the uniform case keeps its exact value.
    out[e] = std::ceil(shares.empty() ? capacity_factor * copies / static_cast<double>(experts) : capacity_factor * copies * share);
  }
  return out;
}

AliasTable::AliasTable(const std::vector<double>& weights) : slots_(weights.size()) { build(weights, 32, slots_.data()); }

void AliasTable::build(std::span<const double> weights, int keep_bits, Slot* out) {
  const std::size_t n = weights.size();
  double sum = 0;
  for (const double w : weights) sum += std::max(0.0, w);
  if (n == 0 || sum <= 0) invariant_failed("alias table over no weight");
  // Scaled to mean 1: a slot below 1 takes the rest from a category above 1 (its alias).
  std::vector<double> scaled(n);
  std::vector<std::uint32_t> small, large;
  for (std::size_t i = 0; i < n; ++i) {
    scaled[i] = std::max(0.0, weights[i]) * static_cast<double>(n) / sum;
    out[i] = {UINT32_MAX, static_cast<std::uint32_t>(i)};
    (scaled[i] < 1.0 ? small : large).push_back(static_cast<std::uint32_t>(i));
  }
  const double top = std::ldexp(1.0, keep_bits) - 1;
  while (!small.empty() && !large.empty()) {
    const std::uint32_t s = small.back(), l = large.back();
    small.pop_back();
    out[s] = {static_cast<std::uint32_t>(std::clamp(std::ldexp(scaled[s], keep_bits), 0.0, top)), l};
    scaled[l] -= 1.0 - scaled[s];
    if (scaled[l] < 1.0) {
      large.pop_back();
      small.push_back(l);
    }
  }
  // What is left is 1 up to rounding: always kept.
}

namespace {

std::vector<double> group_weights(const std::vector<double>& weights) {
  std::vector<double> out((weights.size() + GroupedAliasTable::kGroup - 1) / GroupedAliasTable::kGroup, 0.0);
  for (std::size_t i = 0; i < weights.size(); ++i) out[i / GroupedAliasTable::kGroup] += std::max(0.0, weights[i]);
  return out;
}

}  // namespace

GroupedAliasTable::GroupedAliasTable(const std::vector<double>& weights)
    : categories_(weights.size()), groups_(group_weights(weights)), members_(groups_.size() * kGroup) {
  std::array<double, kGroup> member;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    member.fill(0.0);  // the last group's missing members: no weight, never drawn
    for (std::size_t m = 0; m < kGroup && g * kGroup + m < weights.size(); ++m) member[m] = weights[g * kGroup + m];
    // A group without weight is never drawn: its slots stay unbuilt.
    if (std::any_of(member.begin(), member.end(), [](double w) { return w > 0; }))
      AliasTable::build(member, kMemberKeepBits, members_.data() + g * kGroup);
  }
}

void SparseCopySampler::draw(const std::vector<double>& popularity, const GroupedAliasTable& table, double copies,
                             SparseCopies& out) {
  out.clear();
  if (draws_densely(copies, popularity.size())) return dense(popularity, copies, out);  // straight into `out`
  each(popularity, table, copies, [&out](std::uint32_t e, double c) { out.emplace_back(e, c); });
}

void SparseCopySampler::dense(const std::vector<double>& popularity, double copies, SparseCopies& out) {
  sparse_copies(sample_copies(popularity, copies, rng_), out);
}

void sparse_copies(const std::vector<double>& dense, SparseCopies& out) {
  out.clear();
  for (std::size_t e = 0; e < dense.size(); ++e)
    if (dense[e] > 0) out.emplace_back(static_cast<std::uint32_t>(e), dense[e]);
}

DispatchPlan apply_capacity(std::vector<double> copies, double capacity) {
  std::vector<double> each(copies.size(), capacity);
  return apply_capacity(std::move(copies), each);
}

DispatchPlan apply_capacity(std::vector<double> copies, const std::vector<double>& capacity) {
  if (capacity.size() != copies.size()) invariant_failed("a capacity per expert of another expert count");
  DispatchPlan plan;
  plan.kept_per_expert = std::move(copies);
  for (std::size_t e = 0; e < plan.kept_per_expert.size(); ++e) {
    double& c = plan.kept_per_expert[e];
    const double kept = capacity[e] > 0 ? std::min(c, capacity[e]) : c;
    plan.capacity = std::max(plan.capacity, capacity[e]);
    plan.dropped += c - kept;
    plan.kept += kept;
    c = kept;
  }
  return plan;
}

DispatchPlan plan_dispatch(const std::vector<double>& popularity, double tokens, int top_k, double capacity_factor,
                           const std::vector<double>& capacity_shares) {
  const double copies = tokens * top_k;
  std::vector<double> want(popularity.size());
  for (std::size_t e = 0; e < popularity.size(); ++e) want[e] = copies * popularity[e];
  return apply_capacity(std::move(want), expert_capacities(copies, capacity_factor, popularity.size(), capacity_shares));
}

}  // namespace moesim::workload
