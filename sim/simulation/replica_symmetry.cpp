#include "sim/simulation/replica_symmetry.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::simulation {

std::uint32_t ReplicaSymmetry::collective_copies(std::size_t members, std::size_t simulated) const {
  const std::uint64_t stood_for = static_cast<std::uint64_t>(copies) * simulated;
  if (members == 0 || stood_for % members != 0)
    invariant_failed(fmt::format("a collective of {} GPUs, {} simulated, stands for no whole number of the {} replicas'",
                                 members, simulated, copies));
  return static_cast<std::uint32_t>(stood_for / members);
}

std::uint32_t ReplicaSymmetry::image(std::uint32_t gpu, std::uint32_t v) const {
  const std::uint32_t base = gpu - gpu % stage_size, offset = gpu % stage_size;
  std::uint32_t u = offset / unit, moved = 0, place = 1;
  for (const std::uint32_t r : radix) {  // digit by digit, each cycled alone
    moved += (u % r + v % r) % r * place;
    u /= r, v /= r, place *= r;
  }
  return base + moved * unit + offset % unit;
}

std::vector<std::vector<std::uint32_t>> ReplicaSymmetry::images(const std::vector<std::uint32_t>& members,
                                                                std::uint32_t count) const {
  std::vector<std::vector<std::uint32_t>> out;
  std::set<std::vector<std::uint32_t>> seen;  // as sets
  auto sorted = members;
  std::sort(sorted.begin(), sorted.end());
  seen.insert(sorted);
  for (std::uint32_t v = 1; v < copies && out.size() + 1 < count; ++v) {
    std::vector<std::uint32_t> g(members.size());
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = image(members[i], v);
    sorted = g;
    std::sort(sorted.begin(), sorted.end());
    if (seen.insert(sorted).second) out.push_back(std::move(g));
  }
  if (out.size() + 1 != count)
    invariant_failed(fmt::format("a collective of {} GPUs has {} images of the {} it stands for", members.size(), out.size() + 1, count));
  return out;
}

namespace {

using Shift = std::vector<std::uint32_t>;  // φ, per GPU

// A family the plan runs collectives over, and whether φ must keep each rank's position
// (`exact`) or may rotate a ring's.
struct FamilyUse {
  const parallel::GroupFamily* family;
  bool exact;
  auto operator<=>(const FamilyUse&) const = default;
};

void use(std::set<FamilyUse>& uses, const parallel::FamilyPtr& f, bool exact) {
  if (f) uses.insert({f.get(), exact});
}
// Ranks differ where bytes differ per pair or per rank: all-to-alls, point-to-point, uneven
// gathers (a traffic matrix).
void use(std::set<FamilyUse>& uses, const parallel::CollectiveStep& s) {
  const bool exact = s.traffic || s.kind == network::CollectiveKind::AllToAll || s.kind == network::CollectiveKind::P2P;
  use(uses, s.groups, exact);
}

std::set<FamilyUse> families_of(const parallel::IterationPlan& p) {
  std::set<FamilyUse> uses;
  use(uses, p.tensor_parallel.groups, false);
  use(uses, p.context_parallel.groups, true);
  use(uses, p.pipeline.groups, true);
  use(uses, p.gradients.dense_groups, false);
  for (const auto& lp : p.moe) {
    if (!lp) continue;
    use(uses, lp->expert_tensor_parallel, true);
    for (const auto& steps : lp->at)
      for (const auto& s : steps) use(uses, s);
    for (const auto& s : lp->expert_gradients) use(uses, s);
    for (const auto& s : lp->expert_param_gather) use(uses, s);
    if (lp->fetch)
      for (const auto& s : lp->fetch->steps) use(uses, s);
    if (lp->phased_gather) use(uses, lp->phased_gather->groups, true);
  }
  return uses;
}

// Whether φ maps every group of `f` onto a group of `f`: rank for rank when `exact`; else up to a
// rotation, or onto itself in any order (one collective, the same in the reduced run as in the
// full one, whose members all end together).
bool maps_onto_itself(const std::vector<std::vector<std::uint32_t>>& groups, const Shift& phi, bool exact) {
  constexpr std::uint64_t kUnset = UINT64_MAX;
  std::vector<std::uint64_t> where(phi.size(), kUnset);  // GPU → (group << 32 | position), its first
  for (std::size_t i = 0; i < groups.size(); ++i)
    for (std::size_t r = 0; r < groups[i].size(); ++r)
      if (std::uint64_t& w = where[groups[i][r]]; w == kUnset) w = static_cast<std::uint64_t>(i) << 32 | r;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& g = groups[i];
    if (g.empty()) continue;
    const std::uint64_t w = where[phi[g[0]]];
    if (w == kUnset) return false;
    if (!exact && (w >> 32) == i &&
        std::all_of(g.begin(), g.end(), [&](std::uint32_t m) { return where[phi[m]] >> 32 == i && where[phi[m]] != kUnset; }))
      continue;
    const auto& image = groups[w >> 32];
    const std::size_t at = w & 0xffffffffu;
    if (image.size() != g.size() || (exact && at != 0)) return false;
    for (std::size_t r = 0; r < g.size(); ++r)
      if (image[(at + r) % g.size()] != phi[g[r]]) return false;
  }
  return true;
}

// Whether `of(φ(g))` is a one-to-one function of `of(g)` over the GPUs: φ maps the things `of`
// names (a tier's workers, hosts, PCIe switches) onto each other.
template <typename Of>
bool permutes(const Shift& phi, std::uint32_t count, Of of) {
  std::vector<std::int64_t> forward(count, -1), backward(count, -1);
  for (std::uint32_t g = 0; g < phi.size(); ++g) {
    const std::uint32_t a = of(g), b = of(phi[g]);
    if (forward[a] < 0) {
      if (backward[b] >= 0) return false;
      forward[a] = b, backward[b] = a;
    } else if (forward[a] != b) {
      return false;
    }
  }
  return true;
}

// Why φ is not a symmetry of the cluster (empty: it is).
std::string cluster_breaks(const cluster::Topology& topo, const Shift& phi) {
  for (int t = 0; t < topo.tier_count(); ++t) {
    if (!permutes(phi, topo.tier_workers(t), [&](std::uint32_t g) { return topo.tier_worker(g, t); }))
      return fmt::format("the replicas sit differently on tier {} of the cluster", t);
    // One renumbering of the ports for every worker (rails stay rails).
    if (!permutes(phi, topo.tiers()[t].ports, [&](std::uint32_t g) { return topo.port(g, t); }))
      return fmt::format("the replicas use the ports of tier {} differently", t);
  }
  for (std::uint32_t g = 0; g < phi.size(); ++g)
    if (topo.kind_index(g) != topo.kind_index(phi[g])) return "the replicas run on different GPU kinds";
  if (topo.hosts()) {
    if (!permutes(phi, topo.host_count(), [&](std::uint32_t g) { return topo.host_of(g); }))
      return "the replicas sit differently on the hosts";
    if (!permutes(phi, topo.pcie_switch_count(), [&](std::uint32_t g) { return topo.pcie_switch_of(g); }))
      return "the replicas sit differently on the hosts' PCIe switches";
  }
  return {};
}

template <typename T>
bool invariant(const std::vector<T>& per_gpu, const Shift& phi) {
  if (per_gpu.empty()) return true;
  for (std::uint32_t g = 0; g < phi.size(); ++g)
    if (per_gpu[g] != per_gpu[phi[g]]) return false;
  return true;
}

bool same_placement(const std::shared_ptr<const parallel::ReplicaTable>& a, const std::shared_ptr<const parallel::ReplicaTable>& b) {
  if (a == b) return true;
  if (!a || !b || a->of_expert.size() != b->of_expert.size()) return false;
  for (std::size_t e = 0; e < a->of_expert.size(); ++e) {
    const auto &x = a->of_expert[e], &y = b->of_expert[e];
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].rank != y[i].rank || x[i].share != y[i].share) return false;
  }
  return true;
}

// Why φ is not a symmetry of the plan (empty: it is).
std::string plan_breaks(const parallel::IterationPlan& p, const Shift& phi, const std::set<FamilyUse>& uses) {
  if (!invariant(p.roles, phi)) return "the replicas' GPUs have different roles";
  if (!invariant(p.optimizer_params, phi) || !invariant(p.gradient_buffer_params, phi))
    return "the replicas' GPUs hold different parameters";
  for (const auto& u : uses)
    if (!maps_onto_itself(u.family->groups, phi, u.exact)) return "the replicas' collective groups differ";
  std::set<const parallel::MoeLayerPlan*> seen;  // layers share their plans
  for (const auto& lp : p.moe) {
    if (!lp || !seen.insert(lp.get()).second) continue;
    std::vector<std::vector<std::uint32_t>> groups;
    for (const auto& d : lp->dispatch) groups.push_back(d.gpus);
    if (!maps_onto_itself(groups, phi, true)) return "the replicas' all-to-all groups differ";
    for (const auto& d : lp->dispatch)
      if (!same_placement(d.replicas, lp->dispatch.front().replicas))
        return "the all-to-all groups place their experts differently";
  }
  return {};
}

// The shifts that carry unit 0 of a stage of `w` GPUs to every other unit of `u` GPUs, digit by
// digit: the units of each block of the cluster (a tier's worker, a host, a PCIe switch) cycled
// inside it, and the blocks cycled inside the next larger one, up to the stage. Each shift keeps
// the blocks whole, so a cluster of identical blocks is symmetric under all of them; together they
// take unit 0 to each unit once (the units numbered in mixed radix, each digit cycled alone).
std::vector<std::uint32_t> block_chain(const cluster::Topology& topo, std::uint32_t w, std::uint32_t u) {
  std::set<std::uint32_t> sizes{w};
  for (int t = 0; t < topo.tier_count(); ++t) sizes.insert(topo.gpus_per_tier_worker(t));
  if (const auto& h = topo.hosts()) sizes.insert({h->gpus, h->gpus / std::max<std::uint32_t>(1, h->pcie_switches)});
  std::vector<std::uint32_t> chain;
  std::uint32_t step = u;  // what one shift moves by: the block below
  for (const std::uint32_t block : sizes) {
    if (block <= step || block > w || block % step != 0 || w % block != 0) continue;
    chain.push_back(block);
    step = block;
  }
  return chain;
}

std::vector<Shift> generators(const std::vector<std::uint32_t>& chain, std::uint32_t n, std::uint32_t u) {
  std::vector<Shift> out;
  std::uint32_t step = u;
  for (const std::uint32_t block : chain) {
    Shift& phi = out.emplace_back(n);
    for (std::uint32_t g = 0; g < n; ++g) phi[g] = g - g % block + (g % block + step) % block;
    step = block;
  }
  return out;
}

}  // namespace

ReplicaSymmetry find_replica_symmetry(const cluster::Topology& topo, const parallel::IterationPlan& p) {
  ReplicaSymmetry out;
  const std::uint32_t n = topo.gpu_count();
  const auto& stages = p.pipeline.stage_gpus;
  const std::uint32_t w = stages.empty() ? 0 : static_cast<std::uint32_t>(stages.front().size());
  for (std::size_t s = 0; s < stages.size(); ++s)
    for (std::uint32_t i = 0; i < stages[s].size(); ++i)
      if (stages[s].size() != w || stages[s][i] != s * w + i) {
        out.full_because = "its pipeline stages are not consecutive GPUs";
        return out;
      }
  if (w == 0 || static_cast<std::uint64_t>(w) * stages.size() != n) {
    out.full_because = "its pipeline stages do not hold every GPU";
    return out;
  }
  // The smallest unit that keeps tensor/context groups and expert/expert-tensor groups whole.
  std::uint32_t unit = static_cast<std::uint32_t>(p.tensor_parallel.size * p.context_parallel.size);
  for (const auto& lp : p.moe) {
    if (!lp || lp->dispatch.empty()) continue;
    std::uint32_t span = static_cast<std::uint32_t>(lp->dispatch.front().gpus.size());
    if (lp->expert_tensor_parallel && !lp->expert_tensor_parallel->groups.empty())
      span *= static_cast<std::uint32_t>(lp->expert_tensor_parallel->groups.front().size());
    unit = std::lcm(unit, span);
  }
  if (unit == 0 || w % unit != 0 || w / unit < 2) {
    out.full_because = "its layout has one replica per stage";
    return out;
  }
  const std::set<FamilyUse> uses = families_of(p);
  std::string why;
  int tries = 0;  // each costs a pass over every GPU per tier and family
  for (std::uint32_t u = unit; u <= w / 2 && tries < 8; u += unit) {
    if (w % u != 0) continue;
    ++tries;
    why.clear();
    const std::vector<std::uint32_t> chain = block_chain(topo, w, u);
    for (const Shift& phi : generators(chain, n, u)) {
      why = cluster_breaks(topo, phi);
      if (why.empty()) why = plan_breaks(p, phi, uses);
      if (!why.empty()) break;
    }
    if (!why.empty()) continue;
    // Unit 0 of each stage is simulated; every collective must stand for whole copies.
    out.copies = w / u;
    out.unit = u;
    out.stage_size = w;
    for (std::uint32_t step = u; const std::uint32_t block : chain) out.radix.push_back(block / step), step = block;
    out.representative.resize(n);
    for (std::uint32_t g = 0; g < n; ++g) out.representative[g] = g - g % w + g % w % u;
    // A host's CPU is shared by its GPUs' host work: all of them simulated, or none.
    bool whole = true;
    if (topo.hosts() && p.streams && p.streams->has(parallel::StreamRole::HostCpu))
      for (std::uint32_t g = 0; g < n; ++g)
        whole = whole && out.simulated(g) == out.simulated(topo.host_of(g) * topo.hosts()->gpus);
    for (const auto& use : uses)
      for (const auto& g : use.family->groups) {
        std::size_t simulated = 0;
        for (const std::uint32_t m : g) simulated += out.simulated(m) ? 1 : 0;
        whole = whole && (static_cast<std::uint64_t>(out.copies) * simulated) % g.size() == 0;
      }
    if (whole) return out;
    out = {};
    why = "a host or a collective group straddles the replicas unevenly";
  }
  out.full_because = why;
  return out;
}

}  // namespace moesim::simulation
