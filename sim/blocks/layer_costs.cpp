// Kernel-by-kernel costs of an MoE transformer layer (see layer_costs.hpp). Byte counts of the
// memory-bound kernels are derived where each is costed.
#include "sim/blocks/layer_costs.hpp"

#include <cmath>
#include <initializer_list>

namespace moesim::blocks {

namespace {
// Bytes per activation element in the compute model's training dtype.
double act(const compute::ComputeModel& cm) { return cluster::storage_bytes(cm.options().dtype); }

// RMSNorm of `tokens` rows of `width`: reads the rows, writes the normed rows (the weight vector
// is negligible): 2·T·width·a.
compute::Work norm(const compute::ComputeModel& cm, double tokens, double width) {
  return compute::kernel(cm.memory_bound(2 * tokens * width * act(cm)));
}

// Residual add (Megatron-Core's bias-dropout-add, no bias or dropout in these models): reads the
// block's output and the residual, writes their sum: 3·T·H·a.
compute::Work residual_add(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  return compute::kernel(cm.memory_bound(3 * tokens * m.hidden * act(cm)));
}

compute::Work gemm(const compute::ComputeModel& cm, double m, double n, double k) {
  return compute::kernel(cm.gemm(m, n, k), cm.gemm_measured());
}

// Memory-bound kernels, one for each byte count.
compute::Work memory_kernels(const compute::ComputeModel& cm, std::initializer_list<double> bytes) {
  compute::Work w;
  for (const double b : bytes) w += compute::kernel(cm.memory_bound(b));
  return w;
}

// A stable radix sort of n int64 keys (PyTorch's argsort over CUB's onesweep, all 64 key bits): an
// arange of the int64 indices it carries (8n), a histogram pass over the keys (8n) and eight 8-bit
// passes each reading and writing keys and indices (32n): 10 kernels. With 1-byte keys (a bool
// routing map) one pass: arange 8n, histogram n, one pass 18n.
compute::Work argsort(const compute::ComputeModel& cm, double n, bool byte_keys) {
  if (byte_keys) return memory_kernels(cm, {8 * n, n, 18 * n});
  compute::Work w = memory_kernels(cm, {8 * n, 8 * n});
  for (int pass = 0; pass < 8; ++pass) w += compute::kernel(cm.memory_bound(32 * n));
  return w;
}

// Permuting T tokens' k copies into expert order, by the software's kernels
// (compute::PermuteKernels; a a bytes an activation element, probabilities in a too, indices int64):
//  - fused: Transformer Engine's moe_permute reads each token once and writes its k copies:
//    (1 + k)·T·H·a, one kernel;
//  - megatron (core_v0.17.0 megatron/core/transformer/moe/moe_utils.py permute, fused=False): the
//    T × E routing map transposed (2·T·E), argsorted as bytes, the sorted indices taken modulo T
//    (reads and writes 8·kT), the probabilities transposed (2·a·T·E) and gathered (8 + 2a a copy),
//    the rows gathered by index_select (reads 8 an index, reads and writes H·a a copy): 8 kernels;
//  - torchtitan (torchtitan@b5bcd76 torchtitan/models/common/token_dispatcher.py _local_reorder
//    L70-106): the kT expert ids argsorted as int64, the scores gathered (8 + 4 + 4 a copy), the
//    token index taken (idx // k: 16 a copy), the rows gathered (8 + 2·H·a a copy): 13 kernels.
compute::Work permute_work(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  const double a = act(cm), t = tokens, e = m.experts, c = m.top_k * tokens, h = m.hidden;
  switch (cm.options().permute_kernels) {
    case compute::PermuteKernels::Fused:
      break;
    case compute::PermuteKernels::Megatron:
      return memory_kernels(cm, {2 * t * e}) + argsort(cm, t * e, true) +
             memory_kernels(cm, {16 * c, 2 * a * t * e, (8 + 2 * a) * c, 8 * c + 2 * c * h * a});
    case compute::PermuteKernels::Torchtitan:
      return argsort(cm, c, false) + memory_kernels(cm, {16 * c, 16 * c, 8 * c + 2 * c * h * a});
  }
  return compute::kernel(cm.memory_bound(t * h * a + c * h * a));
}

// Un-permuting the k expert outputs of T tokens and summing them weighted by the probabilities:
//  - fused: Transformer Engine's moe_unpermute reads the k copies and writes their weighted sum:
//    (k + 1)·T·H·a, one kernel;
//  - megatron (moe_utils.py unpermute, fused=False, probabilities in the activations' dtype): the
//    probabilities and the routing map transposed (2·a·T·E, 2·T·E), the probabilities of the copies
//    selected by masked_select (a count over the map, T·E; a nonzero writing kT indices, T·E + 8·kT;
//    a gather, 8 + 2a a copy), the copies multiplied by them (reads H·a + a, writes H·a), a zeroed
//    T × H output (T·H·a) and scatter_add (reads H·a + 8 a copy, reads and writes the output; one
//    16-bit atomic add an element: ComputeModel::atomic_scatter_add): 8 kernels (masked_select
//    also reads its output's size back to the host: not modelled);
//  - torchtitan (token_dispatcher.py L141-169, ops/scatter_add.py): a zeroed output (T·H·a), the
//    copies cast to fp32 (reads a, writes 4), scaled by their fp32 score (reads 4 + 4/H, writes 4)
//    and cast back (reads 4, writes a), then the deterministic scatter_add out of place: the output
//    cloned (2·T·H·a), the kT indices sorted (argsort, as int64) with two index kernels (16 a
//    copy) and the rows accumulated (reads H·a + 8 a copy, reads and writes the output): 18 kernels.
compute::Work unpermute_work(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  const double a = act(cm), t = tokens, e = m.experts, c = m.top_k * tokens, h = m.hidden;
  switch (cm.options().permute_kernels) {
    case compute::PermuteKernels::Fused:
      break;
    case compute::PermuteKernels::Megatron:
      return memory_kernels(cm, {2 * a * t * e, 2 * t * e, t * e, t * e + 8 * c, (8 + 2 * a) * c, 2 * c * h * a + a * c,
                                 t * h * a}) +
             compute::kernel(cm.atomic_scatter_add(c * h * a + 8 * c + 2 * t * h * a, c * h));
    case compute::PermuteKernels::Torchtitan:
      return memory_kernels(cm, {t * h * a, c * h * (a + 4), 8 * c * h + 4 * c, c * h * (4 + a), 2 * t * h * a}) +
             argsort(cm, c, false) + memory_kernels(cm, {8 * c, 8 * c, c * h * a + 8 * c + 2 * t * h * a});
  }
  return compute::kernel(cm.memory_bound((m.top_k + 1) * tokens * m.hidden * act(cm)));
}

// Their backwards (autograd's), where the software's kernels are PyTorch's; the fused kernels'
// (and every kernel's under the scenario's backward factor): ComputeModel::backward of the forward.
//  - megatron: index_select's gradient is index_add_ into a zeroed T × H gradient (T·H·a; then
//    reads H·a + 8 a copy and adds it by atomics into the rows, read and written), the gathered
//    probabilities' likewise over T·E (a·T·E zeroed; (8 + 2a)·C), their transpose back (2a·T·E):
//    4 kernels. The un-permute's: scatter_add's gradient gathers the copies' rows (8 + 2·H·a a
//    copy), the product's two gradients (the copies': reads H·a + a, writes H·a; the
//    probabilities': the product g·y (reads 2·H·a, writes H·a) summed over H (reads H·a)),
//    masked_select's (a zeroed a·T·E, a masked scatter reading T·E + a·C and writing a·T·E) and
//    the transpose back (2a·T·E): 7 kernels.
//  - torchtitan: the row gather's gradient is index_put_ with accumulation (PyTorch's sort-based
//    kernel, no atomics): a zeroed gradient (T·H·a), the C indices argsorted, the rows accumulated
//    (reads H·a + 8 a copy, the rows read and written), the scores' gradient scattered (16·C):
//    13 kernels. The combine's: the scatter-add's gradient gathers (8 + 2·H·a a copy), the casts'
//    and the product's gradients (bf16 → fp32: H·(a + 4); g·s: 8·H + 4; g·y summed per copy:
//    8·H read, 4·H written and read; fp32 → bf16: H·(4 + a)): 6 kernels.
compute::Work permute_backward_work(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  const double a = act(cm), t = tokens, e = m.experts, c = m.top_k * tokens, h = m.hidden;
  if (cm.options().backward_factor) return cm.backward(permute_work(cm, m, tokens));
  switch (cm.options().permute_kernels) {
    case compute::PermuteKernels::Fused:
      break;
    case compute::PermuteKernels::Megatron:
      return compute::kernel(cm.memory_bound(t * h * a)) +
             compute::kernel(cm.atomic_scatter_add(c * h * a + 8 * c + 2 * t * h * a, c * h)) +
             memory_kernels(cm, {a * t * e + (8 + 2 * a) * c, 2 * a * t * e});
    case compute::PermuteKernels::Torchtitan:
      return compute::kernel(cm.memory_bound(t * h * a)) + argsort(cm, c, false) +
             memory_kernels(cm, {c * h * a + 8 * c + 2 * t * h * a, 16 * c});
  }
  return cm.backward(permute_work(cm, m, tokens));
}

compute::Work unpermute_backward_work(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  const double a = act(cm), t = tokens, e = m.experts, c = m.top_k * tokens, h = m.hidden;
  if (cm.options().backward_factor) return cm.backward(unpermute_work(cm, m, tokens));
  switch (cm.options().permute_kernels) {
    case compute::PermuteKernels::Fused:
      break;
    case compute::PermuteKernels::Megatron:
      return memory_kernels(cm, {8 * c + 2 * c * h * a, 2 * c * h * a + a * c, 3 * c * h * a, c * h * a, a * t * e,
                                 t * e + a * c + a * t * e, 2 * a * t * e});
    case compute::PermuteKernels::Torchtitan:
      return memory_kernels(cm, {8 * c + 2 * c * h * a, c * h * (a + 4), 8 * c * h + 4 * c, 12 * c * h, 4 * c * h,
                                 c * h * (4 + a)});
  }
  return cm.backward(unpermute_work(cm, m, tokens));
}

// A grouped GeMM over the local experts: its kernels as the backend launches them.
compute::Work grouped_gemm(const compute::ComputeModel& cm, std::span<const double> rows, double n, double k) {
  const Time t = cm.grouped_gemm(rows, n, k);
  return {t, cm.grouped_gemm_kernels(rows), cm.gemm_measured() ? t : 0};
}
// Its weight gradient (ComputeModel::grouped_gemm_wgrad), the same kernels.
compute::Work grouped_gemm_wgrad(const compute::ComputeModel& cm, std::span<const double> rows, double n, double k) {
  const Time t = cm.grouped_gemm_wgrad(rows, n, k);
  return {t, cm.grouped_gemm_kernels(rows), cm.gemm_measured() ? t : 0};
}

// Under FP8 training, the cast of a GeMM's activation operand that no earlier kernel fuses
// (ComputeModel::fp8_cast): one kernel per GeMM it feeds (`gemms`: a grouped GeMM launched per
// expert casts each expert's rows on their own, as Transformer Engine's GroupedLinear splits its
// input before quantizing), three under current scaling, none otherwise.
compute::Work fp8_cast(const compute::ComputeModel& cm, double elements, int gemms = 1) {
  const Time t = cm.fp8_cast(elements);
  return t > 0 ? compute::Work{t, gemms * cm.fp8_cast_kernels()} : compute::Work{};
}

// The routed experts' output bias as Megatron-Core adds it (core_v0.17.0
// megatron/core/transformer/moe/experts.py TEGroupedMLP._apply_bias; fc2 is built with
// skip_bias_add, fc1's bias rides on its GeMM's epilogue): per local expert e with r_e rows,
// `t + b * p` over a split of fc2's output t (a bytes an element) with the router probability p in
// fp32, so b·p is an fp32 r_e × H tensor (written: 4·r_e·H) and the sum another (reads a + 4, writes
// 4); then one cat of the fp32 rows (reads and writes 4·C·H) and the cast back (reads 4, writes a).
// Its backward (autograd): the cast's (reads a, writes 4), per expert the gradient cast to t's
// dtype (reads 4, writes a), b's gradient as (g · p) summed over rows (writes and reads 4, reads 4
// again) and p's as (g · b) summed over H (the same), and b's [H] gradient cast to its dtype; the
// probabilities' gradients concatenated once (4·C). Forward 2·E_l + 2 kernels, backward 6·E_l + 2.
// This is TEGroupedMLP's eager path, whose GeMMs are Transformer Engine's GroupedLinear (grouped
// GeMM backend per_expert); Megatron-Core 0.18's fused expert MLP (use_transformer_engine_op_fuser,
// backend grouped) hands the bias to Transformer Engine's fused ops, as moesim's idealised grouped
// kernel takes it into its epilogue: no cost. torch._grouped_mm experts (torchtitan) are costed
// without it (not read).
struct BiasWork {
  compute::Work forward, backward;
};
BiasWork expert_bias_work(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens) {
  BiasWork w;
  if (!m.linear_bias || cm.options().grouped_gemm_kernels != compute::GroupedGemmKernels::PerExpert) return w;
  const double a = act(cm), h = m.hidden;
  double copies = 0;
  for (const double r : tokens) {
    if (r <= 0) continue;
    copies += r;
    w.forward += compute::kernel(cm.memory_bound(4 * r * h)) + compute::kernel(cm.memory_bound((a + 8) * r * h));
    w.backward += compute::kernel(cm.memory_bound((4 + a) * r * h)) + compute::kernel(cm.memory_bound(8 * r * h)) +
                  compute::kernel(cm.memory_bound(4 * r * h)) + compute::kernel(cm.memory_bound(8 * r * h)) +
                  compute::kernel(cm.memory_bound(4 * r * h)) + compute::kernel(cm.memory_bound((4 + a) * h));
  }
  if (copies <= 0) return w;
  w.forward += compute::kernel(cm.memory_bound(8 * copies * h)) + compute::kernel(cm.memory_bound((4 + a) * copies * h));
  w.backward += compute::kernel(cm.memory_bound((a + 4) * copies * h)) + compute::kernel(cm.memory_bound(8 * copies));
  return w;
}

// Whether the routed experts' GeMMs are Transformer Engine's GroupedLinear under Megatron-Core's
// TEGroupedMLP (grouped GeMM backend per_expert): each GroupedLinear quantizes its own input and
// output gradient under FP8 (transformer_engine/pytorch/module/grouped_linear.py at v2.14:
// tex.split_quantize in forward, L151, and backward, L356-366), whatever kernel came before, so the
// activation's output and gradient are cast in kernels of their own, not fused into it.
bool te_grouped_linear(const compute::ComputeModel& cm) {
  return cm.options().grouped_gemm_kernels == compute::GroupedGemmKernels::PerExpert;
}

// An FFN's two GeMMs over `tokens` rows per group: fc1 (H → ffn, or H → 2·ffn gated), fc2 (ffn → H).
struct FfnGemms {
  compute::Work fc1, fc2;
};
FfnGemms ffn_gemms(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens,
                   double ffn) {
  return {grouped_gemm(cm, tokens, (m.ffn_gemms() == 3 ? 2 : 1) * ffn, m.hidden), grouped_gemm(cm, tokens, m.hidden, ffn)};
}

// The activation alone, over `copies` rows of `ffn` columns. SwiGLU (and the quick-GeGLU) reads
// the gate and up halves (2·ffn) and writes ffn; an MLP's GeLU reads ffn and writes ffn: (3 or
// 2)·copies·ffn·a (its FP8 output for fc2 is written instead of the BF16 one). Unfused
// (torchtitan@b5bcd76 torchtitan/models/common/moe.py GroupedExperts L94-105: F.silu, then the
// product), SiLU reads and writes the gate half (2·ffn) and the product reads both and writes one
// (3·ffn): two kernels.
compute::Work activation_kernels(const compute::ComputeModel& cm, const workload::ModelShape& m, double copies,
                                 double ffn) {
  if (copies <= 0) return {};
  const double bytes = copies * ffn * act(cm);
  if (m.ffn_gemms() == 3 && !cm.options().fused_activation)
    return compute::kernel(cm.memory_bound(2 * bytes)) + compute::kernel(cm.memory_bound(3 * bytes));
  return compute::kernel(cm.memory_bound((m.ffn_gemms() == 3 ? 3.0 : 2.0) * bytes));
}

// Whether the routed experts' clamped quick-GeGLU runs apart from its fused kernel: Megatron-Core's
// TEGroupedMLP (grouped GeMM backend per_expert; core_v0.16.0 to core_v0.18.0
// megatron/core/transformer/moe/experts.py bias_act_func → megatron/core/fusions/fused_bias_geglu.py
// weighted_bias_quick_geglu_impl L411-440) clamps the two halves and concatenates them in eager
// PyTorch before the compiled activation, and builds its linear offset as a GPU tensor
// (`torch.tensor(linear_offset, device=input.device)`: a pageable host-to-device copy, which
// PyTorch follows with a stream synchronisation), so the launching thread waits there for the GPU
// each forward and recomputation. Megatron-Core 0.18's fused expert MLP (backend grouped: Transformer
// Engine's fused ops, the clamp as the activation op's `limit`) does neither.
bool clamps_apart(const compute::ComputeModel& cm, const workload::ModelShape& m) {
  return m.expert_kind == workload::ExpertKind::ClampedQuickGeGlu && te_grouped_linear(cm);
}

// Those clamps: x_glu.clamp(max=7) and x_linear.clamp(−7, 7), each reading and writing its half
// (copies·ffn·a), then torch.cat of the two (reads and writes 2·copies·ffn·a): 8·copies·ffn·a in
// three kernels.
compute::Work clamp_kernels(const compute::ComputeModel& cm, double copies, double ffn) {
  const double half = copies * ffn * act(cm);
  return memory_kernels(cm, {2 * half, 2 * half, 4 * half});
}

// Their backward (autograd's): each clamp's gradient reads the incoming gradient and its input and
// writes the masked gradient (3·copies·ffn·a); chunk's gradient concatenates the two halves'
// (reads and writes 2·copies·ffn·a); the cat's gradient is two views: 10·copies·ffn·a in three
// kernels.
compute::Work clamp_backward_kernels(const compute::ComputeModel& cm, double copies, double ffn) {
  const double half = copies * ffn * act(cm);
  return memory_kernels(cm, {3 * half, 3 * half, 4 * half});
}

// The FFNs of experts_time, split where the launching thread syncs with the GPU (clamps_apart:
// after the clamps; `after_sync` empty where nothing syncs); `routed`: the permuted tokens of
// routed experts, whose fc1 input comes from no norm, so under FP8 training it is cast in a kernel
// of its own (and fc2's too, through Transformer Engine's GroupedLinear), and whose output bias (a
// model with linear_bias) is added after fc2.
struct FfnPasses {
  compute::Work before_sync, after_sync;
};
FfnPasses grouped_ffn_passes(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             std::span<const double> tokens, double ffn, bool routed) {
  double copies = 0;
  for (const double t : tokens)
    if (t > 0) copies += t;
  if (copies <= 0) return {};
  const auto [fc1, fc2] = ffn_gemms(cm, m, tokens, ffn);
  const compute::Work cast = routed ? fp8_cast(cm, copies * m.hidden, fc1.kernels) : compute::Work{};
  const compute::Work fc2_cast = routed && te_grouped_linear(cm) ? fp8_cast(cm, copies * ffn, fc2.kernels) : compute::Work{};
  const compute::Work bias = routed ? expert_bias_work(cm, m, tokens).forward : compute::Work{};
  const bool clamped = routed && clamps_apart(cm, m);
  const compute::Work head = cast + fc1 + (clamped ? clamp_kernels(cm, copies, ffn) : compute::Work{});
  const compute::Work tail = activation_kernels(cm, m, copies, ffn) + fc2_cast + fc2 + bias;
  if (clamped) return {head, tail};
  return {head + tail, {}};
}

compute::Work grouped_ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                               std::span<const double> tokens, double ffn, bool routed) {
  const FfnPasses p = grouped_ffn_passes(cm, m, tokens, ffn, routed);
  return p.before_sync + p.after_sync;
}
}  // namespace

compute::Work expert_activation_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double copies,
                                     double ffn) {
  if (copies <= 0) return {};
  return (clamps_apart(cm, m) ? clamp_kernels(cm, copies, ffn) : compute::Work{}) + activation_kernels(cm, m, copies, ffn);
}

compute::Work expert_activation_after_sync(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                           double copies, double ffn) {
  return clamps_apart(cm, m) ? activation_kernels(cm, m, copies, ffn) : compute::Work{};
}

compute::Work norm_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  return norm(cm, tokens, m.hidden);
}

ExpertsWork experts_work(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens,
                         double ffn) {
  ExpertsWork w;
  const FfnPasses passes = grouped_ffn_passes(cm, m, tokens, ffn, true);
  w.forward = passes.before_sync + passes.after_sync;
  w.forward_after_sync = passes.after_sync;
  if (w.forward.time == 0 && w.forward.kernels == 0) return w;
  if (cm.options().backward_factor) {  // the scenario's factor for every kernel
    w.backward = cm.backward(w.forward);
    w.wgrad = {w.backward.time / 2, w.backward.kernels / 2, w.backward.measured / 2};
    return w;
  }
  double copies = 0;
  for (const double t : tokens)
    if (t > 0) copies += t;
  const bool gated = m.ffn_gemms() == 3;
  const double width = (gated ? 2 : 1) * ffn;  // fc1's output
  const compute::Work fc2_dgrad = grouped_gemm(cm, tokens, ffn, m.hidden);
  const compute::Work fc2_wgrad = grouped_gemm_wgrad(cm, tokens, m.hidden, ffn);
  const compute::Work fc1_dgrad = grouped_gemm(cm, tokens, m.hidden, width);
  const compute::Work fc1_wgrad = grouped_gemm_wgrad(cm, tokens, width, m.hidden);
  // The activation's backward (SwiGLU: reads the output gradient and both halves, writes both
  // halves' gradients, 5·copies·ffn·a; GeLU 3). Unfused, autograd runs the product's backward as two
  // kernels (each reads the gradient and one half and writes the other's gradient: 3·copies·ffn·a)
  // and SiLU's (reads the gradient and the gate half, writes its gradient: 3).
  const double bytes = copies * ffn * act(cm);
  const compute::Work activation =
      (gated && !cm.options().fused_activation
           ? memory_kernels(cm, {3 * bytes, 3 * bytes, 3 * bytes})
           : compute::kernel(cm.memory_bound((gated ? 5.0 : 3.0) * bytes))) +
      (clamps_apart(cm, m) ? clamp_backward_kernels(cm, copies, ffn) : compute::Work{});
  // One grouped kernel with linear biases: the fused grouped MLP's dGLU kernel computes fc2's data
  // gradient, the activation's backward and fc1's bias gradient together, at the software's
  // measured ratio to the same kernel without the bias gradient (ComputeOptions::dglu_dbias_slowdown).
  const Time dbias = m.linear_bias && cm.options().grouped_gemm_kernels == compute::GroupedGemmKernels::One
                         ? seconds_to_time((cm.options().dglu_dbias_slowdown - 1) * time_to_seconds(fc2_dgrad.time + activation.time))
                         : Time{0};
  const compute::Work cast = fp8_cast(cm, copies * m.hidden, fc2_dgrad.kernels);
  // Through GroupedLinear, fc1's output gradient (the activation's backward) is cast on its own.
  const compute::Work fc1_cast = te_grouped_linear(cm) ? fp8_cast(cm, copies * width, fc1_dgrad.kernels) : compute::Work{};
  w.wgrad = fc2_wgrad + fc1_wgrad;
  w.backward =
      expert_bias_work(cm, m, tokens).backward + cast + fc2_dgrad + activation + fc1_cast + fc1_dgrad + w.wgrad;
  w.backward.time += dbias;
  return w;
}

compute::Work experts_time(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens,
                           double ffn) {
  return grouped_ffn_time(cm, m, tokens, ffn, true);
}

compute::Work ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn) {
  const double rows[1] = {tokens};
  return grouped_ffn_time(cm, m, rows, ffn, false);
}

compute::Work ffn_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn) {
  if (tokens <= 0) return {};
  const double rows[1] = {tokens};
  const auto [fc1, fc2] = ffn_gemms(cm, m, rows, ffn);
  return weight_gradients(cm, fc1 + fc2);
}

compute::Work qkv_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention) return {};
  const compute::Work pre_norm = norm(cm, tokens, m.hidden);  // the pre-attention RMSNorm
  const compute::Work after = qk_norm_time(cm, m, tokens, tp) + rotary_time(cm, m, tokens, tp);
  if (!m.mla) return qkv_gemms(cm, m, tokens, tp) + pre_norm + after;
  // MLA: each latent normed after its down projection.
  const workload::LatentAttention& a = *m.mla;
  const compute::Work latent_norms =
      (a.q_lora_rank > 0 ? norm(cm, tokens, a.q_lora_rank) : compute::Work{}) + norm(cm, tokens, a.kv_lora_rank);
  return qkv_gemms(cm, m, tokens, tp) + latent_norms + pre_norm + after;
}

compute::Work qk_norm_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention || !m.qk_norm) return {};
  // Transformer Engine's RMSNorm over each head's head_dim columns (Megatron-Core's q_layernorm and
  // k_layernorm, TENorm): reads and writes this rank's queries, then its keys.
  return norm(cm, tokens, m.query_width() / tp) + norm(cm, tokens, m.key_width() / tp);
}

compute::Work rotary_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention || !m.rotary) return {};
  const double a = act(cm), t = tokens;
  if (m.mla) {
    // MLA's decoupled rope dims (DeepSeek-V2 §2.1.3) through Megatron-Core's fused kernels
    // (NVIDIA/Megatron-LM@d98e8a6 megatron/core/fusions/fused_mla_yarn_rope_apply.py): the query's
    // rope dims rotated in place (fused_apply_mla_rope_for_q: reads and writes heads·d_rope), and
    // the keys and values split from the up-projected kv with the one shared rope key rotated into
    // each head (fused_apply_mla_rope_for_kv: reads heads·(d_nope + d_v) + d_rope, writes the keys
    // heads·(d_nope + d_rope) and the values heads·d_v). Taken for every software (torchtitan's
    // eager MLA path not read).
    const workload::LatentAttention& l = *m.mla;
    const double h = m.heads / static_cast<double>(tp);
    return memory_kernels(cm, {2 * t * h * l.qk_rope_head_dim * a,
                               t * a * (h * (l.qk_nope_head_dim + l.v_head_dim) + l.qk_rope_head_dim +
                                        h * (l.qk_nope_head_dim + l.qk_rope_head_dim) + h * l.v_head_dim)});
  }
  const double q = t * m.query_width() / tp, k = t * m.key_width() / tp;  // elements
  // Fused (Transformer Engine's fused_rope, Megatron-Core's apply_rope_fusion): each of the queries
  // and keys read and written once.
  if (cm.options().fused_rope) return memory_kernels(cm, {2 * q * a, 2 * k * a});
  // torchtitan@b5bcd76 torchtitan/models/common/rope.py CosSinRoPE.apply_rotary_emb (Qwen3's), per
  // element of each tensor: the cast to fp32 (reads a, writes 4), ·cos (4 + 4), rotate_half's
  // negation of one half (2 + 2) and cat (4 + 4), ·sin (4 + 4), the sum (8 + 4) and type_as back
  // (4 + a): seven kernels a tensor. (Its ComplexRoPE moves fewer bytes: not modelled.)
  compute::Work w;
  for (const double x : {q, k})
    w += memory_kernels(cm, {(a + 4) * x, 8 * x, 4 * x, 8 * x, 8 * x, 12 * x, (4 + a) * x});
  return w;
}

compute::Work qkv_gemms(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention) return {};
  if (!m.mla) return gemm(cm, tokens, (m.query_width() + m.key_width() + m.value_width()) / tp, m.hidden);
  // MLA: the down projections whole on every rank, the up projections of this rank's heads.
  const workload::LatentAttention& a = *m.mla;
  const compute::Work q_down = a.q_lora_rank > 0 ? gemm(cm, tokens, a.q_lora_rank, m.hidden) : compute::Work{};
  const compute::Work kv_down = gemm(cm, tokens, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden);
  return q_down + kv_down + mla_up_projection_time(cm, m, tokens, tp);
}

compute::Work mla_up_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                     int tp) {
  if (!m.attention || !m.mla) return {};
  const workload::LatentAttention& a = *m.mla;
  const double heads = m.heads / static_cast<double>(tp);
  return gemm(cm, tokens, heads * m.qk_head_dim(), a.q_lora_rank > 0 ? a.q_lora_rank : m.hidden) +
         gemm(cm, tokens, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank);
}

compute::Work output_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention) return {};
  // Its input, the attention core's output, is cast to FP8 on its own under FP8 training.
  return fp8_cast(cm, tokens * m.output_width() / tp) + output_gemm(cm, m, tokens, tp) + residual_add(cm, m, tokens);
}

compute::Work output_gemm(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention) return {};
  return gemm(cm, tokens, m.hidden, m.output_width() / tp);
}

compute::Work weight_gradients(const compute::ComputeModel& cm, const compute::Work& gemms) {
  const compute::Work b = cm.backward(gemms);
  return {b.time / 2, gemms.kernels, b.measured / 2};
}

compute::Work attention_core_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  return compute::kernel(cm.attention(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length,
                                      m.core_head_dim(), t.causal, m.attention_window(layer)),
                         cm.attention_measured());
}

// The fused attention backward: one kernel of dQ, dK, dV (cuDNN's and FlashAttention's, with the
// small pre- and post-processing kernels they add counted as a second: dO·O and dQ's conversion).
compute::Work attention_core_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                           const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  const Time time = cm.attention_backward(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length,
                                          m.core_head_dim(), t.causal, m.attention_window(layer));
  return {time, 2, cm.attention_backward_measured() ? time : 0};
}

namespace {
// The attention block without its core.
compute::Work attention_projections(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                    const workload::TrainingConfig& t, int tp) {
  const double tokens = t.tokens_per_microbatch();
  return qkv_projection_time(cm, m, tokens, tp) + output_projection_time(cm, m, tokens, tp);
}
}  // namespace

compute::Work attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  return attention_projections(cm, m, t, tp) + attention_core_time(cm, m, t, tp, layer);
}

compute::Work mean_attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp) {
  compute::Work w = attention_time(cm, m, t, tp, 0);
  if (m.sliding_window <= 0 || m.layers <= 1) return w;
  double total = 0;
  for (int l = 0; l < m.layers; ++l) total += static_cast<double>(attention_time(cm, m, t, tp, l).time);
  w.time = static_cast<Time>(std::llround(total / m.layers));
  return w;
}

compute::Work attention_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                      const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  return cm.backward(attention_projections(cm, m, t, tp)) + attention_core_backward_time(cm, m, t, tp, layer);
}

compute::Work attention_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                   const workload::TrainingConfig& t, int tp) {
  const double tokens = t.tokens_per_microbatch();
  return weight_gradients(cm, qkv_gemms(cm, m, tokens, tp) + output_gemm(cm, m, tokens, tp));
}

namespace {
// The gate before its permutation, as a fused router runs it: the pre-MLP RMSNorm (a layer with
// attention; expert-only models have none); the router logits, a GeMM of the tokens against the E
// router columns; softmax and top-k in one kernel over fp32 logits: reads T·E·4, writes the dense
// routing probabilities T·E·4 (Megatron-Core's routing map and probs are T×E): 2·T·E·4. Its time
// is those large kernels; its launches the software's count (score function, top-k, auxiliary
// losses and their small kernels), at least the router's two. Its backward is twice it.
compute::Work router_work(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int router_kernels) {
  const compute::Work pre_norm = m.attention ? norm(cm, tokens, m.hidden) : compute::Work{};
  const Time router = cm.gemm(tokens, m.experts, m.hidden);
  const Time top_k = cm.memory_bound(2 * tokens * m.experts * 4);
  return pre_norm + compute::Work{router + top_k, std::max(2, router_kernels), cm.gemm_measured() ? router : 0};
}

// What an eager router (software.router_fusion false) adds in its forward: torch.topk after the
// softmax kernel, at its measured time (ComputeModel::eager_topk). Its gradient is a scatter into
// zeros, so its backward is the fused kernel's, not twice this.
Time eager_topk_extra(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  return cm.options().fused_router ? 0 : cm.eager_topk(tokens, m.experts);
}
}  // namespace

compute::Work gate_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, bool fused_permute,
                        int router_kernels) {
  if (tokens <= 0) return {};
  // Permute: the software's kernels (permute_work).
  const compute::Work permute = fused_permute ? compute::Work{} : permute_work(cm, m, tokens);
  return router_work(cm, m, tokens, router_kernels) + compute::Work{eager_topk_extra(cm, m, tokens), 0} + permute;
}

compute::Work gate_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                 bool fused_permute, int router_kernels) {
  if (tokens <= 0) return {};
  const compute::Work router = cm.backward(router_work(cm, m, tokens, router_kernels));
  return fused_permute ? router : router + permute_backward_work(cm, m, tokens);
}

compute::Work combine_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                    bool fused_permute) {
  if (tokens <= 0) return {};
  const compute::Work residual = m.attention ? cm.backward(residual_add(cm, m, tokens)) : compute::Work{};
  if (fused_permute) return residual;
  return unpermute_backward_work(cm, m, tokens) + residual;
}

compute::Work combine_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, bool fused_permute) {
  if (tokens <= 0) return {};
  if (fused_permute) return m.attention ? residual_add(cm, m, tokens) : compute::Work{};
  // Un-permute with the weighted sum: the software's kernels (unpermute_work).
  return unpermute_work(cm, m, tokens) + (m.attention ? residual_add(cm, m, tokens) : compute::Work{});
}

compute::Work regroup_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double copies) {
  if (copies <= 0) return {};
  return {2 * cm.memory_bound(2 * copies * m.hidden * act(cm)), 2};
}

compute::Work dense_ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (tokens <= 0) return {};
  return norm(cm, tokens, m.hidden) + ffn_time(cm, m, tokens, m.dense_ffn_hidden / tp) + residual_add(cm, m, tokens);
}

compute::Work dense_ffn_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  return ffn_wgrad_time(cm, m, tokens, m.dense_ffn_hidden / tp);
}

compute::Work embedding_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  // A gather: reads the tokens' rows of the table, writes them: 2·T·H·a.
  return compute::kernel(cm.memory_bound(2 * tokens * m.hidden * act(cm)));
}

CrossEntropyWork cross_entropy_work(const compute::ComputeModel& cm, double tokens, double columns) {
  const double elements = tokens * columns;
  const auto pass = [&](double bytes_per_element, int kernels) {
    return compute::Work{cm.memory_bound(elements * bytes_per_element), kernels};
  };
  switch (cm.options().cross_entropy) {
    case compute::CrossEntropyKernels::TransformerEngine:
      // NVIDIA/TransformerEngine v2.10 transformer_engine/common/triton/cross_entropy.py (called from
      // pytorch/triton/cross_entropy.py): online_softmax_kernel reads the 16-bit logits once (max and
      // sum of exponentials), cross_entropy_kernel reads them again and writes the gradient over them
      // (6 bytes an element, 2 kernels; with tp > 1 the per-row max and sum are all-gathered, 12
      // bytes a token); the backward's element_mul_kernel scales the gradient by the per-token loss
      // gradient in place (4 bytes, 1 kernel: Megatron-Core passes unreduced losses, so the
      // grad_output == 1 shortcut does not apply).
      return {pass(6, 2), pass(4, 1)};
    case compute::CrossEntropyKernels::Megatron:
      // NVIDIA/Megatron-LM core_v0.17.0 megatron/core/tensor_parallel/cross_entropy.py,
      // _VocabParallelCrossEntropy: forward .float() (reads 2, writes 4), max (reads 4), the in-place
      // subtraction of the max (4 + 4), exp in place (4 + 4), sum (4), the division by the sum in
      // place (4 + 4): 38 bytes; 19 kernels with the per-token target mask, gathers and log. Backward:
      // the target's update (per token), the multiplication by the loss gradient in place (4 + 4)
      // and .float()'s backward, the cast back to 16 bits (4 + 2): 14 bytes, 7 kernels.
      return {pass(38, 19), pass(14, 7)};
    case compute::CrossEntropyKernels::PyTorch:
      // F.cross_entropy(logits.float(), labels) (torchtitan@b5bcd76 torchtitan/components/loss.py
      // L57): the cast (2 + 4), log_softmax (PyTorch's cunn_SoftMaxForward for rows beyond shared
      // memory: three reads, for the max, the sum of exponentials and the output, and one write:
      // 16) and nll_loss's gather: 22 bytes, 3 kernels. Backward: nll_loss_backward's zero fill of
      // the fp32 gradient (4) and scatter, cunn_SoftMaxBackward (the gradient's sum, then the
      // gradient and output read again and the input's gradient written: 16), the cast back
      // (4 + 2): 26 bytes, 4 kernels.
      return {pass(22, 3), pass(26, 4)};
  }
  return {};
}

namespace {
// The final RMSNorm and the logits GeMM over the rank's vocabulary columns.
compute::Work logits_gemm(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  return gemm(cm, tokens, m.vocab / tp, m.hidden);
}
compute::Work logits_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  return (m.attention ? norm(cm, tokens, m.hidden) : compute::Work{}) + logits_gemm(cm, m, tokens, tp);
}
}  // namespace

compute::Work lm_head_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  return weight_gradients(cm, logits_gemm(cm, m, tokens, tp));
}

compute::Work lm_head_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  return logits_time(cm, m, tokens, tp) + cross_entropy_work(cm, tokens, m.vocab / tp).forward;
}

compute::Work lm_head_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                    int tp) {
  return cm.backward(logits_time(cm, m, tokens, tp)) + cross_entropy_work(cm, tokens, m.vocab / tp).backward;
}

}  // namespace moesim::blocks
