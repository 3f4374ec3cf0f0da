// Sliding-window (banded causal) attention (model.sliding_window; GPT-OSS's alternating 128-token
// window, Megatron-Core's window_size with window_attn_skip_freq): the fused kernel computes the
// query × key tiles the band crosses, and the windowed layers cost that, the others full causal
// attention.
#include <gtest/gtest.h>

#include <map>

#include "sim/blocks/layer_costs.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "test_support.hpp"

using namespace moesim;

TEST(SlidingWindow, TheKernelComputesTheTilesTheBandCrosses) {
  // 128 × 128 tiles. Window 128 over L = 4096: query block 0 computes its diagonal tile (half,
  // as the causal count takes a diagonal tile), each of the 31 others its diagonal half and the
  // full tile before it: 0.5 + 31 · 1.5 = 47 tiles of 128².
  EXPECT_DOUBLE_EQ(compute::attention_window_scores(4096, 128), 47.0 * 128 * 128);
  // A window of 1000 keys reaches c = ⌈999 / 128⌉ = 8 blocks back: the first 8 query blocks see
  // every block before them (Σ_{q<8} 128 · (128q + 64) = 524288), the other 3072 queries 8 full
  // tiles and a half (3072 · 1088 = 3342336).
  EXPECT_DOUBLE_EQ(compute::attention_window_scores(4096, 1000), 524288.0 + 3342336.0);
  // A window as long as the sequence is causal attention: L²/2.
  EXPECT_DOUBLE_EQ(compute::attention_window_scores(4096, 4096), 0.5 * 4096 * 4096);
  EXPECT_DOUBLE_EQ(compute::attention_window_scores(4096, 0), 0.5 * 4096 * 4096);
  // FLOPs: 4 · batch · heads · head_dim per score, forward; the backward 2.5 times that.
  EXPECT_DOUBLE_EQ(compute::attention_forward_flops(2, 64, 4096, 64, true, 128), 4.0 * 2 * 64 * 64 * 47 * 128 * 128);
  EXPECT_DOUBLE_EQ(compute::attention_forward_flops(2, 64, 4096, 64, true, 0), 4.0 * 2 * 64 * 4096 * 4096 * 64 * 0.5);
}

TEST(SlidingWindow, WindowedLayersRunTheirCoreOverTheBandAndTheOthersOverTheWholePrefix) {
  // Two layers, a 128-token window on every other one: layer 0 windowed, layer 1 full. 4 heads of
  // 64 over 1024 tokens: the windowed core (c = 1: 0.5 + 7 · 1.5 = 11 tiles) against the full
  // one (1024² / 2 = 32 tiles), each with the kernel's fixed cost.
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["model"]["sliding_window"] = {{"tokens", 128}, {"every", 2}};
  doc["training"]["sequence_length"] = 1024;
  // The modelled core, not the catalogue's measured H100 kernels (which hold no window).
  doc["compute"] = {{"attention_efficiency", 0.58}};
  const auto sc = test::scenario_from(doc.dump());
  EXPECT_EQ(sc.model.attention_window(0), 128);
  EXPECT_EQ(sc.model.attention_window(1), 0);
  simulation::Simulation sim(sc);
  sim.run(test::with_task_log());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  const auto& t = sc.training;
  std::map<int, Time> forward;
  for (const auto& task : sim.task_log().tasks())
    if (task.end >= 0 && task.gpu == 0 && task.label.microbatch == 0 && task.label.kind == engine::WorkKind::Attention &&
        task.label.phase == engine::Phase::Forward)
      forward[task.label.layer] = task.end - task.start;
  ASSERT_EQ(forward.size(), 2u);
  EXPECT_EQ(forward[0], blocks::attention_time(cm, sc.model, t, 1, 0).time);
  EXPECT_EQ(forward[1], blocks::attention_time(cm, sc.model, t, 1, 1).time);
  EXPECT_EQ(forward[1] - forward[0], cm.attention(1, 4, 1024, 64, true) - cm.attention(1, 4, 1024, 64, true, 128));
  // The windowed core's 11 tiles take 0.32 us at 0.58 of 989.4 TFLOP/s, less than reading Q, K,
  // V and writing O (4 · 4 heads · 1024 · 64 · 2 B) at kHbmEfficiency of 3.35 TB/s: it is memory-bound.
  const double compute_s = compute::attention_forward_flops(1, 4, 1024, 64, true, 128) / (989.4e12 * 0.58);
  const double memory_s = 4.0 * 4 * 1024 * 64 * 2 / (compute::kHbmEfficiency * 3.35e12);
  EXPECT_LT(compute_s, memory_s);
  EXPECT_EQ(cm.attention(1, 4, 1024, 64, true, 128), compute::kKernelOverhead + seconds_to_time(memory_s));
  EXPECT_DOUBLE_EQ(compute::attention_window_scores(1024, 128), 11.0 * 128 * 128);
}

TEST(SlidingWindow, GptOss120bHoldsTheParametersItsModelCardCounts) {
  // OpenAI's gpt-oss model card (arXiv 2508.10925, Table 1): 116.83B parameters. 36 layers of 128
  // experts of 3 · 2880² (114.65B), the attention (2880 · (64 + 2 · 8) · 64 in, 64 · 64 · 2880 out:
  // 26.5M a layer), the routers and norms, and the untied 201088 × 2880 embedding and head.
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["model"] = {{"preset", "gpt-oss-120b"}};
  const auto m = test::scenario_from(doc.dump()).model;
  EXPECT_NEAR(m.total_params(), 116.83e9, 0.01 * 116.83e9);
  EXPECT_EQ(m.attention_window(34), 128);
  EXPECT_EQ(m.attention_window(35), 0);
}

TEST(SlidingWindow, RefusedWhereItCannotBeModelled) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["model"]["sliding_window"] = {{"tokens", 128}};
  auto not_causal = doc;
  not_causal["training"]["causal"] = false;
  test::expect_refused_at(not_causal, "$.training.causal");
  auto ring = doc;
  ring["parallel"] = {{"cp", 2}, {"ep", 2}};
  test::expect_refused_at(ring, "$.parallel.cp");
  auto zero = doc;
  zero["model"]["sliding_window"]["tokens"] = 0;
  test::expect_refused_at(zero, "$.model.sliding_window.tokens");
}

TEST(SlidingWindow, PlannersCostTheMeanLayer) {
  // HybridEP's and HeterMoE's planners cost one representative layer: for the windowed model
  // above (2 layers, a window on layer 0) the mean of the windowed and the full layer; a model
  // without a window, its one layer.
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["training"]["sequence_length"] = 1024;
  const auto plain = test::scenario_from(doc.dump());
  doc["model"]["sliding_window"] = {{"tokens", 128}, {"every", 2}};
  const auto windowed = test::scenario_from(doc.dump());
  const compute::ComputeModel cm(windowed.topology().gpu(0), windowed.compute);
  const Time w = blocks::attention_time(cm, windowed.model, windowed.training, 1, 0).time;
  const Time f = blocks::attention_time(cm, windowed.model, windowed.training, 1, 1).time;
  ASSERT_LT(w, f);
  EXPECT_EQ(blocks::mean_attention_time(cm, windowed.model, windowed.training).time, (w + f + 1) / 2);
  EXPECT_EQ(blocks::mean_attention_time(cm, plain.model, plain.training).time,
            blocks::attention_time(cm, plain.model, plain.training).time);
}
