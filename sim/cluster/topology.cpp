#include "sim/cluster/topology.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::cluster {

std::string_view to_string(Fabric f) {
  switch (f) {
    case Fabric::Switch: return "switch";
    case Fabric::FullMesh: return "full_mesh";
    case Fabric::Ring: return "ring";
  }
  return "?";
}

Topology::Topology(std::vector<Level> levels, std::vector<GpuSpec> kinds, std::vector<std::uint16_t> kind_of_gpu)
    : levels_(std::move(levels)), kinds_(std::move(kinds)), kind_of_gpu_(std::move(kind_of_gpu)) {
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

}  // namespace moesim::cluster
