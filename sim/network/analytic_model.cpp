#include "sim/network/analytic_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <numeric>

#include "sim/core/error.hpp"

namespace moesim::network {

namespace {

// Renumbers the level-l workers of the members as 0..k-1 (members are usually in ascending order,
// which makes this one linear pass).
std::uint32_t compress_workers(const cluster::Topology& topo, std::span<const std::uint32_t> members, int level,
                               std::vector<std::uint32_t>& ids) {
  ids.resize(members.size());
  std::map<std::uint32_t, std::uint32_t> seen;
  std::uint32_t last_worker = UINT32_MAX, last_id = 0, next = 0;
  for (std::size_t r = 0; r < members.size(); ++r) {
    const std::uint32_t w = topo.worker(members[r], level);
    if (w != last_worker) {
      auto [it, inserted] = seen.emplace(w, next);
      if (inserted) ++next;
      last_worker = w;
      last_id = it->second;
    }
    ids[r] = last_id;
  }
  return next;
}

}  // namespace

void accumulate(CollectiveCost& into, const CollectiveCost& phase) {
  into.duration += phase.duration;
  if (into.bytes_by_level.size() < phase.bytes_by_level.size()) into.bytes_by_level.resize(phase.bytes_by_level.size());
  for (std::size_t l = 0; l < phase.bytes_by_level.size(); ++l) into.bytes_by_level[l] += phase.bytes_by_level[l];
  into.max_bytes_sent_per_gpu += phase.max_bytes_sent_per_gpu;
}

AnalyticModel::AnalyticModel(const cluster::Topology& topology, AlphaBetaTable params)
    : topology_(topology), params_(std::move(params)) {}

CollectiveCost AnalyticModel::cost(const CollectiveOp& op, std::span<const std::uint32_t> members) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.level_count(), 0.0);
  if (members.size() <= 1) return c;
  switch (op.kind) {
    case CollectiveKind::AllToAll:
      if (!op.traffic || op.traffic->size() != members.size())
        invariant_failed("all-to-all without a traffic matrix matching its group");
      return op.algorithm == Algorithm::Hierarchical ? all_to_all_hierarchical(*op.traffic, members)
                                                     : all_to_all_direct(op.kind, *op.traffic, members);
    case CollectiveKind::P2P:
      if (members.size() != 2) invariant_failed("point-to-point needs a group of two");
      return p2p(op.bytes, members[0], members[1]);
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllReduce:
      if (op.algorithm == Algorithm::Hierarchical) return hierarchical_collective(op, members);
      if (op.algorithm == Algorithm::Direct) {
        // Every rank sends its share straight to every other rank: all-gather sends P per pair,
        // reduce-scatter S/n per pair, all-reduce both.
        const double n = static_cast<double>(members.size());
        const double per_pair = op.kind == CollectiveKind::AllGather ? op.bytes : op.bytes / n;
        const auto uniform = TrafficMatrix::uniform(static_cast<std::uint32_t>(members.size()), per_pair);
        CollectiveCost d = all_to_all_direct(op.kind, uniform, members);
        if (op.kind == CollectiveKind::AllReduce) {
          CollectiveCost total = d;
          accumulate(total, d);
          total.pairs = d.pairs;
          return total;
        }
        return d;
      }
      return ring_collective(op, members);
  }
  return c;
}

CollectiveCost AnalyticModel::all_to_all_direct(CollectiveKind kind, const TrafficMatrix& t,
                                                std::span<const std::uint32_t> members) const {
  CollectiveCost c;
  const int levels = topology_.level_count();
  c.bytes_by_level.assign(levels, 0.0);
  c.pairs = t.pairs();
  std::vector<std::uint32_t> ids;
  std::vector<double> out, in;
  double previous_cross = 0;
  Time alpha = 0, drain = 0;
  for (int l = 0; l < levels; ++l) {
    const std::uint32_t workers = compress_workers(topology_, members, l, ids);
    if (workers <= 1) continue;
    t.worker_loads(ids, workers, out, in);
    double load = 0, cross = 0;
    for (std::uint32_t w = 0; w < workers; ++w) {
      load = std::max({load, out[w], in[w]});
      cross += out[w];
    }
    // Invariant: every byte that leaves a worker enters another one.
    const double entering = std::accumulate(in.begin(), in.end(), 0.0);
    if (std::abs(entering - cross) > 1e-9 * std::max(1.0, cross))
      invariant_failed(fmt::format("all-to-all loses bytes at level {}: {} leave, {} enter", l, cross, entering));
    if (load > 0) {
      const AlphaBeta ab = params_.get(kind, l);
      alpha = std::max(alpha, ab.alpha);
      drain = std::max(drain, ab.cost(load) - ab.alpha);
    }
    if (l == levels - 1) c.max_bytes_sent_per_gpu = *std::max_element(out.begin(), out.end());
    c.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
    previous_cross = cross;
  }
  c.duration = alpha + drain;
  return c;
}

std::vector<std::vector<std::uint32_t>> AnalyticModel::local_groups(std::span<const std::uint32_t> members) const {
  std::vector<std::vector<std::uint32_t>> groups;
  if (topology_.level_count() < 2) return groups;
  const int node_level = topology_.level_count() - 2;
  std::map<std::uint32_t, std::size_t> index;
  for (std::uint32_t m : members) {
    auto [it, inserted] = index.emplace(topology_.worker(m, node_level), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(m);
  }
  for (const auto& g : groups)
    if (g.size() != groups.front().size()) return {};
  return groups;
}

CollectiveCost AnalyticModel::all_to_all_hierarchical(const TrafficMatrix& t, std::span<const std::uint32_t> members) const {
  const auto groups = local_groups(members);
  const std::uint32_t n = t.size();
  if (groups.size() <= 1 || groups.front().size() <= 1) return all_to_all_direct(CollectiveKind::AllToAll, t, members);
  constexpr std::uint32_t kMaxDenseRanks = 2048;
  if (n > kMaxDenseRanks)
    throw InfeasibleError(fmt::format("hierarchical all-to-all is modelled for groups of up to {} GPUs (this one has "
                                      "{}); use \"all_to_all\": \"direct\"",
                                      kMaxDenseRanks, n));
  // Rank bookkeeping: node and local index of each rank, rank of (node, local index).
  const std::size_t k = groups.front().size();
  std::map<std::uint32_t, std::uint32_t> rank_of_gpu;
  for (std::uint32_t r = 0; r < n; ++r) rank_of_gpu[members[r]] = r;
  std::vector<std::uint32_t> node(n), local(n);
  std::vector<std::vector<std::uint32_t>> rank_at(groups.size(), std::vector<std::uint32_t>(k));
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t i = 0; i < k; ++i) {
      const std::uint32_t r = rank_of_gpu.at(groups[g][i]);
      node[r] = static_cast<std::uint32_t>(g);
      local[r] = static_cast<std::uint32_t>(i);
      rank_at[g][i] = r;
    }
  // Phase 1 (inside the node): g hands everything for local index i to its node peer of index i.
  // Phase 2 (across nodes): that peer forwards it to the GPUs of local index i elsewhere.
  std::vector<double> p1(static_cast<std::size_t>(n) * n, 0.0), p2(static_cast<std::size_t>(n) * n, 0.0);
  for (std::uint32_t s = 0; s < n; ++s)
    for (std::uint32_t d = 0; d < n; ++d) {
      const double b = t.at(s, d);
      if (b == 0) continue;
      const std::uint32_t relay = rank_at[node[s]][local[d]];
      if (relay != s) p1[static_cast<std::size_t>(s) * n + relay] += b;
      if (relay != d) p2[static_cast<std::size_t>(relay) * n + d] += b;
    }
  CollectiveCost c = all_to_all_direct(CollectiveKind::AllToAll, TrafficMatrix::dense(n, std::move(p1)), members);
  accumulate(c, all_to_all_direct(CollectiveKind::AllToAll, TrafficMatrix::dense(n, std::move(p2)), members));
  c.pairs = t.pairs();
  return c;
}

CollectiveCost AnalyticModel::rings(CollectiveKind kind, const std::vector<std::vector<std::uint32_t>>& ring_list,
                                    double steps, double chunk) const {
  CollectiveCost c;
  const int levels = topology_.level_count();
  c.bytes_by_level.assign(levels, 0.0);
  Time alpha = 0, drain = 0;
  double previous_cross = 0;
  std::map<std::uint32_t, std::uint32_t> leaving;  // worker → ring edges leaving it
  for (int l = 0; l < levels; ++l) {
    leaving.clear();
    double crossing = 0;
    for (const auto& ring : ring_list) {
      if (ring.size() < 2) continue;
      for (std::size_t i = 0; i < ring.size(); ++i) {
        const std::uint32_t u = ring[i], v = ring[(i + 1) % ring.size()];
        const std::uint32_t wu = topology_.worker(u, l);
        if (wu == topology_.worker(v, l)) continue;
        ++leaving[wu];
        ++crossing;
      }
    }
    std::uint32_t busiest = 0;
    for (const auto& [w, count] : leaving) busiest = std::max(busiest, count);
    if (busiest > 0) {
      const AlphaBeta ab = params_.get(kind, l);
      alpha = std::max(alpha, ab.alpha);
      drain = std::max(drain, ab.cost(chunk * busiest) - ab.alpha);
    }
    const double cross = crossing * steps * chunk;
    c.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
    previous_cross = cross;
  }
  c.duration = static_cast<Time>(std::llround(steps)) * (alpha + drain);
  c.max_bytes_sent_per_gpu = steps * chunk;
  return c;
}

CollectiveCost AnalyticModel::ring_collective(const CollectiveOp& op, std::span<const std::uint32_t> members) const {
  const double n = static_cast<double>(members.size());
  std::vector<std::vector<std::uint32_t>> one{std::vector<std::uint32_t>(members.begin(), members.end())};
  CollectiveCost c;
  switch (op.kind) {
    case CollectiveKind::AllGather: c = rings(op.kind, one, n - 1, op.bytes); break;
    case CollectiveKind::ReduceScatter: c = rings(op.kind, one, n - 1, op.bytes / n); break;
    default: c = rings(op.kind, one, 2 * (n - 1), op.bytes / n); break;
  }
  c.pairs = static_cast<std::uint64_t>(n * (n - 1));
  return c;
}

CollectiveCost AnalyticModel::hierarchical_collective(const CollectiveOp& op, std::span<const std::uint32_t> members) const {
  const auto local = local_groups(members);
  if (local.size() <= 1 || local.front().size() <= 1) return ring_collective(op, members);
  const double k = static_cast<double>(local.front().size());
  const double nodes = static_cast<double>(local.size());
  // Cross rings: the GPUs of equal local index, one ring per index, all at once.
  std::vector<std::vector<std::uint32_t>> cross(local.front().size());
  for (const auto& g : local)
    for (std::size_t i = 0; i < g.size(); ++i) cross[i].push_back(g[i]);
  const double s = op.bytes;
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.level_count(), 0.0);
  switch (op.kind) {
    case CollectiveKind::AllReduce:
      accumulate(c, rings(CollectiveKind::ReduceScatter, local, k - 1, s / k));
      accumulate(c, rings(CollectiveKind::AllReduce, cross, 2 * (nodes - 1), s / (k * nodes)));
      accumulate(c, rings(CollectiveKind::AllGather, local, k - 1, s / k));
      break;
    case CollectiveKind::AllGather:
      accumulate(c, rings(CollectiveKind::AllGather, cross, nodes - 1, s));
      accumulate(c, rings(CollectiveKind::AllGather, local, k - 1, s * nodes));
      break;
    default:  // reduce-scatter
      accumulate(c, rings(CollectiveKind::ReduceScatter, local, k - 1, s / k));
      accumulate(c, rings(CollectiveKind::ReduceScatter, cross, nodes - 1, s / (k * nodes)));
      break;
  }
  const double n = static_cast<double>(members.size());
  c.pairs = static_cast<std::uint64_t>(n * (n - 1));
  return c;
}

CollectiveCost AnalyticModel::p2p(double bytes, std::uint32_t from, std::uint32_t to) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.level_count(), 0.0);
  const int l = topology_.first_differing_level(from, to);
  if (l < 0 || bytes <= 0) return c;
  double beta = 0;
  for (int k = l; k < topology_.level_count(); ++k) beta = std::max(beta, params_.get(CollectiveKind::P2P, k).beta);
  c.duration = params_.get(CollectiveKind::P2P, l).alpha + static_cast<Time>(std::llround(bytes * beta));
  c.bytes_by_level[l] = bytes;
  c.pairs = 1;
  c.max_bytes_sent_per_gpu = bytes;
  return c;
}

}  // namespace moesim::network
