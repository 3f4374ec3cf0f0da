#include "sim/cluster/topology.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::cluster {

Topology::Topology(std::vector<Level> levels, std::vector<GpuSpec> kinds, std::vector<std::uint16_t> kind_of_gpu,
                   std::optional<HostSpec> hosts)
    : levels_(std::move(levels)), hosts_(std::move(hosts)), kinds_(std::move(kinds)), kind_of_gpu_(std::move(kind_of_gpu)) {
  if (levels_.empty() || kinds_.empty()) invariant_failed("topology without levels or GPU kinds");
  stride_.assign(levels_.size(), 1);
  std::uint64_t total = 1;
  for (int l = level_count() - 1; l >= 0; --l) {
    stride_[l] = static_cast<std::uint32_t>(total);
    total *= levels_[l].count;
    if (total > UINT32_MAX) invariant_failed("more than 2^32 GPUs");
  }
  gpu_count_ = static_cast<std::uint32_t>(total);
  if (!kind_of_gpu_.empty() && kind_of_gpu_.size() != gpu_count_)
    invariant_failed(fmt::format("{} GPU kinds given for {} GPUs", kind_of_gpu_.size(), gpu_count_));

  // Tiers: each level; a level cut into domains is preceded by the tier of the links between its
  // domains, whose workers are the domains and whose ports are their GPUs' own links.
  for (int l = 0; l < level_count(); ++l) {
    const Level& lv = levels_[l];
    if (lv.ports == 0 || (lv.ports > 1 && (lv.fabric != Fabric::Switch || stride_[l] % lv.ports != 0)))
      invariant_failed(fmt::format("level {}: {} ports", lv.name, lv.ports));
    const std::uint32_t size = lv.domains.size;
    if (size > 0 && size < lv.count) {
      if (lv.count % size != 0) invariant_failed(fmt::format("level {}: domains of {} in {}", lv.name, size, lv.count));
      Tier between;
      between.name = lv.name + " (between domains)";
      between.level = l;
      between.count = lv.count / size;
      between.fabric = Fabric::Switch;
      between.bandwidth = lv.domains.bandwidth;
      between.ports = size * stride_[l];
      between.latency = lv.domains.latency;
      between.link = lv.domains.link;
      tiers_.push_back(between);
      tier_stride_.push_back(size * stride_[l]);
    }
    Tier own;
    own.name = lv.name;
    own.level = l;
    own.count = size > 0 && size < lv.count ? size : lv.count;
    own.fabric = lv.fabric;
    own.bandwidth = Bandwidth{lv.bandwidth.bytes_per_second / lv.ports};
    own.ports = lv.ports;
    own.latency = lv.latency;
    own.oversubscription = lv.oversubscription;
    own.link = lv.link;
    level_tier_.push_back(static_cast<int>(tiers_.size()));
    tiers_.push_back(own);
    tier_stride_.push_back(stride_[l]);
  }
  for (const Tier& t : tiers_) fabrics_.push_back(TierFabric::make(t));

  if (hosts_) {
    if (hosts_->gpus == 0 || gpu_count_ % hosts_->gpus != 0 || hosts_->pcie_switches == 0 ||
        hosts_->gpus % hosts_->pcie_switches != 0)
      invariant_failed(fmt::format("hosts of {} GPUs with {} PCIe switches for {} GPUs", hosts_->gpus,
                                   hosts_->pcie_switches, gpu_count_));
  }
}

std::vector<std::uint32_t> Topology::location(std::uint32_t m) const {
  std::vector<std::uint32_t> x(levels_.size());
  for (int l = 0; l < level_count(); ++l) x[l] = coordinate(m, l);
  return x;
}

std::uint32_t Topology::index_of(const std::vector<std::uint32_t>& x) const {
  if (x.size() != levels_.size()) invariant_failed("location with the wrong number of levels");
  std::uint32_t m = 0;
  for (int l = 0; l < level_count(); ++l) {
    if (x[l] >= levels_[l].count) invariant_failed(fmt::format("location {} outside level {} of {}", x[l], l, levels_[l].count));
    m += x[l] * stride_[l];
  }
  return m;
}

int Topology::first_differing_level(std::uint32_t m, std::uint32_t n) const {
  for (int l = 0; l < level_count(); ++l)
    if (worker(m, l) != worker(n, l)) return l;
  return -1;
}

int Topology::first_differing_tier(std::uint32_t m, std::uint32_t n) const {
  for (int t = 0; t < tier_count(); ++t)
    if (tier_worker(m, t) != tier_worker(n, t)) return t;
  return -1;
}

std::uint32_t Topology::pcie_switch_of(std::uint32_t m) const {
  if (!hosts_) return 0;
  const std::uint32_t per_switch = hosts_->gpus / hosts_->pcie_switches;
  return host_of(m) * hosts_->pcie_switches + (m % hosts_->gpus) / per_switch;
}

}  // namespace moesim::cluster
