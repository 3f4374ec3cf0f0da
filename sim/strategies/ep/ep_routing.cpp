#include "sim/strategies/ep/ep_routing.hpp"

#include <cmath>

#include "sim/strategies/ep/ep_costs.hpp"

namespace moesim::strategies::ep {

EpLayout EpLayout::consecutive(std::uint32_t gpus, int ep_size, int experts, int chunks) {
  EpLayout l;
  l.chunks = chunks;
  l.rank_of_gpu.resize(gpus);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    if (g % ep_size == 0) l.groups.emplace_back();
    l.groups.back().push_back(g);
    l.rank_of_gpu[g] = static_cast<int>(g % ep_size);
  }
  const int per_rank = experts / ep_size;
  l.experts_of_rank.resize(ep_size);
  for (int e = 0; e < experts; ++e) l.experts_of_rank[e / per_rank].push_back(e);
  return l;
}

EpLayerRouting route_layer(const StrategyContext& ctx, const EpLayout& layout, int it, int layer, int mb) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const auto& topo = ctx.topology;
  const std::uint32_t gpus = topo.gpu_count();
  const int n = layout.size(), chunks = layout.chunks;
  std::vector<int> rank_of_expert(m.experts, -1);
  for (int j = 0; j < n; ++j)
    for (int e : layout.experts_of_rank[j]) rank_of_expert[e] = j;
  const std::size_t kinds = ctx.compute.size();
  const double b = cluster::dtype_bytes(t.dtype);
  const double copies = t.tokens_per_microbatch() * m.top_k;
  const double capacity = t.capacity_factor > 0 ? std::ceil(t.capacity_factor * copies / m.experts) : 0.0;
  const bool sampled = ctx.routing.sampled(static_cast<double>(gpus));
  const auto cm_of = [&](std::uint32_t g) -> const compute::ComputeModel& { return ctx.compute[topo.kind_index(g)]; };

  EpLayerRouting mp;
  mp.expert_fwd.assign(gpus, 0);
  const std::vector<double> popularity = ctx.routing.popularity(it, layer);
  // Expert compute of GPU g from the token copies its experts received.
  const auto experts_time = [&](std::uint32_t g, const std::vector<double>& received) {
    Time total = 0;
    for (int e : layout.experts_of_rank[layout.rank_of_gpu[g]])
      total += ffn_time(cm_of(g), m, received[e] / chunks, m.ffn_hidden);
    return total;
  };
  if (!sampled) {
    const auto plan = workload::plan_dispatch(popularity, t.tokens_per_microbatch(), m.top_k, t.capacity_factor);
    mp.dropped_copies += plan.dropped * gpus;
    mp.routed_copies += (plan.kept + plan.dropped) * gpus;
    std::vector<double> a(n, plan.kept * m.hidden * b / chunks), q(n, 0.0), received(m.experts);
    for (int e = 0; e < m.experts; ++e) {
      q[rank_of_expert[e]] += plan.kept > 0 ? plan.kept_per_expert[e] / plan.kept : 0.0;
      received[e] = plan.kept_per_expert[e] * n;
    }
    std::vector<Time> by_kind_rank(kinds * n, -1);
    for (std::uint32_t g = 0; g < gpus; ++g) {
      Time& cached = by_kind_rank[topo.kind_index(g) * n + layout.rank_of_gpu[g]];
      if (cached < 0) cached = experts_time(g, received);
      mp.expert_fwd[g] = cached;
    }
    auto dispatch = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::factored(std::move(a), std::move(q)));
    mp.combine.push_back(std::make_shared<network::TrafficMatrix>(dispatch->transposed()));
    mp.dispatch.push_back(std::move(dispatch));
    return mp;
  }
  Rng rng = ctx.routing.sampler(it, layer, mb);
  for (const auto& group : layout.groups) {
    std::vector<double> bytes(static_cast<std::size_t>(n) * n, 0.0), received(m.experts, 0.0);
    for (int src = 0; src < n; ++src) {
      const auto plan = workload::apply_capacity(workload::sample_copies(popularity, copies, rng), capacity);
      mp.dropped_copies += plan.dropped;
      mp.routed_copies += plan.kept + plan.dropped;
      for (int e = 0; e < m.experts; ++e) {
        bytes[static_cast<std::size_t>(src) * n + rank_of_expert[e]] += plan.kept_per_expert[e] * m.hidden * b / chunks;
        received[e] += plan.kept_per_expert[e];
      }
    }
    for (const std::uint32_t g : group) mp.expert_fwd[g] = experts_time(g, received);
    auto dispatch = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(n, std::move(bytes)));
    mp.combine.push_back(std::make_shared<network::TrafficMatrix>(dispatch->transposed()));
    mp.dispatch.push_back(std::move(dispatch));
  }
  return mp;
}

}  // namespace moesim::strategies::ep
