// Per-GPU memory footprint of training: weights and gradients in the training dtype, Adam state
// (fp32 master weights and two moments: 12 bytes per parameter with 16-bit training, 8 with fp32),
// and the activations one microbatch keeps for backward, after Korthikanti et al., "Reducing
// Activation Recomputation in Large Transformer Models" (2022), §4.1: per layer
// s·b·h·(34 + 5·a·s/h) bytes in 16-bit, of which 11·sbh attention, 19·sbh MLP, 4·sbh norms and
// 5·a·s²·b the softmax scores (absent with FlashAttention); the attention's 11·sbh written by
// the widths of Q, K, V and the output projection (GQA, explicit head_dim, MLA's latents). MoE blocks replace the MLP term by
// the expert activations of the tokens a GPU actually receives. A pipeline stage holds its own
// layers' activations for as many microbatches as its schedule keeps in flight. Recomputation
// (§5): selective drops the scores, and what each of Megatron-Core's recompute_modules does not
// keep (TrainingConfig::recompute_modules; one layer's of them live again during its backward);
// full keeps each layer's input (2·sbh) and one layer whole. With the optimizer on the host
// (ZeRO-Offload) its state and a copy of the gradients live in host memory instead. The
// vocabulary's ends as Megatron-LM's theoretical memory estimate counts them
// (megatron/training/theoretical_memory_usage.py): the embedding's token ids and dropout mask,
// 8·sb + sbh, and before the loss the final norm's and output projection's inputs with the fp32
// logits, 4·sbh·(1 + v/h), split over tp (the logits in the storage dtype where the loss keeps them
// there: Transformer Engine's fused cross entropy, TrainingConfig::logits_in_storage_dtype); a multi-token prediction module (DeepSeek-V3 §2.2)
// keeps its layer's, its two norms' and projection's inputs (8·sbh) and a second head's.
// Fine-grained activation offloading (TrainingConfig::offload_modules) moves what its modules keep
// to host memory, all but one layer's, which comes back during its backward.
#pragma once

#include <vector>

#include "sim/workload/model_shape.hpp"

namespace moesim::workload {

struct MemoryFootprint {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double activations = 0;
  double buffers = 0;  // communication buffers allocated once (a fused EP backend's all-to-all buffer)
  double host = 0;  // in its host's memory: the optimizer state and a gradient copy when the optimizer steps there
  double total() const { return weights + gradients + optimizer + activations + buffers; }  // on the GPU
};

struct MemoryInputs {
  double params = 0;                 // parameters this GPU holds
  double optimizer_params = -1;      // parameters whose optimizer state it holds (< 0: params; less when sharded)
  double weight_params = -1;         // parameters whose weights it holds at the peak (< 0: params; FSDP: its shard and the gathered layers)
  double gradient_params = -1;       // parameters whose gradients it holds at the peak (< 0: params)
  double tokens = 0;                 // tokens per microbatch on this GPU
  double expert_tokens_per_layer = 0;  // routed token copies this GPU's experts process per MoE layer
  // Under full recomputation, token copies per MoE layer whose expert input the GPU keeps besides
  // its own tokens' layer inputs: a GPU that runs experts but not attention (zebra's expert GPUs)
  // recomputes them from the copies it received.
  double kept_expert_inputs = 0;
  bool flash_attention = true;
  int tensor_parallel = 1;              // attention split over this many GPUs (Korthikanti §4.2: 11·sbh/t)
  double expert_ffn_hidden = 0;         // FFN size of this GPU's expert slice (0: the model's ffn_hidden)
  double moe_buffer_bytes = 0;          // communication buffers per MoE layer kept for backward
  double shared_buffer_bytes = 0;       // communication buffers allocated once and shared by every layer
  bool sequence_parallel = false;       // the attention block's and norms' activations split over tp too (§4.2.2: 34·sbh/t)
  std::vector<int> layers;              // the layers this GPU holds (empty: all)
  double in_flight = 1;                 // microbatches whose activations it holds at once (the schedule's peak)
  // The vocabulary's ends this GPU runs (models with a vocabulary only): the input embedding (the
  // first stage) and the LM head with its loss (the last stage); zebra's expert GPUs run neither.
  bool embedding = true;
  bool lm_head = true;
  double lm_head_in_flight = -1;        // microbatches whose logits it holds at once (< 0: in_flight)
};

MemoryFootprint memory_footprint(const ModelShape& model, const TrainingConfig& training, const MemoryInputs& in);

// What training.offload_modules (OffloadModule) copy to the host of one microbatch's activations in
// a layer, in bytes, counted as memory_footprint counts what the layer keeps (16-bit bytes scaled
// by the dtype's width over 2): per token of the rank with the attention (attn_norm's 2h, qkv_linear's
// 2h, core_attn's Q, K and V, attn_proj's core output; split over tp as the attention block is,
// the norm's input only with sequence parallelism) and with the pre-MLP norm (mlp_norm's 2h, in
// dense and MoE layers alike), and per routed token copy with the experts (expert_fc1's 2h,
// moe_act's fc1 output: 4·ffn for a GLU, else 2·ffn). What a recomputed module does not keep is not
// there to offload: qkv_linear's input under layernorm, core_attn's Q, K, V under mla_up_proj,
// moe_act's input under routed_experts.
struct OffloadedBytes {
  double attention = 0;  // per token
  double mlp_norm = 0;   // per token
  double per_expert_copy = 0;
  double per_token() const { return attention + mlp_norm; }
};
OffloadedBytes offloaded_bytes(const ModelShape& model, const TrainingConfig& training, int tensor_parallel,
                               bool sequence_parallel, double expert_ffn_hidden);
// Whether layer `layer`'s modules offload at all: all but the model's last layer, whose backward
// follows its forward at once on the last pipeline stage, so Megatron-Core keeps its groups on the
// GPU (PipelineOffloadManager.post_warmup_callback and ChunkOffloadHandler.should_bulk_offload,
// the last group of each name).
bool offloads_layer(const ModelShape& model, const TrainingConfig& training, int layer);

}  // namespace moesim::workload
