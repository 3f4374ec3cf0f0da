#include "sim/network/analytic_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <numeric>

#include "sim/core/error.hpp"
#include "sim/network/collective_plan.hpp"

namespace moesim::network {


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
  for (const CollectivePhase& phase : plan_collective(op, members, topology_)) {
    if (const auto* e = std::get_if<ExchangePhase>(&phase.work)) accumulate(c, exchange(phase.kind, *e->traffic, members));
    if (const auto* r = std::get_if<RingPhase>(&phase.work)) accumulate(c, rings(phase.kind, r->rings, r->steps, r->chunk));
    if (const auto* t = std::get_if<TransferPhase>(&phase.work)) accumulate(c, p2p(t->bytes, t->from, t->to));
  }
  const double n = static_cast<double>(members.size());
  c.pairs = op.kind == CollectiveKind::AllToAll ? op.traffic->pairs()
            : op.kind == CollectiveKind::P2P    ? (op.bytes > 0 ? 1 : 0)
                                                : static_cast<std::uint64_t>(n * (n - 1));
  return c;
}

CollectiveCost AnalyticModel::exchange(CollectiveKind kind, const TrafficMatrix& t,
                                                std::span<const std::uint32_t> members) const {
  CollectiveCost c;
  const int levels = topology_.level_count();
  c.bytes_by_level.assign(levels, 0.0);
  std::vector<std::uint32_t> ids;
  std::vector<double> out, in;
  double previous_cross = 0;
  Time alpha = 0, drain = 0;
  bool measured = false;  // the coarsest level crossed was calibrated for this kind: it alone costs the phase
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
    if (load > 0 && !measured) {
      const AlphaBeta ab = params_.get(kind, l, load);
      alpha = std::max(alpha, ab.alpha);
      drain = std::max(drain, ab.cost(load) - ab.alpha);
      measured = params_.overridden(kind, l);
    }
    if (l == levels - 1) c.max_bytes_sent_per_gpu = *std::max_element(out.begin(), out.end());
    c.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
    previous_cross = cross;
  }
  c.duration = alpha + drain;
  return c;
}

CollectiveCost AnalyticModel::rings(CollectiveKind kind, const std::vector<std::vector<std::uint32_t>>& ring_list,
                                    double steps, double chunk) const {
  CollectiveCost c;
  const int levels = topology_.level_count();
  c.bytes_by_level.assign(levels, 0.0);
  Time alpha = 0, drain = 0;
  bool measured = false;  // as in exchange()
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
    if (busiest > 0 && !measured) {
      const AlphaBeta ab = params_.get(kind, l, chunk * busiest);
      alpha = std::max(alpha, ab.alpha);
      drain = std::max(drain, ab.cost(chunk * busiest) - ab.alpha);
      measured = params_.overridden(kind, l);
    }
    const double cross = crossing * steps * chunk;
    c.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
    previous_cross = cross;
  }
  c.duration = static_cast<Time>(std::llround(steps)) * (alpha + drain);
  c.max_bytes_sent_per_gpu = steps * chunk;
  return c;
}

CollectiveCost AnalyticModel::p2p(double bytes, std::uint32_t from, std::uint32_t to) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.level_count(), 0.0);
  const int l = topology_.first_differing_level(from, to);
  if (l < 0 || bytes <= 0) return c;
  double beta = params_.get(CollectiveKind::P2P, l, bytes).beta;
  if (!params_.overridden(CollectiveKind::P2P, l))  // a measured send_recv already includes the finer levels
    for (int k = l + 1; k < topology_.level_count(); ++k) beta = std::max(beta, params_.get(CollectiveKind::P2P, k, bytes).beta);
  c.duration = params_.get(CollectiveKind::P2P, l, bytes).alpha + static_cast<Time>(std::llround(bytes * beta));
  c.bytes_by_level[l] = bytes;
  c.pairs = 1;
  c.max_bytes_sent_per_gpu = bytes;
  return c;
}

}  // namespace moesim::network
