// A GPU kind: vendor data-sheet figures (dense peak FLOPS per dtype, HBM bandwidth and capacity,
// host link), published maximum achievable matmul measurements, and the efficiencies the compute
// model applies. The catalogue of kinds is topologies/gpus.json; each entry cites its sources.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/enum_names.hpp"
#include "sim/core/units.hpp"

namespace moesim::cluster {

// fp8: FP8 GeMM operands with per-tensor scales (Transformer Engine's DelayedScaling and
// current-scaling recipes); mxfp8: the OCP microscaling format (TE's MXFP8BlockScaling), one
// E8M0 scale byte per 32 elements, in hardware on Blackwell's tensor cores only.
enum class Dtype { fp32, tf32, fp16, bf16, fp8, mxfp8 };
inline constexpr auto kDtypeNames = enum_names<Dtype>({{Dtype::fp32, "fp32"}, {Dtype::tf32, "tf32"}, {Dtype::fp16, "fp16"},
                                                    {Dtype::bf16, "bf16"}, {Dtype::fp8, "fp8"}, {Dtype::mxfp8, "mxfp8"}});
std::optional<Dtype> parse_dtype(std::string_view text);
std::string_view to_string(Dtype d);
// Bytes per element as stored in memory (tf32 is stored as fp32; mxfp8 with its block's scale:
// 1 + 1/32).
double dtype_bytes(Dtype d);
// FP8 training by either recipe.
inline bool is_fp8(Dtype d) { return d == Dtype::fp8 || d == Dtype::mxfp8; }
// The dtype a training in dtype d keeps and sends its tensors in (weights, gradients,
// activations, the tokens its experts exchange) and its attention core computes in, and its bytes
// per element: d itself, except FP8 (both recipes): Transformer Engine's FP8 recipes (DelayedScaling, MXFP8BlockScaling
// in NVIDIA/TransformerEngine transformer_engine/common/recipe) cast only the GeMM operands of its
// linear layers to FP8 and keep everything else in BF16, the attention core included (`fp8_dpa`
// defaults to False), and Megatron-Core's all-to-all token dispatcher sends BF16 hidden states.
Dtype storage_dtype(Dtype d);
double storage_bytes(Dtype d);

// A published "maximum achievable matmul FLOPS" measurement (Stas Bekman's mamf-finder,
// stas00/ml-engineering compute/accelerator/README.md): the best FLOP/s a brute-force search over
// GeMM shapes reached, and the shape (M×N×K) that reached it. The compute model derives its GeMM
// ceiling from it (compute::ComputeModel).
struct MatmulMeasurement {
  double flops = 0;  // FLOP/s; 0: none published
  double m = 0, n = 0, k = 0;
};

// One fused attention kernel measured on the GPU, forward and backward (gpus.json
// "attention_kernels": cuDNN's SDPA, which Transformer Engine's FusedAttention runs, in BF16).
// Without a calibration profile's attention table, the compute model takes its attention FLOP/s
// from these, counting each kernel's FLOPs as it counts its own (simulation/calibration_binding).
struct AttentionMeasurement {
  double batch = 0, heads = 0, seq = 0;
  double head_dim = 0, head_dim_v = 0;  // of Q and K, of V and O (MLA: 192, 128)
  bool causal = true;
  double window = 0;  // keys each query sees (a sliding window); 0: all
  Time forward = 0, backward = 0;
};

struct GpuSpec {
  std::string key;   // catalogue key, e.g. "h100-sxm5-80gb"
  std::string name;  // vendor name
  std::array<double, 6> peak_flops{};  // FLOP/s per Dtype; 0 where the GPU has no such unit
  double hbm_bytes_per_second = 0;
  double memory_bytes = 0;
  int sms = 0;  // streaming multiprocessors; 0: unknown (no wave quantization)
  // GeMM ceiling (the fraction of peak a tile's main loop sustains) for dtypes without a
  // measurement in `mamf` (see compute::ComputeModel for the fallback order).
  double gemm_efficiency = 0.7;
  std::array<MatmulMeasurement, 6> mamf{};  // per Dtype
  double attention_efficiency = 0.5;  // the fused attention forward's fraction of peak
  double attention_backward_efficiency = 0;  // its backward's; 0: compute::kAttentionBackwardToForward × forward
  bool flash_attention = true;
  std::vector<AttentionMeasurement> attention_kernels;  // BF16; empty: the efficiencies above
  std::string attention_kernels_source;
  Bandwidth host_bandwidth{16e9};
  Time host_latency = 2 * kMicrosecond;
  Bandwidth nvlink{};  // per direction; 0: no NVLink (plausibility checks only)
  // Host time its system's CPU spends issuing a kernel, relative to a DGX H100's Xeon Platinum
  // 8480C (software::HostCosts are per kernel on that host): a Grace host issues PyTorch's work
  // more slowly (gpus.json cites the measurement).
  double host_launch_factor = 1.0;
  // Under sustained load a power limit pulls the SM clock down: a GPU kept busy settles at this
  // fraction of the rate its kernels were measured at (in short bursts), with this time constant
  // (engine::Engine::set_sustained_clock); 1: none.
  double sustained_clock = 1.0;
  Time sustained_clock_time_constant = 0;
  std::string source;

  double peak(Dtype d) const { return peak_flops[static_cast<std::size_t>(d)]; }
  const MatmulMeasurement& measured_matmul(Dtype d) const { return mamf[static_cast<std::size_t>(d)]; }
};

}  // namespace moesim::cluster
