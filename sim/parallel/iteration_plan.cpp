#include "sim/parallel/iteration_plan.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::parallel {

std::string_view to_string(StreamRole role) {
  switch (role) {
    case StreamRole::Compute: return "compute";
    case StreamRole::Dispatch: return "dispatch";
    case StreamRole::Combine: return "combine";
    case StreamRole::Gradient: return "gradient";
    case StreamRole::Side: return "side";
    case StreamRole::HostCopy: return "host_copy";
    case StreamRole::HostCpu: return "host_cpu";
    case StreamRole::PipelineSend: return "pipeline_send";
    case StreamRole::PipelineRecv: return "pipeline_recv";
    case StreamRole::PipelineRecvGrad: return "pipeline_recv_grad";
    case StreamRole::PipelineRecvReturn: return "pipeline_recv_return";
    case StreamRole::PipelineRecvGradReturn: return "pipeline_recv_grad_return";
    case StreamRole::ContextParallel: return "context_parallel";
    case StreamRole::ParamGather: return "param_gather";
    case StreamRole::Offload: return "offload";
    case StreamRole::Reload: return "reload";
    case StreamRole::Count: break;
  }
  return "?";
}

std::string_view trace_name(StreamRole role) {
  switch (role) {
    case StreamRole::Compute: return "compute";
    case StreamRole::Dispatch: return "comm: dispatch";
    case StreamRole::Combine: return "comm: combine";
    case StreamRole::Gradient: return "comm: gradients";
    case StreamRole::Side: return "comm: side (expert migration, SAA all-gather)";
    case StreamRole::HostCopy: return "host copy (PCIe)";
    case StreamRole::HostCpu: return "host CPU (optimizer)";
    case StreamRole::PipelineSend: return "comm: pipeline send";
    case StreamRole::PipelineRecv: return "comm: pipeline receive (activations)";
    case StreamRole::PipelineRecvGrad: return "comm: pipeline receive (gradients)";
    case StreamRole::PipelineRecvReturn: return "comm: pipeline receive (activations, V's second chunk)";
    case StreamRole::PipelineRecvGradReturn: return "comm: pipeline receive (gradients, V's second chunk)";
    case StreamRole::ContextParallel: return "comm: context-parallel K/V ring";
    case StreamRole::ParamGather: return "comm: parameter all-gather (FSDP)";
    case StreamRole::Offload: return "activations to host (PCIe)";
    case StreamRole::Reload: return "activations from host (PCIe)";
    case StreamRole::Count: break;
  }
  return "?";
}

StreamSet::StreamSet(const std::vector<StreamRole>& roles) {
  index_.fill(kAbsent);
  for (StreamRole r : roles) index_[static_cast<int>(r)] = 0;
  for (int r = 0; r < kStreamRoles; ++r)
    if (index_[r] != kAbsent) {
      index_[r] = static_cast<std::uint8_t>(roles_.size());
      roles_.push_back(static_cast<StreamRole>(r));
    }
  if (!has(StreamRole::Compute)) invariant_failed("a stream set without a compute stream");
}

std::uint8_t StreamSet::index(StreamRole role) const {
  if (!has(role)) invariant_failed(fmt::format("the plan's streams have no {} stream", to_string(role)));
  return index_[static_cast<int>(role)];
}

int PipelinePlan::virtual_stage_of_layer(int layer) const {
  const auto it = std::upper_bound(first_layer.begin(), first_layer.end(), layer);
  return static_cast<int>(it - first_layer.begin()) - 1;
}

std::vector<int> PipelinePlan::layers_of_stage(int stage) const {
  std::vector<int> out;
  for (int c = 0; c < chunks; ++c) {
    const int v = virtual_of(stage, c);
    for (int l = first_layer[v]; l < first_layer[v + 1]; ++l) out.push_back(l);
  }
  return out;
}

PipelinePlan single_stage(std::uint32_t gpus, int layers) {
  PipelinePlan p;
  p.first_layer = {0, layers};
  p.stage_gpus.emplace_back(gpus);
  for (std::uint32_t g = 0; g < gpus; ++g) p.stage_gpus[0][g] = g;
  return p;
}

std::shared_ptr<const StreamSet> streams_for(std::vector<StreamRole> roles, OptimizerPlacement optimizer,
                                             bool offloads_activations) {
  if (optimizer == OptimizerPlacement::Host) {
    roles.push_back(StreamRole::HostCopy);
    roles.push_back(StreamRole::HostCpu);
  }
  if (offloads_activations) {
    roles.push_back(StreamRole::Offload);
    roles.push_back(StreamRole::Reload);
  }
  return std::make_shared<StreamSet>(roles);
}

FamilyPtr family(std::vector<std::vector<std::uint32_t>> groups) {
  auto f = std::make_shared<GroupFamily>();
  f->groups = std::move(groups);
  return f;
}

std::shared_ptr<const ReplicaTable> ReplicaTable::contiguous(int experts, int ranks) {
  auto t = std::make_shared<ReplicaTable>();
  t->of_expert.resize(experts);
  const int per_rank = experts / ranks;
  for (int e = 0; e < experts; ++e) t->of_expert[e].push_back({static_cast<std::uint32_t>(e / per_rank), 1.0});
  return t;
}

}  // namespace moesim::parallel
