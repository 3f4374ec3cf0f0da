// Expert popularity that moves from iteration to iteration, as seed 004 measures it (§2.1, Fig. 2:
// "expert token load fluctuates by over 16x within only 3 iterations"; Fig. 10: the previous
// iteration's popularity is a close proxy of the next) and as spec 004.D recommends simulating
// it. Two sources, one table of popularity per iteration and MoE layer:
//  - a seeded generator: per layer, each expert's gate logit is a mean-reverting random walk (a
//    discrete Ornstein-Uhlenbeck process) around its long-run level, with occasional upward jumps
//    (spikes) that decay at the same rate; the layer's popularity is the softmax of its logits.
//    The long-run levels are spread × the standard normal quantiles Φ⁻¹((i + ½)/E), dealt to the
//    experts by a seeded permutation per layer, so the skew does not hang on a few draws;
//  - a trace: a CSV of iteration,layer,expert,tokens (a real run's gate counts), replayed as is.
// The table is built once per run; routing reads it (sim/workload/routing.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace moesim::workload {

// The generator's parameters (routing.process in a scenario). Defaults: fitted as a whole, with
// the static uniform replication of seed 004 Table 1 (32 experts, capacity factor 1/2/4, pooled
// drops: token survival 44.90 / 65.56 / 74.91 %) and its ≥16× load change within 3 iterations as
// targets, by a random search over the five values (tests/unit/popularity_process_test.cpp holds
// what the fit gives).
struct PopularityProcessParams {
  double spread = 1.097;             // long-run logits: spread × Φ⁻¹((i + ½)/E)
  double volatility = 0.493;         // standard deviation of a logit's step per iteration
  double reversion = 0.538;          // share of the gap to the long-run level closed per iteration, (0, 1]
  double spike_probability = 0.0064; // chance per expert and iteration of a spike
  double spike_size = 6.12;          // logit a spike adds (e^6.12 ≈ 450× the expert's weight)
};

// Popularity (shares summing to 1) per iteration and layer.
class PopularityTable {
 public:
  PopularityTable(int experts, int layers, int iterations);
  std::span<const double> at(int iteration, int layer) const;
  std::span<double> at(int iteration, int layer);
  int experts() const { return experts_; }
  int layers() const { return layers_; }
  int iterations() const { return iterations_; }

 private:
  int experts_, layers_, iterations_;
  std::vector<double> shares_;  // [iteration][layer][expert]
};

// The generator's table for layers 0..layers−1 and iterations 0..iterations−1; each layer's walk
// from its own stream of `seed`.
PopularityTable generate_popularity(const PopularityProcessParams& params, int experts, int layers, int iterations,
                                    std::uint64_t seed);

// A trace file: a header naming the columns iteration, layer, expert and tokens (in any order),
// then one row per iteration, layer and expert with the tokens the gate sent it (experts left out
// got none). Every iteration below `iterations` must have rows for each layer of `moe_layers`.
// Throws InputError naming the file, the line and the fix.
PopularityTable read_popularity_trace(const std::string& path, int experts, int layers, int iterations,
                                      const std::vector<int>& moe_layers);

}  // namespace moesim::workload
