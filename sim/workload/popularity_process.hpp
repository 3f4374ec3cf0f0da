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

// The generator's parameters (routing.process in a scenario). Defaults: fitted as a whole to three
// published targets of seed 004, by a random search then Nelder-Mead over the five values on a
// NumPy model of this walk (12 layers × 1000 iterations, 3 seeds):
//  (a) Table 1, static uniform replication, 32 experts, capacity factor 1/2/4, pooled drops: token
//      survival 44.90 / 65.56 / 74.91 % (fit: 47.2 / 62.8 / 76.9 %);
//  (b) Fig. 2: an expert's load changes ≥ 16× within 3 iterations (fit: 320–1067×);
//  (c) §5.2 / spec 004 C5: Algorithm 1 on the previous iteration's counts drops 69 % fewer tokens
//      than static replication at 16 classes, 16 × 4 slots, capacity factor 1 (fit: 69.6 %) — i.e.
//      how well one iteration predicts the next ("smooth enough", §3.4), which (a) and (b) leave
//      open: an earlier fit to (a) and (b) alone had logit steps of 0.49 and gave 38 %.
// tests/unit/popularity_process_test.cpp holds (a) and (b); tests/unit/adaptive_strategy_test.cpp
// holds (c) by simulating the strategy.
struct PopularityProcessParams {
  double spread = 1.127;             // long-run logits: spread × Φ⁻¹((i + ½)/E)
  double volatility = 0.0232;        // standard deviation of a logit's step per iteration
  double reversion = 0.169;          // share of the gap to the long-run level closed per iteration, (0, 1]
  double spike_probability = 0.0091; // chance per expert and iteration of a spike
  double spike_size = 3.91;          // logit a spike adds (e^3.91 ≈ 50× the expert's weight)
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
