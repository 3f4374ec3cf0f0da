// Pipeline schedules: GPipe, 1F1B and interleaved 1F1B simulated on stages of equal work with no
// communication time, against the bubble fractions of Narayanan et al., "Efficient Large-Scale
// Language Model Training on GPU Clusters Using Megatron-LM" (SC'21), §2.2.
#include <gtest/gtest.h>

#include <map>
#include <tuple>
#include <string>

#include "sim/schedule/schedule.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

// p GPUs, one per stage, joined by links so fast that a stage's activations (128 tokens × 256 ×
// 2 B = 64 KiB) cross in 6.6e-17 s, which rounds to 0 ps, with no latency: communication takes no
// time. ep 1 keeps every expert on its GPU (no all-to-all); dp 1 leaves no gradient to
// synchronise; no vocabulary: every stage runs the same layers' work.
schema::Json pipelined(int p, int layers, int microbatches, const std::string& schedule, int vp = 1) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"]["levels"][0]["count"] = p;
  doc["cluster"]["levels"][0]["bandwidth"] = "1000000000TB/s";
  doc["cluster"]["levels"][0]["latency"] = "0us";
  doc["network"] = {{"model", "analytic"}};
  doc["model"]["layers"] = layers;
  doc["training"]["microbatches"] = microbatches;
  doc["parallel"] = {{"pp", p}, {"vp", vp}, {"ep", 1}, {"schedule", schedule}};
  return doc;
}

struct Timeline {
  Time forward = 0, backward = 0;  // one stage's compute for one microbatch, all its chunks
  Time end = 0;                    // the last backward's end on any GPU
  std::map<int, int> peak;         // per GPU: most microbatch-chunks begun forward, not yet backward
};

Timeline timeline(const schema::Json& doc) {
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  Timeline out;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0 || t.type != engine::TaskType::Compute || t.gpu != 0 || t.label.microbatch != 0) continue;
    if (t.label.phase == engine::Phase::Forward) out.forward += t.end - t.start;
    if (t.label.phase == engine::Phase::Backward) out.backward += t.end - t.start;
  }
  for (const auto& t : sim.task_log().tasks())
    if (t.end >= 0 && t.label.phase == engine::Phase::Backward) out.end = std::max(out.end, t.end);
  return out;
}

TEST(Pipeline, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  // p = 4 stages of 2 layers, m = 8 microbatches. With forward tf and backward tb per stage and
  // microbatch, the first stage starts microbatch 0's forward at 0; the last stage can only start
  // once p − 1 stages have run it, and the first stage's last backward waits for p − 1 stages'
  // backwards: the pipeline ends at (m + p − 1)(tf + tb) (§2.2.1), of which m(tf + tb) is work:
  // the bubble fraction is (p − 1)/(m + p − 1) = 3/11.
  const int p = 4, m = 8;
  const Timeline t = timeline(pipelined(p, 2 * p, m, "1f1b"));
  ASSERT_GT(t.forward, 0);
  EXPECT_EQ(t.end, (m + p - 1) * (t.forward + t.backward));
  const double bubble = 1.0 - static_cast<double>(m * (t.forward + t.backward)) / static_cast<double>(t.end);
  EXPECT_NEAR(bubble, 3.0 / 11.0, 1e-12);
}

TEST(Pipeline, GPipeHasTheSameBubbleAsOneFOneB) {
  // GPipe runs every forward, then every backward: (m + p − 1)·tf + (m + p − 1)·tb (§2.2.1).
  const int p = 4, m = 8;
  const Timeline t = timeline(pipelined(p, 2 * p, m, "gpipe"));
  EXPECT_EQ(t.end, (m + p - 1) * (t.forward + t.backward));
}

TEST(Pipeline, InterleavedBubbleShrinksByTheChunks) {
  // v = 2 chunks of 1 layer per stage (8 layers over 4 stages × 2): each chunk takes tf/v and
  // tb/v, so the bubble is (p − 1)(tf + tb)/v and the pipeline ends at m(tf + tb) + that
  // (§2.2.2): fraction (p − 1)/(v·m + p − 1) = 3/19.
  const int p = 4, m = 8, v = 2;
  const Timeline t = timeline(pipelined(p, 2 * p, m, "interleaved_1f1b", v));
  const Time work = m * (t.forward + t.backward);
  EXPECT_EQ(t.end * v, work * v + (p - 1) * (t.forward + t.backward));
  const double bubble = 1.0 - static_cast<double>(work) / static_cast<double>(t.end);
  EXPECT_NEAR(bubble, 3.0 / 19.0, 1e-12);
}

TEST(Pipeline, OneFOneBHoldsPMinusIMicrobatchesOnStageI) {
  // Stage i runs p − i − 1 warm-up forwards, then one more before its first backward: p − i in
  // flight (§2.2.1: at most p, against GPipe's m).
  const int p = 4, m = 8;
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(schedule::peak_in_flight(schedule::stage_order(parallel::PipelineSchedule::OneFOneB, s, p, 1, m)), p - s);
    EXPECT_EQ(schedule::peak_in_flight(schedule::stage_order(parallel::PipelineSchedule::GPipe, s, p, 1, m)), m);
  }
  // Interleaved, v = 2: (p − s − 1)·2 + (v − 1)·p warm-up units of one chunk, one more before
  // the first backward: 4·… = 11 for stage 0, 5 for stage 3 (microbatch-chunks).
  EXPECT_EQ(schedule::peak_in_flight(schedule::stage_order(parallel::PipelineSchedule::Interleaved, 0, p, 2, m)), 11);
  EXPECT_EQ(schedule::peak_in_flight(schedule::stage_order(parallel::PipelineSchedule::Interleaved, 3, p, 2, m)), 5);
}

TEST(Pipeline, UnderEpOverlapAForwardWrittenWithABackwardHoldsOneLayerMore) {
  // One stage, 4 microbatches under EP overlap: F0, then F1 with B0, F2 with B1, F3 with B2, then
  // B3. Each pair runs the forward's layers ascending beside the backward's descending, a layer
  // freed as one is added: after F0 one unit is held, during a pair at most one layer more (a
  // quarter of a unit for 4 layers), never the two units the order alone would count.
  const auto unpaired = [](std::vector<schedule::Unit> order) {
    for (auto& u : order) u.with_next = false;
    return order;
  };
  const auto order = schedule::stage_order(parallel::PipelineSchedule::OneFOneB, 0, 1, 1, 4, true);
  ASSERT_EQ(order.size(), 8u);
  for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(order[i].with_next, i == 1 || i == 3 || i == 5) << i;
  EXPECT_DOUBLE_EQ(schedule::peak_in_flight(unpaired(order)), 2.0);
  EXPECT_DOUBLE_EQ(schedule::peak_in_flight(order, 0.25), 1.25);
  // Interleaved, p = 2, v = 2, 4 microbatches, stage 0: the warm-up forwards (2·1 + 2 = 4 and
  // one more) are held whole; in the steady state each pair adds a layer at most.
  const auto interleaved = schedule::stage_order(parallel::PipelineSchedule::Interleaved, 0, 2, 2, 4, true);
  const double plain = schedule::peak_in_flight(unpaired(interleaved));
  EXPECT_DOUBLE_EQ(schedule::peak_in_flight(interleaved, 0.5), plain - 1 + 0.5);
}

TEST(Pipeline, EachStageKeepsTheActivationsOfItsMicrobatchesInFlight) {
  // Stages of 2 equal layers: under 1F1B stage i holds p − i microbatches (4, 3, 2, 1), under
  // GPipe every stage holds all m = 8; weights are each stage's 2 layers, a quarter of the model.
  const int p = 4, m = 8;
  simulation::Simulation one(test::scenario_from(pipelined(p, 2 * p, m, "1f1b").dump()));
  one.run();
  simulation::Simulation gpipe(test::scenario_from(pipelined(p, 2 * p, m, "gpipe").dump()));
  gpipe.run();
  const double last = one.memory()[p - 1].activations;
  ASSERT_GT(last, 0);
  for (int s = 0; s < p; ++s) {
    EXPECT_DOUBLE_EQ(one.memory()[s].activations, (p - s) * last) << s;
    EXPECT_DOUBLE_EQ(gpipe.memory()[s].activations, m * last) << s;
  }
  simulation::Simulation flat(test::scenario_from(pipelined(1, 2 * p, m, "1f1b").dump()));
  flat.run();
  EXPECT_DOUBLE_EQ(one.memory()[0].weights * p, flat.memory()[0].weights);
}

TEST(Pipeline, TheFirstStageKeepsTheEmbeddingAndTheLastTheLogitsOfEachMicrobatchAtTheLoss) {
  // Megatron-LM's estimate (megatron/training/theoretical_memory_usage.py): the embedding keeps
  // 8 + h bytes per token (token ids, dropout mask) for every microbatch in flight on the first
  // stage; the last stage keeps 4·(h + v) per token (final norm's and output projection's 16-bit
  // inputs, fp32 logits: Megatron-Core's loss) for each microbatch whose loss awaits its
  // backward: 1 under 1F1B, all m under GPipe. T = 128 tokens, h = 256, v = 1000: the embedding
  // 128·264 = 33,792 B per microbatch, the head 4·128·1256 = 643,072 B; the middle stages keep
  // neither. Transformer Engine's fused cross entropy (the default) keeps the logits in BF16:
  // 128·(4·256 + 2·1000) = 387,072 B.
  const int p = 4, m = 8;
  for (const auto& [kind, loss, head] : {std::tuple{"1f1b", "megatron", 643072.0}, std::tuple{"gpipe", "megatron", 643072.0},
                                        std::tuple{"1f1b", "te", 387072.0}, std::tuple{"gpipe", "te", 387072.0}}) {
    SCOPED_TRACE(std::string(kind) + " " + loss);
    auto plain = pipelined(p, 2 * p, m, kind);
    plain["software"]["cross_entropy"] = loss;
    auto with_vocab = plain;
    with_vocab["model"]["vocab"] = 1000;
    simulation::Simulation without(test::scenario_from(plain.dump()));
    without.run();
    simulation::Simulation with(test::scenario_from(with_vocab.dump()));
    with.run();
    for (int s = 0; s < p; ++s) {
      const double in_flight = std::string(kind) == "1f1b" ? p - s : m;
      const double at_loss = std::string(kind) == "1f1b" ? 1 : m;
      const double want = (s == 0 ? in_flight * 33792.0 : 0.0) + (s == p - 1 ? at_loss * head : 0.0);
      EXPECT_DOUBLE_EQ(with.memory()[s].activations - without.memory()[s].activations, want) << s;
    }
  }
}

TEST(Pipeline, TheLastStageKeepsTheLogitsOfTheMicrobatchesAwaitingTheirLoss) {
  // Counted over the order of the stage holding the last virtual stage: its forward ends with the
  // loss, its backward starts with the head's. 1F1B's last stage and GPipe: 1 and m (Megatron-LM's
  // estimate). Interleaved, p = 2, v = 2, m = 4, stage 1 (its chunk 1 is the last virtual stage):
  // warm-up F(ch0 mb0) F(ch0 mb1), then F(ch1 mb0) B(ch1 mb0), F(ch1 mb1) B(ch1 mb1), F(ch0 mb2)
  // B(ch0 mb0), F(ch0 mb3) B(ch0 mb1), F(ch1 mb2) B(ch1 mb2), F(ch1 mb3) B(ch1 mb3), B B: one at a
  // time, where the units in flight (3 of its chunks at most, 1.5 microbatches) counted it before.
  // DualPipeV rank 0 (its chunk 1 is the last): F1:k is followed by B1:k before F1:k+1 (the order
  // of DualPipeV.EachRankRunsTheStepsOfDualPipeV): one.
  using parallel::PipelineSchedule;
  EXPECT_EQ(schedule::peak_at_loss(schedule::stage_order(PipelineSchedule::OneFOneB, 3, 4, 1, 8), 0), 1);
  EXPECT_EQ(schedule::peak_at_loss(schedule::stage_order(PipelineSchedule::GPipe, 3, 4, 1, 8), 0), 8);
  EXPECT_EQ(schedule::peak_at_loss(schedule::stage_order(PipelineSchedule::Interleaved, 1, 2, 2, 4), 1), 1);
  EXPECT_EQ(schedule::peak_in_flight(schedule::stage_order(PipelineSchedule::Interleaved, 1, 2, 2, 4)), 3);
  EXPECT_EQ(schedule::peak_at_loss(schedule::stage_order(PipelineSchedule::DualPipeV, 0, 2, 2, 4), 1), 1);
  // Simulated, interleaved: the vocabulary adds to stage 1 the head's inputs and BF16 logits of one
  // microbatch, 128·(4·256 + 2·1000) = 387,072 B, and to stage 0 the embedding's ids and mask for
  // its 2.5 microbatches in flight (5 chunks), 2.5 · 128 · (8 + 256) = 84,480 B.
  const auto plain = pipelined(2, 4, 4, "interleaved_1f1b", 2);
  auto with_vocab = plain;
  with_vocab["model"]["vocab"] = 1000;
  simulation::Simulation without(test::scenario_from(plain.dump())), with(test::scenario_from(with_vocab.dump()));
  without.run();
  with.run();
  EXPECT_DOUBLE_EQ(with.memory()[1].activations - without.memory()[1].activations, 387072.0);
  EXPECT_DOUBLE_EQ(with.memory()[0].activations - without.memory()[0].activations, 84480.0);
}

TEST(Pipeline, EachStageRunsItsOwnLayersAndSendsActivationsToTheNext) {
  // 4 stages of 2 layers: GPU 2 runs the forward attention of layers 4 and 5 only; every
  // microbatch crosses 3 stage boundaries each way: 2·3·m transfers of 64 KiB.
  const int p = 4, m = 8;
  simulation::Simulation sim(test::scenario_from(pipelined(p, 2 * p, m, "1f1b").dump()));
  sim.run(test::with_task_log());
  std::map<int, int> layers_on_gpu2;
  int p2p = 0;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0) continue;
    if (t.gpu == 2 && t.label.kind == engine::WorkKind::Attention && t.label.phase == engine::Phase::Forward)
      ++layers_on_gpu2[t.label.layer];
    if (t.label.kind == engine::WorkKind::P2P) ++p2p;
  }
  EXPECT_EQ(layers_on_gpu2, (std::map<int, int>{{4, m}, {5, m}}));
  EXPECT_EQ(p2p, 2 * (2 * (p - 1) * m));  // two member tasks per transfer
  const auto r = sim.results_json();
  EXPECT_DOUBLE_EQ(r["network"]["bytes_by_level"]["gpu"].get<double>(), 2.0 * (p - 1) * m * 128 * 256 * 2);
}

TEST(Pipeline, NonInterleavedOneFOneBWaitsForEachSendBeforeComputingOn) {
  // Megatron-Core's non-interleaved 1F1B exchanges with a neighbouring stage by batched isend/irecv
  // that it waits on before its next forward or backward (p2p_communication._communicate with
  // wait_on_reqs; the schedule refuses overlap_p2p_comm). With links of 6.5536 GB/s and no latency
  // a stage's 64 KiB of activations take 10 us to cross: stage 0 computes nothing while one of its
  // sends is under way, 8 sends of 10 us each. The interleaved schedule (vp 2) sends beside its
  // compute.
  const auto overlaps = [](int vp, int& sends) {
    auto doc = pipelined(2, 4, 8, vp > 1 ? "interleaved_1f1b" : "1f1b", vp);
    doc["cluster"]["levels"][0]["bandwidth"] = "6.5536GB/s";
    simulation::Simulation sim(test::scenario_from(doc.dump()));
    sim.run(test::with_task_log());
    std::vector<std::pair<Time, Time>> p2p, compute;
    for (const auto& t : sim.task_log().tasks()) {
      if (t.end < 0 || t.gpu != 0) continue;
      if (t.label.kind == engine::WorkKind::P2P && t.label.phase == engine::Phase::Forward) p2p.emplace_back(t.start, t.end);
      if (t.type == engine::TaskType::Compute) compute.emplace_back(t.start, t.end);
    }
    sends = static_cast<int>(p2p.size());
    int n = 0;
    for (const auto& [ps, pe] : p2p) {
      if (vp == 1) {
        EXPECT_EQ(pe - ps, 10'000'000);  // 65536 B at 6.5536e9 B/s
      }
      for (const auto& [cs, ce] : compute) n += cs < pe && ce > ps;
    }
    return n;
  };
  int sends = 0;
  EXPECT_EQ(overlaps(1, sends), 0);
  EXPECT_EQ(sends, 8);
  EXPECT_GT(overlaps(2, sends), 0);
}

}  // namespace
}  // namespace moesim

namespace moesim {
namespace {

// Two GPUs (layer 0 dense, layer 1 MoE), 128 tokens of H 256 in bf16: a block's output is
// 128·256·2 = 65536 B. tp 2 puts both in one tensor-parallel group (dp 1, ep 2 over the same GPUs);
// tp 1 makes them data-parallel (dp 2, ep 2).
schema::Json two_gpus(int tp) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"]["levels"][0]["count"] = 2;
  doc["model"]["dense_layers"] = 1;
  doc["parallel"] = {{"tp", tp}};
  return doc;
}

TEST(TensorParallel, AttentionSplitsHeadsAndColumnsBetweenAnAllGatherAndAReduceScatter) {
  // Megatron-LM (Shoeybi et al. 2019 §3): the QKV projection's columns (H + 2·kv·d = 768) and the
  // output projection's rows split over tp = 2, as do the heads of the attention core. With
  // sequence parallelism (Korthikanti et al. 2022 §4.2.2), g — an all-gather of the s/tp shards
  // (32768 B per rank) — before each block and ḡ — a reduce-scatter of the 65536 B output —
  // after it, the backward the same pair: layer 0's attention and dense FFN and layer 1's
  // attention, forward and backward: 6 of each.
  const auto doc = two_gpus(2);
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  const auto sc = test::scenario_from(doc.dump());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  const double tokens = 128, h = 256;
  // The norm (reads and writes 128·256 bf16 values), the projections, the core, and the residual
  // add after the output projection (reads two, writes one: 3·128·256·2 B).
  const Time expected = cm.gemm(tokens, 768.0 / 2, h) + cm.gemm(tokens, h, h / 2) + cm.memory_bound(2 * tokens * h * 2) +
                        cm.attention(1, 4.0 / 2, 128, 64, true) + cm.memory_bound(3 * tokens * h * 2);
  int attention = 0;
  for (const auto& t : sim.task_log().tasks())
    if (t.end >= 0 && t.label.kind == engine::WorkKind::Attention && t.label.phase == engine::Phase::Forward) {
      EXPECT_EQ(t.end - t.start, expected);
      ++attention;
    }
  EXPECT_EQ(attention, 2 * 2);  // 2 layers on 2 GPUs
  const auto c = sim.results_json()["network"]["collectives"];
  EXPECT_FALSE(c.contains("all_reduce"));  // dp 1: no gradient all-reduce either
  EXPECT_EQ(c["all_gather"]["count"].get<double>(), 6);
  EXPECT_EQ(c["reduce_scatter"]["count"].get<double>(), 6);
  // Each rank sends (n − 1) shards of 32768 B: 65536 B per collective (a ring all-reduce's half).
  EXPECT_DOUBLE_EQ(c["all_gather"]["bytes"].get<double>(), 6 * 65536.0);
  EXPECT_DOUBLE_EQ(c["reduce_scatter"]["bytes"].get<double>(), 6 * 65536.0);
}

TEST(TensorParallel, LatentAttentionSplitsItsUpProjectionsByHeads) {
  // MLA (DeepSeek-V2 §2.1) on 4 heads over tp 2, 128 tokens of H 256: the query down projection
  // (256 → 64) and the key/value one (256 → 32 + 16 rotary) whole on each rank, each latent
  // normed (read and write of 128·64 and 128·32 bf16 values); the up projections of the rank's 2
  // heads: 64 → 2·(32 + 16) for queries, 32 → 2·(32 + 32) for keys and values; the output
  // projection from 2·32 value columns and the residual add after it (3·128·256 bf16 values); the
  // block's norm; and the core over 2 heads whose QK^T is 48 wide and PV 32: the work of a head of
  // (48 + 32)/2 = 40.
  auto doc = two_gpus(2);
  doc["model"]["mla"] = {{"q_lora_rank", 64}, {"kv_lora_rank", 32}, {"qk_nope_head_dim", 32},
                         {"qk_rope_head_dim", 16}, {"v_head_dim", 32}};
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  const auto sc = test::scenario_from(doc.dump());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  const double t = 128;
  const Time q = cm.gemm(t, 64, 256) + cm.memory_bound(2 * t * 64 * 2) + cm.gemm(t, 2 * 48, 64);
  const Time kv = cm.gemm(t, 48, 256) + cm.memory_bound(2 * t * 32 * 2) + cm.gemm(t, 2 * 64, 32);
  const Time expected = q + kv + cm.memory_bound(2 * t * 256 * 2) + cm.gemm(t, 256, 2 * 32) + cm.memory_bound(3 * t * 256 * 2) +
                        cm.attention(1, 2, 128, 40, true);
  int attention = 0;
  for (const auto& task : sim.task_log().tasks())
    if (task.end >= 0 && task.label.kind == engine::WorkKind::Attention && task.label.phase == engine::Phase::Forward) {
      EXPECT_EQ(task.end - task.start, expected);
      ++attention;
    }
  EXPECT_EQ(attention, 2 * 2);
}

TEST(TensorParallel, VocabularyEndsAddTheirSequenceParallelPair) {
  // With a vocabulary the embedding's partial rows (each rank looks the tokens up in its half of
  // the vocabulary) are reduce-scattered into sequence shards, and the LM head's input is
  // all-gathered from them (Megatron-LM's VocabParallelEmbedding and its head under sequence
  // parallelism); the backward runs each collective's backward: one more all-gather and one more
  // reduce-scatter per end over the 6 of the layers, of the same 65536 B block.
  auto doc = two_gpus(2);
  doc["model"]["vocab"] = 1000;
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run();
  const auto c = sim.results_json()["network"]["collectives"];
  EXPECT_EQ(c["all_gather"]["count"].get<double>(), 6 + 2);
  EXPECT_EQ(c["reduce_scatter"]["count"].get<double>(), 6 + 2);
  EXPECT_DOUBLE_EQ(c["all_gather"]["bytes"].get<double>(), 8 * 65536.0);
}

TEST(TensorParallel, SharedExpertsAreATensorParallelMlpBesideTheExchanges) {
  // A shared expert is an MLP over the rank's tokens with its columns split over tp (Megatron-
  // Core's SharedExpertMLP): its own all-gather and reduce-scatter of the 65536 B block around
  // it, forward and backward, on the side stream so that they overlap the dispatch; the MoE
  // layer's last kernel waits for them.
  auto doc = two_gpus(2);
  doc["model"]["shared_experts"] = 1;
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  const auto c = sim.results_json()["network"]["collectives"];
  EXPECT_EQ(c["all_gather"]["count"].get<double>(), 6 + 2);
  EXPECT_EQ(c["reduce_scatter"]["count"].get<double>(), 6 + 2);
  const auto sc = test::scenario_from(doc.dump());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  Time shared_end = -1, output_start = -1;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0 || t.gpu != 0 || t.label.phase != engine::Phase::Forward || t.label.layer != 1) continue;
    const std::string name = sim.engine().names()[t.label.name];
    if (name == "shared_expert") {
      // 128 tokens, H→M/2, the GeLU (reads and writes 128·256 bf16 values), M/2→H.
      EXPECT_EQ(t.end - t.start, cm.gemm(128, 256, 256) + cm.memory_bound(2 * 128 * 256 * 2) + cm.gemm(128, 256, 256));
    }
    if (name == "TP-ReduceScatter" && t.stream == sim.engine().stream_specs().size() - 1) shared_end = t.end;
    if (name == "combine_output") output_start = t.start;
  }
  EXPECT_GE(output_start, shared_end);
  EXPECT_GT(shared_end, 0);
}

TEST(TensorParallel, MoeLayersRouteEachRanksSequenceShard) {
  // With tp 2 and sequence parallelism each GPU routes its 64 tokens, not 128: each sends the
  // half routed to the other's experts, 32·256·2 B, where data parallelism sends 64·256·2 B;
  // dispatch and combine, forward and backward.
  simulation::Simulation tp(test::scenario_from(two_gpus(2).dump()));
  tp.run();
  simulation::Simulation dp(test::scenario_from(two_gpus(1).dump()));
  dp.run();
  EXPECT_DOUBLE_EQ(dp.results_json()["network"]["collectives"]["all_to_all"]["bytes"].get<double>(), 4 * 2 * 32768.0);
  EXPECT_DOUBLE_EQ(tp.results_json()["network"]["collectives"]["all_to_all"]["bytes"].get<double>(), 4 * 2 * 16384.0);
}

}  // namespace
}  // namespace moesim

namespace moesim {
namespace {

TEST(ContextParallel, AttentionRunsAsARingOverTheSequenceShards) {
  // cp 2 over the two GPUs (dp 1, ep 2 over the same GPUs): each holds 64 of the 128 tokens
  // (Megatron-Core splits the sequence into 2·cp chunks, two per rank). Its attention is the QKV
  // projection of 64 tokens (768 columns) with the norm, then the core in cp = 2 steps of a
  // quarter of the whole sequence's core each (the rank's half of the causal work, split over
  // the steps), then the output projection of 64 tokens and the residual add (3·64·256·2 B). Between the steps the ring passes K and
  // V of 64 tokens, 4 heads of 64: 2·64·256·2 = 65536 B per rank; the backward passes their
  // gradients too, 131072 B. Two layers: 2 forward and 2 backward ring steps over 2 ranks, and
  // the MoE layer's 4 exchanges of the 32 tokens each GPU routes to the other (32·256·2 B).
  auto doc = two_gpus(1);
  doc["parallel"] = {{"cp", 2}};
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  const auto sc = test::scenario_from(doc.dump());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  const double tokens = 64, h = 256;
  const Time qkv = cm.gemm(tokens, 768, h) + cm.memory_bound(2 * tokens * h * 2),
             out = cm.gemm(tokens, h, h) + cm.memory_bound(3 * tokens * h * 2);
  const Time step = cm.attention(1, 4, 128, 64, true) / 4;
  std::map<std::string, int> forward;
  Time ring_end = -1, second_step_start = -1;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0 || t.gpu != 0 || t.label.layer != 0 || t.label.phase != engine::Phase::Forward) continue;
    const std::string name = sim.engine().names()[t.label.name];
    if (name == "attention") {
      EXPECT_TRUE(t.end - t.start == qkv || t.end - t.start == out) << t.end - t.start;
    }
    if (name == "attention_core") {
      EXPECT_EQ(t.end - t.start, step);
    }
    if (name == "CP-KV") ring_end = t.end;
    if (name == "attention_core" && t.label.chunk == 1) second_step_start = t.start;
    ++forward[name];
  }
  EXPECT_EQ(forward["attention"], 2);
  EXPECT_EQ(forward["attention_core"], 2);
  EXPECT_EQ(forward["CP-KV"], 1);
  EXPECT_GE(second_step_start, ring_end);  // the second step computes on the K/V the ring brought
  const auto c = sim.results_json()["network"]["collectives"];
  EXPECT_EQ(c["all_to_all"]["count"].get<double>(), 2 * 2 + 4);
  EXPECT_DOUBLE_EQ(c["all_to_all"]["bytes"].get<double>(), 2 * 2 * 65536.0 + 2 * 2 * 131072.0 + 4 * 2 * 16384.0);
}

}  // namespace
}  // namespace moesim

namespace moesim {
namespace {

TEST(ExpertTensorParallel, EachGpuComputesItsSliceOfItsGroupsTokens) {
  // 4 GPUs, etp 2 × ep 2 (edp 1, dp 4: each GPU routes its own 128 tokens), one MoE layer of 4
  // experts, top-1, uniform: expert rank = etp + 2·ep (Megatron-Core), so the EP groups are
  // {0, 2} and {1, 3} and the ETP groups {0, 1} and {2, 3}; GPUs 0 and 1 both hold experts 0 and
  // 1, each a 1/2 column slice (M/2 = 256). GPU 0 receives 32 copies per expert from itself and
  // from GPU 2 (64 per expert), GPU 1 likewise from its EP group; the ETP all-gather brings each
  // the other's 2·64 copies of 512 B = 65536 B, and each computes both experts on all 128 copies
  // of each at half width, as one grouped GeMM over the two for each of fc1 and fc2 and one GeLU
  // over the 256 copies (reads and writes 256·256 bf16 values): the same FLOPs as one whole
  // expert of 128 copies at ep 4. The partial outputs go back by a reduce-scatter of the same
  // 65536 B per rank. With two local experts the gathered copies are regrouped by expert and back
  // (regroup_time: two kernels each reading and writing the 256 copies of 512 B). Forward and backward: 4 all-gathers and 4 reduce-scatters over the two ETP
  // groups, 131072 B each; the dispatch sends the 64 copies for the peer's experts, 32768 B per
  // rank, 4 exchanges over each EP group.
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["model"]["dense_layers"] = 1;
  doc["parallel"] = {{"ep", 2}, {"etp", 2}};
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  const auto sc = test::scenario_from(doc.dump());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  const std::vector<double> copies{128, 128};
  const Time expert = cm.grouped_gemm(copies, 256, 256) + cm.memory_bound(2 * 256 * 256 * 2) + cm.grouped_gemm(copies, 256, 256) +
                     2 * cm.memory_bound(2 * 256 * 256 * 2);
  Time gathered = -1, experts_start = -1, experts_end = -1, scattered_start = -1, scattered_end = -1, combine_start = -1;
  int expert_tasks = 0;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0 || t.label.phase != engine::Phase::Forward || t.label.layer != 1) continue;
    const std::string name = sim.engine().names()[t.label.name];
    if (name == "experts") {
      EXPECT_EQ(t.end - t.start, expert) << "GPU " << t.gpu;
      ++expert_tasks;
    }
    if (t.gpu != 0) continue;
    if (name == "etp_gather") gathered = t.end;
    if (name == "experts") std::tie(experts_start, experts_end) = std::pair{t.start, t.end};
    if (name == "etp_scatter") std::tie(scattered_start, scattered_end) = std::pair{t.start, t.end};
    if (name == "combine") combine_start = t.start;
  }
  EXPECT_EQ(expert_tasks, 4);
  EXPECT_GT(gathered, 0);
  EXPECT_GE(experts_start, gathered);
  EXPECT_GE(scattered_start, experts_end);
  EXPECT_GE(combine_start, scattered_end);
  const auto c = sim.results_json()["network"]["collectives"];
  EXPECT_EQ(c["all_gather"]["count"].get<double>(), 4);
  EXPECT_EQ(c["reduce_scatter"]["count"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(c["all_gather"]["bytes"].get<double>(), 4 * 131072.0);
  EXPECT_DOUBLE_EQ(c["reduce_scatter"]["bytes"].get<double>(), 4 * 131072.0);
  EXPECT_EQ(c["all_to_all"]["count"].get<double>(), 8);
  EXPECT_DOUBLE_EQ(c["all_to_all"]["bytes"].get<double>(), 8 * 2 * 32768.0);
}

TEST(ExpertTensorParallel, SplitsTheExpertWeightsAndTheirGradients) {
  // 8 GPUs, dp 8, two MoE layers of 4 experts of P parameters. ep 2: each GPU holds 2 whole
  // experts (2P), its expert-data-parallel groups have 4 GPUs (8 / 2), and a ring all-reduce
  // over n ranks of S bytes sends 2(n − 1)·S in all: 2 groups × 2·3·2P·b = 24P·b per layer.
  // etp 2 × ep 2: each GPU holds 2 half experts (P), EDP groups of 2 (8 / 4): 4 × 2·1·P·b =
  // 8P·b per layer. The dense gradients (dp 8) are the same, so the totals differ by
  // 2 layers × 16P·b; the GPU's expert weights halve.
  auto base = schema::Json::parse(test::kSmallEp);
  base["cluster"]["levels"][0]["count"] = 8;
  auto etp = base, ep = base;
  etp["parallel"] = {{"ep", 2}, {"etp", 2}};
  ep["parallel"] = {{"ep", 2}};
  simulation::Simulation a(test::scenario_from(etp.dump())), b(test::scenario_from(ep.dump()));
  a.run();
  b.run();
  const auto sc = test::scenario_from(base.dump());
  const double p = sc.model.expert_params(), width = 2;
  const auto all_reduce = [](simulation::Simulation& s) {
    return s.results_json()["network"]["collectives"]["all_reduce"]["bytes"].get<double>();
  };
  EXPECT_NEAR(all_reduce(b) - all_reduce(a), 2 * 16 * p * width, 1e-6 * all_reduce(b));
  EXPECT_DOUBLE_EQ(b.memory()[0].weights - a.memory()[0].weights, 2 * p * width);
}

}  // namespace
}  // namespace moesim
