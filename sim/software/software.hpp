// The software that trains the model (DESIGN §8: the software is an input, like the cluster):
// what the training code does on each GPU's host and which kernels it launches. A scenario's
// `software` section states it, from a named preset per framework release (software/*.json, each
// citing the recipe files it was read from) overridden key by key; blocks read it, no strategy
// special-cases it.
//
// The host: one launch thread per GPU issues every task (engine.hpp). A kernel launched eagerly
// costs the thread `launch` in a forward (the framework's Python thread: Python, the PyTorch
// dispatcher, the driver) and `backward_launch` in a backward (autograd's thread), times the GPU
// kind's host factor (a Grace host issues more slowly than a Xeon: cluster::GpuSpec); a CUDA graph
// replay costs `graph_launch` however many kernels it holds; a device-to-host read stops the thread
// until the read returns and `sync` more. Sources and defaults: software/README.md.
//
// CUDA graphs follow Megatron-Core's cuda_graph_scope (TransformerConfig.cuda_graph_scope): per
// layer, microbatch and direction, one graph of each captured module (attn, moe_router,
// moe_preprocess, moe, mlp: Transformer Engine's make_graphed_callables, L·M·2 graphs an
// iteration), or one graph of an iteration's whole forward-backward (full_iteration; the optimizer
// step stays eager).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/compute/compute_model.hpp"
#include "sim/core/enum_names.hpp"

namespace moesim::software {

// The part of a layer a task belongs to, as CUDA graphs capture them. Blocks say which module they
// write (blocks::ProgramBuilder::InModule); None: never captured per layer (embedding, LM head,
// pipeline transfers, gradient and parameter collectives, host reads).
enum class Module : std::uint8_t {
  None,
  Attention,   // attn: the attention block (norm, projections, core, its tensor-parallel collectives)
  Router,      // moe_router: the pre-MLP norm, the router and top-k (and the permute written with them)
  Experts,     // moe: the MoE block's exchanges, experts and combine (token-dropping MoE only)
  DenseMlp,    // mlp: a dense FFN block
};

struct HostCosts {
  Time launch = 0;           // per kernel launched eagerly in a forward (and its recomputation, the optimizer)
  Time backward_launch = 0;  // per kernel launched eagerly in a backward
  Time graph_launch = 0;     // per CUDA graph replay
  Time sync = 0;             // after a device-to-host read returns, before the thread issues anything more
};

struct CudaGraphs {
  bool full_iteration = false;    // the forward-backward of every microbatch as one graph
  std::uint8_t modules = 0;       // bit m: Module m captured per layer, microbatch and direction
  // moe_preprocess: the dispatcher's preprocessing (split sizes, permutation map) in the router's
  // graph; needs a dispatch without a device-to-host read (the read cannot be captured).
  bool preprocess = false;
  bool captures(Module m) const { return full_iteration || (modules >> static_cast<int>(m) & 1); }
};

struct Software {
  std::string name;  // the preset's name, or "custom"
  HostCosts host;
  CudaGraphs graphs;
  // Kernels the router launches per MoE layer and microbatch, forward (score function, top-k,
  // auxiliary losses and their bookkeeping; Megatron-Core: 72 unfused, 31 with moe_router_fusion).
  int router_kernels = 2;
  compute::GroupedGemmKernels grouped_gemm = compute::GroupedGemmKernels::One;
  compute::PermuteKernels permute = compute::PermuteKernels::Fused;  // the token permutation's kernels
  bool fused_activation = true;  // the gated experts' activation in one kernel
  // The fused grouped MLP's dGLU backward kernel with fc1's bias gradient over the kernel without
  // it (compute::ComputeOptions::dglu_dbias_slowdown): a property of the library release.
  double dglu_dbias_slowdown = 1.0;
  bool fused_rope = true;        // the rotary embedding in one kernel a tensor
  bool fused_router = true;      // the router's softmax and top-k in one kernel
  compute::CrossEntropyKernels cross_entropy = compute::CrossEntropyKernels::TransformerEngine;  // the loss's kernels
  compute::OptimizerKernels optimizer = compute::OptimizerKernels::Fused;  // the optimizer step's kernels
  // Megatron-Core's overlap_moe_expert_parallel_comm (combined_1f1b): in the steady state a
  // microbatch's forward and another's backward are written together, layer by layer, each
  // one's all-to-alls beside the other's compute (schedule/iteration_program.cpp).
  bool ep_overlap = false;
  // Megatron-Core's delay_wgrad_compute (with ep_overlap): an expert backward computes its data
  // gradients first, the exchange back leaves with them, and its weight gradients run beside it.
  bool delay_wgrad = false;
  // Megatron-Core's moe_shared_expert_overlap: the shared experts run beside the dispatch
  // all-to-all (on a side stream), not before the router on the compute stream. moesim's default
  // overlaps them; Megatron-Core's (and the presets of its recipes) does not.
  bool shared_expert_overlap = true;
  // Whether the host's launches are modelled at all: false for a scenario without a software
  // section whose defaults leave every cost 0 (tasks start as soon as the GPU can run them).
  bool models_host() const {
    return host.launch > 0 || host.backward_launch > 0 || host.graph_launch > 0 || host.sync > 0;
  }
};

// The cuda_graph_scope names of Megatron-Core (TransformerConfig.cuda_graph_scope) a scenario's
// software.cuda_graphs lists, and full_iteration (cuda_graph_impl full_iteration).
enum class GraphScope : std::uint8_t { Attn, MoeRouter, MoePreprocess, Moe, Mlp, FullIteration };
inline constexpr auto kGraphScopeNames = enum_names<GraphScope>(
    {{GraphScope::Attn, "attn"}, {GraphScope::MoeRouter, "moe_router"}, {GraphScope::MoePreprocess, "moe_preprocess"},
     {GraphScope::Moe, "moe"}, {GraphScope::Mlp, "mlp"}, {GraphScope::FullIteration, "full_iteration"}});

// What a scope captures here; false for a name kGraphScopeNames lacks.
bool parse_graph_scope(std::string_view name, CudaGraphs& graphs);

}  // namespace moesim::software
