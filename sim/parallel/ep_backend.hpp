// The expert-parallel communication backend a MoE block's dispatch and combine run on, after
// torchtitan's `expert_parallel_comm_backend` (seed 001: the HybridEP PR; spec
// seeds-001-002-004.md 001.A.1-A.7):
//  - `nccl` (torchtitan's and Megatron-Core's default all-to-all dispatcher): the router's kernel
//    permutes the tokens, one copy per selected expert, into rows grouped by destination; an NCCL
//    all-to-all sends every copy; the un-permute and weighted sum run as their own kernel after
//    the combine all-to-all. The host learns the split sizes with a device-to-host sync.
//  - `deepep` (DeepEP's normal kernels) and `hybridep` (NVIDIA's Hybrid-EP, TMA-based): fused
//    dispatch = all-to-all + permute into the expert-major layout, fused combine = un-permute +
//    all-to-all + weighted reduction, each token sent once to every rank holding one of its
//    experts (per-rank de-duplication), the kernels holding their SMs while they run. DeepEP's
//    normal mode syncs with the host for its receive counts; HybridEP in blocking mode too (the
//    exact permuted rows), in non-blocking mode not at all: its permuted buffer is sized in
//    advance by a capacity factor and the rows beyond it are dropped (sim/workload/ep_buffers.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sim/core/enum_names.hpp"
#include "sim/core/units.hpp"

namespace moesim::parallel {

enum class EpBackendKind : std::uint8_t { Nccl, DeepEp, HybridEp };
inline constexpr auto kEpBackendNames = enum_names<EpBackendKind>(
    {{EpBackendKind::Nccl, "nccl"}, {EpBackendKind::DeepEp, "deepep"}, {EpBackendKind::HybridEp, "hybridep"}});
std::string_view to_string(EpBackendKind kind);

struct EpBackend {
  EpBackendKind kind = EpBackendKind::Nccl;
  // HybridEP without the device-to-host sync (hybridep_non_blocking): the permuted buffer holds
  // roundup_align(N × EP × min(K, E_local) × capacity_factor) rows.
  bool non_blocking = false;
  double capacity_factor = 0;  // (0, 1] in non-blocking mode
  // SMs each fused kernel holds while it runs: the PR hard-codes 16 for dispatch and 16 for
  // combine (torchtitan, spec 001.A.7); DeepEP's Buffer.num_sms defaults to 20 for both
  // (deep_ep/buffer.py).
  int dispatch_sms = 0, combine_sms = 0;
  // How long the host's launch thread waits after a device-to-host read of the split sizes or the
  // permuted row count returns, before it launches what follows (spec 001.A.5: no document gives
  // its size); unset: the software's sync time (software::HostCosts::sync).
  std::optional<Time> host_sync;

  bool fused() const { return kind != EpBackendKind::Nccl; }
  bool syncs_host() const { return !non_blocking; }
};

// The SMs a backend's fused kernels hold by default (0 for nccl, whose kernels moesim does not
// reserve).
int default_backend_sms(EpBackendKind kind);

}  // namespace moesim::parallel
