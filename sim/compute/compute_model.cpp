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

double attention_forward_flops(double batch, double heads, double seq, double head_dim, bool causal) {
  return 4.0 * batch * heads * seq * seq * head_dim * (causal ? 0.5 : 1.0);
}

namespace {
// HBM bytes of the attention core's forward: Q, K, V and the output always; without
// FlashAttention the L×L scores are written, read by softmax, written again and read by P·V.
double attention_bytes(double batch, double heads, double seq, double head_dim, double element_bytes, bool flash) {
  double bytes = 4.0 * batch * heads * seq * head_dim * element_bytes;
  if (!flash) bytes += 4.0 * batch * heads * seq * seq * element_bytes;
  return bytes;
}
}  // namespace

Time ComputeModel::attention(double batch, double heads, double seq, double head_dim, bool causal) const {
  if (batch <= 0 || seq <= 0) return 0;
  const double flops = attention_forward_flops(batch, heads, seq, head_dim, causal);
  const double efficiency = tables_.attention_flops ? tables_.attention_flops(seq, head_dim, causal) / peak_
                                                    : options_.attention_efficiency.value_or(gpu_.attention_efficiency);
  return roofline(flops, efficiency, attention_bytes(batch, heads, seq, head_dim, element_bytes_, gpu_.flash_attention));
}

Time ComputeModel::attention_backward(double batch, double heads, double seq, double head_dim, bool causal) const {
  if (!tables_.attention_backward_flops) return backward(attention(batch, heads, seq, head_dim, causal));
  if (batch <= 0 || seq <= 0) return 0;
  // dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q and the recomputed QKᵀ: 2.5× the forward FLOPs;
  // it reads Q, K, V, O and dO and writes dQ, dK, dV, and (unfused) passes the scores, their
  // gradient and P as often again as the forward: twice the forward's bytes.
  const double flops = kAttentionBackwardFlopRatio * attention_forward_flops(batch, heads, seq, head_dim, causal);
  const double efficiency = tables_.attention_backward_flops(seq, head_dim, causal) / peak_;
  return roofline(flops, efficiency, 2 * attention_bytes(batch, heads, seq, head_dim, element_bytes_, gpu_.flash_attention));
}

Time ComputeModel::memory_bound(double bytes) const {
  if (bytes <= 0) return 0;
  return options_.launch_overhead + seconds_to_time(bytes / gpu_.hbm_bytes_per_second);
}

Time host_optimizer_step(double params, double bytes_per_param, double bytes_per_second) {
  if (params <= 0) return 0;
  return seconds_to_time(params * bytes_per_param / bytes_per_second);
}

Time ComputeModel::optimizer_step(double params) const { return memory_bound(params * options_.optimizer_bytes_per_param); }

Time ComputeModel::backward(Time forward) const {
  return ps_to_time(static_cast<double>(forward) * options_.backward_factor);
}

}  // namespace moesim::compute
