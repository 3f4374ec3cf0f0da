#include "sim/engine/task.hpp"

namespace moesim::engine {

bool on_gpu_compute(WorkKind kind) { return !is_communication(kind) && kind != WorkKind::HostCompute && kind != WorkKind::Wait; }

bool is_communication(WorkKind kind) {
  switch (kind) {
    case WorkKind::AllToAll:
    case WorkKind::AllGather:
    case WorkKind::AllReduce:
    case WorkKind::ReduceScatter:
    case WorkKind::P2P:
    case WorkKind::HostCopy: return true;
    default: return false;
  }
}

std::string_view to_string(WorkKind kind) {
  switch (kind) {
    case WorkKind::Attention: return "attention";
    case WorkKind::Expert: return "expert";
    case WorkKind::Gate: return "gate";
    case WorkKind::DenseFfn: return "dense_ffn";
    case WorkKind::OtherCompute: return "other_compute";
    case WorkKind::Optimizer: return "optimizer";
    case WorkKind::HostCompute: return "host_compute";
    case WorkKind::AllToAll: return "all_to_all";
    case WorkKind::AllGather: return "all_gather";
    case WorkKind::AllReduce: return "all_reduce";
    case WorkKind::ReduceScatter: return "reduce_scatter";
    case WorkKind::P2P: return "p2p";
    case WorkKind::HostCopy: return "host_copy";
    case WorkKind::Wait: return "wait";
    case WorkKind::Count: break;
  }
  return "?";
}

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::Forward: return "fwd";
    case Phase::Backward: return "bwd";
    case Phase::GradSync: return "grad_sync";
    case Phase::Optimizer: return "optimizer";
    case Phase::Recompute: return "recompute";
  }
  return "?";
}

}  // namespace moesim::engine
