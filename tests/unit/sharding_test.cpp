// The distributed optimizer (Megatron-Core; ZeRO-1 of Rajbhandari et al. 2020): gradients
// reduce-scattered, optimizer state split over the data-parallel ranks, parameters all-gathered.
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace moesim {
namespace {

// The small EP scenario on 4 GPUs with ep 2: dp 4 for the dense parameters, edp 2 for the experts.
schema::Json small(const std::string& sharding) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["parallel"] = {{"ep", 2}, {"sharding", sharding}};
  return doc;
}

TEST(Sharding, DistributedOptimizerSplitsTheOptimizerStateAndKeepsTheCommunicationVolume) {
  simulation::Simulation replicated(test::scenario_from(small("none").dump()));
  replicated.run();
  simulation::Simulation sharded(test::scenario_from(small("distributed_optimizer").dump()));
  sharded.run();
  // Per layer: attention 256·(256 + 2·4·64) + 256·256 = 262144, norms 512, router 256·4 = 1024:
  // 263680 dense parameters; experts 2 per GPU of 2·256·512 = 262144. Two layers: 527360 dense,
  // 1048576 expert parameters per GPU. Adam keeps 12 B each, replicated; split over dp 4 and
  // edp 2: (527360/4 + 1048576/2)·12.
  EXPECT_DOUBLE_EQ(replicated.memory()[0].optimizer, (527360.0 + 1048576.0) * 12);
  EXPECT_DOUBLE_EQ(sharded.memory()[0].optimizer, (527360.0 / 4 + 1048576.0 / 2) * 12);
  EXPECT_DOUBLE_EQ(sharded.memory()[0].weights, replicated.memory()[0].weights);
  // Each layer's dense gradients over 1 group of 4 and expert gradients over 2 groups of 2:
  // 6 all-reduces, or 6 reduce-scatters and 6 all-gathers of the updated parameters.
  const auto r = replicated.results_json()["network"]["collectives"];
  const auto s = sharded.results_json()["network"]["collectives"];
  EXPECT_EQ(r["all_reduce"]["count"].get<double>(), 6);
  EXPECT_FALSE(s.contains("all_reduce"));
  EXPECT_EQ(s["reduce_scatter"]["count"].get<double>(), 6);
  EXPECT_EQ(s["all_gather"]["count"].get<double>(), 6);
  // ZeRO §7.2.1: a reduce-scatter and an all-gather move what one all-reduce moves (a ring
  // all-reduce is the two: each rank sends 2(n − 1)/n of the buffer, each half (n − 1)/n).
  EXPECT_DOUBLE_EQ(s["reduce_scatter"]["bytes"].get<double>() + s["all_gather"]["bytes"].get<double>(),
                   r["all_reduce"]["bytes"].get<double>());
}

TEST(Sharding, EachLayersFirstForwardWaitsForItsParameters) {
  simulation::Simulation sim(test::scenario_from(small("distributed_optimizer").dump()));
  sim.run(test::with_task_log());
  // The parameter all-gathers run on the gradient stream at the iteration's start; layer 1's
  // first attention starts only after its gather ended.
  Time gather_end = -1, attention_start = -1;
  const auto& names = sim.task_log().tasks();
  for (const auto& t : names) {
    if (t.end < 0 || t.gpu != 0 || t.label.layer != 1) continue;
    if (t.label.kind == engine::WorkKind::AllGather) gather_end = std::max(gather_end, t.end);
    if (t.label.kind == engine::WorkKind::Attention && t.label.phase == engine::Phase::Forward && t.label.microbatch == 0)
      attention_start = t.start;
  }
  ASSERT_GT(gather_end, 0);
  EXPECT_GE(attention_start, gather_end);
}

}  // namespace
}  // namespace moesim
