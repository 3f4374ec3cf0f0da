// The distributed optimizer (Megatron-Core; ZeRO-1 of Rajbhandari et al. 2020): gradients
// reduce-scattered, optimizer state split over the data-parallel ranks, parameters all-gathered;
// and FSDP (ZeRO-3; PyTorch FSDP2): the parameters sharded too, gathered before each use.
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

TEST(Sharding, FsdpGathersEachLayerForEveryForwardAndBackward) {
  // 2 microbatches, 2 layers: each layer's parameters are all-gathered before its forward and
  // before its backward of each microbatch, the dense ones over the group of 4 and the experts'
  // over the 2 expert-data-parallel groups: 2 layers · 2 microbatches · 2 passes · 3 groups = 24
  // all-gathers of a quarter of 263680 dense and half of 524288 expert parameters per rank; gradients
  // reduce-scattered after every microbatch's backward: 2 · 2 · 3 = 12.
  auto doc = small("fsdp");
  doc["training"]["microbatches"] = 2;
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  const auto c = sim.results_json()["network"]["collectives"];
  EXPECT_EQ(c["all_gather"]["count"].get<double>(), 24);
  EXPECT_EQ(c["reduce_scatter"]["count"].get<double>(), 12);
  EXPECT_FALSE(c.contains("all_reduce"));
  // A ring all-gather of n ranks sends (n − 1)·(bytes per rank) from each rank: dense 3·(263680/4)
  // ·2 B from 4 ranks, experts 1·(524288/2)·2 B from 4 ranks (2 groups of 2); 8 of each.
  EXPECT_DOUBLE_EQ(c["all_gather"]["bytes"].get<double>(),
                   8 * (4 * 3 * 263680.0 / 4 * 2) + 8 * (4 * 1 * 524288.0 / 2 * 2));
  // Layer 1's forward of microbatch 0 waits for its gather, which was issued (prefetched) when
  // layer 0's forward began, on the parameter-gather stream.
  Time layer1_gather_start = -1, layer1_gather_end = -1, layer0_start = -1, layer1_start = -1;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0 || t.gpu != 0 || t.label.microbatch != 0 || t.label.phase != engine::Phase::Forward) continue;
    if (t.label.kind == engine::WorkKind::AllGather && t.label.layer == 1 && layer1_gather_start < 0) {
      layer1_gather_start = t.start;
      layer1_gather_end = t.end;
    }
    if (t.label.kind == engine::WorkKind::Attention && t.label.layer == 0) layer0_start = t.start;
    if (t.label.kind == engine::WorkKind::Attention && t.label.layer == 1) layer1_start = t.start;
  }
  ASSERT_GT(layer1_gather_end, 0);
  EXPECT_LT(layer1_gather_start, layer1_start);
  EXPECT_GE(layer1_start, layer1_gather_end);
  EXPECT_LE(layer1_gather_start, layer0_start + 1);  // in flight while layer 0 runs
}

TEST(Sharding, VocabularyEndsAreGatheredLikeTheLayers) {
  // A vocabulary of 1000: the embedding and the LM head hold 1000·256 = 256000 parameters each,
  // sharded over the dense group of 4 like every dense parameter. A ring all-gather of n ranks
  // sends (n − 1)·(bytes per rank) from each: 4·3·(256000/4)·2 B = 1536000 B per end.
  //   distributed optimizer: both ends' updated parameters all-gathered once at the iteration's
  //     start, 6 + 2 all-gathers; their gradients reduce-scattered in one bucket (one stage holds
  //     both): 6 + 1;
  //   FSDP, 2 microbatches: each end gathered before each microbatch's forward (torchtitan keeps
  //     the root module's parameters whole until its backward): 24 + 2·2.
  auto zero1 = small("distributed_optimizer"), fsdp = small("fsdp"), plain = small("distributed_optimizer");
  zero1["model"]["vocab"] = fsdp["model"]["vocab"] = 1000;
  fsdp["training"]["microbatches"] = 2;
  simulation::Simulation a(test::scenario_from(zero1.dump())), b(test::scenario_from(plain.dump()));
  a.run(test::with_task_log());
  b.run();
  const auto ca = a.results_json()["network"]["collectives"], cb = b.results_json()["network"]["collectives"];
  EXPECT_EQ(ca["all_gather"]["count"].get<double>(), 6 + 2);
  EXPECT_EQ(ca["reduce_scatter"]["count"].get<double>(), 6 + 1);
  EXPECT_DOUBLE_EQ(ca["all_gather"]["bytes"].get<double>() - cb["all_gather"]["bytes"].get<double>(), 2 * 1536000.0);
  // The embedding's first forward waits for its gather.
  Time gather_end = -1, embedding_start = -1;
  for (const auto& t : a.task_log().tasks()) {
    if (t.end < 0 || t.gpu != 0) continue;
    const std::string name = a.engine().names()[t.label.name];
    if (name == "param_gather" && t.label.layer == 0 && gather_end < 0) gather_end = t.end;
    if (name == "embedding" && t.label.phase == engine::Phase::Forward && t.label.microbatch == 0) embedding_start = t.start;
  }
  ASSERT_GT(gather_end, 0);
  EXPECT_GE(embedding_start, gather_end);
  simulation::Simulation c(test::scenario_from(fsdp.dump()));
  c.run();
  EXPECT_EQ(c.results_json()["network"]["collectives"]["all_gather"]["count"].get<double>(), 24 + 4);
}

TEST(Sharding, MemoryOfEachOptimizer) {
  // Per GPU (see above): 527360 dense and 1048576 expert parameters, 263680 + 524288 = 787968 in
  // the larger layer; bf16 weights and gradients, Adam 12 B per parameter.
  //   replicated: all three whole;
  //   distributed optimizer: weights and gradients whole, optimizer state 1/4 of the dense and
  //     1/2 of the expert parameters (S = 527360/4 + 1048576/2 = 656128);
  //   FSDP: all three sharded the same way; weights hold two whole layers more (the one computing
  //     and the one prefetched), gradients one (being reduce-scattered).
  const auto memory = [](const std::string& sharding) {
    simulation::Simulation sim(test::scenario_from(small(sharding).dump()));
    sim.check();
    return sim.memory().at(0);
  };
  const double all = 527360.0 + 1048576.0, shard = 527360.0 / 4 + 1048576.0 / 2, layer = 263680.0 + 524288.0;
  const auto none = memory("none"), zero1 = memory("distributed_optimizer"), fsdp = memory("fsdp");
  EXPECT_DOUBLE_EQ(none.weights, all * 2);
  EXPECT_DOUBLE_EQ(none.gradients, all * 2);
  EXPECT_DOUBLE_EQ(none.optimizer, all * 12);
  EXPECT_DOUBLE_EQ(zero1.weights, all * 2);
  EXPECT_DOUBLE_EQ(zero1.gradients, all * 2);
  EXPECT_DOUBLE_EQ(zero1.optimizer, shard * 12);
  EXPECT_DOUBLE_EQ(fsdp.weights, (shard + 2 * layer) * 2);
  EXPECT_DOUBLE_EQ(fsdp.gradients, (shard + layer) * 2);
  EXPECT_DOUBLE_EQ(fsdp.optimizer, shard * 12);
  EXPECT_EQ(fsdp.activations, none.activations);
}

}  // namespace
}  // namespace moesim
