// DualPipeV (deepseek-ai/DualPipe dualpipev.py: DualPipe of the DeepSeek-V3 report §3.2.1 cut in
// half): its order per rank, its V of chunks over the stages, the sends it needs and does not, the
// activations it holds, and the scenarios it refuses. Its weight gradients are not split from the
// backward (the zero-bubble steps are not modelled: sim/schedule/schedule.hpp).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

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

// "F0:3" is the forward of chunk 0 for microbatch 3, "B1:0" a backward, "+" a forward written with
// the backward after it.
std::string spelled(const std::vector<schedule::Unit>& order) {
  std::string out;
  for (const auto& u : order)
    out += std::string(u.forward ? "F" : "B") + std::to_string(u.chunk) + ":" + std::to_string(u.microbatch) +
           (u.with_next ? "+" : " ");
  return out;
}

TEST(DualPipeV, EachRankRunsTheStepsOfDualPipeV) {
  // p = 2, m = 4, from dualpipev.py's `step` (steps 1-7; the 8th holds weight gradients only).
  // Rank 0: 1: 2(p − 1) = 2 F0; 2: one F0 F1; 3: one B1 F1; 4: m − 2p + 1 = 1 time F0&B1, F1&B0;
  // 5: one B1, F1&B0; 6: one B1 B0; 7: one B0.
  EXPECT_EQ(spelled(schedule::stage_order(PipelineSchedule::DualPipeV, 0, 2, 2, 4)),
            "F0:0 F0:1 F0:2 F1:0 B1:0 F1:1 F0:3+B1:1 F1:2+B0:0 B1:2 F1:3+B0:1 B1:3 B0:2 B0:3 ");
  // Rank 1, the last: 2: two F0 F1; 4: m − 2p + 2 = 2 times, the first F0 and B1 apart (dualpipev.py
  // does not overlap them "to further reduce bubble size"); 6: two B1 B0.
  EXPECT_EQ(spelled(schedule::stage_order(PipelineSchedule::DualPipeV, 1, 2, 2, 4)),
            "F0:0 F1:0 F0:1 F1:1 F0:2 B1:0 F1:2+B0:0 F0:3+B1:1 F1:3+B0:1 B1:2 B0:2 B1:3 B0:3 ");
  // p = 4, m = 10: every rank runs each chunk's m forwards and m backwards, in microbatch order.
  for (int r = 0; r < 4; ++r) {
    int next[2][2] = {{0, 0}, {0, 0}};  // [forward][chunk]
    for (const auto& u : schedule::stage_order(PipelineSchedule::DualPipeV, r, 4, 2, 10)) {
      EXPECT_EQ(u.microbatch, next[u.forward][u.chunk]) << "rank " << r;
      ++next[u.forward][u.chunk];
      if (u.with_next) EXPECT_TRUE(u.forward);
    }
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
