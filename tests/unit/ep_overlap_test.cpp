// Megatron-Core's EP overlap (software.ep_overlap, schedule/iteration_program.cpp): a forward and
// another microbatch's backward written together, each one's exchanges beside the other's compute;
// and the configurations Megatron-Core refuses, refused here too.
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// Two GPUs, one bare MoE layer (no attention) of 2 experts, top-1, EP 2 over a slow 25 GB/s link so
// that the exchanges are as long as the experts; 2 microbatches; the task log kept.
schema::Json overlap_case(bool overlap) {
  auto doc = schema::Json::parse(R"({
    "name": "ep-overlap",
    "cluster": {"gpu": "h100-sxm5-80gb", "levels": [{"name": "gpu", "count": 2, "bandwidth": "25GB/s", "latency": "5us"}]},
    "model": {"layers": 1, "hidden": 2048, "ffn_hidden": 4096, "experts": 2, "top_k": 1, "heads": 16, "vocab": 0,
              "attention": false},
    "training": {"sequence_length": 8192, "micro_batch_size": 1, "microbatches": 2},
    "routing": {"sampling": "expected"},
    "network": {"model": "analytic"},
    "strategy": {"name": "ep"}
  })");
  doc["software"] = {{"ep_overlap", overlap}};
  return doc;
}

}  // namespace

TEST(EpOverlap, AForwardsExchangeRunsBesideAnotherMicrobatchsBackwardCompute) {
  // Without overlap (1F1B of one stage: F0 B0 F1 B1) nothing of microbatch 1 runs before
  // microbatch 0's backward ends. With it (F0, then F1 with B0, then B1, as Megatron-Core's
  // combined_1f1b_schedule_for_no_pipelining), GPU 0's compute stream runs, between microbatch 1's
  // router and its un-permute: microbatch 0's un-permute gradient, microbatch 1's router,
  // microbatch 0's experts (backward), microbatch 1's experts, microbatch 0's router (backward); and
  // microbatch 1's dispatch all-to-all runs while microbatch 0's expert backward computes. Each
  // exchange then hides behind the other microbatch's compute: the iteration is shorter, and the
  // stage, of one layer, holds two microbatches' activations instead of one (a layer's more).
  simulation::Simulation plain(test::scenario_from(overlap_case(false).dump()));
  plain.run(test::with_task_log());
  simulation::Simulation over(test::scenario_from(overlap_case(true).dump()));
  over.run(test::with_task_log());
  EXPECT_LT(over.mean_iteration_time(), plain.mean_iteration_time());
  // One layer: the forward's layer is whole before the backward frees the other microbatch's.
  EXPECT_DOUBLE_EQ(over.memory()[0].activations, 2 * plain.memory()[0].activations);

  const auto& names = over.engine().names();
  struct Seen {
    std::string name;
    engine::Phase phase;
    int microbatch;
    Time start, end;
  };
  std::vector<Seen> compute;
  Seen dispatch1{}, experts0{};
  for (const auto& t : over.task_log().tasks()) {
    if (t.end < 0 || t.gpu != 0 || t.label.phase == engine::Phase::GradSync || t.label.phase == engine::Phase::Optimizer)
      continue;
    const Seen s{names[t.label.name], t.label.phase, t.label.microbatch, t.start, t.end};
    if (t.stream == 0 && t.end > t.start) compute.push_back(s);
    if (s.name == "dispatch" && s.phase == engine::Phase::Forward && s.microbatch == 1) dispatch1 = s;
    if (s.name == "experts" && s.phase == engine::Phase::Backward && s.microbatch == 0) experts0 = s;
  }
  std::vector<std::string> order;
  for (const Seen& s : compute)
    order.push_back(s.name + (s.phase == engine::Phase::Forward ? " f" : " b") + std::to_string(s.microbatch));
  const std::vector<std::string> want{"gate f0",   "experts f0", "combine_output f0", "combine_output b0",
                                      "gate f1",   "experts b0", "experts f1",        "gate b0",
                                      "combine_output f1", "combine_output b1", "experts b1", "gate b1"};
  EXPECT_EQ(order, want);
  // The dispatch of microbatch 1 (a member's start is its arrival) and microbatch 0's expert
  // backward share time.
  ASSERT_GE(dispatch1.end, 0);
  EXPECT_LT(std::max(dispatch1.start, experts0.start), std::min(dispatch1.end, experts0.end));
}

TEST(EpOverlap, WhatMegatronCoreRefusesIsRefused) {
  auto full = overlap_case(true);  // full recomputation
  full["training"]["recompute"] = "full";
  test::expect_refused_at(full, "$.software.ep_overlap");
  auto stages = overlap_case(true);  // pipeline stages without virtual stages
  stages["model"]["layers"] = 2;
  stages["parallel"] = {{"pp", 2}};
  test::expect_refused_at(stages, "$.software.ep_overlap");
  auto parm = overlap_case(true);  // another strategy
  parm["strategy"] = {{"name", "parm"}};
  test::expect_refused_at(parm, "$.software.ep_overlap");
}

TEST(SharedExpertOverlap, OffTheSharedExpertsRunBeforeTheRouterWithNothingBesideThem) {
  // One MoE layer with attention and a shared expert, EP 2. Megatron-Core's default
  // (moe_shared_expert_overlap off): the shared expert's forward ends before the router starts,
  // so the dispatch, which waits for the router, starts after it; nothing of the dispatch runs
  // beside it. On: it runs after the router, beside the dispatch, which starts before it ends.
  const auto run = [](bool overlap) {
    auto doc = overlap_case(false);
    doc["model"] = {{"layers", 1}, {"hidden", 2048}, {"ffn_hidden", 4096}, {"experts", 2}, {"top_k", 1},
                    {"shared_experts", 1}, {"heads", 16}, {"vocab", 0}};
    doc["software"] = {{"shared_expert_overlap", overlap}};
    simulation::Simulation sim(test::scenario_from(doc.dump()));
    sim.run(test::with_task_log());
    std::map<std::string, std::pair<Time, Time>> first;  // name -> (start, end) of microbatch 0's forward
    for (const auto& t : sim.task_log().tasks()) {
      if (t.end < 0 || t.gpu != 0 || t.label.phase != engine::Phase::Forward || t.label.microbatch != 0) continue;
      first.try_emplace(sim.engine().names()[t.label.name], t.start, t.end);
    }
    return first;
  };
  auto off = run(false), on = run(true);
  for (const auto* seen : {&off, &on})
    for (const char* name : {"shared_expert", "gate", "dispatch"}) ASSERT_TRUE(seen->contains(name)) << name;
  EXPECT_LE(off["shared_expert"].second, off["gate"].first);
  EXPECT_GE(off["dispatch"].first, off["shared_expert"].second);
  EXPECT_GE(on["shared_expert"].first, on["gate"].second);
  EXPECT_LT(on["dispatch"].first, on["shared_expert"].second);
}

TEST(EpOverlap, DelayedWeightGradientsRunBesideTheExchangeBack) {
  // Megatron-Core's delay_wgrad_compute: microbatch 0's expert backward becomes its data gradients,
  // then its weight gradients (half the backward's GeMM work each; the two together as long as the
  // undelayed backward). The exchange back (the backward's second all-to-all, "dispatch") leaves
  // when the data gradients end instead of after both, so it runs beside the weight gradients,
  // and the iteration is not longer.
  const auto run = [](bool delay) {
    auto doc = overlap_case(true);
    doc["software"]["delay_wgrad"] = delay;
    auto sim = std::make_unique<simulation::Simulation>(test::scenario_from(doc.dump()));
    sim->run(test::with_task_log());
    return sim;
  };
  const auto plain = run(false), delayed = run(true);
  const auto find = [](const simulation::Simulation& sim, const std::string& name) {
    for (const auto& t : sim.task_log().tasks())
      if (t.end >= 0 && t.gpu == 0 && t.label.phase == engine::Phase::Backward && t.label.microbatch == 0 &&
          sim.engine().names()[t.label.name] == name)
        return std::pair{t.start, t.end};
    return std::pair<Time, Time>{-1, -1};
  };
  const auto whole = find(*plain, "experts"), dgrad = find(*delayed, "experts"), wgrad = find(*delayed, "experts_wgrad");
  const auto back = find(*delayed, "dispatch"), plain_back = find(*plain, "dispatch");
  ASSERT_GE(wgrad.first, 0);
  EXPECT_EQ((dgrad.second - dgrad.first) + (wgrad.second - wgrad.first), whole.second - whole.first);
  EXPECT_EQ(wgrad.first, dgrad.second);
  EXPECT_EQ(back.first, dgrad.second);
  EXPECT_LT(back.first, wgrad.second);
  EXPECT_EQ(plain_back.first, whole.second);
  EXPECT_LE(delayed->mean_iteration_time(), plain->mean_iteration_time());
  // Without EP overlap Megatron-Core refuses it.
  auto alone = overlap_case(false);
  alone["software"]["delay_wgrad"] = true;
  test::expect_refused_at(alone, "$.software.delay_wgrad");
}
