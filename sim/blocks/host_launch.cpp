#include "sim/blocks/host_launch.hpp"

#include <cmath>

namespace moesim::blocks {

HostLaunch::HostLaunch(const software::Software& software, const cluster::Topology& topology)
    : software_(&software), topology_(&topology), graph_(topology.gpu_count()) {
  for (std::size_t k = 0; k < topology.kinds().size(); ++k) factor_.push_back(topology.kinds()[k].host_launch_factor);
}

Time HostLaunch::scaled(std::uint32_t gpu, Time cost) const {
  if (cost == 0) return 0;
  return ps_to_time(std::round(static_cast<double>(cost) * factor_[topology_->kind_index(gpu)]));
}

engine::Launch HostLaunch::launch(std::uint32_t gpu, software::Module module, const engine::Label& label, int kernels) {
  // Nothing costs the host (a scenario without a software section): no launch, no graph to track.
  if (!software_ || !software_->models_host() || kernels == 0) return {};
  const software::Software& sw = *software_;
  // The optimizer step runs eagerly after the graphed forward-backward (Megatron-Core's
  // full_iteration graph wraps forward_backward_func only).
  const bool captured = label.phase != engine::Phase::Optimizer &&
                        (sw.graphs.full_iteration || (module != software::Module::None && sw.graphs.captures(module)));
  Graph& open = graph_[gpu];
  if (!captured) {
    open.open = false;
    return {scaled(gpu, per_kernel(label) * kernels)};
  }
  Graph g{.open = true, .iteration = label.iteration};
  if (!sw.graphs.full_iteration) {
    g.module = module;
    g.phase = label.phase;
    g.layer = label.layer;
    g.microbatch = label.microbatch;
  }
  if (open == g) return {};
  open = g;
  return {scaled(gpu, sw.host.graph_launch)};
}

engine::Launch HostLaunch::read(std::uint32_t gpu, const engine::Label& label, Time sync) {
  // Never captured: a graph cannot hold a read its host waits for (the scenario loader refuses a
  // full-iteration graph around a dispatch that reads).
  graph_[gpu].open = false;
  return {software_ ? scaled(gpu, per_kernel(label)) : 0, sync};
}

Time HostLaunch::per_kernel(const engine::Label& label) const {
  return label.phase == engine::Phase::Backward ? software_->host.backward_launch : software_->host.launch;
}

}  // namespace moesim::blocks
