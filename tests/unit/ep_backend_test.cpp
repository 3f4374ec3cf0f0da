// The expert-parallel communication backends (parallel.ep_backend; seed 001, spec
// seeds-001-002-004.md 001.A.3-A.8): the fused dispatch's per-rank de-duplication, the
// non-blocking permuted buffer's drops, the fused kernels' SM reservation and the buffers in the
// memory model, on hand cases and on the PR's DeepSeek-V3 numbers; and the scenario options'
// refusals.
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/token_routing.hpp"
#include "sim/cluster/link_graph.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/core/error.hpp"
#include "sim/parallel/iteration_plan.hpp"
#include "sim/workload/ep_buffers.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/strategies/ep/expert_parallel_plan.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// 4 GPUs, `experts` experts contiguous over them, top-k `k`, uniform routing by expected shares,
// one layer, 1024 tokens per GPU of H = 256 in bf16.
schema::Json small(int experts, int k) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["model"]["experts"] = experts;
  doc["model"]["top_k"] = k;
  doc["model"]["layers"] = 1;
  doc["training"]["sequence_length"] = 1024;
  return doc;
}

using Routed = test::RoutingBench;

parallel::MoeLayerPlan ep_layer(int experts, parallel::EpBackendKind kind) {
  parallel::MoeLayerPlan lp;
  lp.dispatch = {{test::iota(4), parallel::ReplicaTable::contiguous(experts, 4)}};
  lp.expert_ffn_hidden = 512;
  lp.gate_tokens = lp.combine_tokens = 1024;
  lp.backend.kind = kind;
  return lp;
}

// The host_sync reads of a run of `d`, counted; the read itself takes no GPU time, and the GPU's
// next task starts exactly 30 us (the scenarios' sync time) after it, launches costing nothing
// there. With `next_kind`, that task must exist and be of that kind.
int host_syncs(const schema::Json& d, std::optional<engine::WorkKind> next_kind = std::nullopt) {
  simulation::Simulation sim(test::scenario_from(d.dump(), "s.json"));
  sim.run(test::with_task_log());
  int n = 0;
  const auto& tasks = sim.task_log().tasks();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const auto& t = tasks[i];
    if (t.end < 0 || sim.engine().names()[t.label.name] != "host_sync") continue;
    ++n;
    EXPECT_EQ(t.end, t.start);  // the read itself: no GPU time
    std::size_t next = i + 1;
    while (next < tasks.size() && tasks[next].gpu != t.gpu) ++next;
    if (next_kind) {
      EXPECT_LT(next, tasks.size());
    }
    if (next < tasks.size()) {
      EXPECT_EQ(tasks[next].start, t.end + 30 * kMicrosecond) << "after task " << i;
      if (next_kind) {
        EXPECT_EQ(tasks[next].label.kind, *next_kind);
      }
    }
  }
  return n;
}

}  // namespace

TEST(EpBackend, FusedDispatchSendsEachTokenOncePerRank) {
  // 8 experts over 4 ranks (2 each), top-2, uniform. NCCL's all-to-all sends every copy: rank r
  // receives 1024 · 2 · 2/8 = 512 copies from each source, 512 · 256 · 2 B = 262,144 B. A fused
  // dispatch sends a token once to a rank holding either or both of its experts: it misses both
  // of r's with probability C(6, 2)/C(8, 2) = 15/28, so 1024 · 13/28 = 475.43 tokens travel,
  // 243,419.4 B (13/14 of NCCL's).
  const Routed r(small(8, 2));
  const auto nccl = r.route(ep_layer(8, parallel::EpBackendKind::Nccl));
  const auto fused = r.route(ep_layer(8, parallel::EpBackendKind::HybridEp));
  for (std::uint32_t s = 0; s < 4; ++s)
    for (std::uint32_t d = 0; d < 4; ++d) {
      if (s == d) continue;
      EXPECT_DOUBLE_EQ(nccl.dispatch[0]->at(s, d), 262144.0);
      EXPECT_NEAR(fused.dispatch[0]->at(s, d), 1024.0 * 13 / 28 * 512, 1e-6);
      EXPECT_NEAR(fused.combine[0]->at(d, s), fused.dispatch[0]->at(s, d), 1e-6);  // combine returns the same rows
    }
  // The experts still compute every copy: de-duplication changes the wire, not the work.
  for (std::size_t g = 0; g < nccl.expert.size(); ++g) EXPECT_EQ(fused.expert[g].experts, nccl.expert[g].experts) << g;
  EXPECT_EQ(fused.dropped_copies, 0);
}

TEST(EpBackend, NcclRegroupsReceivedCopiesByLocalExpertAndBack) {
  // After NCCL's all-to-all a rank holds its copies grouped by source; with 2 local experts it
  // gathers them into expert order before the grouped GeMMs and scatters them back before the
  // combine (Megatron-Core's sort_chunks_by_idxs and its inverse). 8 experts, top-2, uniform:
  // each rank receives 4 sources · 512 = 2048 copies of H = 256 bf16 (512 B): each kernel reads
  // and writes 2048 · 512 B = 1,048,576 B, so 2 × memory_bound(2,097,152 B). A fused dispatch
  // writes the rows expert-major itself, and with one local expert (4 experts on 4 ranks) the
  // chunks are already in order: no regroup.
  const Routed r(small(8, 2));
  const auto nccl = r.route(ep_layer(8, parallel::EpBackendKind::Nccl));
  const auto fused = r.route(ep_layer(8, parallel::EpBackendKind::HybridEp));
  const Time each = r.compute[0].memory_bound(2.0 * 2048 * 512);
  EXPECT_GT(each, 0);
  for (std::uint32_t g = 0; g < 4; ++g) {
    EXPECT_EQ(nccl.expert[g].regroup, (compute::Work{2 * each, 2})) << g;
    EXPECT_EQ(fused.expert[g].regroup, compute::Work{}) << g;
  }
  EXPECT_EQ(blocks::regroup_time(r.compute[0], r.sc.model, 2048), (compute::Work{2 * each, 2}));
  const Routed one(small(4, 1));
  const auto single = one.route(ep_layer(4, parallel::EpBackendKind::Nccl));
  for (std::uint32_t g = 0; g < 4; ++g) EXPECT_EQ(single.expert[g].regroup, compute::Work{}) << g;
}

TEST(EpBackend, RegroupRunsInTheExpertTaskForwardAndBackwardAlike) {
  // The whole run: the small EP scenario at 8 experts, top-2 (2 local experts per GPU) on nccl.
  // Each experts task is its grouped FFN (backward: 2× it) plus the regroup, the same both ways.
  auto doc = small(8, 2);
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run(test::with_task_log());
  const Routed r(doc);
  parallel::MoeLayerPlan lp = ep_layer(8, parallel::EpBackendKind::Nccl);
  lp.expert_ffn_hidden = r.sc.model.ffn_hidden;
  const auto rt = r.route(lp);
  int seen = 0;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.end < 0 || sim.engine().names()[t.label.name] != "experts") continue;
    const blocks::ExpertsWork& ffn = rt.expert[t.gpu].experts;
    const Time want = (t.label.phase == engine::Phase::Backward ? ffn.backward : ffn.forward).time + rt.expert[t.gpu].regroup.time;
    EXPECT_EQ(t.end - t.start, want) << "GPU " << t.gpu;
    EXPECT_GT(rt.expert[t.gpu].regroup.time, 0);
    ++seen;
  }
  EXPECT_EQ(seen, 2 * 4);  // forward and backward on each of the 4 GPUs
}

TEST(EpBackend, FusedDispatchDeDuplicatesSampledRoutingByTheExpectedShare) {
  // Sampled routing: each (source, rank) entry is the drawn copies times the same 13/14.
  auto doc = small(8, 2);
  doc["routing"]["sampling"] = "sampled";
  const Routed r(doc);
  const auto nccl = r.route(ep_layer(8, parallel::EpBackendKind::Nccl));
  const auto fused = r.route(ep_layer(8, parallel::EpBackendKind::DeepEp));
  for (std::uint32_t s = 0; s < 4; ++s)
    for (std::uint32_t d = 0; d < 4; ++d) {
      if (s == d) continue;
      EXPECT_NEAR(fused.dispatch[0]->at(s, d), nccl.dispatch[0]->at(s, d) * 13 / 14, 1e-6);
    }
}

TEST(EpBackend, FusedDispatchAcrossRacksCrossesOncePerDestinationDomain) {
  // The same layer (8 experts over 4 ranks, top-2, 1024 tokens of 256 bf16 = 512 B per source)
  // on 2 racks of 2 GPUs: ranks 0, 1 in rack 0 and 2, 3 in rack 1. A token misses both of a rank's
  // experts with probability C(6, 2)/C(8, 2) = 15/28 and all four of a rack's with C(4, 2)/C(8, 2)
  // = 6/28. Per source:
  //  - NCCL sends every copy: 512 copies to each peer, 2 · 262,144 B across the racks;
  //  - a flat fused dispatch sends a token once per rank: 2 · 1024 · 13/28 · 512 B across;
  //  - the hierarchical one sends it once per remote rack, to the rank of its own local index:
  //    1024 · 22/28 · 512 = 411,940.57 B across, then the relay fans the 13/28 each rank needs out
  //    over NVLink, as the source does inside its own rack: 2 · 243,419.43 B on NVLink.
  auto doc = small(8, 2);
  doc["cluster"]["levels"] = schema::Json::parse(R"([{"name": "rack", "count": 2, "bandwidth": "50GB/s", "latency": "5us"},
                                                     {"name": "gpu", "count": 2, "bandwidth": "450GB/s", "latency": "1us"}])");
  const Routed r(doc);
  const auto nccl = r.route(ep_layer(8, parallel::EpBackendKind::Nccl));
  const auto fused = r.route(ep_layer(8, parallel::EpBackendKind::HybridEp));
  const double rank_tokens = 1024.0 * 13 / 28 * 512, rack_tokens = 1024.0 * 22 / 28 * 512;
  ASSERT_TRUE(nccl.dispatch_stages.empty());
  ASSERT_EQ(fused.dispatch_stages.size(), 1u);
  ASSERT_EQ(fused.dispatch_stages[0].size(), 2u);
  const auto& rdma = *fused.dispatch_stages[0][0];
  const auto& nvlink = *fused.dispatch_stages[0][1];
  EXPECT_NEAR(rdma.at(0, 2), rack_tokens, 1e-6);  // GPU 0's relay in rack 1: GPU 2 (local index 0)
  EXPECT_EQ(rdma.at(0, 3), 0);
  EXPECT_NEAR(rdma.at(3, 1), rack_tokens, 1e-6);
  EXPECT_EQ(rdma.at(0, 1), 0);                    // nothing crosses inside a rack
  // GPU 2 forwards GPU 0's tokens to GPU 3 and sends its own: twice the per-rank share.
  EXPECT_NEAR(nvlink.at(2, 3), 2 * rank_tokens, 1e-6);
  EXPECT_EQ(nvlink.at(0, 2), 0);
  // The combine runs the reverse: reduce over NVLink into the relay, then the network back.
  EXPECT_NEAR(fused.combine_stages[0][0]->at(3, 2), 2 * rank_tokens, 1e-6);
  EXPECT_NEAR(fused.combine_stages[0][1]->at(2, 0), rack_tokens, 1e-6);

  // Bytes by level as the network model costs the exchanges (tier 0: between racks, 1: NVLink).
  const cluster::LinkGraph graph(r.topo);
  const network::AnalyticModel model(r.topo, network::AlphaBetaTable::from_topology(r.topo, graph));
  const std::vector<std::uint32_t> all = {0, 1, 2, 3};
  network::GroupTable groups;
  network::CollectiveOp op{network::CollectiveKind::AllToAll, network::Algorithm::Direct, groups.intern(all), 0,
                           nccl.dispatch[0]};
  const auto flat_nccl = model.cost(op, all);
  EXPECT_NEAR(flat_nccl.bytes_by_level[0], 4 * 2 * 262144.0, 1e-3);
  op.traffic = fused.dispatch[0];
  const auto flat_fused = model.cost(op, all);
  EXPECT_NEAR(flat_fused.bytes_by_level[0], 4 * 2 * rank_tokens, 1e-3);
  op.stages = fused.dispatch_stages[0];
  const auto hierarchical = model.cost(op, all);
  EXPECT_NEAR(hierarchical.bytes_by_level[0], 4 * rack_tokens, 1e-3);   // 1,647,762 B: 0.79 of NCCL's
  EXPECT_NEAR(hierarchical.bytes_by_level[1], 4 * 2 * rank_tokens, 1e-3);
  // The rack uplink is the bottleneck: fewer bytes on it, a shorter exchange.
  EXPECT_LT(hierarchical.duration, flat_fused.duration);
  EXPECT_LT(flat_fused.duration, flat_nccl.duration);

  // Sampled routing: the drawn copies towards a rack, times the rack's 22/28 tokens per copy over
  // its share 2 · 2/8 (top-2): 0.7857 of the copies cross; the fan-out carries 13/14 of each rank's.
  doc["routing"]["sampling"] = "sampled";
  const Routed sampled(doc);
  const auto drawn = sampled.route(ep_layer(8, parallel::EpBackendKind::Nccl));
  const auto staged = sampled.route(ep_layer(8, parallel::EpBackendKind::DeepEp));
  ASSERT_EQ(staged.dispatch_stages.size(), 1u);
  const auto copies = [&](std::uint32_t s, std::uint32_t d) { return drawn.dispatch[0]->at(s, d); };
  EXPECT_NEAR(staged.dispatch_stages[0][0]->at(1, 3), (copies(1, 2) + copies(1, 3)) * 22 / 28, 1e-6);
  EXPECT_NEAR(staged.dispatch_stages[0][1]->at(3, 2), (copies(1, 2) + copies(3, 2)) * 13 / 14, 1e-6);
}

TEST(EpBackend, NonBlockingDispatchDropsTheExpertMajorTailBeyondItsBudget) {
  // 8 experts over 4 ranks, top-1, uniform: each rank receives 4 · 1024/8 = 512 copies for each of
  // its 2 experts. Budget at cf 0.3: roundup8(1024 · 4 · min(1, 2) · 0.3) = roundup8(1228.8) = 1232
  // rows, above the 1024 received: nothing dropped. At cf 0.15: roundup8(614.4) = 616 rows: local
  // expert 0 keeps its 512, expert 1 the 104 rows left, dropping 408 per rank, 1632 of the 4096
  // copies (39.84 %). Blocking mode sizes the buffer exactly: no drops.
  const Routed r(small(8, 1));
  auto lp = ep_layer(8, parallel::EpBackendKind::HybridEp);
  const auto blocking = r.route(lp);
  EXPECT_EQ(blocking.dropped_copies, 0);
  EXPECT_DOUBLE_EQ(blocking.routed_copies, 4096);
  lp.backend.non_blocking = true;
  lp.permuted_rows = workload::permuted_buffer_rows(1024, 4, 1, 2, 0.3, 8);
  EXPECT_DOUBLE_EQ(lp.permuted_rows, 1232);
  EXPECT_EQ(r.route(lp).dropped_copies, 0);
  lp.permuted_rows = workload::permuted_buffer_rows(1024, 4, 1, 2, 0.15, 8);
  EXPECT_DOUBLE_EQ(lp.permuted_rows, 616);
  const auto tight = r.route(lp);
  EXPECT_DOUBLE_EQ(tight.dropped_copies, 1632);
  EXPECT_DOUBLE_EQ(tight.routed_copies, 4096);
  for (std::uint32_t g = 0; g < 4; ++g) {
    EXPECT_EQ(tight.expert[g].experts.forward, r.experts({512, 104}));
    EXPECT_EQ(blocking.expert[g].experts.forward, r.experts({512, 512}));
  }
  // The all-to-all buffer never drops: every copy still travels.
  EXPECT_EQ(tight.dispatch[0]->at(0, 1), blocking.dispatch[0]->at(0, 1));
}

TEST(EpBackend, PermutedRowsAlignAsTorchtitanPadsThem) {
  // torchtitan's TOKEN_GROUP_ALIGN_SIZE_M: 8 rows for BF16, 16 for FP8, 32 for MXFP8.
  const Routed r(small(8, 1));
  for (const auto& [dtype, rows] : {std::pair{cluster::Dtype::bf16, 8}, {cluster::Dtype::fp8, 16}, {cluster::Dtype::mxfp8, 32}}) {
    auto training = r.sc.training;
    training.dtype = dtype;
    const strategies::StrategyContext ctx{{r.topo, r.sc.model, training, r.routing, r.compute}, network::Algorithm::Ring,
                                          nullptr, nullptr, {}};
    EXPECT_EQ(strategies::ep::permute_alignment(ctx), rows) << cluster::to_string(dtype);
  }
  // The hand case above at cf 0.15 under MXFP8: roundup32(614.4) = 640 rows; local expert 1 keeps
  // 128 of its 512, 384 dropped per rank, 1536 in all.
  auto lp = ep_layer(8, parallel::EpBackendKind::HybridEp);
  lp.backend.non_blocking = true;
  lp.permute_alignment = 32;
  lp.permuted_rows = workload::permuted_buffer_rows(1024, 4, 1, 2, 0.15, 32);
  EXPECT_DOUBLE_EQ(lp.permuted_rows, 640);
  EXPECT_DOUBLE_EQ(r.route(lp).dropped_copies, 1536);
}

TEST(EpBackend, FusedKernelsDropThePermuteKernels) {
  // The router's kernel without the permute ((1 + k)·T·H·a bytes moved) and the output kernel
  // without the un-permute ((k + 1)·T·H·a), the residual add left (layer_costs.cpp).
  const Routed r(small(8, 2));
  const auto& cm = r.compute[0];
  const auto& m = r.sc.model;
  const double a = 2;  // bf16
  EXPECT_EQ(blocks::gate_time(cm, m, 1024, false).time - blocks::gate_time(cm, m, 1024, true).time,
            cm.memory_bound(3 * 1024 * 256 * a));
  EXPECT_EQ(blocks::combine_time(cm, m, 1024, false).time - blocks::combine_time(cm, m, 1024, true).time,
            cm.memory_bound(3 * 1024 * 256 * a));
}

namespace {

// The PR's run (spec 001.B): DeepSeek-V3 671B, EP 64 in one NVL72 rack's 64 GPUs, PP 1, FSDP,
// full recomputation, local batch 8 of 4096 tokens, bf16, expected uniform routing.
schema::Json pr_run(const char* backend) {
  return schema::Json::parse(R"({
    "name": "pr",
    "cluster": {"gpu": "gb200-nvl72", "levels": [{"name": "gpu", "count": 64, "bandwidth": "900GB/s", "latency": "2us",
                                                  "link": "nvlink5"}]},
    "model": {"preset": "deepseek-v3"},
    "training": {"sequence_length": 4096, "micro_batch_size": 8, "dtype": "bf16", "recompute": "full"},
    "routing": {"sampling": "expected"},
    "parallel": {"sharding": "fsdp", "ep": 64, "ep_backend": ")" + std::string(backend) + R"("},
    "strategy": {"name": "ep"}
  })");
}

}  // namespace

TEST(EpBackend, DeepSeekV3BuffersAsTheSpecDerivesThem) {
  // Spec 001.A.4: the all-to-all buffer is N × EP = 32,768 × 64 = 2,097,152 rows of 7168 bf16
  // values = 30,064,771,072 B (30.1 GB), once per GPU. Under full recomputation the layer being
  // recomputed holds one permuted buffer: blocking, exactly its copies (each rank's 4 experts get
  // 32,768 · 8/256 · 64 = 65,536 copies each, a multiple of 8: no padding), so nothing beyond the
  // expert inputs the activations count; non-blocking at cf 1, 8,388,608 rows (120.26 GB), of
  // which 8,388,608 − 262,144 rows beyond the copies: 116.5 GB more, past the GPU's 186 GiB.
  // At the balanced cf 0.03125 the budget is the 262,144 copies exactly.
  const double row = 7168.0 * 2;
  for (const char* backend : {"nccl", "hybridep"}) {
    simulation::Simulation sim(test::scenario_from(pr_run(backend).dump(), "pr.json"));
    try {
      sim.check();  // 64 GPUs cannot hold 10.5B expert parameters' Adam state each: refused, memory still computed
    } catch (const InfeasibleError&) {
    }
    const auto& f = sim.memory()[0];
    EXPECT_DOUBLE_EQ(f.buffers, std::string(backend) == "nccl" ? 0.0 : 2097152.0 * row) << backend;
    EXPECT_NEAR(f.buffers / 1e9, std::string(backend) == "nccl" ? 0 : 30.06, 0.005);
  }
  simulation::Simulation nccl(test::scenario_from(pr_run("nccl").dump(), "pr.json"));
  auto doc = pr_run("hybridep");
  simulation::Simulation blocking(test::scenario_from(doc.dump(), "pr.json"));
  doc["parallel"]["ep_non_blocking"] = true;
  doc["parallel"]["ep_capacity_factor"] = 1.0;
  simulation::Simulation cf1(test::scenario_from(doc.dump(), "pr.json"));
  doc["parallel"]["ep_capacity_factor"] = 0.03125;
  simulation::Simulation balanced(test::scenario_from(doc.dump(), "pr.json"));
  for (auto* s : {&nccl, &blocking, &cf1, &balanced}) try {
      s->check();
    } catch (const InfeasibleError&) {
    }
  const double base = nccl.memory()[0].activations;
  EXPECT_DOUBLE_EQ(blocking.memory()[0].activations, base);
  EXPECT_DOUBLE_EQ(balanced.memory()[0].activations, base);
  EXPECT_NEAR(cf1.memory()[0].activations - base, (8388608.0 - 262144.0) * row, 1.0);
  EXPECT_GT(cf1.memory()[0].total(), 186.0 * (1ull << 30));
}

TEST(EpBackend, ScenarioOptionsRefuseWhatTorchtitanRefuses) {
  const auto refused = [](const schema::Json& doc, const std::string& path) {
    try {
      test::scenario_from(doc.dump(), "s.json");
      ADD_FAILURE() << "accepted, expected a refusal at " << path;
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), path) << e.what();
      EXPECT_FALSE(e.fix().empty());
    }
  };
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["parallel"] = {{"ep_backend", "deepep"}, {"ep_non_blocking", true}, {"ep_capacity_factor", 0.5}};
  refused(doc, "$.parallel.ep_non_blocking");  // non-blocking is HybridEP's alone
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_capacity_factor", 0.5}};
  refused(doc, "$.parallel.ep_capacity_factor");  // no meaning when blocking
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_non_blocking", true}};
  refused(doc, "$.parallel.ep_capacity_factor");  // HybridEP asserts on None
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_non_blocking", true}, {"ep_capacity_factor", 1.5}};
  refused(doc, "$.parallel.ep_capacity_factor");  // (0, 1]
  doc["parallel"] = {{"ep_sms", 24}};
  refused(doc, "$.parallel.ep_sms");  // NCCL holds none in the model
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_non_blocking", true}, {"ep_capacity_factor", 0.5},
                     {"ep_host_sync", "20us"}};
  refused(doc, "$.parallel.ep_host_sync");
  doc["parallel"] = {{"ep_backend", "hybridep"}};
  doc["strategy"] = {{"name", "parm"}};
  refused(doc, "$.parallel.ep_backend");
  doc["strategy"] = {{"name", "ep"}, {"pipelining_degree", 2}};
  simulation::Simulation chunked(test::scenario_from(doc.dump(), "s.json"));
  try {
    chunked.check();
    ADD_FAILURE() << "a fused backend with pipelining degree 2 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.strategy.pipelining_degree");
  }
}

TEST(EpBackend, BlockingDispatchIdlesTheComputeStreamForTheHostRoundTrip) {
  // One MoE layer's forward reads the sizes back once, its recomputation once more, the backward
  // never (the sizes are kept): with full recomputation an iteration of the 4-GPU case has 2
  // host_sync reads per GPU and microbatch; none with non-blocking HybridEP. The host's launch
  // thread waits ep_host_sync (30 us) after each read returns: launches cost nothing here, so the
  // GPU's next task (the dispatch's member, which waits for nothing else) starts exactly then.
  auto doc = small(8, 2);
  doc["training"]["recompute"] = "full";
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_host_sync", "30us"}};
  const auto syncs = [](const schema::Json& d) { return host_syncs(d); };
  EXPECT_EQ(syncs(doc), 2 * 4);
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_non_blocking", true}, {"ep_capacity_factor", 1.0}};
  EXPECT_EQ(syncs(doc), 0);
  doc["parallel"] = {{"ep_host_sync", "30us"}};  // nccl syncs for its split sizes
  EXPECT_EQ(syncs(doc), 2 * 4);
  // Without ep_host_sync the software's sync time applies; without either there is no read.
  doc["parallel"] = schema::Json::object();
  doc["software"] = {{"host", {{"sync", "30us"}}}};
  EXPECT_EQ(syncs(doc), 2 * 4);
  doc.erase("software");
  EXPECT_EQ(syncs(doc), 0);
}

TEST(EpBackend, ClampedQuickGeGluSyncsTheHostUnderTeGroupedMlp) {
  // GPT-OSS's activation under Megatron-Core's TEGroupedMLP builds its linear offset as a GPU
  // tensor each call (torch.tensor(..., device=...): a pageable host-to-device copy PyTorch follows
  // with a stream sync; layer_costs.cpp clamps_apart): a read in the middle of the experts'
  // forward and of the activation's recomputation (moe_act), none in their backward. Non-blocking
  // HybridEP reads nothing itself: 4 GPUs x (forward + recomputation) = 8 reads, after each of
  // which the launch thread waits the software's sync (30 us) and the GPU's next task (the rest of
  // the experts' forward, or of the recomputed activation) starts exactly then (launches cost
  // nothing here). The fused expert MLP (grouped_gemm grouped) and SwiGLU read nothing.
  auto doc = small(8, 2);
  doc["model"]["expert_kind"] = "clamped_quick_geglu";
  doc["training"]["recompute"] = "selective";
  doc["training"]["recompute_modules"] = {"moe_act"};
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_non_blocking", true}, {"ep_capacity_factor", 1.0}};
  doc["software"] = {{"host", {{"sync", "30us"}}}, {"grouped_gemm", "per_expert"}};
  const auto syncs = [](const schema::Json& d) { return host_syncs(d, engine::WorkKind::Expert); };
  EXPECT_EQ(syncs(doc), 2 * 4);
  doc["software"]["grouped_gemm"] = "grouped";
  EXPECT_EQ(syncs(doc), 0);
  doc["software"]["grouped_gemm"] = "per_expert";
  doc["model"]["expert_kind"] = "swiglu";
  EXPECT_EQ(syncs(doc), 0);
}

TEST(EpBackend, FusedKernelsHoldTheirSmsWhileTheyRun) {
  // Every dispatch and combine member of a fused backend reserves its SMs of the GPU (the H100's
  // 132, topologies/gpus.json): HybridEP's 16 (the PR's hard-coded budget), DeepEP's 20, or
  // ep_sms; the engine slows the compute beside them by that share (engine_test.cpp). NCCL's
  // members reserve none in moesim's model.
  const auto shares = [](const schema::Json& parallel) {
    auto doc = small(8, 2);
    doc["parallel"] = parallel;
    simulation::Simulation sim(test::scenario_from(doc.dump(), "s.json"));
    sim.run(test::with_task_log());
    std::set<float> out;
    for (const auto& t : sim.task_log().tasks()) {
      const auto& name = sim.engine().names()[t.label.name];
      if (t.end >= 0 && (name == "dispatch" || name == "combine")) out.insert(t.sm_share);
    }
    return out;
  };
  EXPECT_EQ(shares({{"ep_backend", "nccl"}}), std::set<float>{0.0F});
  EXPECT_EQ(shares({{"ep_backend", "hybridep"}}), std::set<float>{static_cast<float>(16.0 / 132)});
  EXPECT_EQ(shares({{"ep_backend", "deepep"}}), std::set<float>{static_cast<float>(20.0 / 132)});
  EXPECT_EQ(shares({{"ep_backend", "deepep"}, {"ep_sms", 24}}), std::set<float>{static_cast<float>(24.0 / 132)});
}
