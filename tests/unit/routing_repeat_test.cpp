// Sampled routing repeated over the microbatches of an iteration (routing.repeat_microbatches,
// issue 21): every microbatch routes as the first does, drawn once per layer, its matrices
// reused, so the routing cost and matrices do not grow with the microbatches.
#include <gtest/gtest.h>

#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

struct Copies {
  double routed, dropped, routing_memory;
};

// kSmallEp (4 GPUs, 4 experts, top-1, 2 MoE layers, 128 tokens per GPU) with sampled Zipf(1.2)
// routing and capacity factor 1: each source keeps ceil(128 / 4) = 32 copies per expert, and the
// most popular expert's share, 1 / (1 + 2^-1.2 + 3^-1.2 + 4^-1.2) = 53 % of 128 (about 68), overflows
// it: about 36 of 128 copies (28 %) dropped.
Copies run(int microbatches, bool repeat) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["routing"] = {{"kind", "zipf"}, {"zipf_exponent", 1.2}, {"sampling", "sampled"}, {"repeat_microbatches", repeat}};
  doc["training"]["capacity_factor"] = 1.0;
  doc["training"]["microbatches"] = microbatches;
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run();
  return {sim.results().routed_copies(), sim.results().dropped_copies(), sim.memory_estimate().routing};
}

}  // namespace

TEST(RoutingRepeat, RepeatedMicrobatchesRouteAsTheFirstDoes) {
  const Copies one = run(1, false), repeated = run(4, true), drawn = run(4, false);
  // 4 sources × 128 tokens × top-1 × 2 layers per microbatch.
  EXPECT_EQ(one.routed, 4 * 128 * 2);
  EXPECT_GT(one.dropped, 0.2 * one.routed);
  // Repeated: the first microbatch's draws (the same seed and stream as a run of one) four times.
  EXPECT_EQ(repeated.routed, 4 * one.routed);
  EXPECT_EQ(repeated.dropped, 4 * one.dropped);
  // Drawn per microbatch: the other three draw other copies.
  EXPECT_EQ(drawn.routed, 4 * one.routed);
  EXPECT_NE(drawn.dropped, 4 * one.dropped);
  // One set of dense 4 × 4 matrices (dispatch and combine) per MoE layer, not one per microbatch.
  EXPECT_EQ(repeated.routing_memory, one.routing_memory);
  EXPECT_EQ(drawn.routing_memory, 4 * one.routing_memory);
  EXPECT_EQ(one.routing_memory, 2 * 2 * 4 * 4 * sizeof(double));
}
