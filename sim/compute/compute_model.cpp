// The GeMM shape model, the fixed kernel cost and the ceilings from published matmul
// measurements: see compute_model.hpp; every fitted constant is in the block below.
#include "sim/compute/compute_model.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::compute {

namespace {
// ---- The GeMM shape model's constants (one place) ----
// Output tile shapes (rows × columns) the model chooses from: those of cuBLAS's and CUTLASS's
// sm_80/sm_90 16-bit kernels, 128×256 and 256×128 (CUTLASS's large-tile defaults), 128×128, and
// 64-row tiles for skinny outputs (64 is the smallest M of Hopper's wgmma).
constexpr std::array<std::array<double, 2>, 6> kGemmTiles{{{128, 256}, {256, 128}, {128, 128}, {64, 128}, {128, 64}, {64, 64}}};
// Fitted, with kKernelOverhead, to the OpenXLA sm_90 table as a whole (tests/data/realdata/20_*:
// 375 batched shapes, b ∈ {1, 2, 4} × M, N, K ∈ {256 … 4096}, BF16 and TF32 achieved FLOP/s on an
// H100-class GPU), the H100's ceiling derived from its BF16 MAMF at each step: mean time error
// 3.3 % (BF16) and 12 % (TF32); compute_test's XlaSm90Table reports it. One set for every dtype:
// the intensity is per operand byte, so TF32's 4-byte operands need tiles twice as wide (the
// table's TF32 column fits best so, with BF16's ceiling).
// FP32 (CUDA cores, no tensor cores) scales kCriticalIntensity by its peak over BF16's: with it the
// model meets this project's own H100 cuBLASLt FP32 table (tests/data/measured) at 14 % mean time
// error, without it at 82 % (small FP32 GeMMs taken as starved as tensor-core tiles).
constexpr double kCriticalIntensity = 55;  // tensor cores: FLOPs per operand byte at which a tile reaches the ceiling
constexpr double kTileRampK = 155;  // a tile's prologue and epilogue, in K elements of the H100's main loop
// The ramp is a time: the prologue waits on the first operand loads' latency and the epilogue
// writes the tile out, neither done by the tensor cores. A GPU whose SMs run the main loop faster
// pays it over more K: kTileRampK scaled by the GPU's 16-bit tensor peak per SM (FP16: every
// tensor-core GPU has it, V100 and T4 no BF16) over the H100's it was fitted on (989.4 TFLOP/s over
// 132 SMs, topologies/gpus.json); B200 2.03x. Held out, on the OpenXLA sm_100 table (compute_test
// XlaSm100Table) it moves the B200's BF16 mean time error from 9.1 to 6.7 % (signed -8.4 to -5.1
// %) and FP8's from 12.9 to 12.0 %. Per GPU, not per dtype: scaled by FP8's doubled rate as well,
// the ramp would leave the GB200's measured FP8 maximum (3615.6 TFLOP/s at K = 1536) out of reach
// and time B200's MXFP8 data gradient 19 % slow (compute_test MeasuredB200Mxfp8GroupedGemm).
constexpr double kRampReferenceFlopsPerSm = 989.4e12 / 132;
// Split-K: slices of at least 512 K elements (the rule of the earlier model, not fitted), partial
// sums in fp32 written and read back once.
constexpr double kMinSplitK = 512;
constexpr double kPartialSumBytes = 4;
// torch._grouped_mm's tiles (compute_model.hpp, kTorchGroupedMmCeiling): sm_90's ping-pong tile
// for groups of at most this many mean rows or outputs of at most this many columns, its
// cooperative tile otherwise; sm_100's one tile.
constexpr std::array<double, 2> kTorchSmallTile{64, 128};
constexpr std::array<double, 2> kTorchLargeTile{128, 256};
constexpr double kTorchSmallBelow = 128;
}  // namespace

ComputeModel::ComputeModel(cluster::GpuSpec gpu, ComputeOptions options, KernelTables tables)
    : gpu_(std::move(gpu)), options_(options), tables_(std::move(tables)) {
  peak_ = gpu_.peak(options_.dtype);
  if (peak_ <= 0 && options_.dtype == cluster::Dtype::mxfp8)
    throw InfeasibleError(fmt::format("GPU {} has no MXFP8 tensor cores (block-scaled FP8 needs Blackwell); use \"dtype\": "
                                      "\"fp8\" (per-tensor scaling) on it",
                                      gpu_.key));
  if (peak_ <= 0)
    throw InfeasibleError(fmt::format("GPU {} has no {} peak in the catalogue; pick a dtype it supports",
                                      gpu_.key, cluster::to_string(options_.dtype)));
  attention_peak_ = gpu_.peak(cluster::storage_dtype(options_.dtype));
  element_bytes_ = cluster::storage_bytes(options_.dtype);
  precision_ = precision(gpu_, options_.dtype);
  overhead_ = options_.launch_overhead.value_or(kKernelOverhead);
  memory_overhead_ = options_.launch_overhead.value_or(tables_.memory_bound ? tables_.memory_bound->fixed : kMemoryKernelOverhead);
  hbm_rate_ = tables_.memory_bound ? tables_.memory_bound->bytes_per_second : kHbmEfficiency * gpu_.hbm_bytes_per_second;
  // A scenario's attention efficiency sets the forward's; the backward keeps the measured ratio.
  attention_backward_efficiency_ = options_.attention_efficiency ? *options_.attention_efficiency * kAttentionBackwardToForward
                                   : gpu_.attention_backward_efficiency > 0
                                       ? gpu_.attention_backward_efficiency
                                       : gpu_.attention_efficiency * kAttentionBackwardToForward;
  measured_overhead_ = options_.launch_overhead.value_or(0);
  ceiling_ = derive_ceiling();
  max_flops_ = derive_max_flops();
}

ComputeModel::Precision ComputeModel::precision(const cluster::GpuSpec& gpu, cluster::Dtype d) {
  // FP32 without TF32 runs on the CUDA cores, not the tensor cores: at its far lower rate a tile
  // needs proportionally fewer FLOPs per operand byte to keep them busy.
  const double bf16 = gpu.peak(cluster::Dtype::bf16);
  const double critical = d == cluster::Dtype::fp32 && bf16 > 0 ? kCriticalIntensity * gpu.peak(d) / bf16 : kCriticalIntensity;
  const double fp16 = gpu.peak(cluster::Dtype::fp16);
  const double ramp = gpu.sms > 0 && fp16 > 0 ? kTileRampK * fp16 / gpu.sms / kRampReferenceFlopsPerSm : kTileRampK;
  return {gpu.peak(d), cluster::dtype_bytes(d), cluster::storage_bytes(d), critical, ramp};
}

ComputeModel::Kernel ComputeModel::cublas() { return {kGemmTiles, true, false}; }

ComputeModel::Kernel ComputeModel::kernel_for(double mean_rows, double columns) const {
  if (options_.grouped_gemm_kernels != GroupedGemmKernels::TorchGroupedMm) return cublas();
  // sm_100 (the catalogue's GPUs with block-scaled MXFP8 tensor cores) runs one tile shape.
  const bool sm100 = gpu_.peak(cluster::Dtype::mxfp8) > 0;
  const bool small = sm100 || mean_rows <= kTorchSmallBelow || columns <= kTorchSmallBelow;
  return {std::span<const std::array<double, 2>>(small ? &kTorchSmallTile : &kTorchLargeTile, 1), false, true};
}

double ComputeModel::modelled_gemm_seconds(std::span<const double> rows, double n, double k, double ceiling,
                                           const Precision& p, const Kernel& kernel) const {
  double rows_sum = 0, groups = 0;
  for (const double r : rows)
    if (r > 0) rows_sum += r, groups += 1;
  if (rows_sum <= 0 || n <= 0 || k <= 0) return 0;
  const double hbm = hbm_rate();
  // A and C per group's rows, each group's own B.
  const double bytes = rows_sum * k * p.operand_bytes + groups * k * n * p.operand_bytes + rows_sum * n * p.output_bytes;
  const double memory = bytes / hbm;
  const double sms = gpu_.sms;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [tm, tn] : kernel.tiles) {
    const double intensity = 2 * tm * tn / ((tm + tn) * p.operand_bytes);
    const double tile_rate = p.peak * ceiling * std::min(1.0, intensity / p.critical_intensity);  // all SMs on such tiles
    double seconds;
    if (sms <= 0) {  // SM count unknown: no wave quantization, no split-K
      seconds = std::max(2 * rows_sum * n * (k + p.ramp_k) / tile_rate, memory);
    } else {
      double tiles = 0;
      for (const double r : rows)
        if (r > 0) tiles += std::ceil(r / tm);
      tiles *= std::ceil(n / tn);
      const double split = kernel.split_k && tiles < sms
                                 ? std::max(1.0, std::min(std::floor(sms / tiles), std::floor(k / kMinSplitK)))
                                 : 1.0;
      const double waves = std::ceil(tiles * split / sms);
      const double compute = waves * sms * 2 * tm * tn * (k / split + p.ramp_k) / tile_rate;
      const double reduction = split > 1 ? 2 * rows_sum * n * split * kPartialSumBytes / hbm : 0.0;
      seconds = std::max(compute, memory) + reduction;
    }
    best = std::min(best, seconds);
  }
  return fixed_seconds(kernel) + best;
}

double ComputeModel::fixed_seconds(const Kernel& kernel) const {
  // torch._grouped_mm's preparation kernel runs first (kTorchGroupedMmCeiling).
  return time_to_seconds(overhead_) + (kernel.prepared ? time_to_seconds(memory_overhead_) : 0.0);
}

double ComputeModel::modelled_wgrad_seconds(std::span<const double> rows, double n, double k, double scale,
                                            const Kernel& kernel) const {
  const Precision& p = precision_;
  double rows_sum = 0, groups = 0, longest = 0;
  for (const double r : rows)
    if (r > 0) rows_sum += r, groups += 1, longest = std::max(longest, r);
  if (rows_sum <= 0 || n <= 0 || k <= 0) return 0;
  const double hbm = hbm_rate();
  // A and dC per group's rows, each group's k × n gradient written.
  const double memory = (rows_sum * (k + n) * p.operand_bytes + groups * k * n * p.output_bytes) / hbm;
  const double sms = gpu_.sms;
  double best = std::numeric_limits<double>::infinity();
  for (const auto& [tm, tn] : kernel.tiles) {
    const double intensity = 2 * tm * tn / ((tm + tn) * p.operand_bytes);
    const double tile_rate = p.peak * ceiling_ * scale * std::min(1.0, intensity / p.critical_intensity);  // all SMs
    const double per_group = std::ceil(k / tm) * std::ceil(n / tn);
    // Every tile of group g runs rows_g + ramp steps of its main loop.
    const double work = per_group * 2 * tm * tn * (rows_sum + groups * p.ramp_k);
    double compute;
    if (sms <= 0) {
      compute = work / tile_rate;
    } else {
      // Waves of one tile per SM, each as long as the mean tile, and never shorter than the
      // longest group's tile (equal groups: the forward's wave model).
      const double tiles = per_group * groups, per_sm = tile_rate / sms;
      compute = std::max(std::ceil(tiles / sms) * work / tiles / per_sm, 2 * tm * tn * (longest + p.ramp_k) / per_sm);
    }
    best = std::min(best, std::max(compute, memory));
  }
  const double modelled = fixed_seconds(kernel) + best;
  return max_flops_ > 0 ? std::max(modelled, 2 * rows_sum * n * k / (max_flops_ * scale)) : modelled;
}

Time ComputeModel::grouped_gemm_wgrad(std::span<const double> rows, double n, double k) const {
  if (tables_.gemm_flops) {  // measured shapes: each group's k × n output over its rows
    Time total = 0;
    for (const double r : rows) total += gemm(k, n, r);
    return total;
  }
  if (options_.grouped_gemm_kernels == GroupedGemmKernels::PerExpert)
    return seconds_to_time(kernels_on_streams(rows, [&](const double r) {
      const double one[1] = {r};
      return modelled_wgrad_seconds(one, n, k, 1.0, cublas());
    }));
  // Each group's k × n output: the kernel's rows are k (torch._grouped_mm's K-grouped call).
  return seconds_to_time(modelled_wgrad_seconds(rows, n, k, grouped_scale(), kernel_for(k, n)));
}

double ComputeModel::kernels_on_streams(std::span<const double> rows, const std::function<double(double rows)>& alone) const {
  const double fixed = time_to_seconds(overhead_);
  // When each stream may launch its next GeMM (its predecessor's end plus the fixed cost), and when
  // the GPU is free of the GeMMs before.
  std::array<double, kTransformerEngineGemmStreams> launch;
  launch.fill(fixed);
  double free = 0;
  std::size_t kernel = 0;
  for (const double r : rows) {
    if (r <= 0) continue;
    double& stream = launch[kernel++ % launch.size()];
    // Launched in order, stream after stream, so each waits for the one launched before it.
    free = std::max(free, stream) + alone(r) - fixed;
    stream = free + fixed;
  }
  return free;
}

double ComputeModel::grouped_scale() const {
  return options_.grouped_gemm_kernels == GroupedGemmKernels::TorchGroupedMm
             ? options_.torch_grouped_mm_ceiling.value_or(kTorchGroupedMmCeiling)
             : 1.0;
}

cluster::Dtype ComputeModel::measurement_dtype() const {
  // The dtype's own measurement, else (fp16, tf32: the same tensor cores) bf16's, and (mxfp8
  // without one: the same FP8 tensor cores, the block scales applied in hardware) fp8's.
  const cluster::Dtype d = options_.dtype;
  if (gpu_.measured_matmul(d).flops > 0) return d;
  if (d == cluster::Dtype::fp16 || d == cluster::Dtype::tf32) return cluster::Dtype::bf16;
  if (d == cluster::Dtype::mxfp8) return cluster::Dtype::fp8;
  return d;
}

double ComputeModel::derive_max_flops() const {
  if (options_.gemm_efficiency) return 0;  // the scenario's ceiling stands alone
  const cluster::Dtype d = measurement_dtype();
  const cluster::MatmulMeasurement& mm = gpu_.measured_matmul(d);
  if (mm.flops <= 0 || gpu_.peak(d) <= 0) return 0;
  return mm.flops * peak_ / gpu_.peak(d);
}

double ComputeModel::derive_ceiling() const {
  if (options_.gemm_efficiency) return *options_.gemm_efficiency;
  const cluster::Dtype d = measurement_dtype();
  const cluster::MatmulMeasurement* mm = &gpu_.measured_matmul(d);
  if (mm->flops <= 0 || gpu_.peak(d) <= 0) return gpu_.gemm_efficiency;
  // The ceiling at which the model, in the measurement's dtype, takes the measured time at the
  // measured shape: time falls as the ceiling rises, so bisect (60 halvings: far below a picosecond).
  const Precision p = precision(gpu_, d);
  const double measured = 2 * mm->m * mm->n * mm->k / mm->flops;
  const double shape[1] = {mm->m};
  // The brute-force search timed torch.mm: cuBLAS's kernels.
  if (modelled_gemm_seconds(shape, mm->n, mm->k, 1.0, p, cublas()) > measured)
    throw InfeasibleError(fmt::format("GPU {}: the measured matmul rate {:.1f} TFLOP/s at {}x{}x{} is beyond what its {} peak "
                                      "allows with a kernel overhead of {:.1f} us; check the measurement and the peak",
                                      gpu_.key, mm->flops / 1e12, mm->m, mm->n, mm->k, cluster::to_string(d),
                                      time_to_seconds(overhead_) * 1e6));
  double lo = 0, hi = 1;
  for (int i = 0; i < 60; ++i) {
    const double mid = (lo + hi) / 2;
    (modelled_gemm_seconds(shape, mm->n, mm->k, mid, p, cublas()) > measured ? lo : hi) = mid;
  }
  return hi;
}

double ComputeModel::gemm_seconds(double m, double n, double k) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  if (tables_.gemm_flops) {
    const double flops = 2.0 * m * n * k;
    const double bytes = (m * k + k * n) * precision_.operand_bytes + m * n * precision_.output_bytes;
    return time_to_seconds(measured_overhead_) +
           std::max(flops / tables_.gemm_flops(m, n, k), bytes / hbm_rate());
  }
  const double rows[1] = {m};
  return capped_gemm_seconds(rows, n, k, 1.0, cublas());
}

double ComputeModel::capped_gemm_seconds(std::span<const double> rows, double n, double k, double scale,
                                         const Kernel& kernel) const {
  const double modelled = modelled_gemm_seconds(rows, n, k, ceiling_ * scale, precision_, kernel);
  if (max_flops_ <= 0) return modelled;
  double rows_sum = 0;
  for (const double r : rows) rows_sum += std::max(0.0, r);
  return std::max(modelled, 2 * rows_sum * n * k / (max_flops_ * scale));
}

double ComputeModel::gemm_efficiency(double m, double n, double k) const {
  const double s = gemm_seconds(m, n, k);
  return s > 0 ? 2.0 * m * n * k / (s * peak_) : 0.0;
}

Time ComputeModel::attention_roofline(double flops, double efficiency, double bytes, Time fixed) const {
  const double compute_s = flops / (attention_peak_ * efficiency);
  const double memory_s = bytes / hbm_rate();
  return fixed + seconds_to_time(std::max(compute_s, memory_s));
}

Time ComputeModel::gemm(double m, double n, double k) const { return seconds_to_time(gemm_seconds(m, n, k)); }

Time ComputeModel::grouped_gemm(std::span<const double> rows, double n, double k) const {
  if (tables_.gemm_flops) {  // measured shapes: each group as the GeMM the table measured
    Time total = 0;
    for (const double r : rows) total += gemm(r, n, k);
    return total;
  }
  return seconds_to_time(grouped_call_seconds(rows, n, k));
}

double ComputeModel::grouped_call_seconds(std::span<const double> rows, double n, double k) const {
  if (options_.grouped_gemm_kernels == GroupedGemmKernels::PerExpert)
    return kernels_on_streams(rows, [&](const double r) {
      const double one[1] = {r};
      return capped_gemm_seconds(one, n, k, 1.0, cublas());
    });
  // PyTorch picks the tile by the rows over the group count, empty groups included.
  double rows_sum = 0;
  for (const double r : rows) rows_sum += std::max(0.0, r);
  const double mean = rows.empty() ? 0.0 : rows_sum / static_cast<double>(rows.size());
  return capped_gemm_seconds(rows, n, k, grouped_scale(), kernel_for(mean, n));
}

int ComputeModel::grouped_gemm_kernels(std::span<const double> rows) const {
  if (options_.grouped_gemm_kernels != GroupedGemmKernels::PerExpert) return 1;
  int n = 0;
  for (const double r : rows) n += r > 0;
  return n;
}

double attention_window_scores(double seq, double window) {
  if (window <= 0 || window >= seq) return 0.5 * seq * seq;
  const double b = kAttentionTile;
  // Query block q's first key block is q − c (c = ⌈(window − 1)/b⌉) once q ≥ c: it computes c full
  // tiles and the diagonal half; the first c blocks compute every tile before them, as causal.
  const double c = std::ceil((window - 1) / b);
  double scores = 0;
  for (double q = 0; q < c && q * b < seq; ++q) scores += std::min(b, seq - q * b) * (q * b + b / 2);
  scores += std::max(0.0, seq - c * b) * (c * b + b / 2);
  return scores;
}

double attention_forward_flops(double batch, double heads, double seq, double head_dim, bool causal, double window) {
  if (causal && window > 0) return 4.0 * batch * heads * head_dim * attention_window_scores(seq, window);
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

Time ComputeModel::attention(double batch, double heads, double seq, double head_dim, bool causal, double window) const {
  if (batch <= 0 || seq <= 0) return 0;
  const double flops = attention_forward_flops(batch, heads, seq, head_dim, causal, window);
  const bool measured = static_cast<bool>(tables_.attention_flops);
  const double efficiency = measured ? tables_.attention_flops(seq, head_dim, causal, window) / attention_peak_
                                     : options_.attention_efficiency.value_or(gpu_.attention_efficiency);
  return attention_roofline(flops, efficiency, attention_bytes(batch, heads, seq, head_dim, element_bytes_, gpu_.flash_attention),
                  measured ? measured_overhead_ : overhead_);
}

Time ComputeModel::attention_backward(double batch, double heads, double seq, double head_dim, bool causal,
                                      double window) const {
  if (batch <= 0 || seq <= 0) return 0;
  // dV = Pᵀ·dO, dP = dO·Vᵀ, dQ = dS·K, dK = dSᵀ·Q and the recomputed QKᵀ: 2.5× the forward FLOPs;
  // it reads Q, K, V, O and dO and writes dQ, dK, dV, and (unfused) passes the scores, their
  // gradient and P as often again as the forward: twice the forward's bytes.
  const double flops = kAttentionBackwardFlopRatio * attention_forward_flops(batch, heads, seq, head_dim, causal, window);
  const bool measured = static_cast<bool>(tables_.attention_backward_flops);
  const double efficiency =
      measured ? tables_.attention_backward_flops(seq, head_dim, causal, window) / attention_peak_ : attention_backward_efficiency_;
  return attention_roofline(flops, efficiency, 2 * attention_bytes(batch, heads, seq, head_dim, element_bytes_, gpu_.flash_attention),
                            measured ? measured_overhead_ : overhead_);
}

Time ComputeModel::memory_bound(double bytes) const {
  if (bytes <= 0) return 0;
  return memory_overhead_ + seconds_to_time(bytes / hbm_rate());
}

Time ComputeModel::atomic_scatter_add(double bytes, double adds) const {
  if (bytes <= 0 && adds <= 0) return 0;
  const double rate = kAtomicAddsPerSecond * gpu_.hbm_bytes_per_second / kAtomicReferenceHbm;
  return memory_overhead_ +
         seconds_to_time(std::max(bytes / hbm_rate(), adds > 0 ? adds / rate : 0.0));
}

Time ComputeModel::eager_topk(double rows, double experts) const {
  if (rows <= 0) return 0;
  return kTopkFixed + seconds_to_time(rows * (kTopkPerRowSeconds + experts * kTopkPerScoreSeconds));
}

Time ComputeModel::fp8_cast(double elements) const {
  if (!cluster::is_fp8(options_.dtype) || elements <= 0) return 0;
  const double amax = options_.fp8_current_scaling ? element_bytes_ : 0.0;
  return memory_bound(elements * (amax + element_bytes_ + 2 * cluster::dtype_bytes(options_.dtype)));
}

Time host_optimizer_step(double params, double bytes_per_param, double bytes_per_second) {
  if (params <= 0) return 0;
  return seconds_to_time(params * bytes_per_param / bytes_per_second);
}

Time ComputeModel::optimizer_step(double params) const { return memory_bound(params * options_.optimizer_bytes_per_param); }

Work ComputeModel::optimizer_kernels(double params, double gradient_buffer_params) const {
  const OptimizerBytes& b = options_.optimizer_bytes;
  Work w;
  const auto pass = [&](double bytes) {
    if (bytes > 0) w += kernel(memory_bound(bytes));
  };
  switch (options_.optimizer_kernels) {
    case OptimizerKernels::Fused: return kernel(optimizer_step(params));
    case OptimizerKernels::Megatron:
      pass(params * b.main_grad);                  // the gradient norm
      pass(params * b.adam);                       // FusedAdam
      pass(params * b.master_copy);                // master weights into the 16-bit weights
      pass(gradient_buffer_params * b.main_grad);  // the gradient buffer zeroed
      return w;
    case OptimizerKernels::Torch:
      pass(params * b.main_grad);      // torch._foreach_norm
      pass(params * 2 * b.main_grad);  // _foreach_mul_ by the clip coefficient
      pass(params * b.adam);           // AdamW(fused=True)
      return w;
  }
  return w;
}

Time ComputeModel::backward(Time forward) const {
  return ps_to_time(static_cast<double>(forward) * options_.backward_factor.value_or(2.0));
}

std::vector<std::pair<std::string, std::string>> ComputeModel::kernel_sources() const {
  const std::string dt(cluster::to_string(options_.dtype));
  const std::string gemm_model =
      fmt::format("model: output tiles in waves at {:.0f} % of the {} peak{}", 100 * ceiling_, dt,
                  max_flops_ > 0 ? ", never above the GPU's measured maximum matmul rate" : "");
  const std::string attention_model = fmt::format(
      "model: {:.0f} % of the {} peak", 100 * options_.attention_efficiency.value_or(gpu_.attention_efficiency),
      cluster::to_string(cluster::storage_dtype(options_.dtype)));
  const auto table = [](const std::string& source) { return "measured table: " + source; };
  return {
      {"gemm", gemm_measured() ? table(tables_.gemm_source) : gemm_model},
      {"grouped_gemm", gemm_measured() ? table(tables_.gemm_source) + ", each group as the GeMM of its shape"
                                       : fmt::format("{} ({} kernels)", gemm_model,
                                                     name_of(kGroupedGemmNames, options_.grouped_gemm_kernels))},
      {"attention", attention_measured() ? table(tables_.attention_source) : attention_model},
      {"attention_backward", attention_backward_measured()
                                 ? table(tables_.attention_source)
                                 : fmt::format("model: {:.0f} % of the {} peak", 100 * attention_backward_efficiency_,
                                               cluster::to_string(cluster::storage_dtype(options_.dtype)))},
      {"memory_bound",
       tables_.memory_bound
           ? fmt::format("model, its line measured: {:.2f} us and the bytes at {:.0f} GB/s ({})",
                         time_to_seconds(memory_overhead_) * 1e6, hbm_rate_ / 1e9, tables_.memory_bound_source)
           : fmt::format("model: a fixed cost and the bytes at {:.1f} % of the HBM bandwidth, fitted to "
                         "tests/data/measured/h100-memory-bound-kernels.json",
                         100 * kHbmEfficiency)},
  };
}

}  // namespace moesim::compute
