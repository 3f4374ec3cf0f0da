#include "sim/strategies/ep/ep_routing.hpp"

#include <cmath>

#include "sim/strategies/ep/ep_costs.hpp"

namespace moesim::strategies::ep {

EpLayerRouting route_layer(const StrategyContext& ctx, const EpLayout& layout, int it, int layer, int mb) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const auto& topo = ctx.topology;
  const std::uint32_t gpus = topo.gpu_count();
  const int n = layout.ep_size, groups = layout.groups, per_rank = layout.experts_per_rank, chunks = layout.chunks;
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
    const int r = static_cast<int>(g) % n;
    for (int e = r * per_rank; e < (r + 1) * per_rank; ++e)
      total += ffn_time(cm_of(g), m, received[e] / chunks, m.ffn_hidden);
    return total;
  };
  if (!sampled) {
    const auto plan = workload::plan_dispatch(popularity, t.tokens_per_microbatch(), m.top_k, t.capacity_factor);
    mp.dropped_copies += plan.dropped * gpus;
    mp.routed_copies += (plan.kept + plan.dropped) * gpus;
    std::vector<double> a(n, plan.kept * m.hidden * b / chunks), q(n, 0.0), received(m.experts);
    for (int e = 0; e < m.experts; ++e) {
      q[e / per_rank] += plan.kept > 0 ? plan.kept_per_expert[e] / plan.kept : 0.0;
      received[e] = plan.kept_per_expert[e] * n;
    }
    std::vector<Time> by_kind_rank(kinds * n, -1);
    for (std::uint32_t g = 0; g < gpus; ++g) {
      Time& cached = by_kind_rank[topo.kind_index(g) * n + g % n];
      if (cached < 0) cached = experts_time(g, received);
      mp.expert_fwd[g] = cached;
    }
    auto dispatch = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::factored(std::move(a), std::move(q)));
    mp.combine.push_back(std::make_shared<network::TrafficMatrix>(dispatch->transposed()));
    mp.dispatch.push_back(std::move(dispatch));
    return mp;
  }
  Rng rng = ctx.routing.sampler(it, layer, mb);
  for (int gi = 0; gi < groups; ++gi) {
    std::vector<double> bytes(static_cast<std::size_t>(n) * n, 0.0), received(m.experts, 0.0);
    for (int src = 0; src < n; ++src) {
      const auto plan = workload::apply_capacity(workload::sample_copies(popularity, copies, rng), capacity);
      mp.dropped_copies += plan.dropped;
      mp.routed_copies += plan.kept + plan.dropped;
      for (int e = 0; e < m.experts; ++e) {
        bytes[static_cast<std::size_t>(src) * n + e / per_rank] += plan.kept_per_expert[e] * m.hidden * b / chunks;
        received[e] += plan.kept_per_expert[e];
      }
    }
    for (int r = 0; r < n; ++r) {
      const auto g = static_cast<std::uint32_t>(gi * n + r);
      mp.expert_fwd[g] = experts_time(g, received);
    }
    auto dispatch = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(n, std::move(bytes)));
    mp.combine.push_back(std::make_shared<network::TrafficMatrix>(dispatch->transposed()));
    mp.dispatch.push_back(std::move(dispatch));
  }
  return mp;
}

}  // namespace moesim::strategies::ep
