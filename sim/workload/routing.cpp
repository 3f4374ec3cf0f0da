#include "sim/workload/routing.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/core/rng.hpp"

namespace moesim::workload {

RoutingModel::RoutingModel(RoutingConfig config, int experts, std::uint64_t seed)
    : config_(config), experts_(experts), seed_(seed) {}

std::vector<double> RoutingModel::popularity(int iteration, int layer) const {
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

DispatchPlan plan_dispatch(const std::vector<double>& popularity, double tokens, int top_k, double capacity_factor) {
  DispatchPlan plan;
  const double copies = tokens * top_k;
  const double experts = static_cast<double>(popularity.size());
  plan.capacity = capacity_factor > 0 ? std::ceil(capacity_factor * copies / experts) : 0;
  plan.kept_per_expert.resize(popularity.size());
  for (std::size_t e = 0; e < popularity.size(); ++e) {
    const double want = copies * popularity[e];
    const double kept = plan.capacity > 0 ? std::min(want, plan.capacity) : want;
    plan.kept_per_expert[e] = kept;
    plan.kept += kept;
    plan.dropped += want - kept;
  }
  return plan;
}

}  // namespace moesim::workload
