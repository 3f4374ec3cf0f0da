// Zebra parallelism (HeterMoE §4) by simulation: the Fig. 6 example (spec 002 C2) on a toy whose
// kernels take set times, Theorem 1's order against every single swap of its proof (spec 002
// A.4), and the plan's placement, exchanges and streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/token_routing.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/schedule/schedule.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/strategies/zebra/zebra_strategy.hpp"
#include "test_support.hpp"

using namespace moesim;
using engine::Phase;
using engine::WorkKind;

namespace {

// Fig. 6's toy (spec 002 C2): one attention GPU (an H100) and one expert GPU (an A100) whose
// kernels take the times a calibration profile gives them (the same for both kinds: an expert
// costs as much on either), 3 MoE layers of 6 experts, 3 microbatches, top-1, no communication
// time. 60 tokens per microbatch route 10 to each expert (expected shares).
//   - the attention core of one microbatch takes T_A = 3 ms (attention table: the causal core of
//     60 tokens and one head of 64 is 4·60²·64/2 = 460800 FLOP, at 460800/3e-3 FLOP/s);
//   - an expert's two GeMMs (10 × 64 × 64, 81920 FLOP each) take 1/3 ms each, so the expert GPU's
//     6 experts take T_E = 4 ms per microbatch (81920·3e3 FLOP/s);
//   - every other GeMM (projections, router) runs at 300 TFLOP/s and the memory-bound kernels at
//     the GPUs' HBM rates with no fixed cost: nanoseconds against milliseconds;
//   - links of 1000 TB/s without latency: a dispatch of 60 × 64 × 2 B takes 8 ps;
//   - every backward, the experts' included, twice its forward (compute.backward_factor 2: the
//     toy's times, not the shapes of the gradients' GeMMs).
constexpr const char* kToy = R"({
  "name": "fig6-toy",
  "cluster": {"groups": [{"gpu": "h100-sxm5-80gb", "count": 1}, {"gpu": "a100-sxm4-80gb", "count": 1}],
              "levels": [{"name": "gpu", "count": 2, "bandwidth": "1000TB/s", "latency": "0us"}]},
  "model": {"layers": 3, "hidden": 64, "ffn_hidden": 64, "experts": 6, "top_k": 1, "heads": 1},
  "training": {"sequence_length": 60, "micro_batch_size": 1, "microbatches": 3, "dtype": "bf16"},
  "routing": {"sampling": "expected"},
  "compute": {"launch_overhead": "0us", "backward_factor": 2},
  "strategy": {"name": "zebra", "attention_gpu": "h100-sxm5-80gb", "asym_ea": "off"}
})";

constexpr double kMs = 1e9;  // picoseconds per millisecond

calibration::Profile toy_profile() {
  const double fast = 300;                        // TFLOP/s
  const double expert = 81920.0 * 3e3 / 1e12;     // TFLOP/s: 81920 FLOP in 1/3 ms
  const double core = 460800.0 / 3e-3 / 1e12;     // TFLOP/s: 460800 FLOP in 3 ms
  const auto point = [](double m, double n, double k, double tflops) {
    return schema::Json{{"m", m}, {"n", n}, {"k", k}, {"tflops", tflops}};
  };
  const schema::Json doc = {
      {"name", "fig6-toy"},
      {"provenance", {{"source", "HeterMoE Fig. 6 toy times (spec 002 C2)"}}},
      {"gemm", {{{"dtype", "bf16"},
                 {"points", {point(60, 192, 64, fast), point(60, 64, 64, fast), point(60, 6, 64, fast),
                             point(10, 64, 64, expert)}}}}},
      {"attention", {{{"dtype", "bf16"}, {"causal", true},
                      {"points", {{{"seq", 60}, {"head_dim", 64}, {"forward_tflops", core}, {"backward_tflops", core}}}}}}}};
  return calibration::parse_profile(doc, "fig6-toy.json");
}

scenario::Scenario toy(const std::string& asym_ea, int layers = 3) {
  auto doc = schema::Json::parse(kToy);
  doc["strategy"]["asym_ea"] = schema::Json::parse(asym_ea);
  doc["model"]["layers"] = layers;
  auto sc = test::scenario_from(doc.dump());
  sc.calibration = std::make_shared<calibration::Profile>(toy_profile());
  return sc;
}

struct Span {
  Time start = -1, end = -1;
};

// The forward tasks of `kind` on GPU g, in start order.
std::vector<Span> forward(const simulation::Simulation& sim, std::uint32_t g, WorkKind kind) {
  std::vector<Span> out;
  for (const auto& t : sim.task_log().tasks())
    if (t.gpu == g && t.label.kind == kind && t.label.phase == Phase::Forward && t.end > t.start) out.push_back({t.start, t.end});
  std::sort(out.begin(), out.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  return out;
}

Time busy(const std::vector<Span>& spans) {
  Time b = 0;
  for (const auto& s : spans) b += s.end - s.start;
  return b;
}

struct ToyRun {
  std::unique_ptr<simulation::Simulation> sim;
  Time makespan = 0;           // end of the expert GPU's last forward expert task (the first three layers' forward)
  Time attention_busy = 0;     // the attention GPU's forward compute (attention and offloaded experts)
  Time expert_busy = 0;        // the expert GPU's forward expert compute
  Time expert_first_start = 0;
};

ToyRun run_toy(const std::string& asym_ea, int layers = 3) {
  ToyRun r;
  r.sim = std::make_unique<simulation::Simulation>(toy(asym_ea, layers));
  r.sim->run(test::with_task_log());
  const auto experts = forward(*r.sim, 1, WorkKind::Expert);
  r.makespan = experts.back().end;
  r.expert_busy = busy(experts);
  r.expert_first_start = experts.front().start;
  r.attention_busy = busy(forward(*r.sim, 0, WorkKind::Attention)) + busy(forward(*r.sim, 0, WorkKind::Expert));
  return r;
}

}  // namespace

TEST(Zebra, Fig6ToyWithoutOffloadTakes39AndLeavesTheAttentionGpuIdle12) {
  // Theorem 1's order with T_A = 3, T_E = 4, R = 3 (spec 002 C2): A(1,1..3) at 0–9; E(1,j) at
  // 3–7, 7–11, 11–15; A(2,1..3) at 9–12, 12–15, 15–18; E(2,j) at 15–19, 19–23, 23–27;
  // A(3,j) at 19–22, 23–26, 27–30; E(3,j) at 27–31, 31–35, 35–39: the forward of the three
  // layers ends at 39, and the attention GPU computes 27 of it (idle 12).
  const ToyRun r = run_toy("\"off\"");
  EXPECT_NEAR(r.makespan / kMs, 39.0, 39e-3);
  EXPECT_NEAR(r.attention_busy / kMs, 27.0, 27e-3);
  EXPECT_NEAR((r.makespan - r.attention_busy) / kMs, 12.0, 39e-3);
}

TEST(Zebra, Fig6ToyAttentionGpuComputes75PercentInTheSteadyState) {
  // With more layers the expert GPU paces every layer at R·T_E = 12 while the attention GPU
  // computes R·T_A = 9 of it: 75 % (Fig. 6, "effective compute only 75 % of the time"). From
  // layer 3 on, A(l+1,1) starts 12 after A(l,1) (layers 3→4 and 4→5 of a 5-layer model).
  const ToyRun r = run_toy("\"off\"", 5);
  const auto a = forward(*r.sim, 0, WorkKind::Attention);
  ASSERT_EQ(a.size(), 15u);  // one attention core per layer and microbatch (projections and norms take ns)
  for (const int l : {2, 3}) {
    const Time period = a[static_cast<std::size_t>(3 * (l + 1))].start - a[static_cast<std::size_t>(3 * l)].start;
    EXPECT_NEAR(period / kMs, 12.0, 12e-3) << "layer " << l + 1;
    EXPECT_NEAR(9.0 * kMs / period, 0.75, 1e-3);
  }
}

TEST(Zebra, Fig6ToyOffloadInLayers2And3Takes35AndNoMoreWithLayer1Too) {
  // Asym-EA moves one expert of layers 2 and 3 to the attention GPU (spec 002 C2): the expert GPU
  // computes 5 experts (10/3 ms) and the attention GPU the sixth (2/3 ms) after the layer's
  // attention of every microbatch. The forward of the three layers falls from 39 to 35 (−10.3 %);
  // the attention GPU now computes 27 + 2·3·2/3 = 31 of it (idle 12 → 4, −67 %; the paper's
  // "60 %" is approximate, spec 002 C2).
  const ToyRun none = run_toy("\"off\""), l23 = run_toy("[0, 1, 1]"), all = run_toy("[1, 1, 1]");
  EXPECT_NEAR(l23.makespan / kMs, 35.0, 35e-3);
  EXPECT_NEAR(l23.attention_busy / kMs, 31.0, 31e-3);
  EXPECT_NEAR((l23.makespan - l23.attention_busy) / kMs, 4.0, 35e-3);
  EXPECT_NEAR(1.0 - static_cast<double>(l23.makespan) / none.makespan, 4.0 / 39, 1e-3);
  // Offloading in layer 1 too gains nothing: 35 again, and the expert GPU now idles 2 of the 32
  // between its first forward expert and the last (6.25 %, the paper's "6 % bubbles").
  EXPECT_NEAR(all.makespan / kMs, 35.0, 35e-3);
  const double span = static_cast<double>(all.makespan - all.expert_first_start);
  EXPECT_NEAR(span / kMs, 32.0, 32e-3);
  EXPECT_NEAR(1.0 - all.expert_busy / span, 2.0 / 32, 1e-3);
}

TEST(Zebra, Fig6ToyWithoutOverlapIsDistEp) {
  // DistEP (overlap "none"): the same placement run microbatch after microbatch, forward then
  // backward, nothing overlapped. A microbatch's forward takes 3 layers × (T_A + T_E) = 21 ms; its
  // backward 3 × (7.5 + 8) = 46.5 ms (the attention core's backward is 2.5× its FLOPs at the
  // table's rate, compute::kAttentionBackwardFlopRatio; the experts' 2× their forward,
  // backward_factor). The third microbatch's forward ends at 2 × 67.5 + 21 = 156 ms.
  auto sc = toy("\"off\"");
  sc.strategy_options["overlap"] = "none";
  simulation::Simulation sim(std::move(sc));
  sim.run(test::with_task_log());
  const auto experts = forward(sim, 1, WorkKind::Expert);
  EXPECT_NEAR(experts[2].end / kMs, 21.0, 21e-3);
  EXPECT_NEAR(experts.back().end / kMs, 156.0, 156e-3);
}

namespace {

// The zebra plan in an order a test gives (Theorem 1's with one exchange).
class Reordered final : public strategies::Strategy {
 public:
  explicit Reordered(std::vector<parallel::WorkItem> order) : order_(std::move(order)) {
    strategies::zebra::ZebraOptions o;
    o.attention_gpu = "h100-sxm5-80gb";
    o.asym_ea = strategies::zebra::AsymEaMode::Off;
    zebra_ = std::make_unique<strategies::zebra::ZebraStrategy>(o);
  }
  std::string name() const override { return "zebra-reordered"; }
  void check(const strategies::StrategyContext& ctx) const override { zebra_->check(ctx); }
  std::vector<workload::MemoryFootprint> memory(const strategies::StrategyContext& ctx) const override { return zebra_->memory(ctx); }
  strategies::ProgramSize program_per_iteration(const strategies::StrategyContext& ctx) const override {
    return zebra_->program_per_iteration(ctx);
  }
  schema::Json describe(const strategies::StrategyContext& ctx) const override { return zebra_->describe(ctx); }
  parallel::PlanPtr plan(const strategies::StrategyContext& ctx, int it, const parallel::RunState& s) override {
    auto p = std::make_shared<parallel::IterationPlan>(*zebra_->plan(ctx, it, s));
    p->order = std::make_shared<const std::vector<parallel::WorkItem>>(order_);
    return p;
  }

 private:
  std::vector<parallel::WorkItem> order_;
  std::unique_ptr<strategies::zebra::ZebraStrategy> zebra_;
};

Time iteration_in_order(const std::vector<parallel::WorkItem>& order) {
  simulation::Simulation sim(toy("\"off\""), std::make_unique<Reordered>(order));
  sim.run();
  return sim.mean_iteration_time();
}

std::size_t find(const std::vector<parallel::WorkItem>& order, parallel::Work w, parallel::Segment s, int layer, int mb) {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i].work == w && order[i].segment == s && order[i].layer == layer && order[i].microbatch == mb) return i;
  ADD_FAILURE() << "no such work item";
  return 0;
}

}  // namespace

TEST(Zebra, EverySingleSwapOfTheorem1sProofGivesAnIterationNoShorter) {
  // Spec 002 A.4: Theorem 1's order is optimal by an exchange argument with three kinds of swap
  // on the attention GPU, none of which shortens the iteration. On the Fig. 6 toy (3 MoE layers,
  // R = 3, T_A = 3, T_E = 4, forward and backward), every swap of each kind is simulated:
  //   1. A^F(i, j) with A^F(i+1, j') for j' < j (the next layer's earlier microbatch first);
  //   2. A^F(i, j) with A^F(i, j') for j < j' (microbatches out of order);
  //   3. at the last layer, A^B(L, j) (the LM head's backward with the last layer's backward up
  //      to its exchange) with A^F(L, j') for j < j' (a later forward before an earlier backward).
  using parallel::Segment;
  using parallel::Work;
  const int layers = 3, r = 3;
  const auto theorem1 = schedule::layer_major(layers, r);
  const Time best = iteration_in_order(theorem1);
  int swaps = 0;
  const auto expect_no_shorter = [&](std::vector<parallel::WorkItem> order, const std::string& what) {
    ++swaps;
    EXPECT_GE(iteration_in_order(order), best - 1) << what;  // 1 ps: rounding
  };
  for (int i = 0; i + 1 < layers; ++i)
    for (int j = 0; j < r; ++j)
      for (int jp = 0; jp < j; ++jp) {
        auto o = theorem1;
        std::swap(o[find(o, Work::Forward, Segment::Layer, i, j)], o[find(o, Work::Forward, Segment::Layer, i + 1, jp)]);
        expect_no_shorter(o, fmt::format("A^F({},{}) <-> A^F({},{})", i + 1, j + 1, i + 2, jp + 1));
      }
  for (int i = 0; i < layers; ++i)
    for (int j = 0; j < r; ++j)
      for (int jp = j + 1; jp < r; ++jp) {
        auto o = theorem1;
        std::swap(o[find(o, Work::Forward, Segment::Layer, i, j)], o[find(o, Work::Forward, Segment::Layer, i, jp)]);
        expect_no_shorter(o, fmt::format("A^F({},{}) <-> A^F({},{})", i + 1, j + 1, i + 1, jp + 1));
      }
  for (int j = 0; j < r; ++j)
    for (int jp = j + 1; jp < r; ++jp) {
      // A^B(L, j) is the head's backward and the last layer's opening, moved as one.
      auto o = theorem1;
      const std::size_t b = find(o, Work::Backward, Segment::Head, layers, j);
      const parallel::WorkItem head_b = o[b], layer_b = o[b + 1];
      o.erase(o.begin() + static_cast<std::ptrdiff_t>(b), o.begin() + static_cast<std::ptrdiff_t>(b + 2));
      const std::size_t f = find(o, Work::Forward, Segment::Head, layers, jp);
      const parallel::WorkItem head_f = o[f];
      o[f] = head_b;
      o.insert(o.begin() + static_cast<std::ptrdiff_t>(f + 1), layer_b);
      o.insert(o.begin() + static_cast<std::ptrdiff_t>(b), head_f);
      expect_no_shorter(o, fmt::format("A^B(L,{}) <-> A^F(L,{})", j + 1, jp + 1));
    }
  EXPECT_EQ(swaps, 6 + 9 + 3);
}

TEST(Zebra, FullRecomputationRunsEachSidesForwardAgainWithoutExchangingTokensAgain) {
  // Under activation checkpointing each side recomputes its own part before its backward (spec
  // 002 A.7): on the Fig. 6 toy the expert GPU runs its 9 (layer, microbatch) forwards again,
  // 9 × T_E = 36 ms, the attention GPU its 9 attention cores, 9 × T_A = 27 ms; no all-to-all runs
  // again, so the network moves the same bytes as without recomputation.
  auto sc = toy("\"off\"");
  sc.training.recompute = workload::Recompute::Full;
  simulation::Simulation full(std::move(sc)), none(toy("\"off\""));
  full.run(test::with_task_log());
  none.run();
  Time experts = 0, attention = 0;
  int exchanges = 0;
  for (const auto& t : full.task_log().tasks()) {
    if (t.label.phase != Phase::Recompute) continue;
    if (t.gpu == 1 && t.label.kind == WorkKind::Expert) experts += t.end - t.start;
    if (t.gpu == 0 && t.label.kind == WorkKind::Attention) attention += t.end - t.start;
    if (t.label.kind == WorkKind::AllToAll) ++exchanges;
  }
  EXPECT_NEAR(experts / kMs, 36.0, 36e-3);
  EXPECT_NEAR(attention / kMs, 27.0, 27e-3);
  EXPECT_EQ(exchanges, 0);
  EXPECT_EQ(full.results_json()["network"]["bytes_by_level"], none.results_json()["network"]["bytes_by_level"]);
}

namespace {

// A zebra plan on a scenario, and the routing of one of its layers (expected shares).
struct ZebraPlan {
  scenario::Scenario sc;
  cluster::Topology topo;
  std::vector<compute::ComputeModel> compute;
  workload::RoutingModel routing;
  strategies::StrategyContext ctx;
  strategies::zebra::ZebraStrategy zebra;
  parallel::PlanPtr plan;
  explicit ZebraPlan(const std::string& json)
      : sc(test::scenario_from(json)),
        topo(sc.topology()),
        compute{compute::ComputeModel(topo.kinds()[0], sc.compute), compute::ComputeModel(topo.kinds()[1], sc.compute)},
        routing(sc.routing, sc.model.experts, sc.model.layers, sc.training.iterations, sc.seed),
        ctx{{topo, sc.model, sc.training, routing, compute}, network::Algorithm::Ring, nullptr, nullptr, {}},
        zebra(read(sc.strategy_options)) {
    zebra.check(ctx);
    plan = zebra.plan(ctx, 0, {});
  }
  static strategies::zebra::ZebraOptions read(const schema::Json& o) {
    strategies::zebra::ZebraOptions z;
    z.zp_groups = o.value("zp_groups", 1);
    if (o.contains("asym_ea") && o["asym_ea"].is_array()) {
      z.asym_ea = strategies::zebra::AsymEaMode::Given;
      z.offloaded = o["asym_ea"].get<std::vector<int>>();
    } else {
      z.asym_ea = strategies::zebra::AsymEaMode::Off;
    }
    return z;
  }
  blocks::LayerRouting route(int layer) const {
    const blocks::Context c = ctx;
    return blocks::route_layer(c, *plan, *plan->moe[static_cast<std::size_t>(layer)], 0, layer, 0);
  }
};

// O2: 4 A40 (GPUs 0–3) and 8 V100 (GPUs 4–11), Mixtral-D1 (8 MoE layers, 24 experts, 3 per
// V100, hidden 1024, top-2), 4096 tokens per A40 and microbatch, FP16, expected shares.
std::string o2(const std::string& strategy) {
  return R"({"name": "o2", "cluster": {"preset": "hetermoe-o2"}, "model": {"preset": "mixtral-d1"},
             "training": {"sequence_length": 4096, "microbatches": 2, "dtype": "fp16"},
             "routing": {"sampling": "expected"}, "strategy": )" +
         strategy + "}";
}

}  // namespace

TEST(Zebra, AttentionGpusSendOnlyToExpertGpusAndAsymEaAddsTheirOffloadedExperts) {
  // Layer 0 (no offload): each A40 routes 4096 tokens × top-2 = 8192 copies, 1/8 of them to each
  // V100 (3 of the 24 experts): 1024 copies × 1024 × 2 B = 2 MiB per pair; nothing A40→A40,
  // nothing from a V100. Layer 3 offloads one expert per V100 ([0,0,0,1,0,0,0,1]): V100 j keeps
  // experts 3j, 3j+1 and hands 3j+2 to A40 ⌊j/2⌋ (N·o/M = 2 each: A40 0 gets 2 and 5), so each A40
  // sends 2/24 of its copies, 682.67 × 2 KiB, to each other A40 and 2/24 to each V100.
  const ZebraPlan z(o2(R"({"name": "zebra", "asym_ea": [0, 0, 0, 1, 0, 0, 0, 1]})"));
  const auto& p = *z.plan;
  EXPECT_EQ(p.schedule, parallel::ScheduleKind::LayerMajor);
  for (std::uint32_t g = 0; g < 12; ++g) EXPECT_EQ(p.role(g), g < 4 ? parallel::kRunsBoth : parallel::kRunsExperts) << g;
  const double pair = 1024.0 * 1024 * 2;
  const auto l0 = z.route(0);
  for (std::uint32_t s = 0; s < 12; ++s)
    for (std::uint32_t d = 0; d < 12; ++d)
      EXPECT_DOUBLE_EQ(l0.dispatch[0]->at(s, d), s < 4 && d >= 4 ? pair : 0.0) << s << " -> " << d;
  EXPECT_FALSE(p.moe[0]->experts_after_attention);
  ASSERT_TRUE(p.moe[3]->experts_after_attention);
  const auto& table = p.moe[3]->dispatch[0].replicas->of_expert;
  for (int e = 0; e < 24; ++e) {
    const std::uint32_t want = e % 3 == 2 ? static_cast<std::uint32_t>(e / 6) : static_cast<std::uint32_t>(4 + e / 3);
    EXPECT_EQ(table[static_cast<std::size_t>(e)].at(0).rank, want) << "expert " << e;
  }
  const auto l3 = z.route(3);
  const double copies = 8192.0 * 2 / 24;  // per source and destination of two experts
  EXPECT_NEAR(l3.dispatch[0]->at(0, 1), copies * 2048, 1e-3);
  EXPECT_NEAR(l3.dispatch[0]->at(0, 4), copies * 2048, 1e-3);
  EXPECT_EQ(l3.dispatch[0]->at(4, 0), 0.0);
  // The A40 computes its two offloaded experts on the copies of all four A40s: 4 × 2 × 341.33.
  EXPECT_EQ(l3.expert[0].experts.forward, blocks::experts_time(z.compute[0], z.sc.model, std::vector<double>{4 * 341.0 + 4.0 / 3, 4 * 341.0 + 4.0 / 3}, 3584));
}

TEST(Zebra, EachCommunicationStreamCarriesOneDirection) {
  // §4.1: dispatch and combine run on their own streams in opposite directions; in the backward
  // the exchange towards the experts (the combine's gradients) shares the dispatch stream and the
  // one back (the dispatch's gradients) the combine stream.
  const std::string text = o2(R"({"name": "zebra", "asym_ea": "off"})");
  simulation::Simulation sim(test::scenario_from(text));
  sim.run(test::with_task_log());
  const auto streams = ZebraPlan(text).plan->streams;  // the numbering the run's program uses (kept alive)
  int checked = 0;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.label.kind != WorkKind::AllToAll) continue;
    const bool towards_experts = (t.label.phase == Phase::Forward) == (sim.engine().names()[t.label.name] == "dispatch");
    const auto role = towards_experts ? parallel::StreamRole::Dispatch : parallel::StreamRole::Combine;
    EXPECT_EQ(t.stream, streams->index(role)) << sim.engine().names()[t.label.name];
    ++checked;
  }
  // 8 layers × 2 microbatches × 2 exchanges × 2 passes, 12 members each.
  EXPECT_EQ(checked, 8 * 2 * 2 * 2 * 12);
}

TEST(Zebra, ZpGroupsTrainDataParallel) {
  // O1 as two ZP groups of 3 A40 + 3 V100 (24 experts, 8 per V100): the dense gradients are
  // all-reduced over all 6 A40s and each V100's experts with the V100 at the same place of the
  // other group (8 experts × 3·1024·3584 parameters × 2 B = 176 MiB); the V100s hold no dense
  // parameters and step only their experts' 8 layers × 8 experts.
  const ZebraPlan z(R"({"name": "o1", "cluster": {"preset": "hetermoe-o1"}, "model": {"preset": "mixtral-d1"},
                        "training": {"sequence_length": 4096, "dtype": "fp16"}, "routing": {"sampling": "expected"},
                        "strategy": {"name": "zebra", "zp_groups": 2}})");
  const auto& p = *z.plan;
  ASSERT_EQ(p.gradients.dense_groups->groups.size(), 1u);
  EXPECT_EQ(p.gradients.dense_groups->groups[0], (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(p.moe[0]->dispatch.size(), 2u);
  EXPECT_EQ(p.moe[0]->dispatch[1].gpus, (std::vector<std::uint32_t>{3, 4, 5, 9, 10, 11}));
  ASSERT_EQ(p.moe[0]->expert_gradients.size(), 1u);
  const auto& eg = p.moe[0]->expert_gradients[0];
  EXPECT_DOUBLE_EQ(eg.bytes, 8.0 * 3 * 1024 * 3584 * 2);
  EXPECT_EQ(eg.groups->groups, (std::vector<std::vector<std::uint32_t>>{{6, 9}, {7, 10}, {8, 11}}));
  EXPECT_DOUBLE_EQ(p.optimizer_params[6], 8.0 * 8 * 3 * 1024 * 3584);
  EXPECT_DOUBLE_EQ(p.tokens, 6.0 * 4096);
}
