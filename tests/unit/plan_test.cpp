// Plans over the shared blocks (DESIGN.md §8), by hand: replicas split an expert's tokens as the
// plan's shares say, a two-sided group sends tokens only from attention GPUs to expert GPUs, and a
// plan that reads the previous iteration's token counts changes the placement of the next.
#include <gtest/gtest.h>

#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/token_routing.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/strategies/ep/expert_parallel_plan.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// 2 experts, top-1, uniform routing by expected shares, no capacity limit; 1024 tokens per GPU of
// H = 256 in bf16.
schema::Json small(int gpus) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"]["levels"][0]["count"] = gpus;
  doc["model"]["experts"] = 2;
  doc["model"]["layers"] = 1;
  doc["training"]["sequence_length"] = 1024;
  return doc;
}

// The routing of one layer under a hand-written plan.
struct Routed : test::RoutingBench {
  blocks::LayerRouting rt;
  Routed(const schema::Json& doc, const parallel::IterationPlan& plan, const parallel::MoeLayerPlan& layer)
      : RoutingBench(doc), rt(route(layer, plan)) {}
};

parallel::MoeLayerPlan one_group(std::vector<std::uint32_t> gpus, std::vector<std::vector<parallel::Replica>> replicas) {
  auto table = std::make_shared<parallel::ReplicaTable>();
  table->of_expert = std::move(replicas);
  parallel::MoeLayerPlan lp;
  lp.dispatch = {{std::move(gpus), table}};
  lp.expert_ffn_hidden = 512;
  lp.gate_tokens = lp.combine_tokens = 1024;  // each GPU routes its microbatch of 1024 tokens
  return lp;
}

}  // namespace

TEST(Plan, TwoReplicasSplitAnExpertsTokensAsThePlanSays) {
  // Expert 0 has replicas on rank 0 (a quarter of its tokens) and rank 1 (three quarters); expert
  // 1 lives on rank 1. Each GPU routes 512 of its 1024 tokens to each expert. Source 0 keeps
  // 512/4 = 128 for its own replica and sends 384 + 512 = 896 tokens of 256·2 B to rank 1:
  // 458752 B; source 1 sends 128 tokens to rank 0: 65536 B. Expert 0 receives 1024 copies over
  // both sources: rank 0 computes 256 of them, rank 1 the other 768 and all 1024 of expert 1, in
  // one grouped FFN.
  const auto lp = one_group({0, 1}, {{{0, 0.25}, {1, 0.75}}, {{1, 1.0}}});
  const Routed r(small(2), parallel::IterationPlan{}, lp);
  ASSERT_EQ(r.rt.dispatch.size(), 1u);
  EXPECT_DOUBLE_EQ(r.rt.dispatch[0]->at(0, 1), 458752.0);
  EXPECT_DOUBLE_EQ(r.rt.dispatch[0]->at(1, 0), 65536.0);
  EXPECT_DOUBLE_EQ(r.rt.combine[0]->at(1, 0), 458752.0);  // combine returns what was dispatched
  EXPECT_EQ(r.rt.expert[0].experts.forward, r.ffn(256));
  EXPECT_EQ(r.rt.expert[1].experts.forward, r.experts({768, 1024}));
  EXPECT_LT(r.rt.expert[1].experts.forward.time, (r.ffn(768) + r.ffn(1024)).time);  // one launch per kernel, not two
  EXPECT_EQ(r.rt.expert_tokens, (std::vector<double>{1024, 1024}));
  EXPECT_DOUBLE_EQ(r.rt.routed_copies, 2048);
}

TEST(Plan, SampledRoutingSplitsEachSourcesDrawByTheShares) {
  // The same plan with per-source draws: whatever a source draws for expert 0, a quarter goes to
  // rank 0's replica, so rank 0 computes exactly a quarter of expert 0's copies and the rest of
  // the copies (three quarters of expert 0's, all of expert 1's) go to rank 1.
  auto doc = small(2);
  doc["routing"]["sampling"] = "sampled";
  const auto lp = one_group({0, 1}, {{{0, 0.25}, {1, 0.75}}, {{1, 1.0}}});
  const Routed r(doc, parallel::IterationPlan{}, lp);
  const double e0 = r.rt.expert_tokens[0], e1 = r.rt.expert_tokens[1];
  EXPECT_DOUBLE_EQ(e0 + e1, 2048);
  EXPECT_NE(e0, 1024);  // drawn, not expected
  EXPECT_EQ(r.rt.expert[0].experts.forward, r.ffn(e0 / 4));
  EXPECT_EQ(r.rt.expert[1].experts.forward, r.experts({e0 * 0.75, e1}));
}

TEST(Plan, DroplessSampledRoutingIsEachSourcesMultinomial) {
  // Without a capacity a source draws over the ranks and each rank's copies are split over its
  // experts once (token_routing.cpp). That must be the distribution of a draw per source and
  // expert: 4 GPUs, 8 experts (2 per rank), Zipf 1 popularity, 1024 copies per source. Over 2000
  // microbatches, source 0's copies to rank r are Binomial(1024, P_r) with P_r its experts' summed
  // popularity, and expert e receives Binomial(4·1024, p_e) over the four sources. Means are
  // checked to 4 standard errors (σ/√n), variances to 4 (σ²·√(2/(n−1))).
  auto doc = small(4);
  doc["model"]["experts"] = 8;
  doc["routing"] = {{"kind", "zipf"}, {"zipf_exponent", 1.0}, {"sampling", "sampled"}};
  const auto sc = test::scenario_from(doc.dump());
  const cluster::Topology topo = sc.topology();
  const std::vector<compute::ComputeModel> compute{compute::ComputeModel(topo.gpu(0), sc.compute)};
  const workload::RoutingModel routing(sc.routing, sc.model.experts, sc.model.layers, sc.training.iterations, sc.seed);
  const blocks::Context ctx{topo, sc.model, sc.training, routing, compute};
  parallel::MoeLayerPlan lp;
  lp.dispatch = {{{0, 1, 2, 3}, parallel::ReplicaTable::contiguous(8, 4)}};
  lp.expert_ffn_hidden = 512;
  lp.gate_tokens = lp.combine_tokens = 1024;
  const std::vector<double> p = routing.popularity(0, 0);
  const int n = 2000;
  const double bytes_per_copy = 256 * 2;
  std::vector<double> s1(4 + 8, 0.0), s2(4 + 8, 0.0);
  for (int mb = 0; mb < n; ++mb) {
    const auto rt = blocks::route_layer(ctx, parallel::IterationPlan{}, lp, 0, 0, mb);
    EXPECT_DOUBLE_EQ(rt.routed_copies, 4096);
    for (int r = 0; r < 4; ++r) {
      const double x = rt.dispatch[0]->at(r == 0 ? 1 : 0, r) / bytes_per_copy;
      s1[r] += x;
      s2[r] += x * x;
    }
    for (int e = 0; e < 8; ++e) {
      s1[4 + e] += rt.expert_tokens[e];
      s2[4 + e] += rt.expert_tokens[e] * rt.expert_tokens[e];
    }
  }
  const auto check = [&](int i, double trials, double q, const std::string& what) {
    const double mean = s1[i] / n, var = (s2[i] - s1[i] * s1[i] / n) / (n - 1);
    const double want_mean = trials * q, want_var = trials * q * (1 - q);
    EXPECT_NEAR(mean, want_mean, 4 * std::sqrt(want_var / n)) << what;
    EXPECT_NEAR(var, want_var, 4 * want_var * std::sqrt(2.0 / (n - 1))) << what;
  };
  for (int r = 0; r < 4; ++r) check(r, 1024, p[2 * r] + p[2 * r + 1], "to rank " + std::to_string(r));
  for (int e = 0; e < 8; ++e) check(4 + e, 4096, p[e], "expert " + std::to_string(e));
}

TEST(Plan, TwoSidedGroupSendsTokensOnlyFromAttentionGpusToExpertGpus) {
  // GPUs 0 and 1 run attention only, 2 and 3 experts only (expert 0 on rank 2, expert 1 on rank
  // 3): each attention GPU sends half its 1024 tokens to each expert GPU (262144 B), nothing else
  // moves, and only the expert GPUs compute, 1024 copies each.
  parallel::IterationPlan plan;
  plan.roles = {parallel::kRunsAttention, parallel::kRunsAttention, parallel::kRunsExperts, parallel::kRunsExperts};
  auto doc = small(4);
  const auto lp = one_group({0, 1, 2, 3}, {{{2, 1.0}}, {{3, 1.0}}});
  const Routed r(doc, plan, lp);
  const auto& t = *r.rt.dispatch[0];
  for (std::uint32_t s = 0; s < 4; ++s)
    for (std::uint32_t d = 0; d < 4; ++d)
      EXPECT_DOUBLE_EQ(t.at(s, d), s < 2 && d >= 2 ? 262144.0 : 0.0) << s << " -> " << d;
  EXPECT_EQ(r.rt.expert[0].experts.forward, compute::Work{});
  EXPECT_EQ(r.rt.expert[1].experts.forward, compute::Work{});
  EXPECT_EQ(r.rt.expert[2].experts.forward, r.ffn(1024));
  EXPECT_EQ(r.rt.expert[3].experts.forward, r.ffn(1024));
  EXPECT_DOUBLE_EQ(r.rt.routed_copies, 2048);  // two sources of 1024 copies
}

namespace {

// A plan made by hand: EP over one group of every GPU, each holding E/G experts, with the
// replica table and the schedule a test gives.
class HandPlan : public strategies::Strategy {
 public:
  std::string name() const override { return "hand-plan"; }
  void check(const strategies::StrategyContext&) const override {}
  std::vector<workload::MemoryFootprint> memory(const strategies::StrategyContext& ctx) const override {
    return strategies::ep::memory(ctx, static_cast<int>(ctx.topology.gpu_count()));
  }
  strategies::ProgramSize program_per_iteration(const strategies::StrategyContext&) const override {
    return strategies::ProgramSize::kernels(1000);
  }
  schema::Json describe(const strategies::StrategyContext&) const override { return schema::Json::object(); }
  parallel::PlanPtr plan(const strategies::StrategyContext& ctx, int, const parallel::RunState& state) override {
    const auto& m = ctx.model;
    const std::uint32_t gpus = ctx.topology.gpu_count();
    strategies::ep::ExpertParallelPlan in;
    in.streams = {parallel::StreamRole::Compute, parallel::StreamRole::Dispatch, parallel::StreamRole::Combine,
                  parallel::StreamRole::Gradient};
    in.groups = {{std::vector<std::uint32_t>(), replicas(ctx, state)}};
    for (std::uint32_t g = 0; g < gpus; ++g) in.groups[0].gpus.push_back(g);
    in.params_per_gpu = m.replicated_params() + m.moe_layers() * (m.experts / static_cast<int>(gpus)) * m.expert_params();
    auto p = std::make_shared<parallel::IterationPlan>(*strategies::ep::make_plan(ctx, in));
    p->schedule = schedule;
    return p;
  }
  parallel::ScheduleKind schedule = parallel::ScheduleKind::Pipeline;

 protected:
  virtual std::shared_ptr<const parallel::ReplicaTable> replicas(const strategies::StrategyContext& ctx,
                                                                 const parallel::RunState& state) = 0;
};

// The same placement for every iteration.
class Fixed final : public HandPlan {
 public:
  explicit Fixed(std::shared_ptr<const parallel::ReplicaTable> t) : table_(std::move(t)) {}

 private:
  std::shared_ptr<const parallel::ReplicaTable> replicas(const strategies::StrategyContext&, const parallel::RunState&) override {
    return table_;
  }
  std::shared_ptr<const parallel::ReplicaTable> table_;
};

// 2 GPUs, experts [0, 1] on rank 0 and [2, 3] on rank 1; from the second iteration on, the expert
// that received the most copies in the previous iteration (in layer 0) gets a second replica on
// the other rank with the share x of its tokens that evens the ranks' loads by those counts:
// owner load L0 − x·h = other load L1 + x·h, x = (L0 − L1)/(2h).
class FollowThePopular final : public HandPlan {
 public:
  std::vector<int> hottest;
  std::vector<double> shares;
  std::vector<std::shared_ptr<const parallel::ReplicaTable>> tables;

 private:
  std::shared_ptr<const parallel::ReplicaTable> replicas(const strategies::StrategyContext&,
                                                         const parallel::RunState& state) override {
    auto table = std::make_shared<parallel::ReplicaTable>(*parallel::ReplicaTable::contiguous(4, 2));
    if (state.previous) {
      const auto& tokens = state.previous->expert_tokens[0];
      const int hot = static_cast<int>(std::max_element(tokens.begin(), tokens.end()) - tokens.begin());
      hottest.push_back(hot);
      const std::uint32_t owner = static_cast<std::uint32_t>(hot / 2);
      const double l0 = tokens[2 * owner] + tokens[2 * owner + 1], l1 = tokens[2 * (1 - owner)] + tokens[2 * (1 - owner) + 1];
      const double x = (l0 - l1) / (2 * tokens[hot]);
      shares.push_back(x);
      table->of_expert[hot] = {{owner, 1 - x}, {1 - owner, x}};
    }
    tables.push_back(table);
    return table;
  }
};

}  // namespace

TEST(Plan, APlanThatReadsThePreviousIterationsTokenCountsChangesThePlacementOfTheNext) {
  // Zipf routing (s = 1.2) whose hot experts stay put over iterations: popularity 1/r^1.2
  // normalised over 4 ranks r is 0.528, 0.230, 0.142, 0.100, so the hot expert's rank carries at
  // least 0.628 of the copies. The previous iteration's counts name it; from iteration 1 on its
  // second replica evens the two ranks at 0.5 each. Every GPU ends each iteration together (the
  // dense all-reduce, then equal optimizer steps), so an iteration under a plan takes what the
  // first iteration of a run with that plan from the start takes: iteration 0 as plain EP,
  // iterations 1 and 2 as the replicated placement, and those are faster.
  auto doc = small(2);
  doc["model"]["experts"] = 4;
  doc["model"]["ffn_hidden"] = 8192;
  doc["routing"] = {{"kind", "zipf"}, {"zipf_exponent", 1.2}, {"resample_each_iteration", false}, {"sampling", "expected"}};
  doc["training"]["iterations"] = 3;
  auto adaptive = std::make_unique<FollowThePopular>();
  FollowThePopular& a = *adaptive;
  simulation::Simulation sim(test::scenario_from(doc.dump()), std::move(adaptive));
  sim.run();
  const auto popularity = workload::RoutingModel(test::scenario_from(doc.dump()).routing, 4, 2, 1, 1).popularity(0, 0);
  const int hot = static_cast<int>(std::max_element(popularity.begin(), popularity.end()) - popularity.begin());
  EXPECT_EQ(a.hottest, (std::vector<int>{hot, hot}));
  EXPECT_EQ(a.tables[0]->of_expert[hot].size(), 1u);
  EXPECT_EQ(a.tables[1]->of_expert[hot].size(), 2u);
  // x = (L0 − L1)/(2h) = (2·L0 − 1)/(2h) with the counts normalised: the rank's share before.
  const int partner = hot ^ 1;
  EXPECT_NEAR(a.shares[0], (2 * (popularity[hot] + popularity[partner]) - 1) / (2 * popularity[hot]), 1e-12);

  // The same placements held for a whole run: plain EP, and the replicated one.
  doc["training"]["iterations"] = 1;
  simulation::Simulation plain(test::scenario_from(doc.dump()), std::make_unique<Fixed>(a.tables[0]));
  plain.run();
  simulation::Simulation replicated(test::scenario_from(doc.dump()), std::make_unique<Fixed>(a.tables[1]));
  replicated.run();
  const auto& its = sim.results().iterations;
  ASSERT_EQ(its.size(), 3u);
  EXPECT_EQ(its[0].time, plain.results().iterations[0].time);
  EXPECT_EQ(its[1].time, replicated.results().iterations[0].time);
  EXPECT_EQ(its[2].time, replicated.results().iterations[0].time);
  EXPECT_LT(its[1].time, its[0].time);
}

namespace {

// Plain EP over all GPUs, one expert each, in the schedule the plan names.
class EpInOrder final : public HandPlan {
 public:
  explicit EpInOrder(parallel::ScheduleKind s) { schedule = s; }

 private:
  std::shared_ptr<const parallel::ReplicaTable> replicas(const strategies::StrategyContext& ctx, const parallel::RunState&) override {
    return parallel::ReplicaTable::contiguous(ctx.model.experts, static_cast<int>(ctx.topology.gpu_count()));
  }
};

// Start of GPU 0's forward attention of (layer, microbatch).
Time attention_start(const simulation::Simulation& sim, int layer, int mb) {
  for (const auto& t : sim.task_log().tasks())
    if (t.gpu == 0 && t.label.kind == engine::WorkKind::Attention && t.label.phase == engine::Phase::Forward &&
        t.label.layer == layer && t.label.microbatch == mb)
      return t.start;
  return -1;
}

}  // namespace

TEST(Plan, APlanNamesItsScheduleTheLayerMajorOrderRunsTheSameWorkInAnotherOrder) {
  // Two layers, two microbatches. The data-parallel order runs microbatch 0 through both layers
  // before microbatch 1 starts; HeterMoE's Theorem 1 order runs layer 0 for both microbatches
  // before layer 1. The same tasks of the same lengths, the same bytes: busy time per kind and
  // network bytes agree; only the order (and so the overlap) differs.
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["training"]["microbatches"] = 2;
  std::map<parallel::ScheduleKind, std::unique_ptr<simulation::Simulation>> runs;
  for (const auto kind : {parallel::ScheduleKind::Pipeline, parallel::ScheduleKind::LayerMajor}) {
    runs[kind] = std::make_unique<simulation::Simulation>(test::scenario_from(doc.dump()), std::make_unique<EpInOrder>(kind));
    runs[kind]->run(test::with_task_log());
  }
  const auto& dp = *runs[parallel::ScheduleKind::Pipeline];
  const auto& lm = *runs[parallel::ScheduleKind::LayerMajor];
  EXPECT_LT(attention_start(dp, 1, 0), attention_start(dp, 0, 1));
  EXPECT_LT(attention_start(lm, 0, 1), attention_start(lm, 1, 0));
  const auto a = dp.results_json(), b = lm.results_json();
  EXPECT_EQ(a["busy_ms"], b["busy_ms"]);
  EXPECT_EQ(a["network"]["bytes_by_level"], b["network"]["bytes_by_level"]);
  EXPECT_EQ(a["engine"]["tasks"], b["engine"]["tasks"]);
}
