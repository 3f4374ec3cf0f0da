// The multi-level cluster of HybridEP §IV-A: levels from coarse to fine (e.g. dc × 1000 →
// node × 1 → gpu × 8), each with a count (the scaling factor SF^i), the fabric joining its workers,
// per-worker link bandwidth and latency, and oversubscription. GPU global index m maps to the
// location (x0..xL-1) by the renumbering of HybridEP Eq. 13: x_i = (m / Π_{j>i} SF^j) mod SF^i.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/units.hpp"

namespace moesim::cluster {

enum class Fabric { Switch, FullMesh, Ring };
std::string_view to_string(Fabric f);

struct Level {
  std::string name;
  std::uint32_t count = 1;
  Fabric fabric = Fabric::Switch;
  Bandwidth bandwidth{};
  Time latency = 0;
  double oversubscription = 1.0;
};

class Topology {
 public:
  // `kinds` are the GPU kinds present; `kind_of_gpu[m]` indexes them (empty: all GPUs of kinds[0]).
  Topology(std::vector<Level> levels, std::vector<GpuSpec> kinds, std::vector<std::uint16_t> kind_of_gpu);

  std::uint32_t gpu_count() const { return gpu_count_; }
  const std::vector<Level>& levels() const { return levels_; }
  int level_count() const { return static_cast<int>(levels_.size()); }

  // HybridEP Eq. 13.
  std::vector<std::uint32_t> location(std::uint32_t m) const;
  // The inverse: m = Σ_i x_i · Π_{j>i} SF^j.
  std::uint32_t index_of(const std::vector<std::uint32_t>& location) const;
  std::uint32_t coordinate(std::uint32_t m, int level) const { return (m / stride_[level]) % levels_[level].count; }
  // Cluster-wide index of the level-`level` worker that holds GPU m (e.g. its DC, its node).
  std::uint32_t worker(std::uint32_t m, int level) const { return m / stride_[level]; }
  std::uint32_t workers_at(int level) const { return gpu_count_ / stride_[level]; }
  // GPUs inside one worker of `level`.
  std::uint32_t gpus_per_worker(int level) const { return stride_[level]; }
  // Coarsest level at which m and n sit in different workers; -1 when m == n.
  int first_differing_level(std::uint32_t m, std::uint32_t n) const;

  const GpuSpec& gpu(std::uint32_t m) const { return kinds_[kind_of_gpu_.empty() ? 0 : kind_of_gpu_[m]]; }
  std::uint16_t kind_index(std::uint32_t m) const { return kind_of_gpu_.empty() ? 0 : kind_of_gpu_[m]; }
  const std::vector<GpuSpec>& kinds() const { return kinds_; }

 private:
  std::vector<Level> levels_;
  std::vector<std::uint32_t> stride_;
  std::vector<GpuSpec> kinds_;
  std::vector<std::uint16_t> kind_of_gpu_;
  std::uint32_t gpu_count_ = 0;
};

}  // namespace moesim::cluster
