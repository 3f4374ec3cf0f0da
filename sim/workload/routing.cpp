#include "sim/workload/routing.hpp"

#include <algorithm>
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

bool RoutingModel::sampled(double sources) const {
  if (config_.sampling == RoutingSampling::Auto) return sources * experts_ <= kAutoSampledLimit;
  return config_.sampling == RoutingSampling::Sampled;
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
