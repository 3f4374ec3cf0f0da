// Kernel cost on one GPU kind: a roofline. A kernel takes
//     launch_overhead + max(FLOPs / (peak[dtype] · efficiency), bytes moved / HBM bandwidth).
// GeMM efficiency is the GPU's `gemm_efficiency` (the fraction of peak a large cuBLAS GeMM
// reaches) times the wave quantization of the shape, unless a calibration table (KernelTables,
// bound from the scenario's profile by sim/simulation/calibration_binding) gives the measured
// FLOP/s of the shape: then efficiency = measured / peak. Wave
// quantization: the output is cut into 128×128 tiles, one per SM at a time; when there are fewer
// tiles than SMs, K is split (as cuBLAS's split-K does) into up to SMs/tiles slices of at least
// 512; the last wave of tiles leaves SMs idle: efficiency × tiles / (waves · SMs). attention uses the GPU's
// `attention_efficiency`, and without FlashAttention it also reads and writes the L×L score
// matrix through HBM (HeterMoE §2.2: why V100 falls far behind A40 on long sequences).
// Backward costs `backward_factor` (2 by default: gradients of inputs and of weights) times forward;
// the attention core's backward instead takes its own measured FLOP/s when a calibration table
// holds them (attention_backward).
#pragma once

#include <functional>
#include <optional>

#include "sim/cluster/gpu_spec.hpp"

namespace moesim::compute {

// Self-attention core FLOPs: QKᵀ and P·V, two GeMMs of 2·L·L·d per head; causal masking halves
// the useful work.
double attention_forward_flops(double batch, double heads, double seq, double head_dim, bool causal);
// Backward: dV, dP, dQ, dK and the recomputed QKᵀ, 5 GeMMs against the forward's 2.
constexpr double kAttentionBackwardFlopRatio = 2.5;

struct ComputeOptions {
  cluster::Dtype dtype = cluster::Dtype::bf16;
  Time launch_overhead = 0;
  double backward_factor = 2.0;
  std::optional<double> gemm_efficiency;       // overrides the GPU's
  std::optional<double> attention_efficiency;  // overrides the GPU's
  double optimizer_bytes_per_param = 32;        // Adam: read/write fp32 master, moments, gradient
};

// Calibration hooks: the FLOP/s measured for a shape in the model's dtype (empty: roofline default).
// Attention FLOPs are counted as attention_forward_flops and, backward, kAttentionBackwardFlopRatio
// times that: the fitter (calibrate/fit) turns measured times into FLOP/s with the same counts.
struct KernelTables {
  std::function<double(double m, double n, double k)> gemm_flops;
  std::function<double(double seq, double head_dim, bool causal)> attention_flops;
  std::function<double(double seq, double head_dim, bool causal)> attention_backward_flops;
};

// The optimizer step of `params` parameters on a host CPU (ZeRO-Offload's CPU Adam): bytes-bound
// like the GPU's, `bytes_per_param` through host memory (Adam reads and writes the fp32 master
// weights and both moments and reads the gradient) at the host's measured streaming rate
// (cluster::HostSpec::optimizer_bytes_per_second; DeepSpeed's CPU-Adam steps 11.6 B parameters in
// 8.2 s, deepspeedai/DeepSpeed PR #735: 45 GB/s at 32 B per parameter).
Time host_optimizer_step(double params, double bytes_per_param, double bytes_per_second);

class ComputeModel {
 public:
  ComputeModel(cluster::GpuSpec gpu, ComputeOptions options, KernelTables tables = {});

  // C[m×n] = A[m×k]·B[k×n].
  Time gemm(double m, double n, double k) const;
  // Self-attention core (QKᵀ, softmax, ·V) for `batch` sequences, `heads` heads of `head_dim`.
  Time attention(double batch, double heads, double seq, double head_dim, bool causal) const;
  // Its backward (dQ, dK, dV): at the measured backward FLOP/s when a table gives them, else
  // backward(attention(...)).
  Time attention_backward(double batch, double heads, double seq, double head_dim, bool causal) const;
  // A memory-bound kernel that moves `bytes` through HBM (norms, activations, permutations).
  Time memory_bound(double bytes) const;
  Time optimizer_step(double params) const;
  Time backward(Time forward) const;

  const cluster::GpuSpec& gpu() const { return gpu_; }
  const ComputeOptions& options() const { return options_; }
  double gemm_efficiency(double m, double n, double k) const;
  // The fraction of the GPU's SMs a GeMM of this shape keeps busy (1 when the SM count is unknown).
  double wave_efficiency(double m, double n, double k) const;

 private:
  Time roofline(double flops, double efficiency, double bytes) const;
  cluster::GpuSpec gpu_;
  ComputeOptions options_;
  KernelTables tables_;
  double peak_;
  double element_bytes_;
};

}  // namespace moesim::compute
