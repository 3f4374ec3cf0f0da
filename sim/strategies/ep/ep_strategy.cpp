#include "sim/strategies/ep/ep_strategy.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <cmath>
#include <numeric>

#include "sim/core/error.hpp"
#include "sim/strategies/ep/ep_costs.hpp"
#include "sim/strategies/ep/ep_routing.hpp"

namespace moesim::strategies::ep {

using engine::Phase;
using engine::TaskId;
using engine::WorkKind;
namespace sc = moesim::schema;

sc::Field pipelining_degree_option() {
  return sc::optional("pipelining_degree", sc::integer(1, 64), 1,
                      "chunks the tokens are split into so all-to-all overlaps expert compute");
}

sc::Field gradient_sync_option() {
  return sc::optional("gradient_sync", sc::enumeration({"overlap", "after_backward"}), "overlap",
                      "synchronise each layer's gradients as its backward ends, or all after backward");
}

void read_iteration_options(const sc::Json& o, EpOptions& into) {
  into.pipelining_degree = o.at("pipelining_degree").get<int>();
  into.overlap_gradient_sync = o.at("gradient_sync") == "overlap";
}

StrategyInfo info() {
  StrategyInfo s;
  s.name = "ep";
  s.description = "plain expert parallelism: all-to-all dispatch and combine around the local experts";
  s.paper = "GShard (Lepikhin et al. 2021), DeepSpeed-MoE, Tutel; baseline of every seed paper";
  s.options = sc::object({
      sc::required("name", sc::enumeration({"ep"}), "the strategy name"),
      sc::optional("ep_size", sc::integer(0), 0,
                   "GPUs per expert-parallel group (0: all GPUs); experts and GPUs must divide by it"),
      pipelining_degree_option(),
      sc::optional("all_to_all", sc::enumeration({"direct", "hierarchical"}), "direct",
                   "all-to-all algorithm: direct, or hierarchical (2-D: inside the node, then across)"),
      gradient_sync_option(),
  });
  s.make = [](const sc::Json& o) {
    EpOptions opt;
    opt.ep_size = o.at("ep_size").get<int>();
    read_iteration_options(o, opt);
    opt.all_to_all = o.at("all_to_all") == "hierarchical" ? network::Algorithm::Hierarchical : network::Algorithm::Direct;
    return std::make_unique<EpStrategy>(opt);
  };
  return s;
}

int EpStrategy::ep_size(const StrategyContext& ctx) const {
  return options_.ep_size == 0 ? static_cast<int>(ctx.topology.gpu_count()) : options_.ep_size;
}

void EpStrategy::check(const StrategyContext& ctx) const {
  const int n = ep_size(ctx);
  const int g = static_cast<int>(ctx.topology.gpu_count());
  const int e = ctx.model.experts;
  if (n > g)
    throw InputError("", "$.strategy.ep_size", fmt::format("ep_size {} exceeds the cluster's {} GPUs", n, g),
                     fmt::format("use at most {}", g));
  if (g % n != 0)
    throw InputError("", "$.strategy.ep_size", fmt::format("{} GPUs do not split into EP groups of {}", g, n),
                     "choose an ep_size that divides the GPU count");
  if (e % n != 0) {
    std::vector<int> good;
    for (int d = 1; d <= std::min(e, g); ++d)
      if (e % d == 0 && g % d == 0) good.push_back(d);
    throw InputError("", "$.strategy.ep_size",
                     fmt::format("the model's {} experts are not divisible by ep_size {}", e, n),
                     fmt::format("choose an ep_size dividing both {} experts and {} GPUs (e.g. {}), or change "
                                 "model.experts",
                                 e, g, fmt::join(good, ", ")));
  }
  if (options_.all_to_all == network::Algorithm::Hierarchical && ctx.topology.level_count() >= 2) {
    const std::uint32_t per_node = ctx.topology.gpus_per_worker(ctx.topology.level_count() - 2);
    if (static_cast<std::uint32_t>(n) % per_node != 0)
      throw InputError("", "$.strategy.all_to_all",
                       fmt::format("hierarchical all-to-all needs EP groups of whole nodes ({} GPUs), not {}", per_node, n),
                       "use \"direct\" or an ep_size that is a multiple of the node size");
  }
}


std::vector<workload::MemoryFootprint> EpStrategy::memory(const StrategyContext& ctx) const {
  const int n = ep_size(ctx);
  const auto& m = ctx.model;
  const int per_rank = m.experts / n;
  const double tokens = ctx.training.tokens_per_microbatch();
  // The busiest rank's routed token copies per MoE layer, over the first iteration's routing.
  double busiest = 0;
  for (int layer = m.dense_layers; layer < m.layers; ++layer) {
    const auto plan = workload::plan_dispatch(ctx.routing.popularity(0, layer), tokens, m.top_k, ctx.training.capacity_factor);
    for (int r = 0; r < n; ++r) {
      double copies = 0;
      for (int e = r * per_rank; e < (r + 1) * per_rank; ++e) copies += plan.kept_per_expert[e] * n;
      busiest = std::max(busiest, copies);
    }
  }
  std::vector<workload::MemoryFootprint> out(ctx.topology.gpu_count());
  for (std::uint32_t g = 0; g < ctx.topology.gpu_count(); ++g) {
    workload::MemoryInputs in;
    in.params = m.replicated_params() + m.moe_layers() * per_rank * m.expert_params();
    in.tokens = tokens;
    in.expert_tokens_per_layer = busiest;
    in.flash_attention = ctx.topology.gpu(g).flash_attention;
    out[g] = workload::memory_footprint(m, ctx.training, in);
  }
  return out;
}

std::size_t EpStrategy::tasks_per_iteration(const StrategyContext& ctx) const {
  const std::size_t g = ctx.topology.gpu_count();
  const std::size_t p = static_cast<std::size_t>(options_.pipelining_degree);
  return g * (static_cast<std::size_t>(ctx.training.microbatches) * (ctx.model.layers * (8 + 6 * p) + 4) +
              ctx.model.layers * 2 + 4);
}

EpLayout EpStrategy::layout(const StrategyContext& ctx) const {
  return EpLayout::consecutive(ctx.topology.gpu_count(), ep_size(ctx), ctx.model.experts, options_.pipelining_degree);
}

double EpStrategy::params_on_gpu(const StrategyContext& ctx) const {
  const auto& m = ctx.model;
  return m.replicated_params() + m.moe_layers() * (m.experts / ep_size(ctx)) * m.expert_params();
}

void EpStrategy::gradient_collective(const StrategyContext&, ProgramBuilder& pb, network::CollectiveKind kind,
                                     network::Algorithm algorithm, network::GroupId group, double bytes,
                                     const engine::Label& label, const std::vector<TaskId>& after) {
  const auto& gpus_of = pb.group_members(group);
  if (gpus_of.size() <= 1 || bytes <= 0) return;
  pb.collective({kind, algorithm, group, bytes, nullptr}, kGradientStream, label, members_);
  for (std::size_t r = 0; r < gpus_of.size(); ++r) {
    pb.depend(after[gpus_of[r]], members_[r]);
    last_sync_[gpus_of[r]] = members_[r];
  }
}

void EpStrategy::sync_expert_gradients(const StrategyContext& ctx, ProgramBuilder& pb, int it, int layer,
                                       const std::vector<TaskId>& after) {
  // The expert-data-parallel group of EP rank r holds the GPUs with rank r in every EP group.
  const int n = ep_size(ctx);
  const int groups = static_cast<int>(ctx.topology.gpu_count()) / n;
  if (expert_dp_group_.empty())
    for (int r = 0; r < n; ++r) {
      std::vector<std::uint32_t> v;
      for (int gi = 0; gi < groups; ++gi) v.push_back(static_cast<std::uint32_t>(gi * n + r));
      expert_dp_group_.push_back(pb.group(std::move(v)));
    }
  const double bytes = (ctx.model.experts / n) * ctx.model.expert_params() * cluster::dtype_bytes(ctx.training.dtype);
  for (int r = 0; r < n; ++r)
    gradient_collective(ctx, pb, network::CollectiveKind::AllReduce, ctx.all_reduce_algorithm, expert_dp_group_[r], bytes,
                        pb.label(Phase::GradSync, WorkKind::AllReduce, "expert_grads", it, layer), after);
}

void EpStrategy::build_iteration(const StrategyContext& ctx, ProgramBuilder& pb, int it) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const auto& topo = ctx.topology;
  const std::uint32_t gpus = topo.gpu_count();
  const int chunks = options_.pipelining_degree;
  const double b = cluster::dtype_bytes(t.dtype);
  const std::size_t kinds = ctx.compute.size();
  const EpLayout lay = layout(ctx);
  const int n = lay.size();
  expert_dp_group_.clear();
  last_sync_.assign(gpus, engine::kNone);

  // All-to-all groups; dense parameters are replicated on all GPUs.
  std::vector<network::GroupId> a2a_group;
  for (const auto& g : lay.groups) a2a_group.push_back(pb.group(g));
  std::vector<std::uint32_t> all(gpus);
  std::iota(all.begin(), all.end(), 0u);
  const network::GroupId dp_group = pb.group(std::move(all));

  std::vector<LayerCosts> costs;
  for (std::size_t k = 0; k < kinds; ++k) costs.push_back(layer_costs(ctx.compute[k], m, t, params_on_gpu(ctx)));
  const auto cost = [&](std::uint32_t g) -> const LayerCosts& { return costs[topo.kind_index(g)]; };
  const auto& cm_of = [&](std::uint32_t g) -> const compute::ComputeModel& { return ctx.compute[topo.kind_index(g)]; };

  double dropped = 0, routed = 0;
  std::vector<EpLayerRouting> plans(m.layers);

  std::vector<std::vector<TaskId>> chunk_tasks(chunks, std::vector<TaskId>(gpus));
  std::vector<TaskId> before(gpus), attention(gpus);
  const auto a2a = [&](const std::vector<network::TrafficPtr>& traffic, std::uint8_t stream, const engine::Label& label,
                       std::vector<TaskId>& out_by_gpu, const std::vector<TaskId>& after) {
    for (std::size_t gi = 0; gi < lay.groups.size(); ++gi) {
      pb.collective({network::CollectiveKind::AllToAll, options_.all_to_all, a2a_group[gi], 0,
                     traffic.size() == 1 ? traffic[0] : traffic[gi]},
                    stream, label, members_);
      for (int r = 0; r < n; ++r) {
        const std::uint32_t g = lay.groups[gi][r];
        pb.depend(after[g], members_[r]);
        out_by_gpu[g] = members_[r];
      }
    }
  };

  const double layer_dense_params = m.attention_params() + m.norm_params();
  const double moe_dense_params =
      m.gate_params() + m.shared_experts * m.expert_params() + extra_replicated_moe_params(ctx);
  std::vector<std::vector<TaskId>> expert_bwd(m.layers);
  std::vector<TaskId> attention_bwd(gpus), embed_bwd(gpus);
  const bool n_has_comm = n > 1;

  begin_iteration(ctx, pb, it);
  for (int mb = 0; mb < t.microbatches; ++mb) {
    const bool last_mb = mb + 1 == t.microbatches;
    for (int layer = m.dense_layers; layer < m.layers; ++layer) {
      plans[layer] = route_layer(ctx, lay, it, layer, mb);
      dropped += plans[layer].dropped_copies;
      routed += plans[layer].routed_copies;
    }
    // Forward.
    {
      auto l = pb.label(Phase::Forward, WorkKind::OtherCompute, "embedding", it, 0, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) pb.compute(g, cost(g).embed, l);
    }
    for (int layer = 0; layer < m.layers; ++layer) {
      auto la = pb.label(Phase::Forward, WorkKind::Attention, "attention", it, layer, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) attention[g] = pb.compute(g, cost(g).attention, la);
      if (!m.is_moe(layer)) {
        auto lf = pb.label(Phase::Forward, WorkKind::DenseFfn, "dense_ffn", it, layer, mb);
        for (std::uint32_t g = 0; g < gpus; ++g) pb.compute(g, cost(g).dense_ffn, lf);
        continue;
      }
      begin_moe_forward(ctx, pb, it, layer, mb, attention);
      const EpLayerRouting& mp = plans[layer];
      auto lg = pb.label(Phase::Forward, WorkKind::Gate, "gate", it, layer, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) before[g] = pb.compute(g, cost(g).gate, lg);
      if (m.shared_experts > 0) {
        auto ls = pb.label(Phase::Forward, WorkKind::Expert, "shared_expert", it, layer, mb);
        for (std::uint32_t g = 0; g < gpus; ++g) pb.compute(g, cost(g).shared, ls);
      }
      for (int c = 0; c < chunks; ++c) {
        auto& chunk = chunk_tasks[c];
        if (n_has_comm)
          a2a(mp.dispatch, kDispatchStream, pb.label(Phase::Forward, WorkKind::AllToAll, "dispatch", it, layer, mb, c),
              chunk, before);
        auto le = pb.label(Phase::Forward, WorkKind::Expert, "experts", it, layer, mb, c);
        const bool first = mb == 0 && c == 0;
        for (std::uint32_t g = 0; g < gpus; ++g) {
          const TaskId e = pb.compute(g, mp.expert_fwd[g] + (first ? expert_prologue(ctx, layer, g) : 0), le);
          if (n_has_comm) pb.depend(chunk[g], e);
          if (const TaskId ready = experts_ready(layer, g); ready != engine::kNone) pb.depend(ready, e);
          chunk[g] = e;
        }
        if (n_has_comm)
          a2a(mp.combine, kCombineStream, pb.label(Phase::Forward, WorkKind::AllToAll, "combine", it, layer, mb, c), chunk,
              chunk);
      }
      auto lp = pb.label(Phase::Forward, WorkKind::OtherCompute, "combine_output", it, layer, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) {
        const TaskId p = pb.compute(g, cost(g).post, lp);
        if (n_has_comm)
          for (int c = 0; c < chunks; ++c) pb.depend(chunk_tasks[c][g], p);
      }
    }
    {
      auto l = pb.label(Phase::Forward, WorkKind::OtherCompute, "lm_head", it, m.layers, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) pb.compute(g, cost(g).lm_head, l);
    }
    // Backward.
    {
      auto l = pb.label(Phase::Backward, WorkKind::OtherCompute, "lm_head", it, m.layers, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) pb.compute(g, cm_of(g).backward(cost(g).lm_head), l);
    }
    for (int layer = m.layers - 1; layer >= 0; --layer) {
      auto& exp_bwd = expert_bwd[layer];
      if (!m.is_moe(layer)) {
        auto lf = pb.label(Phase::Backward, WorkKind::DenseFfn, "dense_ffn", it, layer, mb);
        for (std::uint32_t g = 0; g < gpus; ++g) pb.compute(g, cm_of(g).backward(cost(g).dense_ffn), lf);
      } else {
        const EpLayerRouting& mp = plans[layer];
        auto lp = pb.label(Phase::Backward, WorkKind::OtherCompute, "combine_output", it, layer, mb);
        for (std::uint32_t g = 0; g < gpus; ++g) before[g] = pb.compute(g, cm_of(g).backward(cost(g).post), lp);
        if (m.shared_experts > 0) {
          auto ls = pb.label(Phase::Backward, WorkKind::Expert, "shared_expert", it, layer, mb);
          for (std::uint32_t g = 0; g < gpus; ++g) pb.compute(g, cm_of(g).backward(cost(g).shared), ls);
        }
        exp_bwd.assign(gpus, engine::kNone);
        for (int c = 0; c < chunks; ++c) {
          auto& chunk = chunk_tasks[c];
          // Output gradients travel from the token owners back to the experts: the dispatch pattern.
          if (n_has_comm)
            a2a(mp.dispatch, kCombineStream, pb.label(Phase::Backward, WorkKind::AllToAll, "combine", it, layer, mb, c),
                chunk, before);
          auto le = pb.label(Phase::Backward, WorkKind::Expert, "experts", it, layer, mb, c);
          const bool first = mb == 0 && c == 0;
          for (std::uint32_t g = 0; g < gpus; ++g) {
            const TaskId e =
                pb.compute(g, cm_of(g).backward(mp.expert_fwd[g]) + (first ? expert_prologue(ctx, layer, g) : 0), le);
            if (n_has_comm) pb.depend(chunk[g], e);
            chunk[g] = e;
            exp_bwd[g] = e;
          }
          if (n_has_comm)
            a2a(mp.combine, kDispatchStream, pb.label(Phase::Backward, WorkKind::AllToAll, "dispatch", it, layer, mb, c),
                chunk, chunk);
        }
        auto lg = pb.label(Phase::Backward, WorkKind::Gate, "gate", it, layer, mb);
        for (std::uint32_t g = 0; g < gpus; ++g) {
          const TaskId gt = pb.compute(g, cm_of(g).backward(cost(g).gate), lg);
          if (n_has_comm)
            for (int c = 0; c < chunks; ++c) pb.depend(chunk_tasks[c][g], gt);
        }
      }
      auto la = pb.label(Phase::Backward, WorkKind::Attention, "attention", it, layer, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) attention_bwd[g] = pb.compute(g, cost(g).attention_backward, la);
      if (last_mb && options_.overlap_gradient_sync) {
        const double dense = layer_dense_params + (m.is_moe(layer) ? moe_dense_params : m.dense_ffn_params());
        gradient_collective(ctx, pb, network::CollectiveKind::AllReduce, ctx.all_reduce_algorithm, dp_group, dense * b,
                            pb.label(Phase::GradSync, WorkKind::AllReduce, "dense_grads", it, layer), attention_bwd);
        if (m.is_moe(layer)) sync_expert_gradients(ctx, pb, it, layer, exp_bwd);
      }
    }
    {
      auto l = pb.label(Phase::Backward, WorkKind::OtherCompute, "embedding", it, 0, mb);
      for (std::uint32_t g = 0; g < gpus; ++g) embed_bwd[g] = pb.compute(g, cm_of(g).backward(cost(g).embed), l);
    }
  }
  if (!options_.overlap_gradient_sync) {
    for (int layer = m.layers - 1; layer >= 0; --layer) {
      const double dense = layer_dense_params + (m.is_moe(layer) ? moe_dense_params : m.dense_ffn_params());
      gradient_collective(ctx, pb, network::CollectiveKind::AllReduce, ctx.all_reduce_algorithm, dp_group, dense * b,
                          pb.label(Phase::GradSync, WorkKind::AllReduce, "dense_grads", it, layer), embed_bwd);
      if (m.is_moe(layer)) sync_expert_gradients(ctx, pb, it, layer, embed_bwd);
    }
  }
  gradient_collective(ctx, pb, network::CollectiveKind::AllReduce, ctx.all_reduce_algorithm, dp_group, m.embedding_params() * b,
                      pb.label(Phase::GradSync, WorkKind::AllReduce, "embedding_grads", it, 0), embed_bwd);
  totals_.dropped_token_copies += dropped;
  totals_.routed_token_copies += routed;
  totals_.dropped_per_iteration.push_back(dropped);
  auto lo = pb.label(Phase::Optimizer, WorkKind::Optimizer, "optimizer", it, 0);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const TaskId o = pb.compute(g, cost(g).optimizer, lo);
    if (last_sync_[g] != engine::kNone) pb.depend(last_sync_[g], o);
  }
}

schema::Json EpStrategy::describe(const StrategyContext& ctx) const {
  const int n = ep_size(ctx);
  schema::Json j;
  j["ep_size"] = n;
  j["ep_groups"] = static_cast<int>(ctx.topology.gpu_count()) / n;
  j["experts_per_gpu"] = ctx.model.experts / n;
  j["expert_data_parallel_size"] = static_cast<int>(ctx.topology.gpu_count()) / n;
  j["pipelining_degree"] = options_.pipelining_degree;
  j["all_to_all"] = std::string(network::to_string(options_.all_to_all));
  j["gradient_sync"] = options_.overlap_gradient_sync ? "overlap" : "after_backward";
  return j;
}

}  // namespace moesim::strategies::ep
