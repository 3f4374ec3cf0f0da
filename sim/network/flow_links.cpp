#include "sim/network/flow_links.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::network {

FlowLinks::FlowLinks(const cluster::Topology& topo) : topology_(topo) {
  const int levels = topo.level_count();
  uplink_base_.assign(levels, kNoLink);
  core_base_.assign(levels, kNoLink);
  sibling_base_.assign(levels, kNoLink);
  for (int l = 0; l < levels; ++l) {
    const cluster::Level& lv = topo.levels()[l];
    const double bw = lv.bandwidth.bytes_per_second;
    const std::uint32_t workers = topo.workers_at(l);
    const std::uint32_t parents = l == 0 ? 1 : topo.workers_at(l - 1);
    if (lv.fabric == cluster::Fabric::Switch) {
      uplink_base_[l] = static_cast<std::uint32_t>(size());
      for (std::uint32_t i = 0; i < 2 * workers; ++i) add(l, bw);
      if (lv.oversubscription > 1) {
        core_base_[l] = static_cast<std::uint32_t>(size());
        for (std::uint32_t p = 0; p < parents; ++p) add(l, lv.count * bw / lv.oversubscription);
      }
    } else {
      // Every ordered pair of siblings gets a slot; rings use only neighbours' slots.
      sibling_base_[l] = static_cast<std::uint32_t>(size());
      const std::uint64_t slots = static_cast<std::uint64_t>(parents) * lv.count * lv.count;
      if (slots > (1ULL << 26))
        throw InfeasibleError(fmt::format("level {} has {} sibling links, more than the flow model holds; use a switch "
                                          "fabric for it",
                                          lv.name, slots));
      for (std::uint64_t i = 0; i < slots; ++i) add(l, bw);
    }
  }
}

std::uint32_t FlowLinks::add(int level, double capacity) {
  capacity_.push_back(capacity);
  level_.push_back(level);
  return static_cast<std::uint32_t>(capacity_.size() - 1);
}

std::uint32_t FlowLinks::uplink(int level, std::uint32_t worker, bool up) const {
  if (uplink_base_[level] == kNoLink) invariant_failed(fmt::format("level {} has no uplinks", level));
  return uplink_base_[level] + 2 * worker + (up ? 0 : 1);
}

std::uint32_t FlowLinks::core(int level, std::uint32_t parent) const {
  return core_base_[level] == kNoLink ? kNoLink : core_base_[level] + parent;
}

std::uint32_t FlowLinks::sibling(int level, std::uint32_t parent, std::uint32_t i, std::uint32_t j) const {
  const std::uint32_t n = topology_.levels()[level].count;
  return sibling_base_[level] + (parent * n + i) * n + j;
}

std::string FlowLinks::name(std::uint32_t link) const {
  const int l = level_[link];
  const std::string& lv = topology_.levels()[l].name;
  if (uplink_base_[l] != kNoLink && link >= uplink_base_[l] && link < uplink_base_[l] + 2 * topology_.workers_at(l)) {
    const std::uint32_t k = link - uplink_base_[l];
    return fmt::format("{} {} {}", lv, k / 2, k % 2 == 0 ? "up" : "down");
  }
  if (core_base_[l] != kNoLink && link >= core_base_[l] && sibling_base_[l] == kNoLink)
    return fmt::format("{} switch core {}", lv, link - core_base_[l]);
  const std::uint32_t n = topology_.levels()[l].count;
  const std::uint32_t k = link - sibling_base_[l];
  return fmt::format("{} {}->{} (parent {})", lv, (k / n) % n, k % n, k / (n * n));
}

}  // namespace moesim::network
