// Token routing: per layer and iteration, the popularity of each expert, and what a capacity
// factor does to it (GShard/Switch: each source keeps at most ceil(f·k·T/E) tokens per expert and
// drops the rest). Uniform routing gives every expert 1/E; skewed routing draws a Zipf(s)
// popularity whose ranking is permuted per layer and iteration from the scenario's seed, so the
// hot experts move as they do in real training.
#pragma once

#include <cstdint>
#include <vector>

namespace moesim::workload {

enum class RoutingKind { Uniform, Zipf };

struct RoutingConfig {
  RoutingKind kind = RoutingKind::Uniform;
  double zipf_exponent = 1.0;
  bool resample_each_iteration = true;
};

class RoutingModel {
 public:
  RoutingModel(RoutingConfig config, int experts, std::uint64_t seed);
  // Share of routed token copies that go to each expert; sums to 1.
  std::vector<double> popularity(int iteration, int layer) const;

 private:
  RoutingConfig config_;
  int experts_;
  std::uint64_t seed_;
};

// What one source GPU's `tokens` do in a layer, given the expert popularity.
struct DispatchPlan {
  std::vector<double> kept_per_expert;  // token copies one source sends to each expert
  double kept = 0;                      // Σ kept_per_expert
  double dropped = 0;                   // copies one source drops (over capacity)
  double capacity = 0;                  // per source and expert; 0 = unlimited
};

DispatchPlan plan_dispatch(const std::vector<double>& popularity, double tokens, int top_k, double capacity_factor);

}  // namespace moesim::workload
