#include "sim/network/flow_links.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::network {

FlowLinks::FlowLinks(const cluster::Topology& topo) : topology_(topo) {
  const int tiers = topo.tier_count();
  port_base_.assign(tiers, kNoLink);
  core_base_.assign(tiers, kNoLink);
  sibling_base_.assign(tiers, kNoLink);
  for (int t = 0; t < tiers; ++t) {
    const cluster::TierFabric& f = topo.fabric(t);
    const cluster::Tier& tier = topo.tiers()[t];
    const std::uint32_t parents = t == 0 ? 1 : topo.tier_workers(t - 1);
    if (f.switched()) {
      port_base_[t] = static_cast<std::uint32_t>(size());
      for (std::uint64_t i = 0; i < 2ULL * topo.tier_workers(t) * tier.ports; ++i) add(t, f.port_capacity());
      if (f.core_capacity() > 0) {
        core_base_[t] = static_cast<std::uint32_t>(size());
        for (std::uint32_t p = 0; p < parents; ++p) add(t, f.core_capacity());
      }
    } else {
      sibling_base_[t] = static_cast<std::uint32_t>(size());
      const std::uint64_t slots = static_cast<std::uint64_t>(parents) * f.links();
      if (slots > (1ULL << 26))
        throw InfeasibleError(fmt::format("level {} has {} sibling links, more than the flow model holds; use a switch "
                                          "fabric for it",
                                          tier.name, slots));
      for (std::uint64_t i = 0; i < slots; ++i) add(t, f.link_capacity());
    }
  }
  // Every GPU's PCIe link to its host (its kind's host link); with hosts described, their
  // switches' uplinks to the CPUs.
  pcie_base_ = static_cast<std::uint32_t>(size());
  for (std::uint32_t m = 0; m < topo.gpu_count(); ++m)
    for (int dir = 0; dir < 2; ++dir) add(tiers, topo.gpu(m).host_bandwidth.bytes_per_second);
  if (const auto& h = topo.hosts()) {
    switch_base_ = static_cast<std::uint32_t>(size());
    for (std::uint32_t s = 0; s < topo.pcie_switch_count(); ++s)
      for (int dir = 0; dir < 2; ++dir) add(tiers, h->switch_uplink.bytes_per_second);
  }
  if (size() != count(topo))
    invariant_failed(fmt::format("FlowLinks::count says {} links, the constructor adds {}", count(topo), size()));
}

std::size_t FlowLinks::count(const cluster::Topology& topo) {
  // As the constructor adds them: per switch tier two per port of every worker and a core per
  // parent when oversubscribed; per mesh or ring tier each parent's sibling links; two per GPU's
  // PCIe link and, with hosts, two per PCIe switch's uplink.
  std::size_t n = 0;
  for (int t = 0; t < topo.tier_count(); ++t) {
    const cluster::TierFabric& f = topo.fabric(t);
    const std::size_t parents = t == 0 ? 1 : topo.tier_workers(t - 1);
    if (f.switched())
      n += 2ULL * topo.tier_workers(t) * topo.tiers()[t].ports + (f.core_capacity() > 0 ? parents : 0);
    else
      n += parents * f.links();
  }
  n += 2ULL * topo.gpu_count();
  if (topo.hosts()) n += 2ULL * topo.pcie_switch_count();
  return n;
}

std::uint32_t FlowLinks::add(int tier, double capacity) {
  capacity_.push_back(capacity);
  tier_.push_back(tier);
  return static_cast<std::uint32_t>(capacity_.size() - 1);
}

std::uint32_t FlowLinks::port(int tier, std::uint32_t worker, std::uint32_t p, bool up) const {
  if (port_base_[tier] == kNoLink) invariant_failed(fmt::format("tier {} has no port links", tier));
  return port_base_[tier] + 2 * (worker * topology_.tiers()[tier].ports + p) + (up ? 0 : 1);
}

std::uint32_t FlowLinks::core(int tier, std::uint32_t parent) const {
  return core_base_[tier] == kNoLink ? kNoLink : core_base_[tier] + parent;
}

void FlowLinks::siblings(int tier, std::uint32_t parent, std::uint32_t i, std::uint32_t j, std::vector<std::uint32_t>& out) const {
  const std::size_t first = out.size();
  topology_.fabric(tier).route(i, j, out);
  const std::uint32_t base = sibling_base_[tier] + parent * topology_.fabric(tier).links();
  for (std::size_t k = first; k < out.size(); ++k) out[k] += base;
}

std::uint32_t FlowLinks::pcie(std::uint32_t gpu, bool up) const { return pcie_base_ + 2 * gpu + (up ? 0 : 1); }

std::uint32_t FlowLinks::switch_uplink(std::uint32_t s, bool up) const {
  if (switch_base_ == kNoLink) invariant_failed("no PCIe switches: the cluster describes no hosts");
  return switch_base_ + 2 * s + (up ? 0 : 1);
}

std::string FlowLinks::name(std::uint32_t link) const {
  const int t = tier_[link];
  if (t == topology_.tier_count()) {
    if (switch_base_ == kNoLink || link < switch_base_) return fmt::format("pcie gpu {} {}", (link - pcie_base_) / 2, (link - pcie_base_) % 2 == 0 ? "up" : "down");
    return fmt::format("pcie switch {} {}", (link - switch_base_) / 2, (link - switch_base_) % 2 == 0 ? "up" : "down");
  }
  const cluster::Tier& tier = topology_.tiers()[t];
  const std::string& lv = tier.name;
  if (port_base_[t] != kNoLink && link >= port_base_[t] && link < port_base_[t] + 2 * topology_.tier_workers(t) * tier.ports) {
    const std::uint32_t k = (link - port_base_[t]) / 2;
    const char* dir = (link - port_base_[t]) % 2 == 0 ? "up" : "down";
    if (tier.ports == 1) return fmt::format("{} {} {}", lv, k, dir);
    return fmt::format("{} {} port {} {}", lv, k / tier.ports, k % tier.ports, dir);
  }
  if (core_base_[t] != kNoLink && link >= core_base_[t]) return fmt::format("{} switch core {}", lv, link - core_base_[t]);
  const std::uint32_t per_parent = topology_.fabric(t).links();
  const std::uint32_t k = link - sibling_base_[t];
  const std::uint32_t n = tier.count;
  return fmt::format("{} {}->{} (parent {})", lv, (k % per_parent) / n, k % n, k / per_parent);
}

}  // namespace moesim::network
