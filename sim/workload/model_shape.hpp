// The shape of an MoE transformer (tensor sizes, parameters, per-token work) and the training
// settings that turn it into work per GPU. Presets in models/ cite their papers.
#pragma once

#include <optional>
#include <string>

#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/enum_names.hpp"

namespace moesim::workload {

// The experts' FFN: a 2-GeMM MLP, or a gated one (3 GeMMs: gate, up, down) whose activation is
// SwiGLU, or GPT-OSS's clamped quick-GeGLU (openai/gpt-oss-120b config.json swiglu_limit 7.0;
// Megatron-Core's quick_gelu with activation_func_clamp_value 7.0 and glu_linear_offset 1.0:
// quick_gelu(min(gate, 7)) · (clamp(up, −7, 7) + 1)), whose clamps Megatron-Core's TEGroupedMLP runs
// as kernels of their own (blocks::expert_activation_time).
enum class ExpertKind { Mlp, SwiGlu, ClampedQuickGeGlu };
inline constexpr auto kExpertKindNames = enum_names<ExpertKind>(
    {{ExpertKind::Mlp, "mlp"}, {ExpertKind::SwiGlu, "swiglu"}, {ExpertKind::ClampedQuickGeGlu, "clamped_quick_geglu"}});

// Multi-head latent attention (DeepSeek-V2 §2.1, DeepSeek-V3 §2.1.1): queries through a
// q_lora_rank latent (or straight from the hidden state when 0), keys and values through one
// kv_lora_rank latent plus a shared rotary key of qk_rope_head_dim; each head's query and key are
// qk_nope_head_dim + qk_rope_head_dim wide, its value v_head_dim. The down projections are whole
// on every tensor-parallel rank, the up projections and the output projection split by heads
// (Megatron-Core's MLASelfAttention).
struct LatentAttention {
  double q_lora_rank = 0;
  double kv_lora_rank = 0;
  double qk_nope_head_dim = 0;
  double qk_rope_head_dim = 0;
  double v_head_dim = 0;
};

struct ModelShape {
  std::string name;
  int layers = 1;
  int dense_layers = 0;  // leading layers with a dense FFN instead of an MoE block
  double hidden = 0;     // H
  double ffn_hidden = 0; // M, per expert
  double dense_ffn_hidden = 0;
  int experts = 1;  // E, routed experts per MoE layer
  int top_k = 1;
  int shared_experts = 0;
  ExpertKind expert_kind = ExpertKind::Mlp;
  // The linear layers carry biases (GPT-OSS; Megatron-Core's add_bias_linear). Their time is the
  // routed experts' output bias (blocks::expert_bias_time); the parameters (E·(2M + H) per layer
  // for gated experts) are not counted, under 0.1 % of GPT-OSS's.
  bool linear_bias = false;
  // Rotary position embeddings on the queries and keys (RoFormer, Su et al. 2021; Mixtral, Qwen3,
  // GPT-OSS, DeepSeek-V3's decoupled rope dims), applied after the QKV projection
  // (blocks::rotary_time); false: positions learned or absolute, nothing to apply per layer.
  bool rotary = false;
  // An RMSNorm over each query and key head before the attention (Qwen3's q_norm and k_norm,
  // Megatron-Core's qk_layernorm).
  bool qk_norm = false;
  int heads = 1;
  int kv_heads = 1;
  double vocab = 0;
  // false: a bare MoE layer without attention (the layer benchmarks of Parm Table III, FasterMoE).
  bool attention = true;
  // Multi-token prediction (DeepSeek-V3 §2.2; Megatron-Core's mtp_num_layers): the last mtp_layers
  // of `layers` are MTP modules, each an MoE layer after the decoder's last with, before it, the
  // embedding of the tokens one step further, two RMSNorms and a 2h → h projection, and after it
  // a second pass of the shared LM head and its loss.
  int mtp_layers = 0;

  // Sliding-window (banded causal) attention: each query attends to the last `sliding_window`
  // tokens, itself included, in the layers l with l % window_period == 0; the others attend to
  // the whole causal prefix (GPT-OSS: a window of 128 on every other layer, the first windowed).
  // 0: every layer full attention.
  double sliding_window = 0;
  int window_period = 1;

  double explicit_head_dim = 0;  // 0: hidden / heads (Qwen3 MoE uses 128 with hidden 2048 and 32 heads)
  std::optional<LatentAttention> mla;  // multi-head latent attention instead of (grouped-query) multi-head

  double head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden / heads; }
  // The attention window of `layer` in tokens, 0 for full attention (and for layer -1: none named).
  double attention_window(int layer) const {
    return sliding_window > 0 && layer >= 0 && layer % window_period == 0 ? sliding_window : 0;
  }
  // Width of one head's query and key, and of its value.
  double qk_head_dim() const { return mla ? mla->qk_nope_head_dim + mla->qk_rope_head_dim : head_dim(); }
  double v_head_dim() const { return mla ? mla->v_head_dim : head_dim(); }
  // The head width the attention core's work follows: QK^T over qk_head_dim, PV over v_head_dim.
  double core_head_dim() const { return (qk_head_dim() + v_head_dim()) / 2; }
  double query_width() const { return heads * qk_head_dim(); }   // columns of Q
  double output_width() const { return heads * v_head_dim(); }   // rows of the output projection
  double key_width() const { return kv_heads * qk_head_dim(); }  // columns of K (per head with MLA)
  double value_width() const { return kv_heads * v_head_dim(); } // columns of V
  int ffn_gemms() const { return expert_kind == ExpertKind::Mlp ? 2 : 3; }
  int moe_layers() const { return layers - dense_layers; }
  bool is_moe(int layer) const { return layer >= dense_layers; }
  bool is_mtp(int layer) const { return layer >= layers - mtp_layers; }
  // An MTP module's own parameters besides its layer's: the projection M (2h × h) and the norms of
  // the embedding, of the previous depth's hidden state and of its output.
  double mtp_extra_params() const { return 2 * hidden * hidden + 3 * hidden; }

  double expert_params() const { return ffn_gemms() * hidden * ffn_hidden; }  // P_E of HybridEP
  // Q, K, V projections (GQA: kv_heads key/value heads; MLA: down and up projections and the
  // latents' norms) and the output projection.
  double attention_params() const;
  double gate_params() const { return hidden * experts; }
  double dense_ffn_params() const { return ffn_gemms() * hidden * dense_ffn_hidden; }
  double norm_params() const { return 2 * hidden; }
  double embedding_params() const { return 2 * vocab * hidden; }  // input embedding and LM head, untied
  // Parameters every data-parallel rank holds: everything but the routed experts.
  double replicated_params() const;
  double routed_expert_params() const { return moe_layers() * experts * expert_params(); }
  double total_params() const { return replicated_params() + routed_expert_params(); }
};

// Activation recomputation (Korthikanti et al. 2022 §5): none; selective (the attention core's
// softmax, dropout and QK^T recomputed in the backward instead of kept: the 5·a·s/h term of the
// activations; FlashAttention always does this); full (each layer's input kept, the whole layer's
// forward run again before its backward: Megatron's --recompute-granularity full, uniform, 1 layer).
// How FP8 (dtype fp8) tensors get their scale: from the amax history of earlier iterations
// (Transformer Engine's DelayedScaling) or from the tensor itself, each cast first reading it for
// its amax (per-tensor current scaling: Megatron-Core's fp8_recipe tensorwise).
enum class Fp8Scaling : std::uint8_t { Delayed, Current };
inline constexpr auto kFp8ScalingNames = enum_names<Fp8Scaling>({{Fp8Scaling::Delayed, "delayed"}, {Fp8Scaling::Current, "current"}});

enum class Recompute : std::uint8_t { None, Selective, Full };
inline constexpr auto kRecomputeNames =
    enum_names<Recompute>({{Recompute::None, "none"}, {Recompute::Selective, "selective"}, {Recompute::Full, "full"}});

// Selective recomputation by module, as Megatron-Core names them (TransformerConfig.recompute_modules,
// megatron/core/transformer/transformer_config.py; default core_attn): each frees the activations its
// forward keeps and runs that forward again just before its backward. core_attn: the attention core
// (the scores above; nothing to do with FlashAttention); layernorm: the input and pre-MLP norms'
// outputs (the GeMM inputs they feed); mla_up_proj: MLA's up projections, their Q, K, V; moe_act:
// the routed experts' activation output; mlp: a dense layer's FFN from its input; shared_experts:
// the shared experts from theirs. Megatron's "moe" (the whole MoE layer, exchanges included) is
// not modelled: training.recompute "full" recomputes whole layers. One more is torchtitan's, not
// Megatron's: routed_experts, the routed experts' whole FFN from their input (fc1, the activation,
// fc2), recomputed before their backward, as torchtitan's selective activation checkpointing does
// because it does not save torch._grouped_mm's outputs (torchtitan@b5bcd76
// torchtitan/distributed/activation_checkpoint.py L31-94; the exchanges' outputs it saves).
enum class RecomputeModule : std::uint8_t { CoreAttn, Layernorm, MlaUpProj, MoeAct, Mlp, SharedExperts, RoutedExperts, Count };
inline constexpr auto kRecomputeModuleNames = enum_names<RecomputeModule>(
    {{RecomputeModule::CoreAttn, "core_attn"}, {RecomputeModule::Layernorm, "layernorm"},
     {RecomputeModule::MlaUpProj, "mla_up_proj"}, {RecomputeModule::MoeAct, "moe_act"}, {RecomputeModule::Mlp, "mlp"},
     {RecomputeModule::SharedExperts, "shared_experts"}, {RecomputeModule::RoutedExperts, "routed_experts"}});

// Fine-grained activation offloading by module, as Megatron-Core names them
// (TransformerConfig.offload_modules with fine_grained_activation_offloading; core_v0.17.0
// megatron/core/pipeline_parallel/fine_grained_activation_offload.py, and the modules' forwards in
// transformer_layer.py, attention.py and moe/experts.py): at the end of a module's forward the
// tensors it saved for its backward are copied to pinned host memory on a device-to-host stream
// and freed on the GPU; they come back on a host-to-device stream once the backward of the
// module offloaded after it (in forward order) is done, and its backward waits for them.
// attn_norm: the input norm's input; qkv_linear: the QKV projection's input; core_attn: the
// core's Q, K and V; attn_proj: the output projection's input; mlp_norm: the pre-MLP norm's input;
// expert_fc1: each routed copy's fc1 input; moe_act: each routed copy's activation input (fc1's
// output). workload::offloaded_bytes counts them.
enum class OffloadModule : std::uint8_t { AttnNorm, QkvLinear, CoreAttn, AttnProj, MlpNorm, ExpertFc1, MoeAct, Count };
inline constexpr auto kOffloadModuleNames = enum_names<OffloadModule>(
    {{OffloadModule::AttnNorm, "attn_norm"}, {OffloadModule::QkvLinear, "qkv_linear"}, {OffloadModule::CoreAttn, "core_attn"},
     {OffloadModule::AttnProj, "attn_proj"}, {OffloadModule::MlpNorm, "mlp_norm"}, {OffloadModule::ExpertFc1, "expert_fc1"},
     {OffloadModule::MoeAct, "moe_act"}});

// The optimizer's state per parameter, in bytes, as Megatron-Core's precision-aware optimizer
// (OptimizerConfig.use_precision_aware_optimizer with main_params_dtype, exp_avg_dtype,
// exp_avg_sq_dtype and main_grads_dtype; Transformer Engine's FusedAdam steps them): the master
// copy of the weights (none when training in FP32: the weights are their own master), Adam's two
// moments, and the main gradients accumulated over the microbatches (0: in the training's dtype,
// as moesim keeps them without this setting). The default is FP32 master weights and moments.
struct OptimizerStates {
  double main_params = 4, exp_avg = 4, exp_avg_sq = 4, main_grads = 0;
  bool given = false;  // training.optimizer_states was written

  // For weights stored in `storage` bytes (cluster::storage_bytes of the training's dtype): the
  // optimizer state per parameter (FP32 master weights and moments: 12 B for 16-bit training, the
  // moments alone, 8 B, in FP32); the gradients'.
  double master(double storage) const { return storage < 4 ? main_params : 0.0; }
  double state_bytes(double storage) const { return master(storage) + exp_avg + exp_avg_sq; }
  double gradient_bytes(double storage) const { return main_grads > 0 ? main_grads : storage; }
  // What Adam's step streams per parameter: the master weights and both moments read and written,
  // the main gradient read (FP32 unless given) and the updated weights written, counted at 4 bytes
  // as the default 32 B per parameter counts them (FP32 master and moments: 2 · 12 + 4 + 4).
  double step_bytes(double storage) const { return 2 * state_bytes(storage) + (main_grads > 0 ? main_grads : 4.0) + 4; }
};

struct TrainingConfig {
  int sequence_length = 1;
  int micro_batch_size = 1;  // sequences per GPU per microbatch
  int microbatches = 1;      // gradient accumulation steps per iteration
  int iterations = 1;
  cluster::Dtype dtype = cluster::Dtype::bf16;
  double capacity_factor = 0;  // 0: no capacity limit (dropless)
  bool fp8_current_scaling = false;  // FP8 casts scaled by their tensor's own amax (training.fp8_scaling)
  bool causal = true;
  bool optimizer_on_host = false;  // the optimizer state lives and steps on the host (ZeRO-Offload)
  OptimizerStates optimizer_states;
  Recompute recompute = Recompute::None;
  // Under Recompute::Selective, the modules recomputed (bits by RecomputeModule).
  std::uint8_t recompute_modules = 1u << static_cast<int>(RecomputeModule::CoreAttn);
  // The modules whose saved activations are offloaded to the host (bits by OffloadModule; none by
  // default).
  std::uint8_t offload_modules = 0;
  // The loss keeps its logits, and their gradient computed in place, in the training's storage
  // dtype (2 bytes under BF16 or FP8), as Transformer Engine's fused cross entropy does
  // (transformer_engine/pytorch/cross_entropy.py: CrossEntropyFunction saves its input, which the
  // forward kernel overwrote with the gradient); otherwise in an fp32 copy (4 bytes): Megatron-Core's
  // vocab_parallel_cross_entropy casts them with .float() and saves exp_logits
  // (megatron/core/tensor_parallel/cross_entropy.py), torchtitan's loss takes F.cross_entropy of
  // pred.float(), whose log_softmax saves its fp32 output (torchtitan/components/loss.py). Set from
  // software.cross_entropy.
  bool logits_in_storage_dtype = false;
  double tokens_per_microbatch() const { return static_cast<double>(sequence_length) * micro_batch_size; }
  bool offloads(OffloadModule m) const { return offload_modules >> static_cast<int>(m) & 1u; }
  bool recomputes(RecomputeModule m) const {
    return recompute == Recompute::Selective && (recompute_modules >> static_cast<int>(m) & 1u);
  }
};

}  // namespace moesim::workload
