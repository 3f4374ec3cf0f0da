#include "sim/blocks/optimizer_step.hpp"

namespace moesim::blocks {

void optimizer_step(Emission& em, const Frontier& after, const Frontier& last_gradient_sync) {
  if (em.plan.optimizer == parallel::OptimizerPlacement::Gpu) {
    const auto label = em.label(engine::Phase::Optimizer, engine::WorkKind::Optimizer, "optimizer", 0);
    const auto& buffers = em.plan.gradient_buffer_params.empty() ? em.plan.optimizer_params : em.plan.gradient_buffer_params;
    for (std::uint32_t g = 0; g < em.gpus(); ++g) {
      // The software's multi-tensor kernels (compute::OptimizerKernels), each one launch.
      const engine::TaskId t = em.pb.compute(
          g, em.ctx.compute_of(g).optimizer_kernels(em.plan.optimizer_params[g], buffers[g]), label, after[g]);
      em.pb.depend(last_gradient_sync[g], t);
    }
    return;
  }
  const auto& host = *em.ctx.topology.hosts();
  const auto l_down = em.label(engine::Phase::Optimizer, engine::WorkKind::HostCopy, "gradients_to_host", 0);
  const auto l_cpu = em.label(engine::Phase::Optimizer, engine::WorkKind::HostCompute, "optimizer_on_host", 0);
  const auto l_up = em.label(engine::Phase::Optimizer, engine::WorkKind::HostCopy, "weights_from_host", 0);
  const auto l_ready = em.label(engine::Phase::Optimizer, engine::WorkKind::Wait, "gradients_ready", 0);
  const auto l_wait = em.label(engine::Phase::Optimizer, engine::WorkKind::Wait, "weights_ready", 0);
  for (std::uint32_t g = 0; g < em.gpus(); ++g) {
    const double params = em.plan.optimizer_params[g];
    const double bytes = params * em.ctx.dtype_bytes();
    // The gradients leave once the GPU's backward and its gradient collectives are done.
    const engine::TaskId ready = em.pb.wait(g, 0, l_ready, after[g]);
    em.pb.depend(last_gradient_sync[g], ready);
    const engine::TaskId down = em.pb.host_copy(g, bytes, true, parallel::StreamRole::HostCopy, l_down, ready);
    const Time step = compute::host_optimizer_step(params, em.ctx.compute_of(g).options().optimizer_bytes_per_param,
                                                   host.optimizer_bytes_per_second);
    const engine::TaskId cpu = em.pb.wait(g, step, l_cpu, down, parallel::StreamRole::HostCpu);
    const engine::TaskId up = em.pb.host_copy(g, bytes, false, parallel::StreamRole::HostCopy, l_up, cpu);
    // The GPU's next kernels wait for the updated weights.
    em.pb.wait(g, 0, l_wait, up);
  }
}

}  // namespace moesim::blocks
