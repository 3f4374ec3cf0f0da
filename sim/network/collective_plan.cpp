#include <cmath>
#include "sim/network/collective_plan.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <unordered_map>

#include "sim/core/error.hpp"

namespace moesim::network {

namespace {
// Renumbers the keys of `members` (key(m)) as 0..k−1 in order of first appearance; returns k.
template <typename Key>
std::uint32_t compress(std::span<const std::uint32_t> members, Key key, std::vector<std::uint32_t>& ids,
                       std::vector<std::uint32_t>* global) {
  ids.resize(members.size());
  if (global) global->clear();
  // Members in ascending order (EP, DP and node groups all are) need no lookup: a new key is a new
  // id. Otherwise a hash map remembers the keys seen.
  const bool ascending = std::is_sorted(members.begin(), members.end());
  std::unordered_map<std::uint32_t, std::uint32_t> seen;
  std::uint32_t last_key = UINT32_MAX, last_id = 0, next = 0;
  for (std::size_t r = 0; r < members.size(); ++r) {
    const std::uint32_t w = key(members[r]);
    if (w != last_key) {
      bool fresh = true;
      if (!ascending) {
        auto [it, inserted] = seen.emplace(w, next);
        fresh = inserted;
        last_id = it->second;
      }
      if (fresh) {
        last_id = next++;
        if (global) global->push_back(w);
      }
      last_key = w;
    }
    ids[r] = last_id;
  }
  return next;
}
}  // namespace

std::uint32_t compress_workers(const cluster::Topology& topo, std::span<const std::uint32_t> members, int tier,
                               std::vector<std::uint32_t>& ids, std::vector<std::uint32_t>* global) {
  return compress(members, [&](std::uint32_t m) { return topo.tier_worker(m, tier); }, ids, global);
}

RankTiers rank_tiers(const cluster::Topology& topo, std::span<const std::uint32_t> members) {
  RankTiers out;
  out.worker.resize(topo.tier_count());
  for (int t = 0; t < topo.tier_count(); ++t) out.workers.push_back(compress_workers(topo, members, t, out.worker[t]));
  return out;
}

std::uint32_t compress_ports(const cluster::Topology& topo, std::span<const std::uint32_t> members, int tier,
                             std::vector<std::uint32_t>& ids, std::vector<std::uint32_t>* global) {
  const std::uint32_t ports = topo.tiers()[tier].ports;
  return compress(members, [&](std::uint32_t m) { return topo.tier_worker(m, tier) * ports + topo.port(m, tier); }, ids,
                  global);
}

std::uint32_t compress_hosts(const cluster::Topology& topo, std::span<const std::uint32_t> members,
                             std::vector<std::uint32_t>& ids) {
  return compress(members, [&](std::uint32_t m) { return topo.host_of(m); }, ids, nullptr);
}

std::vector<std::vector<std::uint32_t>> local_groups(std::span<const std::uint32_t> members,
                                                     const cluster::Topology& topo) {
  std::vector<std::vector<std::uint32_t>> groups;
  if (topo.level_count() < 2) return groups;
  const int node_level = topo.level_count() - 2;
  std::map<std::uint32_t, std::size_t> index;
  for (std::uint32_t m : members) {
    auto [it, inserted] = index.emplace(topo.worker(m, node_level), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(m);
  }
  for (const auto& g : groups)
    if (g.size() != groups.front().size()) return {};
  return groups;
}

namespace {

// Each rank's node and index in it (ranks are positions in `members`), and the rank at each.
struct NodeIndex {
  std::vector<std::uint32_t> node, local;
  std::vector<std::vector<std::uint32_t>> rank_at;  // [node][local index]
};
NodeIndex node_index(std::span<const std::uint32_t> members, const std::vector<std::vector<std::uint32_t>>& groups) {
  const auto n = static_cast<std::uint32_t>(members.size());
  const std::size_t k = groups.front().size();
  std::unordered_map<std::uint32_t, std::uint32_t> rank_of_gpu;
  for (std::uint32_t r = 0; r < n; ++r) rank_of_gpu[members[r]] = r;
  NodeIndex out{std::vector<std::uint32_t>(n), std::vector<std::uint32_t>(n),
                std::vector<std::vector<std::uint32_t>>(groups.size(), std::vector<std::uint32_t>(k))};
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t i = 0; i < k; ++i) {
      const std::uint32_t r = rank_of_gpu.at(groups[g][i]);
      out.node[r] = static_cast<std::uint32_t>(g);
      out.local[r] = static_cast<std::uint32_t>(i);
      out.rank_at[g][i] = r;
    }
  return out;
}

// Phase matrices of the 2-D all-to-all: g hands everything for local index i to its node peer of
// index i, which forwards it to the GPUs of local index i in the other nodes. Pair by pair where
// the matrix is dense (or small); in tiered form from the tiers' sums above
// network::kMaxDenseRanks (TrafficMatrix::relayed).
std::pair<TrafficMatrix, TrafficMatrix> hierarchical_matrices(const TrafficMatrix& t, std::span<const std::uint32_t> members,
                                                              const std::vector<std::vector<std::uint32_t>>& groups,
                                                              const cluster::Topology& topo) {
  const std::uint32_t n = t.size();
  const NodeIndex at = node_index(members, groups);
  if (t.is_tiered() || n > kMaxDenseRanks) {
    const TrafficMatrix tiered = t.is_tiered() ? t : t.as_tiered(std::make_shared<RankTiers>(rank_tiers(topo, members)));
    return tiered.relayed(at.node, at.local, at.rank_at);
  }
  std::vector<double> p1(static_cast<std::size_t>(n) * n, 0.0), p2(static_cast<std::size_t>(n) * n, 0.0);
  for (std::uint32_t s = 0; s < n; ++s)
    for (std::uint32_t d = 0; d < n; ++d) {
      const double b = t.at(s, d);
      if (b == 0) continue;
      const std::uint32_t relay = at.rank_at[at.node[s]][at.local[d]];
      if (relay != s) p1[static_cast<std::size_t>(s) * n + relay] += b;
      if (relay != d) p2[static_cast<std::size_t>(relay) * n + d] += b;
    }
  return {TrafficMatrix::dense(n, std::move(p1)), TrafficMatrix::dense(n, std::move(p2))};
}

CollectivePhase exchange(CollectiveKind kind, TrafficMatrix t) {
  return {kind, ExchangePhase{std::make_shared<TrafficMatrix>(std::move(t))}};
}

CollectivePhase ring(CollectiveKind kind, std::vector<std::vector<std::uint32_t>> rings, double steps, double chunk) {
  return {kind, RingPhase{std::move(rings), steps, chunk}};
}

}  // namespace

int nvls_tier(std::span<const std::uint32_t> members, const cluster::Topology& topo, const AlphaBetaTable& params) {
  if (members.size() < 2) return -1;
  const int t = topo.tier_count() - 1;  // the GPUs' own switch
  if (!topo.fabric(t).switched() || !params.in_switch(t) || params.overridden(CollectiveKind::AllReduce, t)) return -1;
  const std::uint32_t parent = topo.tier_worker(members.front(), t) / topo.tiers()[t].count;
  for (std::uint32_t m : members)
    if (topo.tier_worker(m, t) / topo.tiers()[t].count != parent) return -1;
  return t;
}

std::vector<CollectivePhase> plan_collective(const CollectiveOp& op, std::span<const std::uint32_t> members,
                                             const cluster::Topology& topo, const AlphaBetaTable& params) {
  std::vector<CollectivePhase> phases;
  if (op.kind == CollectiveKind::HostCopy) {
    phases.push_back({op.kind, HostCopyPhase{members.front(), op.bytes, op.to_host}});
    return phases;
  }
  if (members.size() <= 1) return phases;
  const double n = static_cast<double>(members.size());
  const auto count = static_cast<std::uint32_t>(members.size());
  switch (op.kind) {
    case CollectiveKind::AllToAll: {
      if (!op.traffic || op.traffic->size() != members.size())
        invariant_failed("all-to-all without a traffic matrix matching its group");
      if (!op.stages.empty()) {  // the caller's stages, pipelined
        for (const TrafficPtr& stage : op.stages) {
          if (!stage || stage->size() != members.size()) invariant_failed("all-to-all stage not matching its group");
          phases.push_back({op.kind, ExchangePhase{stage}, true});
        }
        phases.back().overlaps_next = false;
        return phases;
      }
      const auto groups = op.algorithm == Algorithm::Hierarchical ? local_groups(members, topo)
                                                                  : std::vector<std::vector<std::uint32_t>>{};
      if (groups.size() <= 1 || groups.front().size() <= 1) {
        phases.push_back({op.kind, ExchangePhase{op.traffic}});
        return phases;
      }
      auto [p1, p2] = hierarchical_matrices(*op.traffic, members, groups, topo);
      phases.push_back(exchange(op.kind, std::move(p1)));
      phases.push_back(exchange(op.kind, std::move(p2)));
      return phases;
    }
    case CollectiveKind::P2P:
      if (members.size() != 2) invariant_failed("point-to-point needs a group of two");
      phases.push_back({op.kind, TransferPhase{members[0], members[1], op.bytes}});
      return phases;
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
      if (op.traffic) {  // uneven shares: one direct exchange
        if (op.traffic->size() != members.size()) invariant_failed("uneven collective without a traffic matrix matching its group");
        phases.push_back({op.kind, ExchangePhase{op.traffic}});
        return phases;
      }
      break;
    case CollectiveKind::AllReduce:
      break;
    case CollectiveKind::HostCopy:
    case CollectiveKind::Count: invariant_failed("not a collective over GPUs");
  }
  const double s = op.bytes;
  if (op.kind == CollectiveKind::AllReduce && op.algorithm == Algorithm::Nvls) {
    const int t = nvls_tier(members, topo, params);
    if (t >= 0) {
      phases.push_back({op.kind, InSwitchPhase{{std::vector<std::uint32_t>(members.begin(), members.end())}, t, s}});
      return phases;
    }
  }
  if (op.algorithm == Algorithm::Direct) {
    const double per_pair = op.kind == CollectiveKind::AllGather ? s : s / n;
    if (op.kind == CollectiveKind::AllReduce) {
      phases.push_back(exchange(CollectiveKind::ReduceScatter, TrafficMatrix::uniform(count, per_pair)));
      phases.push_back(exchange(CollectiveKind::AllGather, TrafficMatrix::uniform(count, per_pair)));
    } else {
      phases.push_back(exchange(op.kind, TrafficMatrix::uniform(count, per_pair)));
    }
    return phases;
  }
  const bool tree = op.algorithm == Algorithm::Tree && op.kind == CollectiveKind::AllReduce;
  // A tree all-reduce over `count` ranks: the ring's 2(count−1)/count·bytes per rank, in 2⌈log2 count⌉
  // latency steps (a pipelined reduce up and broadcast down).
  const auto tree_phase = [&](const std::vector<std::vector<std::uint32_t>>& rings, double count, double bytes) {
    const double steps = 2 * std::ceil(std::log2(count));
    return ring(CollectiveKind::AllReduce, rings, steps, 2 * (count - 1) / count * bytes / steps);
  };
  const auto local = op.algorithm == Algorithm::Hierarchical || op.algorithm == Algorithm::Tree
                         ? local_groups(members, topo)
                         : std::vector<std::vector<std::uint32_t>>{};
  if (local.size() <= 1 || local.front().size() <= 1) {
    std::vector<std::vector<std::uint32_t>> one{std::vector<std::uint32_t>(members.begin(), members.end())};
    switch (op.kind) {
      case CollectiveKind::AllGather: phases.push_back(ring(op.kind, one, n - 1, s)); break;
      case CollectiveKind::ReduceScatter: phases.push_back(ring(op.kind, one, n - 1, s / n)); break;
      default: phases.push_back(tree ? tree_phase(one, n, s) : ring(op.kind, one, 2 * (n - 1), s / n)); break;
    }
    return phases;
  }
  // Hierarchical: rings inside each node, and across nodes one ring per local index, all at once.
  const double k = static_cast<double>(local.front().size());
  const double nodes = static_cast<double>(local.size());
  std::vector<std::vector<std::uint32_t>> cross(local.front().size());
  for (const auto& g : local)
    for (std::size_t i = 0; i < g.size(); ++i) cross[i].push_back(g[i]);
  switch (op.kind) {
    case CollectiveKind::AllReduce: {
      // Pipelined: the node's reduce-scatter and all-gather (one ring all-reduce's bytes, or NVLS
      // where the node's switch has it) drain together with the all-reduce across nodes.
      const int t = nvls_tier(local.front(), topo, params);
      if (t >= 0) phases.push_back({op.kind, InSwitchPhase{local, t, s, static_cast<int>(local.size())}});
      else phases.push_back(ring(CollectiveKind::AllReduce, local, 2 * (k - 1), s / k));
      phases.back().overlaps_next = true;
      phases.push_back(tree ? tree_phase(cross, nodes, s / k)
                            : ring(CollectiveKind::AllReduce, cross, 2 * (nodes - 1), s / (k * nodes)));
      break;
    }
    case CollectiveKind::AllGather:
      phases.push_back(ring(CollectiveKind::AllGather, cross, nodes - 1, s));
      phases.push_back(ring(CollectiveKind::AllGather, local, k - 1, s * nodes));
      break;
    default:
      phases.push_back(ring(CollectiveKind::ReduceScatter, local, k - 1, s / k));
      phases.push_back(ring(CollectiveKind::ReduceScatter, cross, nodes - 1, s / (k * nodes)));
      break;
  }
  return phases;
}

std::vector<TierLoad> ring_loads(const cluster::Topology& topo, const std::vector<std::vector<std::uint32_t>>& rings,
                                 double chunk) {
  std::vector<TierLoad> loads;
  std::size_t edges = 0;
  std::vector<std::size_t> first_crossed(topo.tier_count(), 0);
  for (const auto& ring : rings)
    for (std::size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
      ++edges;
      const int l = topo.first_differing_tier(ring[i], ring[(i + 1) % ring.size()]);
      if (l >= 0) ++first_crossed[l];
    }
  std::map<std::uint32_t, std::uint32_t> leaving;  // worker → ring edges leaving it
  for (int l = 0; l < topo.tier_count(); ++l) {
    leaving.clear();
    for (const auto& ring : rings)
      for (std::size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
        const std::uint32_t wu = topo.tier_worker(ring[i], l);
        if (wu != topo.tier_worker(ring[(i + 1) % ring.size()], l)) ++leaving[wu];
      }
    const auto ports = ring_ports(topo, rings, l);
    double busiest = 0;
    for (const auto& [w, count] : leaving) {
      // A port drains at 1/ports of the worker's bandwidth; the edges spread over the ports used.
      const double spread = ports.empty() ? 1.0
                                          : static_cast<double>(topo.tiers()[l].ports) / static_cast<double>(ports[w].size());
      busiest = std::max(busiest, count * spread);
    }
    if (busiest > 0) loads.push_back({l, chunk * busiest, edges ? static_cast<double>(first_crossed[l]) / edges : 0.0, 0.0});
  }
  return loads;
}

std::vector<std::vector<std::uint32_t>> ring_ports(const cluster::Topology& topo,
                                                   const std::vector<std::vector<std::uint32_t>>& rings, int tier) {
  std::vector<std::vector<std::uint32_t>> used;
  if (topo.tiers()[tier].ports <= 1) return used;
  used.resize(topo.tier_workers(tier));
  for (const auto& ring : rings)
    for (std::uint32_t g : ring) {
      if (ring.size() < 2) break;  // a ring of one GPU sends nothing
      auto& ports = used[topo.tier_worker(g, tier)];
      const std::uint32_t p = topo.port(g, tier);
      if (std::find(ports.begin(), ports.end(), p) == ports.end()) ports.push_back(p);
    }
  return used;
}

std::vector<TierLoad> transfer_loads(const cluster::Topology& topo, std::uint32_t from, std::uint32_t to, double bytes) {
  std::vector<TierLoad> loads;
  const int top = topo.first_differing_tier(from, to);
  if (top < 0) return loads;
  for (int k = top; k < topo.tier_count(); ++k) loads.push_back({k, bytes * topo.tiers()[k].ports, k == top ? 1.0 : 0.0, 0.0});
  return loads;
}

std::vector<double> peers_by_tier(const cluster::Topology& topo, std::span<const std::uint32_t> members) {
  std::vector<double> peers(topo.tier_count(), 0.0);
  std::vector<std::uint32_t> ids, parent_ids(members.size(), 0);
  std::vector<std::uint32_t> in_worker, in_parent;
  std::uint32_t parents = 1;
  for (int l = 0; l < topo.tier_count(); ++l) {
    const std::uint32_t workers = compress_workers(topo, members, l, ids);
    in_worker.assign(workers, 0);
    in_parent.assign(parents, 0);
    for (std::size_t r = 0; r < members.size(); ++r) {
      ++in_worker[ids[r]];
      ++in_parent[parent_ids[r]];
    }
    for (std::size_t r = 0; r < members.size(); ++r)
      peers[l] = std::max(peers[l], static_cast<double>(in_parent[parent_ids[r]] - in_worker[ids[r]]));
    parent_ids = ids;
    parents = workers;
  }
  return peers;
}

std::vector<double> ring_bytes_by_tier(const cluster::Topology& topo, const std::vector<std::vector<std::uint32_t>>& rings,
                                       double bytes) {
  std::vector<double> out(topo.tier_count(), 0.0);
  for (const auto& ring : rings)
    for (std::size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
      const int l = topo.first_differing_tier(ring[i], ring[(i + 1) % ring.size()]);
      if (l >= 0) out[l] += bytes;
    }
  return out;
}

}  // namespace moesim::network
