#include "sim/strategies/hybridep/hybridep_strategy.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>


#include "sim/blocks/layer_costs.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/ep/expert_parallel_plan.hpp"
#include "sim/strategies/hybridep/domain_partition.hpp"

namespace moesim::strategies::hybridep {

namespace sc = moesim::schema;

const sc::Options<HybridEpOptions>& hybridep_options() {
  using T = HybridEpOptions;
  static const sc::Options<T> o({
      sc::declared<T>(sc::required("name", sc::enumeration({"hybridep"}), "the strategy name")),
      sc::declared<T>(sc::optional("domain", sc::any(), "auto",
                                   "expert-domain sizes: \"auto\" (Eq. 10-12), one S_ED per cluster level coarsest "
                                   "first (e.g. [2, 8]), or {\"p\": 0.5} for a fixed share of data sent by all-to-all")),
      sc::option<T>("compression_ratio", &T::compression_ratio, sc::number(1),
                    "expert residuals are sent top-k compressed by this ratio (paper: 50); 1 turns off the SR "
                    "compression, SREncode/SRDecode and the shared expert"),
      sc::option<T>("async_communicator", &T::async_communicator, sc::boolean(),
                    "issue every layer's expert all-gather at iteration start (false: when the layer's MoE block is "
                    "reached)"),
      sc::option<T>("encode_fusion_saving", &T::encode_fusion_saving, sc::number(0, 0.99),
                    "share of SREncode's cost saved by fusing it with the optimizer step (paper §V-E: 0.3)"),
      sc::option<T>("decode_fusion_saving", &T::decode_fusion_saving, sc::number(0, 0.99),
                    "share of SRDecode's cost saved by fusing it with expert compute (paper §V-E: 0.45)"),
      sc::switch_option<T>("gradient_return", &T::compress_gradients, {"full", "compressed"}, "compressed",
                           "gathered experts' gradients return to their owners whole (full), or compressed like the "
                           "parameters (compressed: not in the paper, which does not say how they return)"),
      sc::enum_option<T>("migration_algorithm", &T::migration_algorithm, network::kAlgorithmNames,
                         "algorithm of the expert all-gathers and gradient reduce-scatters: ring (NCCL's), or direct "
                         "(one exchange, latency paid once: a stand-in for tree/PAT algorithms over many workers)",
                         {"ring", "direct"}),
      ep::pipelining_degree_option<T>(&T::ep),
      ep::gradient_sync_option<T>(&T::ep),
  });
  return o;
}

StrategyInfo info() {
  StrategyInfo s;
  s.name = "hybridep";
  s.description = "HybridEP: experts all-gathered inside expert domains, tokens all-to-all across them";
  s.paper = "HybridEP: Scaling Expert Parallelism to Cross-Datacenter Scenario via Hybrid Expert/Data Transmission: stream-based model §III, domain-based partition §IV-A, migration §IV-B";
  s.options = hybridep_options().node();
  s.make = [](const sc::Json& o) {
    HybridEpOptions opt;
    hybridep_options().read(o, opt);
    opt.domain = o.at("domain");
    return std::make_unique<HybridEpStrategy>(std::move(opt));
  };
  return s;
}

std::vector<std::uint32_t> divisors(std::uint32_t n) {
  std::vector<std::uint32_t> out;
  for (std::uint32_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

std::vector<std::uint32_t> sizes_for_domain(const cluster::Topology& topo, double gpus) {
  std::vector<std::uint32_t> sizes;
  double remaining = gpus;
  for (const auto& level : topo.levels()) {
    std::uint32_t best = 1;
    for (const std::uint32_t d : divisors(level.count))
      if (d <= remaining + 1e-9) best = d;
    sizes.push_back(best);
    remaining /= best;
  }
  return sizes;
}

void HybridEpStrategy::check(const StrategyContext& ctx) const {
  const auto& topo = ctx.topology;
  const std::uint32_t g = topo.gpu_count();
  if (ctx.model.experts % g != 0)
    throw InputError("", "$.model.experts",
                     fmt::format("hybridep spreads the experts over all {} GPUs, but {} experts do not divide by {}", g,
                                 ctx.model.experts, g),
                     fmt::format("use a multiple of {} experts (e.g. {}), or the ep strategy with an ep_size", g, g));
  const sc::Json& d = options_.domain;
  const auto level_names = [&] {
    std::vector<std::string> v;
    for (const auto& l : topo.levels()) v.push_back(fmt::format("{} ({})", l.name, l.count));
    return fmt::format("{}", fmt::join(v, ", "));
  };
  if (d.is_string()) {
    if (d != "auto")
      throw InputError("", "$.strategy.domain", fmt::format("unknown domain choice \"{}\"", d.get<std::string>()),
                       "use \"auto\", a list of sizes per level, or {\"p\": 0.5}");
  } else if (d.is_array()) {
    if (d.size() != topo.levels().size())
      throw InputError("", "$.strategy.domain",
                       fmt::format("{} domain sizes given but the cluster has {} levels: {}", d.size(),
                                   topo.levels().size(), level_names()),
                       "give one expert-domain size per level, coarsest first");
    for (std::size_t l = 0; l < d.size(); ++l) {
      const std::uint32_t count = topo.levels()[l].count;
      if (!d[l].is_number_integer() || d[l].get<long long>() < 1 || count % d[l].get<long long>() != 0) {
        throw InputError("", fmt::format("$.strategy.domain[{}]", l),
                         fmt::format("{} is not a divisor of level {}'s {} workers", d[l].dump(),
                                     topo.levels()[l].name, count),
                         fmt::format("use one of {}", fmt::join(divisors(count), ", ")));
      }
    }
  } else if (d.is_object()) {
    if (d.size() != 1 || !d.contains("p") || !d.at("p").is_number() || d.at("p").get<double>() < 0 ||
        d.at("p").get<double>() > 1)
      throw InputError("", "$.strategy.domain", fmt::format("{} is not a proportion", d.dump()),
                       "write {\"p\": x} with 0 <= x <= 1 (the share of data chunks sent by all-to-all)");
  } else {
    throw InputError("", "$.strategy.domain", fmt::format("{} is not a domain choice", d.dump()),
                     "use \"auto\", a list of sizes per level (e.g. [2, 8]), or {\"p\": 0.5}");
  }
}

double HybridEpStrategy::own_expert_bytes(const StrategyContext& ctx) const {
  return (ctx.model.experts / static_cast<double>(ctx.topology.gpu_count())) * ctx.model.expert_params() *
         cluster::storage_bytes(ctx.training.dtype);
}

double HybridEpStrategy::transmitted_bytes(const StrategyContext& ctx, double bytes) const {
  if (!compresses()) return bytes;
  // Top-k of the residual: 1/ratio of the values, each with its int32 index (§IV-B).
  return bytes / options_.compression_ratio * (1 + kSrIndexBytes / cluster::storage_bytes(ctx.training.dtype));
}

const DomainChoice& HybridEpStrategy::domain(const StrategyContext& ctx) const {
  if (domain_) return *domain_;
  const auto& topo = ctx.topology;
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const std::uint32_t gpus = topo.gpu_count();
  DomainChoice c;
  // The stream model's inputs (§III): D, the dispatch bytes of one GPU per MoE layer and iteration;
  // P_E, its experts as transmitted; B, the per-GPU share of the slowest level; Lat_PE, the compute
  // before a MoE layer's experts (attention and gate, and the dense blocks between MoE layers).
  StreamInputs& in = c.inputs;
  in.gpus = gpus;
  in.data_bytes = t.tokens_per_microbatch() * m.top_k * m.hidden * cluster::storage_bytes(t.dtype) * t.microbatches;
  in.expert_bytes = transmitted_bytes(ctx, own_expert_bytes(ctx));
  in.bandwidth = 0;
  for (int l = 0; l < topo.level_count(); ++l)
    if (topo.levels()[l].count > 1) {
      const double share = topo.levels()[l].bandwidth.bytes_per_second / topo.gpus_per_worker(l);
      in.bandwidth = in.bandwidth > 0 ? std::min(in.bandwidth, share) : share;
    }
  // Lat_PE: the slowest GPU kind's (the all-to-all after it waits for every GPU).
  const double tokens = t.tokens_per_microbatch();
  double backward_factor = 2;
  in.pre_expert_seconds = 0;
  for (const auto& cm : ctx.compute) {
    const Time attention = blocks::mean_attention_time(cm, m, t).time;
    const Time dense_between =
        m.moe_layers() > 0 ? static_cast<Time>(std::llround(static_cast<double>(m.layers - m.moe_layers()) / m.moe_layers() *
                                                            static_cast<double>(attention + blocks::dense_ffn_time(cm, m, tokens).time)))
                           : 0;
    const Time pre = attention + blocks::gate_time(cm, m, tokens).time + dense_between;
    if (time_to_seconds(pre) > in.pre_expert_seconds) {
      in.pre_expert_seconds = time_to_seconds(pre);
      backward_factor = pre > 0 ? static_cast<double>(cm.backward(pre)) / static_cast<double>(pre) : 2.0;
    }
  }
  if (gpus > 1) c.model = solve(in);
  const sc::Json& d = options_.domain;
  if (d.is_array()) {
    c.source = "explicit";
    for (const auto& s : d) c.sizes.push_back(s.get<std::uint32_t>());
  } else if (d.is_object()) {
    c.source = "proportion";
    c.sizes = sizes_for_domain(topo, gpus - d.at("p").get<double>() * (gpus - 1.0));
  } else {
    c.source = "auto";
    // The per-level model ranks every candidate: one divisor of each level's worker count.
    MultiLevelInputs ml;
    ml.data_bytes = in.data_bytes;
    ml.expert_bytes = in.expert_bytes;
    ml.gradient_bytes = options_.compress_gradients ? in.expert_bytes : own_expert_bytes(ctx);
    ml.pre_expert_seconds = in.pre_expert_seconds;
    ml.backward_factor = backward_factor;
    std::vector<std::vector<std::uint32_t>> candidates{{}};
    for (int l = 0; l < topo.level_count(); ++l) {
      const auto& level = topo.levels()[l];
      ml.levels.push_back({level.count, level.bandwidth.bytes_per_second / topo.gpus_per_worker(l)});
      std::vector<std::vector<std::uint32_t>> next;
      for (const auto& prefix : candidates)
        for (const std::uint32_t size : divisors(level.count)) {
          next.push_back(prefix);
          next.back().push_back(size);
        }
      candidates = std::move(next);
    }
    for (auto& sizes : candidates) c.ranked.push_back({sizes, domain_latency(ml, sizes)});
    // Fastest first; ties keep the smaller domain (enumeration order), for determinism.
    std::stable_sort(c.ranked.begin(), c.ranked.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    c.sizes = c.ranked.front().first;
  }
  c.domain_gpus = std::accumulate(c.sizes.begin(), c.sizes.end(), 1u, std::multiplies<>());
  c.p = gpus > 1 ? (gpus - static_cast<double>(c.domain_gpus)) / (gpus - 1.0) : 1.0;
  domain_ = std::move(c);
  return *domain_;
}

SameOffsetLayout HybridEpStrategy::layout(const StrategyContext& ctx) const {
  const auto& topo = ctx.topology;
  const auto& sizes = domain(ctx).sizes;
  const std::uint32_t gpus = topo.gpu_count();
  const int per_gpu = ctx.model.experts / static_cast<int>(gpus);
  std::uint32_t domains = 1, offsets = 1;
  for (int l = 0; l < topo.level_count(); ++l) {
    domains *= topo.levels()[l].count / sizes[l];
    offsets *= sizes[l];
  }
  SameOffsetLayout lay;
  lay.groups.assign(offsets, std::vector<std::uint32_t>(domains));
  lay.experts_of_rank.resize(domains);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const auto loc = topo.location(g);
    std::uint32_t domain_index = 0, offset_index = 0;
    for (int l = 0; l < topo.level_count(); ++l) {
      domain_index = domain_index * (topo.levels()[l].count / sizes[l]) + loc[l] / sizes[l];
      offset_index = offset_index * sizes[l] + loc[l] % sizes[l];
    }
    lay.groups[offset_index][domain_index] = g;
    for (int e = 0; e < per_gpu; ++e) lay.experts_of_rank[domain_index].push_back(static_cast<int>(g) * per_gpu + e);
  }
  for (auto& v : lay.experts_of_rank) std::sort(v.begin(), v.end());
  return lay;
}

double HybridEpStrategy::params_on_gpu(const StrategyContext& ctx) const {
  // Every GPU holds E/G experts per MoE layer; the shared expert of every MoE layer is trained (and
  // stepped) on every GPU.
  const auto& m = ctx.model;
  const int per_gpu = m.experts / static_cast<int>(ctx.topology.gpu_count());
  const double shared = compresses() && migrates(ctx) ? m.moe_layers() * m.expert_params() : 0.0;
  return m.replicated_params() + m.moe_layers() * per_gpu * m.expert_params() + shared;
}

Time HybridEpStrategy::encode_time(const StrategyContext& ctx, std::size_t kind) const {
  // SREncode per own expert: read the expert and the shared expert, write the residual, and one
  // top-k selection pass over it (4 passes), then the compressed value-index pairs.
  const double bytes = own_expert_bytes(ctx) * 4 + transmitted_bytes(ctx, own_expert_bytes(ctx));
  const Time t = ctx.compute[kind].memory_bound(bytes);
  return static_cast<Time>(std::llround(static_cast<double>(t) * (1 - options_.encode_fusion_saving)));
}

Time HybridEpStrategy::decode_time(const StrategyContext& ctx, std::size_t kind) const {
  // SRDecode of every received expert: read its compressed residual and the shared expert, write
  // the restored expert (fused with the expert GeMMs, §V-E); again in backward, as the restored
  // experts are not kept (see memory()).
  const double received = domain(ctx).domain_gpus - 1.0;
  const double bytes = received * (own_expert_bytes(ctx) * 2 + transmitted_bytes(ctx, own_expert_bytes(ctx)));
  const Time t = ctx.compute[kind].memory_bound(bytes);
  return static_cast<Time>(std::llround(static_cast<double>(t) * (1 - options_.decode_fusion_saving)));
}

parallel::PlanPtr HybridEpStrategy::plan(const StrategyContext& ctx, int, const parallel::RunState&) {
  if (plan_) return plan_;
  const auto& m = ctx.model;
  const auto& topo = ctx.topology;
  const SameOffsetLayout lay = layout(ctx);
  ep::ExpertParallelPlan in;
  in.streams = {parallel::StreamRole::Compute, parallel::StreamRole::Dispatch, parallel::StreamRole::Combine,
                parallel::StreamRole::Gradient, parallel::StreamRole::Side};
  auto replicas = std::make_shared<parallel::ReplicaTable>();
  replicas->of_expert.resize(m.experts);
  for (std::size_t j = 0; j < lay.experts_of_rank.size(); ++j)
    for (int e : lay.experts_of_rank[j]) replicas->of_expert[e].push_back({static_cast<std::uint32_t>(j), 1.0});
  for (const auto& g : lay.groups) in.groups.push_back({g, replicas});
  in.chunks = options_.ep.pipelining_degree;
  in.timing = ep::timing(options_.ep);
  in.params_per_gpu = params_on_gpu(ctx);
  if (migrates(ctx)) {
    const auto& sizes = domain(ctx).sizes;
    const auto level_groups = build_groups(topo, sizes);
    std::vector<parallel::FamilyPtr> families;
    for (const auto& lg : level_groups) families.push_back(parallel::family(lg.all_gather));
    // The domain's experts, level by level, coarsest first: at level l each GPU contributes what it
    // holds so far, its own experts times the domain sizes of the coarser levels.
    auto fetch = std::make_shared<parallel::ExpertFetch>();
    fetch->at_iteration_start = options_.async_communicator;
    double bytes = transmitted_bytes(ctx, own_expert_bytes(ctx));
    for (int l = 0; l < topo.level_count(); ++l) {
      if (sizes[l] <= 1) continue;
      fetch->steps.push_back({"expert_migration", network::CollectiveKind::AllGather, options_.migration_algorithm, bytes,
                              families[l], parallel::StreamRole::Side, nullptr});
      bytes *= sizes[l];
    }
    if (compresses())
      for (std::size_t k = 0; k < ctx.compute.size(); ++k) {
        fetch->prepare.push_back(encode_time(ctx, k));
        fetch->prologue.push_back(decode_time(ctx, k));
      }
    in.fetch = std::move(fetch);
    // Every expert has one owner (the EP group is all GPUs): only the gathered copies' gradients
    // travel, by reduce-scatter back to the owners, finest level first.
    double held = domain(ctx).domain_gpus;  // own experts' worth of gradients each GPU holds
    for (int l = topo.level_count() - 1; l >= 0; --l) {
      if (sizes[l] <= 1) continue;
      in.expert_gradients.push_back({"gathered_expert_grads", network::CollectiveKind::ReduceScatter,
                                     options_.migration_algorithm,
                                     options_.compress_gradients ? transmitted_bytes(ctx, held * own_expert_bytes(ctx))
                                                                 : held * own_expert_bytes(ctx),
                                     families[l],
                                     parallel::StreamRole::Gradient, nullptr});
      held /= sizes[l];
    }
    // The shared expert of the SR compression is all-reduced in backward, asynchronously (§IV-B):
    // it rides in the layer's data-parallel all-reduce bucket on the gradient stream.
    if (compresses()) in.extra_moe_dense_params = m.expert_params();
  }
  plan_ = ep::make_plan(ctx, in);
  return plan_;
}

std::vector<workload::MemoryFootprint> HybridEpStrategy::memory(const StrategyContext& ctx) const {
  auto out = ep::memory(ctx, static_cast<int>(ctx.topology.gpu_count()));
  if (!migrates(ctx)) return out;
  const auto& m = ctx.model;
  const double b = cluster::storage_bytes(ctx.training.dtype);
  // Gathered experts of one layer, restored for compute, and their gradients until the layer's
  // reduce-scatter (one layer at a time). With SR compression every layer's gathered residuals
  // wait compressed in the receive queue and are decoded when needed (forward and backward);
  // without it every layer's gathered experts stay restored for the backward.
  const double one_layer = (domain(ctx).domain_gpus - 1.0) * own_expert_bytes(ctx);
  const double held = compresses() ? one_layer + m.moe_layers() * transmitted_bytes(ctx, one_layer) : m.moe_layers() * one_layer;
  // Shared experts: trained everywhere (weights, gradients, Adam state), as EpStrategy counts params.
  const double shared = compresses() ? m.moe_layers() * m.expert_params() : 0.0;
  for (auto& f : out) {
    f.weights += held + shared * b;
    f.gradients += one_layer + shared * b;
    f.optimizer += shared * (b < 4 ? 12.0 : 8.0);
  }
  return out;
}

ProgramSize HybridEpStrategy::program_per_iteration(const StrategyContext& ctx) const {
  // EP's blocks over every GPU, its all-to-alls over the same-offset groups (a GPU of every
  // domain of ΠS GPUs), plus per GPU and MoE layer, per level: the experts' all-gather into the
  // domain and their gradients' reduce-scatter back (over the level's S_ED GPUs); and the SR
  // encoding kernel (blocks/expert_fetch.cpp; the decoding is the expert kernels' prologue).
  using P = ProgramSize;
  const DomainChoice& d = domain(ctx);
  const double gpus = ctx.topology.gpu_count();
  P per_layer = P::kernels(1);
  for (const std::uint32_t size : d.sizes) per_layer += P::collective(2, size);
  return ep::program_per_iteration(ctx, options_.ep.pipelining_degree, std::nullopt, gpus / d.domain_gpus) +
         gpus * ctx.model.moe_layers() * per_layer;
}

std::vector<Alternative> HybridEpStrategy::alternatives(const StrategyContext& ctx) const {
  const DomainChoice& c = domain(ctx);
  if (c.source != "auto") return {};
  std::vector<Alternative> out;
  for (std::size_t i = 0; i < c.ranked.size() && i < kSimulatedDomainCandidates; ++i) {
    const schema::Json sizes = c.ranked[i].first;
    out.push_back({sizes.dump(), {{"domain", sizes}}});
  }
  return out;
}

schema::Json HybridEpStrategy::describe(const StrategyContext& ctx) const {
  const DomainChoice& c = domain(ctx);
  schema::Json j;
  if (c.source == "auto") {
    j["choice"] = schema::Json(c.sizes).dump();
    schema::Json ranked = schema::Json::array();
    for (std::size_t i = 0; i < c.ranked.size() && i < kSimulatedDomainCandidates; ++i)
      ranked.push_back({{"domain", c.ranked[i].first}, {"model_ms", c.ranked[i].second * 1e3}});
    j["candidates_by_model"] = ranked;
  }
  j["domain_source"] = c.source;
  j["domain_sizes"] = c.sizes;
  j["domain_gpus"] = c.domain_gpus;
  j["p"] = c.p;
  schema::Json model;
  model["case"] = ctx.topology.gpu_count() > 1 ? to_string(c.model.which) : "none";
  model["p"] = c.model.p;
  model["p_star"] = c.model.p_star;
  model["domain_gpus"] = c.model.domain;
  model["moe_block_latency_ms"] = c.model.latency * 1e3;
  model["data_bytes"] = c.inputs.data_bytes;
  model["expert_bytes_transmitted"] = c.inputs.expert_bytes;
  model["bandwidth_bytes_per_second"] = c.inputs.bandwidth;
  model["pre_expert_ms"] = c.inputs.pre_expert_seconds * 1e3;
  j["stream_model"] = model;
  const SameOffsetLayout lay = layout(ctx);
  j["all_to_all_group_size"] = lay.experts_of_rank.size();
  j["all_to_all_groups"] = lay.groups.size();
  j["experts_per_gpu"] = ctx.model.experts / static_cast<int>(ctx.topology.gpu_count());
  const PairCounts pairs = count_pairs(ctx.topology, c.sizes);
  j["algorithm1_pairs"] = {{"all_to_all", pairs.all_to_all}, {"all_gather", pairs.all_gather}};
  j["compression_ratio"] = options_.compression_ratio;
  j["async_communicator"] = options_.async_communicator;
  j["encode_fusion_saving"] = options_.encode_fusion_saving;
  j["decode_fusion_saving"] = options_.decode_fusion_saving;
  j["gradient_return"] = options_.compress_gradients ? "compressed" : "full";
  j["migration_algorithm"] = std::string(network::to_string(options_.migration_algorithm));
  j["pipelining_degree"] = options_.ep.pipelining_degree;
  j["gradient_sync"] = options_.ep.overlap_gradient_sync ? "overlap" : "after_backward";
  return j;
}

}  // namespace moesim::strategies::hybridep
