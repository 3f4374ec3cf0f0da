#include "sim/compute/compute_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::compute {

ComputeModel::ComputeModel(cluster::GpuSpec gpu, ComputeOptions options, KernelTables tables)
    : gpu_(std::move(gpu)), options_(options), tables_(std::move(tables)) {
  peak_ = gpu_.peak(options_.dtype);
  if (peak_ <= 0)
    throw InfeasibleError(fmt::format("GPU {} has no {} peak in the catalogue; pick a dtype it supports",
                                      gpu_.key, cluster::to_string(options_.dtype)));
  element_bytes_ = cluster::dtype_bytes(options_.dtype);
}

double ComputeModel::gemm_efficiency(double m, double n, double k) const {
  if (tables_.gemm_flops) return tables_.gemm_flops(m, n, k) / peak_;
  return options_.gemm_efficiency.value_or(gpu_.gemm_efficiency) * wave_efficiency(m, n, k);
}

double ComputeModel::wave_efficiency(double m, double n, double k) const {
  if (gpu_.sms <= 0) return 1.0;
  const double sms = gpu_.sms;
  double tiles = std::ceil(m / 128) * std::ceil(n / 128);
  if (tiles < sms) tiles *= std::max(1.0, std::min(std::floor(sms / tiles), std::floor(k / 512)));
  const double waves = std::ceil(tiles / sms);
  return tiles / (waves * sms);
}

Time ComputeModel::roofline(double flops, double efficiency, double bytes) const {
  const double compute_s = flops / (peak_ * efficiency);
  const double memory_s = bytes / gpu_.hbm_bytes_per_second;
  return options_.launch_overhead + seconds_to_time(std::max(compute_s, memory_s));
}

Time ComputeModel::gemm(double m, double n, double k) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double flops = 2.0 * m * n * k;
  const double bytes = (m * k + k * n + m * n) * element_bytes_;
  return roofline(flops, gemm_efficiency(m, n, k), bytes);
}

Time ComputeModel::attention(double batch, double heads, double seq, double head_dim, bool causal) const {
  if (batch <= 0 || seq <= 0) return 0;
  // QKᵀ and P·V: 2 GeMMs of 2·L·L·d FLOPs per head; causal masking halves the useful work.
  const double flops = 4.0 * batch * heads * seq * seq * head_dim * (causal ? 0.5 : 1.0);
  // Q, K, V and the output always pass through HBM; without FlashAttention the L×L scores are
  // written, read by softmax, written again and read by P·V (4 passes).
  double bytes = 4.0 * batch * heads * seq * head_dim * element_bytes_;
  if (!gpu_.flash_attention) bytes += 4.0 * batch * heads * seq * seq * element_bytes_;
  const double efficiency = tables_.attention_flops ? tables_.attention_flops(seq, head_dim, causal) / peak_
                                                    : options_.attention_efficiency.value_or(gpu_.attention_efficiency);
  return roofline(flops, efficiency, bytes);
}

Time ComputeModel::memory_bound(double bytes) const {
  if (bytes <= 0) return 0;
  return options_.launch_overhead + seconds_to_time(bytes / gpu_.hbm_bytes_per_second);
}

Time ComputeModel::optimizer_step(double params) const { return memory_bound(params * options_.optimizer_bytes_per_param); }

Time ComputeModel::backward(Time forward) const {
  return static_cast<Time>(std::llround(static_cast<double>(forward) * options_.backward_factor));
}

}  // namespace moesim::compute
