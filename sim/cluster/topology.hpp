// The multi-level cluster of HybridEP §IV-A: levels from coarse to fine (e.g. dc × 1000 →
// node × 1 → gpu × 8), each with a count (the scaling factor SF^i), the fabric joining its workers,
// per-worker link bandwidth and latency, and oversubscription. GPU global index m maps to the
// location (x0..xL-1) by the renumbering of HybridEP Eq. 13: x_i = (m / Π_{j>i} SF^j) mod SF^i.
//
// Links may differ inside a level (fabric.hpp): a switch level's per-worker bandwidth may be split
// over ports (a node's NICs; GPU i of a worker uses port ⌊i·ports/gpus⌋), and a level may be cut
// into NVLink domains of consecutive workers, joined to each other by each GPU's own link. The
// network models see tiers: one per level, plus, before a level with domains, the tier of the
// links between its domains.
//
// Hosts (optional): consecutive GPUs share a host — its CPU and memory, and PCIe switches that join
// its GPUs (each through its kind's host link) and NICs to the CPU. Host copies cross the GPU's
// PCIe link and its switch's uplink; traffic that leaves a host also crosses the GPU's PCIe link
// to the NIC (GPUDirect RDMA through the switch).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/cluster/fabric.hpp"
#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/units.hpp"

namespace moesim::cluster {

// NVLink domains inside a level: `size` consecutive workers share the level's fabric; between
// domains of one parent every GPU has a link of its own of `bandwidth` per direction.
struct Domains {
  std::uint32_t size = 0;  // 0: the whole level is one domain
  Bandwidth bandwidth{};
  Time latency = 0;
  LinkTechPtr link;  // the technology of the links between domains (null: ideal)
};

struct Level {
  std::string name;
  std::uint32_t count = 1;
  Fabric fabric = Fabric::Switch;
  Bandwidth bandwidth{};  // per worker and direction (over all its ports)
  Time latency = 0;
  double oversubscription = 1.0;
  std::uint32_t ports = 1;  // switch: links the per-worker bandwidth is spread over (a node's NICs)
  Domains domains;
  LinkTechPtr link;         // how NCCL drives the level's links (null: ideal links)
};

struct HostSpec {
  std::uint32_t gpus = 1;              // consecutive GPUs per host
  double memory_bytes = 0;
  // What the CPU optimizer streams through host memory: DeepSpeed's CPU-Adam steps an
  // 11.6B-parameter GPT-2 (32 B per parameter) in 8.2 s (deepspeedai/DeepSpeed PR #735), 45 GB/s.
  double optimizer_bytes_per_second = 45e9;
  std::uint32_t pcie_switches = 1;     // per host; its GPUs spread evenly over them
  Bandwidth switch_uplink{};           // each switch's link to the CPU, per direction
  Time switch_latency = 0;
  std::string source;
};

class Topology {
 public:
  // `kinds` are the GPU kinds present; `kind_of_gpu[m]` indexes them (empty: all GPUs of kinds[0]).
  Topology(std::vector<Level> levels, std::vector<GpuSpec> kinds, std::vector<std::uint16_t> kind_of_gpu,
           std::optional<HostSpec> hosts = std::nullopt);

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

  // The network's tiers (see the header comment), coarsest first, with the same accessors.
  const std::vector<Tier>& tiers() const { return tiers_; }
  int tier_count() const { return static_cast<int>(tiers_.size()); }
  const TierFabric& fabric(int tier) const { return *fabrics_[tier]; }
  std::uint32_t tier_worker(std::uint32_t m, int tier) const { return m / tier_stride_[tier]; }
  std::uint32_t tier_coordinate(std::uint32_t m, int tier) const { return (m / tier_stride_[tier]) % tiers_[tier].count; }
  std::uint32_t tier_workers(int tier) const { return gpu_count_ / tier_stride_[tier]; }
  std::uint32_t gpus_per_tier_worker(int tier) const { return tier_stride_[tier]; }
  int first_differing_tier(std::uint32_t m, std::uint32_t n) const;
  // The port of its tier-`tier` worker that GPU m's traffic uses.
  std::uint32_t port(std::uint32_t m, int tier) const {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(m % tier_stride_[tier]) * tiers_[tier].ports /
                                      tier_stride_[tier]);
  }
  // The description level the tier belongs to, and the tier that carries a level's own fabric.
  int level_of_tier(int tier) const { return tiers_[tier].level; }
  int tier_of_level(int level) const { return level_tier_[level]; }

  // Hosts (null: not described).
  const std::optional<HostSpec>& hosts() const { return hosts_; }
  std::uint32_t host_of(std::uint32_t m) const { return hosts_ ? m / hosts_->gpus : 0; }
  std::uint32_t host_count() const { return hosts_ ? gpu_count_ / hosts_->gpus : 1; }
  // Cluster-wide index of the PCIe switch GPU m sits behind.
  std::uint32_t pcie_switch_of(std::uint32_t m) const;
  std::uint32_t pcie_switch_count() const { return hosts_ ? host_count() * hosts_->pcie_switches : 0; }

  const GpuSpec& gpu(std::uint32_t m) const { return kinds_[kind_of_gpu_.empty() ? 0 : kind_of_gpu_[m]]; }
  std::uint16_t kind_index(std::uint32_t m) const { return kind_of_gpu_.empty() ? 0 : kind_of_gpu_[m]; }
  const std::vector<GpuSpec>& kinds() const { return kinds_; }

 private:
  std::vector<Level> levels_;
  std::vector<std::uint32_t> stride_;
  std::vector<Tier> tiers_;
  std::vector<std::uint32_t> tier_stride_;
  std::vector<int> level_tier_;
  std::vector<std::shared_ptr<const TierFabric>> fabrics_;
  std::optional<HostSpec> hosts_;
  std::vector<GpuSpec> kinds_;
  std::vector<std::uint16_t> kind_of_gpu_;
  std::uint32_t gpu_count_ = 0;
};

}  // namespace moesim::cluster
