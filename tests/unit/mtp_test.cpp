// Multi-token prediction (model.mtp_layers; DeepSeek-V3 §2.2, Megatron-Core's mtp_num_layers): an
// MoE layer after the decoder's last, with its input projection before it and a second pass of
// the LM head after it, on the last pipeline stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "sim/blocks/layer_costs.hpp"
#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/workload/memory.hpp"
#include "test_support.hpp"

using namespace moesim;

TEST(MultiTokenPrediction, DeepSeekV3sModuleHoldsTheParametersItsReportCounts) {
  // DeepSeek-V3's model card: 685B on Hugging Face, 671B of the main model and 14B of the MTP
  // module, whose checkpoint stores its own copy of the shared embedding and output head
  // (2 · 129280 · 7168 = 1.85B). One MoE layer (256 experts of 3 · 7168 · 2048, a shared one,
  // the router, MLA) and the projection M (2 · 7168²) come to 11.6B, 13.5B with the copies.
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["model"] = {{"preset", "deepseek-v3"}};
  const auto main_only = test::scenario_from(doc.dump()).model;
  doc["model"]["mtp_layers"] = 1;
  const auto with_mtp = test::scenario_from(doc.dump()).model;
  EXPECT_EQ(with_mtp.layers, main_only.layers + 1);
  EXPECT_NEAR(main_only.total_params(), 671e9, 0.01 * 671e9);
  const double module = with_mtp.total_params() - main_only.total_params();
  EXPECT_NEAR(module + main_only.embedding_params(), 14e9, 0.05 * 14e9);
  EXPECT_DOUBLE_EQ(module, main_only.attention_params() + main_only.norm_params() + main_only.gate_params() +
                               main_only.shared_experts * main_only.expert_params() +
                               main_only.experts * main_only.expert_params() + 2 * 7168.0 * 7168 + 3 * 7168.0);
}

TEST(MultiTokenPrediction, ItsInputAndSecondHeadAreKeptBesideItsLayer) {
  // Two MoE layers either way; with mtp_layers 1 the second is an MTP module, which keeps besides
  // its layer's activations its two norms' inputs and the projection's (2h + 2h + 4h bytes per
  // token in 16-bit) and a second head's: the final norm's and output projection's inputs (4h)
  // and the fp32 logits (4v). T = 128 tokens, h = 256, v = 1000, one microbatch in flight.
  workload::ModelShape m;
  m.layers = 2;
  m.hidden = 256;
  m.ffn_hidden = 512;
  m.experts = 4;
  m.heads = 4;
  m.kv_heads = 4;
  m.vocab = 1000;
  workload::TrainingConfig t;
  t.sequence_length = 128;
  workload::MemoryInputs in;
  in.params = 1;
  in.tokens = 128;
  in.expert_tokens_per_layer = 128;
  const double plain = workload::memory_footprint(m, t, in).activations;
  m.mtp_layers = 1;
  EXPECT_DOUBLE_EQ(workload::memory_footprint(m, t, in).activations - plain, 128.0 * (8 * 256 + 4 * 256 + 4 * 1000));
}

namespace {

// The small EP scenario with a vocabulary over 2 pipeline stages, one decoder layer each, and one
// MTP module on the last; the task log kept.
schema::Json mtp_case(int mtp) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["model"]["vocab"] = 32000;
  doc["model"]["mtp_layers"] = mtp;
  doc["parallel"] = {{"pp", 2}, {"last_stage_layers", 1}};
  doc["training"]["microbatches"] = 2;
  return doc;
}

}  // namespace

TEST(MultiTokenPrediction, TheLastStageRunsTheModuleAfterItsLayerAndTheHeadTwice) {
  // On the last stage (GPUs 2 and 3), microbatch 0's forward: the decoder's layer 1, then the
  // module (layer 2): its embedding, its projection (two norms and a 2h → h GeMM), its layer's
  // attention, its MoE block, its head (as long as the main one), then the main LM head; the
  // backward in reverse, the module's embedding last. The first stage runs none of it.
  simulation::Simulation sim(test::scenario_from(mtp_case(1).dump()));
  sim.run(test::with_task_log());
  const compute::ComputeModel cm(sim.scenario().kinds[0], sim.scenario().compute);
  const auto& m = sim.scenario().model;
  const auto& names = sim.engine().names();
  std::vector<std::string> forward, backward;
  Time head = -1, mtp_head = -1, projection = -1;
  for (const auto& t : sim.task_log().tasks()) {
    // The compute stream's kernels (not its zero-length waits, such as for a pipeline send).
    if (t.end < 0 || t.label.microbatch != 0 || t.stream != 0 || t.label.kind == engine::WorkKind::Wait) continue;
    const std::string name = names[t.label.name];
    if (t.gpu == 0) {
      EXPECT_EQ(name.rfind("mtp", 0), std::string::npos) << name;
    }
    if (t.gpu != 2) continue;
    if (t.label.phase == engine::Phase::Forward) forward.push_back(name + " " + std::to_string(t.label.layer));
    if (t.label.phase == engine::Phase::Backward) backward.push_back(name + " " + std::to_string(t.label.layer));
    if (t.label.phase != engine::Phase::Forward) continue;
    if (name == "lm_head") head = t.end - t.start;
    if (name == "mtp_head") mtp_head = t.end - t.start;
    if (name == "mtp_projection") projection = t.end - t.start;
  }
  const std::vector<std::string> want_forward{"attention 1", "gate 1",         "experts 1",   "combine_output 1",
                                              "mtp_embedding 2", "mtp_projection 2", "attention 2", "gate 2",
                                              "experts 2",   "combine_output 2", "mtp_head 2",  "lm_head 3"};
  EXPECT_EQ(forward, want_forward);
  ASSERT_GE(backward.size(), 4u);
  EXPECT_EQ(backward.front(), "lm_head 3");
  EXPECT_EQ(backward[1], "mtp_head 2");
  EXPECT_EQ(backward.back(), "attention 1");
  EXPECT_NE(std::find(backward.begin(), backward.end(), "mtp_embedding 2"), backward.end());
  EXPECT_EQ(mtp_head, head);
  const double tokens = 128;
  EXPECT_EQ(projection, (blocks::norm_time(cm, m, tokens) + blocks::norm_time(cm, m, tokens) +
                         compute::kernel(cm.gemm(tokens, m.hidden, 2 * m.hidden)))
                            .time);
  // The module costs the iteration time.
  simulation::Simulation plain(test::scenario_from(mtp_case(0).dump()));
  plain.run();
  EXPECT_GT(sim.mean_iteration_time(), plain.mean_iteration_time());
}

TEST(MultiTokenPrediction, WhatItCannotBeIsRefused) {
  auto no_vocabulary = mtp_case(1);
  no_vocabulary["model"]["vocab"] = 0;
  test::expect_refused_at(no_vocabulary, "$.model.mtp_layers");
  auto other = schema::Json::parse(test::kSmallEp);
  other["model"]["vocab"] = 32000;
  other["model"]["mtp_layers"] = 1;
  other["strategy"] = {{"name", "hybridep"}};
  test::expect_refused_at(other, "$.model.mtp_layers");  // another strategy's schedule
}
