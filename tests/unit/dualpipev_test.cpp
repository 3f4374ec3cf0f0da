// DualPipeV (deepseek-ai/DualPipe dualpipev.py: DualPipe of the DeepSeek-V3 report §3.2.1 cut in
// half): its order per rank with its zero-bubble backwards and W steps, its V of chunks over the
// stages, the sends it needs and does not, the weight gradients its W runs, the activations it
// holds, and the scenarios it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "sim/schedule/schedule.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

using parallel::PipelineSchedule;

// `p` stages of one GPU each, 2p layers (one per virtual stage), `m` microbatches under DualPipeV.
schema::Json dualpipev(int p, int m) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"]["levels"][0]["count"] = p;
  doc["model"]["layers"] = 2 * p;
  doc["model"]["vocab"] = 1000;
  doc["training"]["microbatches"] = m;
  doc["parallel"] = {{"pp", p}, {"vp", 2}, {"ep", 1}, {"schedule", "dualpipev"}};
  return doc;
}

// "F0:3" is the forward of chunk 0 for microbatch 3, "B1:0" a backward, "B1:0*" a zero-bubble one,
// "+" a forward written with the backward after it, "W" a W.
std::string spelled(const std::vector<schedule::Unit>& order) {
  std::string out;
  for (const auto& u : order) {
    if (u.weight) {
      out += "W ";
      continue;
    }
    out += std::string(u.forward ? "F" : "B") + std::to_string(u.chunk) + ":" + std::to_string(u.microbatch) +
           (u.zero_bubble ? "*" : "") + (u.with_next ? "+" : " ");
  }
  return out;
}

TEST(DualPipeV, EachRankRunsTheStepsOfDualPipeV) {
  // p = 2, m = 4, from dualpipev.py's `step`. Rank 0: 1: 2(p − 1) = 2 F0; 2: one F0 F1; 3: one
  // zero-bubble B1, its W, F1; 4: m − 2p + 1 = 1 time F0&B1, F1&B0; 5: one B1, F1&B0; 6: one pair
  // B1 B0, zero-bubble from its middle (pair 1 // 2 = 0), on an even rank after the B1; 7: one W
  // and a zero-bubble B0; 8: r + 1 = 1 W.
  EXPECT_EQ(spelled(schedule::stage_order(PipelineSchedule::DualPipeV, 0, 2, 2, 4)),
            "F0:0 F0:1 F0:2 F1:0 B1:0* W F1:1 F0:3+B1:1 F1:2+B0:0 B1:2 F1:3+B0:1 B1:3 B0:2* W B0:3* W ");
  // Rank 1, the last: 2: two F0 F1; 4: m − 2p + 2 = 2 times, the first F0 and B1 apart (dualpipev.py
  // does not overlap them "to further reduce bubble size"); 6: two pairs B1 B0, zero-bubble from
  // pair 2 // 2 = 1, on an odd rank before its B1; 8: two W.
  EXPECT_EQ(spelled(schedule::stage_order(PipelineSchedule::DualPipeV, 1, 2, 2, 4)),
            "F0:0 F1:0 F0:1 F1:1 F0:2 B1:0 F1:2+B0:0 F0:3+B1:1 F1:3+B0:1 B1:2 B0:2 B1:3* B0:3* W W ");
  // p = 4, m = 10: every rank runs each chunk's m forwards and m backwards, in microbatch order,
  // and one W per zero-bubble backward, after it: dualpipev.py asserts the queue empty at the end.
  for (int r = 0; r < 4; ++r) {
    int next[2][2] = {{0, 0}, {0, 0}};  // [forward][chunk]
    int waiting = 0;
    for (const auto& u : schedule::stage_order(PipelineSchedule::DualPipeV, r, 4, 2, 10)) {
      if (u.weight) {
        EXPECT_GT(waiting--, 0) << "rank " << r;
        continue;
      }
      EXPECT_EQ(u.microbatch, next[u.forward][u.chunk]) << "rank " << r;
      ++next[u.forward][u.chunk];
      waiting += u.zero_bubble;
      if (u.with_next) {
        EXPECT_TRUE(u.forward);
      }
    }
    EXPECT_EQ(waiting, 0) << "rank " << r;
    for (int f = 0; f < 2; ++f)
      for (int c = 0; c < 2; ++c) EXPECT_EQ(next[f][c], 10) << "rank " << r;
  }
}

TEST(DualPipeV, TheChunksLieInAVAndTheTipSendsNothing) {
  // p = 2 stages, 4 layers: chunk 0 of stage s is virtual stage s, chunk 1 virtual stage 3 − s, so
  // stage 0 (GPU 0) runs layers 0 and 3 and both ends of the model (the embedding, labelled layer
  // 0, and the LM head, layer 4), stage 1 layers 1 and 2. A microbatch crosses from stage 0 to 1
  // (layer 0 → 1) and back (2 → 3) each way; layer 1 → 2 stays on stage 1: 2 transfers forward and
  // 2 backward per microbatch, two member tasks each.
  const int p = 2, m = 4;
  simulation::Simulation sim(test::scenario_from(dualpipev(p, m).dump()));
  sim.run(test::with_task_log());
  std::map<int, std::set<int>> layers;                  // gpu → layers of its forward and backward compute
  std::map<int, std::map<int, int>> forward_attention;  // gpu → layer → microbatches
  int p2p = 0;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0) continue;
    const bool pass = t.label.phase == engine::Phase::Forward || t.label.phase == engine::Phase::Backward;
    if (pass && t.type == engine::TaskType::Compute && t.label.kind != engine::WorkKind::Wait)
      layers[static_cast<int>(t.gpu)].insert(t.label.layer);
    if (t.label.kind == engine::WorkKind::Attention && t.label.phase == engine::Phase::Forward)
      ++forward_attention[static_cast<int>(t.gpu)][t.label.layer];
    if (t.label.kind == engine::WorkKind::P2P) ++p2p;
  }
  EXPECT_EQ(layers[0], (std::set<int>{0, 3, 4}));
  EXPECT_EQ(layers[1], (std::set<int>{1, 2}));
  EXPECT_EQ(forward_attention[0], (std::map<int, int>{{0, m}, {3, m}}));
  EXPECT_EQ(forward_attention[1], (std::map<int, int>{{1, m}, {2, m}}));
  EXPECT_EQ(p2p, 2 * 4 * m);
  // Rank 0's first backward (B1:0, zero-bubble) starts with the LM head's: its weight gradient is
  // left to the W after it, on GPU 0, with the head's label (layer 4).
  int head_w = 0;
  for (const auto& t : sim.task_log().tasks())
    head_w += t.end >= 0 && sim.engine().names()[t.label.name] == "lm_head_wgrad" && t.gpu == 0 && t.label.layer == 4 &&
              t.label.microbatch == 0;
  EXPECT_EQ(head_w, 1);
  // Each transfer is one microbatch's hidden states, 128 tokens · 256 · 2 B.
  EXPECT_DOUBLE_EQ(sim.results_json()["network"]["bytes_by_level"]["gpu"].get<double>(), 4.0 * m * 128 * 256 * 2);
}

TEST(DualPipeV, ItHoldsTheChunksItsOrderKeepsInFlight) {
  // Rank 0 of p = 2, m = 4 (the order above): after F0:0 F0:1 F0:2 F1:0 four units are held, B1:0
  // frees one, F1:1 adds it back; each forward written with a backward adds at most one layer of
  // its chunk (`layer`) before the backward frees one: a peak of 4 + layer. Rank 1 holds 5 after
  // its warm-up of F0 F1 F0 F1 F0.
  EXPECT_DOUBLE_EQ(schedule::peak_in_flight(schedule::stage_order(PipelineSchedule::DualPipeV, 0, 2, 2, 4), 0.5), 4.5);
  EXPECT_DOUBLE_EQ(schedule::peak_in_flight(schedule::stage_order(PipelineSchedule::DualPipeV, 1, 2, 2, 4), 0.5), 5.0);
  // With one layer a chunk, stage 1 holds 5 chunks: 2.5 microbatches of its 2 layers, where 1F1B's
  // last stage holds 1 and the LM head's inputs and logits of one microbatch at the loss,
  // 128·(4·256 + 2·1000) B. One parameter copy either way: the LM head moves to stage 0 and nothing
  // else does.
  auto one_f_one_b = dualpipev(2, 4);
  one_f_one_b["parallel"] = {{"pp", 2}, {"ep", 1}};
  simulation::Simulation v(test::scenario_from(dualpipev(2, 4).dump())), plain(test::scenario_from(one_f_one_b.dump()));
  v.run();
  plain.run();
  EXPECT_DOUBLE_EQ(v.memory()[1].activations, 2.5 * (plain.memory()[1].activations - 128.0 * (4 * 256 + 2 * 1000)));
  const double head = plain.memory()[1].weights - v.memory()[1].weights;
  EXPECT_GE(head, 2.0 * 1000 * 256);  // the head's 1000 × 256 weights at 2 B
  EXPECT_DOUBLE_EQ(v.memory()[0].weights - plain.memory()[0].weights, head);
}

// The p-stage pipeline of `dualpipev` with kernels long enough that the host's launches never
// hold them back and sends that take no time: what is left of its iteration is its order.
schema::Json compute_only(int p, int m) {
  auto doc = dualpipev(p, m);
  doc["model"].erase("vocab");
  doc["model"]["hidden"] = 2048;
  doc["model"]["ffn_hidden"] = 4096;
  doc["model"]["heads"] = 16;
  doc["training"]["sequence_length"] = 2048;
  doc["cluster"]["levels"][0]["bandwidth"] = "100000TB/s";
  doc["cluster"]["levels"][0]["latency"] = "0us";
  return doc;
}

TEST(DualPipeV, ItsWRunsTheWeightGradientsItsZeroBubbleBackwardsLeft) {
  for (const int p : {2, 4}) {
    const int m = 2 * p;
    simulation::Simulation sim(test::scenario_from(compute_only(p, m).dump()));
    sim.run(test::with_task_log());
    const auto& names = sim.engine().names();
    // Per GPU, layer and microbatch: the backward's compute and its weight gradients (tasks named
    // *_wgrad), their sums and spans; every GPU's first start and last end of the passes.
    struct Piece {
      Time busy = 0, start = std::numeric_limits<Time>::max(), end = 0;
    };
    std::map<std::tuple<int, int, int>, Piece> backward, weights, forward;
    Time first = std::numeric_limits<Time>::max(), last = 0;
    std::map<int, Time> busy;
    for (const auto& t : sim.task_log().tasks()) {
      if (t.end < 0 || t.type != engine::TaskType::Compute || t.label.kind == engine::WorkKind::Wait) continue;
      if (t.label.phase != engine::Phase::Forward && t.label.phase != engine::Phase::Backward) continue;
      const std::string& n = names[t.label.name];
      const bool w = n.size() > 6 && n.compare(n.size() - 6, 6, "_wgrad") == 0;
      auto& piece = (t.label.phase == engine::Phase::Forward ? forward : w ? weights : backward)[{
          static_cast<int>(t.gpu), t.label.layer, t.label.microbatch}];
      piece.busy += t.end - t.start;
      piece.start = std::min(piece.start, t.start);
      piece.end = std::max(piece.end, t.end);
      busy[static_cast<int>(t.gpu)] += t.end - t.start;
      first = std::min(first, t.start);
      last = std::max(last, t.end);
    }
    // The zero-bubble backwards of the order (EachRankRunsTheStepsOfDualPipeV), and nothing else,
    // leave weight gradients: rank r's B1 of step 3 (p − r − 1), its second half of step 6 and its
    // B0 of step 7 (p − r − 1). With one layer a chunk, chunk 0 of rank r is layer r, chunk 1 layer
    // 2p − 1 − r.
    std::set<std::tuple<int, int, int>> expected;
    for (int r = 0; r < p; ++r) {
      const auto order = schedule::stage_order(PipelineSchedule::DualPipeV, r, p, 2, m);
      for (const auto& u : order)
        if (u.zero_bubble) expected.insert({r, u.chunk == 0 ? r : 2 * p - 1 - r, u.microbatch});
    }
    std::set<std::tuple<int, int, int>> split;
    for (const auto& [key, w] : weights) split.insert(key);
    EXPECT_EQ(split, expected) << "p " << p;
    // Each W runs after its backward, and the backward and its W together take what the same
    // layer's backward of a microbatch not split takes, to the picosecond.
    for (const auto& [key, w] : weights) {
      const auto [g, layer, mb] = key;
      int whole = 0;
      while (weights.count({g, layer, whole})) ++whole;
      EXPECT_GE(w.start, backward.at(key).end);
      EXPECT_EQ(backward.at(key).busy + w.busy, backward.at({g, layer, whole}).busy) << "gpu " << g << " layer " << layer;
      EXPECT_GT(w.busy, 0);
    }
    // Every rank computes 2m forwards and backwards of one layer; the rest of the iteration is the
    // bubble, at most the DualPipe README's (PP/2 − 1)(F&B + B − 3W) for PP = 2p stages, with F&B
    // = F + B here (nothing to overlap): its pairs run whole, where the simulation interleaves a
    // pair's layer pieces (Megatron-Core's order) and sends each result once its own pieces end.
    // F, B, W: layer 1's forward, full backward (microbatch 0's, not split) and W on its GPU.
    const Time f = forward.at({1, 1, 0}).busy, b = backward.at({1, 1, 0}).busy;
    const Time w = weights.begin()->second.busy;
    for (const auto& [g, t] : busy) EXPECT_EQ(t, 2 * m * (f + b)) << "gpu " << g;
    const Time bubble = last - first - 2 * m * (f + b);
    const Time readme = (p - 1) * (f + b + b - 3 * w);
    EXPECT_LE(bubble, readme) << "p " << p;
    EXPECT_GE(bubble, readme - f) << "p " << p;
    // Without the split (W = 0) the same bound would be higher by 3W a rank: the W fill bubbles.
    EXPECT_LT(bubble, (p - 1) * (f + b + b)) << "p " << p;
  }
}

TEST(DualPipeV, ItHoldsPpPlusOneStagesOfActivationsAsItsReadmeSays) {
  // deepseek-ai/DualPipe's README table: DualPipeV holds PP + 1 stages' activations a device, PP
  // the stages (2p on p devices), where 1F1B holds PP. With a zero-bubble backward's activations
  // held until its W, the busiest rank's order reaches exactly that, whatever m.
  for (const int p : {2, 3, 4, 8})
    for (const int m : {2 * p, 3 * p, 20}) {
      double busiest = 0;
      for (int r = 0; r < p; ++r)
        busiest = std::max(busiest, schedule::peak_in_flight(schedule::stage_order(PipelineSchedule::DualPipeV, r, p, 2, m)));
      EXPECT_DOUBLE_EQ(busiest, 2 * p + 1) << "p " << p << " m " << m;
    }
}

TEST(DualPipeV, RefusesWhatItCannotRun) {
  // Two chunks a rank exactly, and at least 2p microbatches (dualpipev.py asserts
  // num_chunks >= num_ranks * 2).
  auto doc = dualpipev(2, 4);
  doc["parallel"]["vp"] = 1;
  test::expect_refused_at(doc, "$.parallel.vp");
  doc["parallel"]["vp"] = 4;
  test::expect_refused_at(doc, "$.parallel.vp");
  doc = dualpipev(2, 3);
  test::expect_refused_at(doc, "$.training.microbatches");
}

}  // namespace
}  // namespace moesim
