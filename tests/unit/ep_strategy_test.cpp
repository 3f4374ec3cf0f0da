// The ep strategy end to end: communicated bytes, token drops and memory derived by hand.
#include <gtest/gtest.h>

#include <sstream>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

using test::kSmallEp;

std::unique_ptr<simulation::Simulation> run(const std::string& json) {
  auto sim = std::make_unique<simulation::Simulation>(test::scenario_from(json));
  sim->check();
  sim->run();
  return sim;
}

}  // namespace

TEST(EpStrategy, CommunicatedBytesMatchHandCount) {
  const auto sim = run(kSmallEp);
  const auto& ns = sim->network_stats();
  // Dispatch per GPU and layer: D = T·k·H·b = 128·1·256·2 = 65536 B; an even all-to-all over 4
  // GPUs moves 4·D·3/4 = 196608 B. Four all-to-alls per layer (dispatch and combine, forward and
  // backward), 2 layers: 8 collectives, 1572864 B, 8 × 12 GPU pairs.
  const auto& a2a = ns.by_kind[static_cast<int>(network::CollectiveKind::AllToAll)];
  EXPECT_EQ(a2a.collectives, 8u);
  EXPECT_EQ(a2a.pairs, 96u);
  EXPECT_DOUBLE_EQ(a2a.bytes, 1572864.0);
  // Dense gradients per layer: attention H·(H + 2·H) + H² = 262144, norms 2H = 512, gate H·E =
  // 1024: 263680 params, 527360 B in bf16. A ring all-reduce over 4 GPUs sends 6 steps of S/4
  // from each GPU: 6·S = 3164160 B per layer. With 4 experts over EP 4 there is no expert
  // all-reduce, and no vocabulary means no embedding all-reduce.
  const auto& ar = ns.by_kind[static_cast<int>(network::CollectiveKind::AllReduce)];
  EXPECT_EQ(ar.collectives, 2u);
  EXPECT_DOUBLE_EQ(ar.bytes, 2 * 3164160.0);
  EXPECT_DOUBLE_EQ(ns.bytes_by_level[0], 1572864.0 + 2 * 3164160.0);
  // 2 layers × (attention, gate, experts, output), forward and backward, + optimizer = 17 compute
  // tasks per GPU (no vocabulary: no embedding lookup, no LM head); + 8 all-to-all and 2
  // all-reduce members.
  EXPECT_EQ(sim->results().engine.tasks, 4u * (17 + 10));
}

TEST(EpStrategy, Fp8TrainingSendsBf16TokensAndGradients) {
  // Transformer Engine casts only GeMM operands to FP8; the tokens the all-to-alls carry and the
  // gradients the all-reduce sums stay BF16 (cluster::storage_bytes): the hand counts of
  // CommunicatedBytesMatchHandCount, byte for byte.
  auto doc = schema::Json::parse(kSmallEp);
  doc["training"]["dtype"] = "fp8";
  const auto sim = run(doc.dump());
  const auto& ns = sim->network_stats();
  EXPECT_DOUBLE_EQ(ns.by_kind[static_cast<int>(network::CollectiveKind::AllToAll)].bytes, 1572864.0);
  EXPECT_DOUBLE_EQ(ns.by_kind[static_cast<int>(network::CollectiveKind::AllReduce)].bytes, 2 * 3164160.0);
}

TEST(EpStrategy, TheSameScenarioGivesTheSameResults) {
  EXPECT_EQ(run(kSmallEp)->results_json().dump(), run(kSmallEp)->results_json().dump());
}

TEST(EpStrategy, CapacityFactorDropsTheHotExpertsOverflow) {
  // 2 experts, Zipf s = 1: popularity 2/3 and 1/3 (in a seeded order). 1200 tokens, top-1,
  // capacity factor 1: capacity ceil(1200/2) = 600 per source and expert; the hot expert is
  // offered 800 and drops 200 per source: 1/6 of all copies, 400 over 2 GPUs.
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"]["levels"][0]["count"] = 2;
  doc["model"]["experts"] = 2;
  doc["model"]["layers"] = 1;
  doc["training"]["sequence_length"] = 1200;
  doc["training"]["capacity_factor"] = 1.0;
  doc["routing"] = {{"kind", "zipf"}, {"zipf_exponent", 1.0}, {"sampling", "expected"}};
  const auto r = run(doc.dump())->results_json();
  EXPECT_NEAR(r["tokens"]["dropped_copies"].get<double>(), 400.0, 1e-9);
  EXPECT_NEAR(r["tokens"]["dropped_fraction"].get<double>(), 1.0 / 6.0, 1e-12);
}

TEST(EpStrategy, SkewedRoutingMakesTheHotGpuTheSlowest) {
  // With Zipf routing and no capacity limit the GPU holding the hottest expert computes most:
  // its expert busy time exceeds the mean. Expected shares, so that the margin does not depend on
  // one seed's draw: Zipf 1.2 over 4 experts gives the hottest 1/(1 + 2^-1.2 + 3^-1.2 + 4^-1.2) =
  // 0.53 of the copies, 2.1× the mean. With 1024 tokens per GPU and experts of H 1024, M 4096 the
  // GeMMs span several waves, so that they and not the kernels' fixed costs decide (with the 128
  // tokens, H 256 and M 512 of kSmallEp every expert's GeMMs fit one wave of an H100 and all GPUs
  // take the same time): the hot GPU's 2176 copies need 544 tiles of 128×128 (5 waves) for fc1
  // where a mean GPU's 1024 need 256 (2 waves); its expert time is above 1.2× the mean.
  auto doc = schema::Json::parse(kSmallEp);
  doc["training"]["sequence_length"] = 1024;
  doc["model"]["hidden"] = 1024;
  doc["model"]["ffn_hidden"] = 4096;
  doc["routing"] = {{"kind", "zipf"}, {"zipf_exponent", 1.2}, {"sampling", "expected"}};
  const auto r = run(doc.dump())->results_json();
  EXPECT_GT(r["busy_ms"]["expert"]["max"].get<double>(), 1.2 * r["busy_ms"]["expert"]["mean"].get<double>());
}

TEST(EpStrategy, PipeliningOverlapsAllToAllWithExperts) {
  // Slow network, large experts: splitting into 4 chunks hides part of the all-to-all.
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"]["levels"][0]["bandwidth"] = "25Gbps";
  doc["model"]["ffn_hidden"] = 8192;
  doc["training"]["sequence_length"] = 4096;
  const double one = run(doc.dump())->results_json()["iteration_time_ms"].get<double>();
  doc["strategy"]["pipelining_degree"] = 4;
  const auto r4 = run(doc.dump())->results_json();
  EXPECT_LT(r4["iteration_time_ms"].get<double>(), 0.95 * one);
  // The bytes moved do not change with chunking.
  EXPECT_DOUBLE_EQ(r4["network"]["collectives"]["all_to_all"]["bytes"].get<double>(),
                   run(doc.dump())->results_json()["network"]["collectives"]["all_to_all"]["bytes"].get<double>());
}

TEST(EpStrategy, MemoryFootprintByHand) {
  // gpt-medium-moe on 8 GPUs, EP 8: replicated params 12·(4·1024² + 2·1024) + 12·1024·32 +
  // 2·50257·1024 = 153675776; local experts 12 layers × 4 × 2·1024·4096 = 402653184. In bf16:
  // weights and gradients 2 B/param, Adam 12 B/param.
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"]["levels"][0]["count"] = 8;
  doc["model"] = {{"preset", "gpt-medium-moe"}};
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.check();
  const double params = 153675776.0 + 402653184.0;
  EXPECT_DOUBLE_EQ(sim.memory()[0].weights, 2 * params);
  EXPECT_DOUBLE_EQ(sim.memory()[0].optimizer, 12 * params);
  EXPECT_GT(sim.memory()[0].activations, 0);
}

namespace {
// Mixtral-8x7B on two 16 GB T4s in FP16.
schema::Json mixtral_on_two_t4s() {
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"] = schema::Json::parse(
      R"({"gpu": "t4-16gb", "levels": [{"name": "gpu", "count": 2, "bandwidth": "16GB/s", "latency": "5us"}]})");
  doc["model"] = {{"preset", "mixtral-8x7b"}};
  doc["training"]["dtype"] = "fp16";
  return doc;
}
}  // namespace

TEST(EpStrategy, ModelThatDoesNotFitIsRefused) {
  // Mixtral-8x7B on two 16 GB T4s: 23B parameters per GPU at 16 B each is ~370 GB.
  simulation::Simulation sim(test::scenario_from(mixtral_on_two_t4s().dump()));
  try {
    sim.check();
    FAIL() << "no refusal";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit in GPU memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("t4-16gb"), std::string::npos);
  }
}

TEST(EpStrategy, AnOutOfMemoryHintOffersOnlyWhatTheScenarioHasNotDone) {
  // Mixtral-8x7B on two T4s (as above): what the refusal suggests follows what the scenario does.
  auto doc = mixtral_on_two_t4s();
  const auto refusal = [](const schema::Json& d) {
    simulation::Simulation sim(test::scenario_from(d.dump()));
    try {
      sim.check();
    } catch (const InfeasibleError& e) {
      const std::string what = e.what();
      return what.substr(what.find("the largest term is"));
    }
    ADD_FAILURE() << "no refusal";
    return std::string();
  };
  // The optimizer's 12 B a parameter is the largest term: no sharding yet, so the distributed
  // optimizer is offered; once it is on, FSDP is, and the distributed optimizer no more.
  const std::string plain = refusal(doc);
  EXPECT_NE(plain.find("optimizer state: set parallel.sharding to \"distributed_optimizer\""), std::string::npos) << plain;
  doc["parallel"] = {{"sharding", "distributed_optimizer"}};
  const std::string sharded = refusal(doc);
  EXPECT_EQ(sharded.find("distributed_optimizer"), std::string::npos) << sharded;
  EXPECT_NE(sharded.find("set parallel.sharding to \"fsdp\""), std::string::npos) << sharded;
  // A long sequence makes the activations the largest: under full recomputation it is not offered again.
  doc["training"]["sequence_length"] = 131072;
  doc["training"]["micro_batch_size"] = 8;
  const std::string activations = refusal(doc);
  EXPECT_TRUE(activations.starts_with("the largest term is activations: set training.recompute to \"full\"")) << activations;
  doc["training"]["recompute"] = "full";
  const std::string recomputed = refusal(doc);
  EXPECT_TRUE(recomputed.starts_with("the largest term is activations: a smaller micro_batch_size")) << recomputed;
}

TEST(EpStrategy, AnOutOfMemoryRefusalSimulatesEachRemedy) {
  // Qwen3-30B-A3B on one DGX H100, 4 sequences of 8192 tokens a microbatch: the activations
  // overflow. The refusal gives the fullest GPU under each remedy the scenario has not applied
  // (full recomputation, the distributed optimizer, FSDP) and under all of them: each figure is
  // that scenario's own peak, as its check computes it, and says whether every GPU holds it.
  const auto doc = schema::Json::parse(
      R"({"name": "oom", "cluster": {"preset": "dgx-h100"}, "model": {"preset": "qwen3-30b-a3b"},
          "training": {"sequence_length": 8192, "micro_batch_size": 4}, "parallel": {"ep": 8}, "strategy": {"name": "ep"}})");
  const auto refused = [](const schema::Json& d, double* peak, bool* fits) {
    simulation::Simulation sim(test::scenario_from(d.dump()));
    std::string what;
    try {
      sim.check();
    } catch (const InfeasibleError& e) {
      what = e.what();
    }
    *peak = 0, *fits = true;
    for (std::uint32_t g = 0; g < sim.memory().size(); ++g) {
      *peak = std::max(*peak, sim.memory()[g].total());
      *fits = *fits && sim.memory()[g].total() <= sim.topology().gpu(g).memory_bytes;
    }
    return what;
  };
  double peak = 0;
  bool fits = true;
  const std::string refusal = refused(doc, &peak, &fits);
  ASSERT_FALSE(fits);
  const struct {
    const char* label;
    const char* training_patch;
    const char* parallel_patch;
  } remedies[] = {{"training.recompute \"full\"", R"({"recompute": "full"})", "{}"},
                  {"parallel.sharding \"distributed_optimizer\"", "{}", R"({"sharding": "distributed_optimizer"})"},
                  {"parallel.sharding \"fsdp\"", "{}", R"({"sharding": "fsdp"})"},
                  {"all of them", R"({"recompute": "full"})", R"({"sharding": "fsdp"})"}};
  bool any_fits = false;
  for (const auto& r : remedies) {
    auto variant = doc;
    variant["training"].merge_patch(schema::Json::parse(r.training_patch));
    variant["parallel"].merge_patch(schema::Json::parse(r.parallel_patch));
    refused(variant, &peak, &fits);
    any_fits = any_fits || fits;
    const std::string figure = fmt::format("{} {} ({})", r.label, format_bytes(peak), fits ? "fits" : "does not fit");
    EXPECT_NE(refusal.find(figure), std::string::npos) << figure << "\n" << refusal;
  }
  EXPECT_TRUE(any_fits) << refusal;  // all of them together: 76.9 GiB of 80
}

TEST(EpStrategy, ExpertsNotDivisibleByEpSizeIsAnInputError) {
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"]["levels"][0]["count"] = 6;
  doc["strategy"]["ep_size"] = 3;  // 4 experts over 3 ranks
  simulation::Simulation sim(test::scenario_from(doc.dump(), "ep.json"));
  try {
    sim.check();
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "ep.json");
    EXPECT_EQ(e.path(), "$.strategy.ep_size");
  }
}

TEST(EpStrategy, ExpertDataParallelAllReduceWhenEpIsSmallerThanTheCluster) {
  // 4 GPUs, EP 2: two EP groups, each expert lives on 2 GPUs, so expert gradients are all-reduced
  // over pairs: per layer 2 all-reduces (one per EP rank) of 2 experts × 2·256·512 params.
  auto doc = schema::Json::parse(kSmallEp);
  doc["strategy"]["ep_size"] = 2;
  const auto sim = run(doc.dump());
  const auto& ar = sim->network_stats().by_kind[static_cast<int>(network::CollectiveKind::AllReduce)];
  EXPECT_EQ(ar.collectives, 2u * (1 + 2));
  // Expert all-reduce over 2 GPUs: 2 steps of S/2 from each of 2 GPUs = 2·S bytes per collective,
  // S = 2 experts · 262144 params · 2 B = 1048576 B. Dense: 6·527360 per layer as before.
  EXPECT_DOUBLE_EQ(ar.bytes, 2 * (6 * 527360.0) + 4 * (2 * 1048576.0));
}

TEST(EpStrategy, SampledRoutingConservesTokensAndVariesPerSource) {
  // Per-source multinomial draws: every source still routes exactly T·k copies (128 per GPU and
  // layer, 4 GPUs, 2 layers: 1024 in all), but the experts no longer receive exactly 1/E each,
  // so the busiest GPU computes more than the mean even under uniform popularity.
  auto doc = schema::Json::parse(kSmallEp);
  doc["routing"]["sampling"] = "sampled";
  doc["training"]["sequence_length"] = 4096;
  const auto r = run(doc.dump())->results_json();
  EXPECT_DOUBLE_EQ(r["tokens"]["routed_copies"].get<double>(), 4.0 * 4096 * 2);
  EXPECT_DOUBLE_EQ(r["tokens"]["dropped_copies"].get<double>(), 0.0);
  EXPECT_GT(r["busy_ms"]["expert"]["max"].get<double>(), r["busy_ms"]["expert"]["mean"].get<double>());
  // The bytes that cross stay near the expected D·(G−1)/G per GPU: 4·4096·256·2·3/4 per
  // all-to-all, 8 all-to-alls; a multinomial's spread over 16384 copies is well under 3 %.
  const double expected = 8 * 4 * 4096 * 256 * 2 * 0.75;
  EXPECT_NEAR(r["network"]["collectives"]["all_to_all"]["bytes"].get<double>(), expected, 0.03 * expected);
  // Same seed, same draws; another seed, other draws.
  EXPECT_EQ(run(doc.dump())->results_json().dump(), r.dump());
  doc["seed"] = 99;
  EXPECT_NE(run(doc.dump())->results_json()["busy_ms"]["expert"]["max"], r["busy_ms"]["expert"]["max"]);
}

TEST(EpStrategy, RunTooLargeForThisMachineIsRefusedWithTheEstimate) {
  // 1000 DCs × 8 GPUs, 10000 microbatches, 12 MoE layers, pipelining degree 1, EP over all 8000
  // GPUs (edp 1). Per GPU and microbatch each layer writes, forward and backward, its attention
  // kernel, router and output kernels, and the chunk's dispatch, experts and combine: 2·6 = 12,
  // 4 of them members of the layer's 4 all-to-alls over the 8000; the embedding and the head a
  // kernel each way: 4; so 12·12 + 4 = 148 tasks, 48 members. Per iteration each layer's
  // gradient sync and the two vocabulary gradients (all-reduces over the 8000) and the
  // optimizer's 4: 18 tasks, 14 members. Two iterations held at once: 2·8000·(10000·148 + 18) =
  // 2.368e10 tasks of 64 B, 2·8000·(10000·48 + 14) = 7.680e9 members of 4 B and twice as many
  // edges of 8 B, 2·(10000·48 + 14) = 960028 collectives of 40 B and an op each (520/7 B:
  // CollectiveProgram::bytes_per_op): 1.669e12 B = 1.518 TiB, each queue within a chunk and two
  // blocks of its records' bytes. Besides, the engine's list of an iteration's tasks added while
  // the previous one runs: 1.184e10 ids of 4 B, grown to 2^34 of them, 64 GiB; the rest of the
  // state is 8000 GPUs' (0.02 GiB) and what the flow model keeps for reuse: the link demands of 64
  // collectives over every GPU of 2 tiers (64 · 2 · 3 · 8000 of 16 B, 0.05 GiB) and its matrices'
  // limit (64 MiB, 0.06 GiB). Refused before anything is built, whatever the iteration count.
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"] = {{"preset", "hybridep-1000dc"}};
  doc["model"] = {{"preset", "gpt-medium-moe"}, {"experts", 8000}};
  doc["training"]["microbatches"] = 10000;
  doc["training"]["iterations"] = 65535;
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  try {
    sim.check();
    FAIL() << "not refused";
  } catch (const InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("the run needs about 1.581 TiB of memory (task program 1.518 TiB, run state 64.13 GiB)"),
              std::string::npos)
        << e.what();
    const double tasks = 2 * 8000 * (10000 * 148.0 + 18), members = 2 * 8000 * (10000 * 48.0 + 14), collectives = 960028;
    const double program = 64 * tasks + 4 * members + 8 * 2 * members + 40 * collectives +
                           collectives * network::CollectiveProgram::bytes_per_op();
    EXPECT_NEAR(sim.memory_estimate().program, program, 4 * 2.5 * (1 << 20));
  }
}

TEST(EpStrategy, LongRunsNeedNoMoreHostMemoryThanTwoIterations) {
  // The run loop holds at most two iterations of tasks (as in the test above, one microbatch:
  // 8000·(148 + 18) = 1.328 M tasks per iteration; the run writes 1.296 M): 1000 iterations are
  // estimated as 100 (each queue holds the blocks two iterations straddle, however many cycle
  // through them; 62 collectives per iteration fill a first block of 1024 in 17), and accepted.
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"] = {{"preset", "hybridep-1000dc"}};
  doc["model"] = {{"preset", "gpt-medium-moe"}, {"experts", 8000}};
  doc["training"]["iterations"] = 1000;
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  EXPECT_DOUBLE_EQ(sim.program_per_iteration().tasks, 8000.0 * (148 + 18));
  doc["training"]["iterations"] = 100;
  simulation::Simulation hundred(test::scenario_from(doc.dump()));
  EXPECT_DOUBLE_EQ(sim.host_memory_estimate(), hundred.host_memory_estimate());
  EXPECT_NO_THROW(sim.check());
}

TEST(EpStrategy, TwoGpuIterationFollowsTheHandDerivedSchedule) {
  // 2 GPUs, 1 MoE layer, 2 experts (one per GPU), top-1, uniform expected routing, no capacity
  // limit, pipelining degree 1, no vocabulary (no embedding lookup, no LM head). Every task of a
  // GPU depends on the one before, so the iteration is the sum of its compute tasks and of its
  // collectives; the dense-gradient all-reduce starts when attention's backward ends and the
  // optimizer waits for it, with nothing left to overlap it:
  //   attention + gate + dispatch + experts + combine + output                   (forward)
  //   + output' + combine' + experts' + dispatch' + gate' + attention'            (backward)
  //   + all-reduce + optimizer.
  // Component costs come from the compute and network models (each tested on its own); the
  // schedule is what this test checks.
  auto doc = schema::Json::parse(kSmallEp);
  doc["cluster"]["levels"][0]["count"] = 2;
  doc["model"]["layers"] = 1;
  doc["model"]["experts"] = 2;
  const auto sc = test::scenario_from(doc.dump());
  auto sim = std::make_unique<simulation::Simulation>(sc);
  sim->check();
  sim->run();

  const auto topo = sc.topology();
  const compute::ComputeModel cm = simulation::bound_compute_model(topo.gpu(0), sc.compute);
  const auto& m = sc.model;
  const double t = 128, h = 256, b = 2;
  // Kernels as layer_costs costs them (every kernel with its fixed cost): RMSNorm reads and writes
  // T·H·b, a residual add reads two and writes one.
  const Time norm = cm.memory_bound(2 * t * h * b);
  const Time residual = cm.memory_bound(3 * t * h * b);
  // Attention: the projections and norms (backward: backward_factor × forward) and the core (its own
  // backward cost).
  const Time projections = norm + cm.gemm(t, h + 2 * 4 * 64, h) + cm.gemm(t, h, h) + residual;
  const Time attention = projections + cm.attention(1, 4, 128, 64, true);
  const Time attention_backward = cm.backward(projections) + cm.attention_backward(1, 4, 128, 64, true);
  // Pre-MLP norm, router GeMM, softmax/top-k over 2·T·E·4 B, permute (1 + k)·T·H·b.
  const Time gate = norm + cm.gemm(t, 2, h) + cm.memory_bound(2 * t * 2 * 4) + cm.memory_bound(2 * t * h * b);
  // Un-permute (k + 1)·T·H·b, residual add.
  const Time output = cm.memory_bound(2 * t * h * b) + residual;
  // Each expert gets 64 tokens from each of the 2 GPUs: 128 tokens through H→M, the GeLU (reads
  // and writes 128·M·b), M→H.
  const Time experts = cm.gemm(128, 512, h) + cm.memory_bound(2 * 128 * 512 * b) + cm.gemm(128, h, 512);
  // Their backward at its own shapes (layer_costs.hpp, experts_work): fc2's data gradient (128 × M
  // over H) and weight gradient (M × H over the 128 rows), the GeLU's backward (reads the gradient
  // and the input, writes the input's gradient: 3·128·M·b), fc1's data gradient (128 × H over M)
  // and weight gradient (H × M over the 128 rows).
  const std::vector<double> rows{128};
  const Time experts_backward = cm.gemm(128, 512, h) + cm.grouped_gemm_wgrad(rows, h, 512) +
                                cm.memory_bound(3 * 128 * 512 * b) + cm.gemm(128, h, 512) + cm.grouped_gemm_wgrad(rows, 512, h);
  // The all-to-all: each GPU sends the half of its 128·256·2 B meant for the other GPU.
  cluster::LinkGraph graph(topo);
  network::AnalyticModel net(topo, network::AlphaBetaTable::from_topology(topo, graph));
  const std::vector<std::uint32_t> both{0, 1};
  auto traffic = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::uniform(2, t * h * b / 2));
  const Time a2a = net.cost({network::CollectiveKind::AllToAll, network::Algorithm::Direct, 0, 0, traffic}, both).duration;
  EXPECT_EQ(a2a, 1 * kMicrosecond + 32768 * 10);  // α = 1 us, 32768 B at 100 GB/s (10 ps/B)
  const double dense_params = m.attention_params() + m.norm_params() + m.gate_params();
  const Time all_reduce =
      net.cost({network::CollectiveKind::AllReduce, network::Algorithm::Ring, 0, dense_params * b, nullptr}, both).duration;
  const Time optimizer = cm.optimizer_step(m.replicated_params() + m.expert_params());

  const Time forward = attention + gate + a2a + experts + a2a + output;
  const Time backward = cm.backward(output) + a2a + experts_backward + a2a + cm.backward(gate) + attention_backward;
  const Time expected = forward + backward + all_reduce + optimizer;
  EXPECT_EQ(sim->metrics().iteration_time[0], expected);
  EXPECT_EQ(sim->metrics().gpus[0].exposed_communication, 4 * a2a + all_reduce);
}

TEST(EpStrategy, ResultsJsonStreamsTheIterationSeriesAsTheTreeWouldPrintIt) {
  // results.json is written with the per-iteration entries streamed one by one; the text is the
  // same as the whole tree's dump (3 iterations, so the splice joins several entries).
  auto doc = schema::Json::parse(kSmallEp);
  doc["training"]["iterations"] = 3;
  const auto sim = run(doc.dump());
  std::ostringstream streamed;
  report::write_json(streamed, sim->results());
  EXPECT_EQ(streamed.str(), sim->results_json().dump(2) + "\n");
  EXPECT_EQ(sim->results_json()["iterations"].size(), 3u);
}
