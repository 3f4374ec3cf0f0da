#include "sim/strategies/hybridep/hybridep_strategy.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>


#include "sim/core/error.hpp"
#include "sim/strategies/ep/ep_costs.hpp"
#include "sim/strategies/hybridep/domain_partition.hpp"

namespace moesim::strategies::hybridep {

using engine::Phase;
using engine::TaskId;
using engine::WorkKind;
namespace sc = moesim::schema;

StrategyInfo info() {
  StrategyInfo s;
  s.name = "hybridep";
  s.description = "HybridEP: experts all-gathered inside expert domains, tokens all-to-all across them";
  s.paper = "HybridEP (seed 000): stream-based model §III, domain-based partition §IV-A, migration §IV-B";
  s.options = sc::object({
      sc::required("name", sc::enumeration({"hybridep"}), "the strategy name"),
      sc::optional("domain", sc::any(), "auto",
                   "expert-domain sizes: \"auto\" (Eq. 10-12), one S_ED per cluster level coarsest first "
                   "(e.g. [2, 8]), or {\"p\": 0.5} for a fixed share of data sent by all-to-all"),
      sc::optional("compression_ratio", sc::number(1), 50,
                   "expert residuals are sent top-k compressed by this ratio (paper: 50); 1 turns off the "
                   "SR compression, SREncode/SRDecode and the shared expert"),
      sc::optional("async_communicator", sc::boolean(), true,
                   "issue every layer's expert all-gather at iteration start (false: when the layer's MoE block "
                   "is reached)"),
      sc::optional("encode_fusion_saving", sc::number(0, 0.99), 0.3,
                   "share of SREncode's cost saved by fusing it with the optimizer step (paper §V-E: 0.3)"),
      sc::optional("decode_fusion_saving", sc::number(0, 0.99), 0.45,
                   "share of SRDecode's cost saved by fusing it with expert compute (paper §V-E: 0.45)"),
      sc::optional("gradient_return", sc::enumeration({"compressed", "full"}), "compressed",
                   "gathered experts' gradients return to their owners compressed like the parameters, or whole"),
      sc::optional("migration_algorithm", sc::enumeration({"ring", "direct"}), "ring",
                   "algorithm of the expert all-gathers and gradient reduce-scatters: ring (NCCL's), or direct "
                   "(one exchange, latency paid once: a stand-in for tree/PAT algorithms over many workers)"),
      ep::pipelining_degree_option(),
      ep::gradient_sync_option(),
  });
  s.make = [](const sc::Json& o) {
    HybridEpOptions opt;
    ep::read_iteration_options(o, opt.ep);
    opt.domain = o.at("domain");
    opt.compression_ratio = o.at("compression_ratio").get<double>();
    opt.async_communicator = o.at("async_communicator").get<bool>();
    opt.encode_fusion_saving = o.at("encode_fusion_saving").get<double>();
    opt.decode_fusion_saving = o.at("decode_fusion_saving").get<double>();
    opt.compress_gradients = o.at("gradient_return") == "compressed";
    opt.migration_algorithm =
        o.at("migration_algorithm") == "direct" ? network::Algorithm::Direct : network::Algorithm::Ring;
    return std::make_unique<HybridEpStrategy>(std::move(opt));
  };
  return s;
}

std::vector<std::uint32_t> sizes_for_domain(const cluster::Topology& topo, double gpus) {
  std::vector<std::uint32_t> sizes;
  double remaining = gpus;
  for (const auto& level : topo.levels()) {
    std::uint32_t best = 1;
    for (std::uint32_t d = 1; d <= level.count; ++d)
      if (level.count % d == 0 && d <= remaining + 1e-9) best = d;
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
  const sc::Json& d = hoptions_.domain;
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
        std::vector<std::uint32_t> divisors;
        for (std::uint32_t k = 1; k <= count; ++k)
          if (count % k == 0) divisors.push_back(k);
        throw InputError("", fmt::format("$.strategy.domain[{}]", l),
                         fmt::format("{} is not a divisor of level {}'s {} workers", d[l].dump(),
                                     topo.levels()[l].name, count),
                         fmt::format("use one of {}", fmt::join(divisors, ", ")));
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
         cluster::dtype_bytes(ctx.training.dtype);
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
  in.data_bytes = t.tokens_per_microbatch() * m.top_k * m.hidden * cluster::dtype_bytes(t.dtype) * t.microbatches;
  in.expert_bytes = own_expert_bytes(ctx) / hoptions_.compression_ratio;
  in.bandwidth = 0;
  for (int l = 0; l < topo.level_count(); ++l)
    if (topo.levels()[l].count > 1) {
      const double share = topo.levels()[l].bandwidth.bytes_per_second / topo.gpus_per_worker(l);
      in.bandwidth = in.bandwidth > 0 ? std::min(in.bandwidth, share) : share;
    }
  const ep::LayerCosts lc = ep::layer_costs(ctx.compute[0], m, t, EpStrategy::params_on_gpu(ctx));
  const double dense_between = m.moe_layers() > 0
                                   ? static_cast<double>(m.layers - m.moe_layers()) / m.moe_layers() *
                                         time_to_seconds(lc.attention + lc.dense_ffn)
                                   : 0.0;
  in.pre_expert_seconds = time_to_seconds(lc.attention + lc.gate) + dense_between;
  if (gpus > 1) c.model = solve(in);
  const sc::Json& d = hoptions_.domain;
  if (d.is_array()) {
    c.source = "explicit";
    for (const auto& s : d) c.sizes.push_back(s.get<std::uint32_t>());
  } else if (d.is_object()) {
    c.source = "proportion";
    c.sizes = sizes_for_domain(topo, gpus - d.at("p").get<double>() * (gpus - 1.0));
  } else {
    c.source = "auto";
    c.sizes = gpus > 1 ? sizes_for_domain(topo, gpus - c.model.p * (gpus - 1.0)) : std::vector<std::uint32_t>(topo.level_count(), 1);
  }
  c.domain_gpus = std::accumulate(c.sizes.begin(), c.sizes.end(), 1u, std::multiplies<>());
  c.p = gpus > 1 ? (gpus - static_cast<double>(c.domain_gpus)) / (gpus - 1.0) : 1.0;
  domain_ = std::move(c);
  return *domain_;
}

ep::EpLayout HybridEpStrategy::layout(const StrategyContext& ctx) const {
  // Rank j of a same-offset group is the GPU of expert domain j (domains numbered coarse-major, as
  // Eq. 13 numbers GPUs); it computes every expert its domain's GPUs own.
  const auto& topo = ctx.topology;
  const auto& sizes = domain(ctx).sizes;
  const std::uint32_t gpus = topo.gpu_count();
  const int per_gpu = ctx.model.experts / static_cast<int>(gpus);
  std::uint32_t domains = 1, offsets = 1;
  for (int l = 0; l < topo.level_count(); ++l) {
    domains *= topo.levels()[l].count / sizes[l];
    offsets *= sizes[l];
  }
  ep::EpLayout lay;
  lay.chunks = options_.pipelining_degree;
  lay.groups.assign(offsets, std::vector<std::uint32_t>(domains));
  lay.rank_of_gpu.resize(gpus);
  lay.experts_of_rank.resize(domains);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const auto loc = topo.location(g);
    std::uint32_t domain_index = 0, offset_index = 0;
    for (int l = 0; l < topo.level_count(); ++l) {
      domain_index = domain_index * (topo.levels()[l].count / sizes[l]) + loc[l] / sizes[l];
      offset_index = offset_index * sizes[l] + loc[l] % sizes[l];
    }
    lay.groups[offset_index][domain_index] = g;
    lay.rank_of_gpu[g] = static_cast<int>(domain_index);
    for (int e = 0; e < per_gpu; ++e) lay.experts_of_rank[domain_index].push_back(static_cast<int>(g) * per_gpu + e);
  }
  for (auto& v : lay.experts_of_rank) std::sort(v.begin(), v.end());
  return lay;
}

double HybridEpStrategy::params_on_gpu(const StrategyContext& ctx) const {
  // The shared expert of every MoE layer is trained (and stepped) on every GPU.
  const double shared = compresses() && migrates(ctx) ? ctx.model.moe_layers() * ctx.model.expert_params() : 0.0;
  return EpStrategy::params_on_gpu(ctx) + shared;
}

Time HybridEpStrategy::encode_time(const StrategyContext& ctx, std::uint32_t g) const {
  // SREncode per own expert: read the expert and the shared expert, write the residual, and one
  // top-k selection pass over it (4 passes), then the compressed value-index pairs.
  const double b = cluster::dtype_bytes(ctx.training.dtype);
  const double bytes = own_expert_bytes(ctx) * 4 + own_expert_bytes(ctx) / hoptions_.compression_ratio * (1 + 4 / b);
  const Time t = ctx.compute[ctx.topology.kind_index(g)].memory_bound(bytes);
  return static_cast<Time>(std::llround(static_cast<double>(t) * (1 - hoptions_.encode_fusion_saving)));
}

Time HybridEpStrategy::expert_prologue(const StrategyContext& ctx, int, std::uint32_t g) const {
  if (!migrates(ctx) || !compresses()) return 0;
  // SRDecode of every received expert: read its compressed residual and the shared expert, write
  // the restored expert (fused with the expert GeMMs, §V-E); again in backward, as the restored
  // experts are not kept (see memory()).
  const double b = cluster::dtype_bytes(ctx.training.dtype);
  const double received = domain(ctx).domain_gpus - 1.0;
  const double bytes = received * (own_expert_bytes(ctx) * 2 + own_expert_bytes(ctx) / hoptions_.compression_ratio * (1 + 4 / b));
  const Time t = ctx.compute[ctx.topology.kind_index(g)].memory_bound(bytes);
  return static_cast<Time>(std::llround(static_cast<double>(t) * (1 - hoptions_.decode_fusion_saving)));
}

void HybridEpStrategy::all_gather_experts(const StrategyContext& ctx, ProgramBuilder& pb, int it, int layer,
                                          const std::vector<TaskId>& after) {
  // Level by level, coarsest first: at level l each GPU contributes what it holds so far, its own
  // experts times the domain sizes of the coarser levels.
  const auto& sizes = domain(ctx).sizes;
  std::vector<TaskId> cur = after;
  cur.resize(ctx.topology.gpu_count(), engine::kNone);
  double bytes = own_expert_bytes(ctx) / hoptions_.compression_ratio;
  const auto label = pb.label(Phase::Forward, WorkKind::AllGather, "expert_migration", it, layer);
  for (int l = 0; l < ctx.topology.level_count(); ++l) {
    if (sizes[l] <= 1) continue;
    for (const network::GroupId group : ag_groups_[l]) {
      pb.collective({network::CollectiveKind::AllGather, hoptions_.migration_algorithm, group, bytes, nullptr},
                    kMigrationStream, label, members_);
      const auto& gpus_of = pb.group_members(group);
      for (std::size_t r = 0; r < gpus_of.size(); ++r) {
        if (cur[gpus_of[r]] != engine::kNone) pb.depend(cur[gpus_of[r]], members_[r]);
        cur[gpus_of[r]] = members_[r];
      }
    }
    bytes *= sizes[l];
  }
  ready_[layer] = std::move(cur);
}

void HybridEpStrategy::begin_iteration(const StrategyContext& ctx, ProgramBuilder& pb, int it) {
  const auto& m = ctx.model;
  const std::uint32_t gpus = ctx.topology.gpu_count();
  ready_.assign(m.layers, {});
  if (!migrates(ctx)) return;
  const auto& sizes = domain(ctx).sizes;
  if (ag_groups_.empty()) {
    const auto level_groups = build_groups(ctx.topology, sizes);
    ag_groups_.resize(level_groups.size());
    for (std::size_t l = 0; l < level_groups.size(); ++l)
      for (const auto& g : level_groups[l].all_gather) ag_groups_[l].push_back(pb.group(g));
  }
  // Initialisation stage (Fig. 10a): SREncode of every layer's experts, fused with the optimizer
  // step that ends the previous iteration.
  std::vector<std::vector<TaskId>> encoded(m.layers);
  if (compresses()) {
    const auto label = pb.label(Phase::Optimizer, WorkKind::OtherCompute, "sr_encode", it, 0);
    for (int layer = m.dense_layers; layer < m.layers; ++layer) {
      if (!m.is_moe(layer)) continue;
      encoded[layer].resize(gpus);
      for (std::uint32_t g = 0; g < gpus; ++g) encoded[layer][g] = pb.compute(g, encode_time(ctx, g), label);
    }
  }
  // Asynchronous communication stage (Fig. 10b): every layer's all-gather is queued now, in layer
  // order, on the migration stream, and overlaps the pre-expert compute.
  if (hoptions_.async_communicator)
    for (int layer = 0; layer < m.layers; ++layer)
      if (m.is_moe(layer)) all_gather_experts(ctx, pb, it, layer, encoded[layer]);
}

void HybridEpStrategy::begin_moe_forward(const StrategyContext& ctx, ProgramBuilder& pb, int it, int layer, int mb,
                                         const std::vector<TaskId>& attention) {
  // Without the asynchronous communicator a layer's experts are fetched when its MoE block is
  // reached, once per iteration.
  if (hoptions_.async_communicator || mb != 0 || !migrates(ctx)) return;
  all_gather_experts(ctx, pb, it, layer, attention);
}

TaskId HybridEpStrategy::experts_ready(int layer, std::uint32_t g) const {
  return ready_[layer].empty() ? engine::kNone : ready_[layer][g];
}

void HybridEpStrategy::sync_expert_gradients(const StrategyContext& ctx, ProgramBuilder& pb, int it, int layer,
                                             const std::vector<TaskId>& after) {
  // Every expert has one owner (the EP group is all GPUs): only the gathered copies' gradients
  // travel, by reduce-scatter back to the owners, finest level first.
  if (!migrates(ctx)) return;
  const auto& sizes = domain(ctx).sizes;
  const double ratio = hoptions_.compress_gradients ? hoptions_.compression_ratio : 1.0;
  double held = domain(ctx).domain_gpus;  // own experts' worth of gradients each GPU holds
  std::vector<TaskId> cur = after;
  const auto label = pb.label(Phase::GradSync, WorkKind::ReduceScatter, "gathered_expert_grads", it, layer);
  for (int l = ctx.topology.level_count() - 1; l >= 0; --l) {
    if (sizes[l] <= 1) continue;
    for (const network::GroupId group : ag_groups_[l])
      gradient_collective(ctx, pb, network::CollectiveKind::ReduceScatter, hoptions_.migration_algorithm, group,
                          held * own_expert_bytes(ctx) / ratio, label, cur);
    cur = last_gradient_sync();
    held /= sizes[l];
  }
}

double HybridEpStrategy::extra_replicated_moe_params(const StrategyContext& ctx) const {
  // The shared expert of the SR compression is all-reduced in backward, asynchronously (§IV-B):
  // it rides in the layer's data-parallel all-reduce bucket on the gradient stream.
  return compresses() && migrates(ctx) ? ctx.model.expert_params() : 0.0;
}

std::vector<workload::MemoryFootprint> HybridEpStrategy::memory(const StrategyContext& ctx) const {
  auto out = EpStrategy::memory(ctx);
  if (!migrates(ctx)) return out;
  const auto& m = ctx.model;
  const double b = cluster::dtype_bytes(ctx.training.dtype);
  // Gathered experts of one layer, restored for compute, and their gradients until the layer's
  // reduce-scatter (one layer at a time). With SR compression every layer's gathered residuals
  // wait compressed in the receive queue and are decoded when needed (forward and backward);
  // without it every layer's gathered experts stay restored for the backward.
  const double one_layer = (domain(ctx).domain_gpus - 1.0) * own_expert_bytes(ctx);
  const double held = compresses() ? one_layer + m.moe_layers() * one_layer / hoptions_.compression_ratio * (1 + 4 / b)
                                   : m.moe_layers() * one_layer;
  // Shared experts: trained everywhere (weights, gradients, Adam state), as EpStrategy counts params.
  const double shared = compresses() ? m.moe_layers() * m.expert_params() : 0.0;
  for (auto& f : out) {
    f.weights += held + shared * b;
    f.gradients += one_layer + shared * b;
    f.optimizer += shared * (b < 4 ? 12.0 : 8.0);
  }
  return out;
}

std::size_t HybridEpStrategy::tasks_per_iteration(const StrategyContext& ctx) const {
  return EpStrategy::tasks_per_iteration(ctx) +
         static_cast<std::size_t>(ctx.topology.gpu_count()) * ctx.model.moe_layers() * (2 * ctx.topology.level_count() + 4);
}

schema::Json HybridEpStrategy::describe(const StrategyContext& ctx) const {
  const DomainChoice& c = domain(ctx);
  schema::Json j;
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
  const ep::EpLayout lay = layout(ctx);
  j["all_to_all_group_size"] = lay.size();
  j["all_to_all_groups"] = lay.groups.size();
  j["experts_per_gpu"] = ctx.model.experts / static_cast<int>(ctx.topology.gpu_count());
  const PairCounts pairs = count_pairs(ctx.topology, c.sizes);
  j["algorithm1_pairs"] = {{"all_to_all", pairs.all_to_all}, {"all_gather", pairs.all_gather}};
  j["compression_ratio"] = hoptions_.compression_ratio;
  j["async_communicator"] = hoptions_.async_communicator;
  j["encode_fusion_saving"] = hoptions_.encode_fusion_saving;
  j["decode_fusion_saving"] = hoptions_.decode_fusion_saving;
  j["gradient_return"] = hoptions_.compress_gradients ? "compressed" : "full";
  j["migration_algorithm"] = std::string(network::to_string(hoptions_.migration_algorithm));
  j["pipelining_degree"] = options_.pipelining_degree;
  j["gradient_sync"] = options_.overlap_gradient_sync ? "overlap" : "after_backward";
  return j;
}

}  // namespace moesim::strategies::hybridep
