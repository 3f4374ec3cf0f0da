// The optimizer step of each GPU, after its backward and its last gradient collective: on the GPU
// (the software's memory-bound kernels, compute::ComputeModel::optimizer_kernels, over the
// parameters it steps and the gradient buffers it holds), or on
// its host (ZeRO-Offload): the gradients copied to host memory over PCIe, the CPU's Adam step
// (compute::host_optimizer_step; the GPUs of one host share its CPU), the updated weights copied
// back; the GPU's next work waits for them.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void optimizer_step(Emission& em, const Frontier& after, const Frontier& last_gradient_sync);

}  // namespace moesim::blocks
