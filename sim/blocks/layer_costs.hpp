// Compute durations of the pieces of an MoE transformer layer on one GPU kind, forward (backward
// through the compute model's backward factor, except the attention core whose backward has its
// own measured throughput when a calibration table gives it): attention with its projections and
// norm, the router, the experts' FFN, the combine, dense FFN blocks, embedding, LM head and the
// optimizer step. Attention, dense FFN and LM head split over a tensor-parallel group of `tp`
// GPUs as Megatron-LM does (heads, projection columns, FFN columns, vocabulary per rank).
#pragma once

#include "sim/compute/compute_model.hpp"
#include "sim/workload/model_shape.hpp"

namespace moesim::blocks {

// FFN of `tokens` tokens through an expert (or dense FFN) of size `ffn`: H→ffn (twice for SwiGLU),
// then ffn→H.
Time ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn);

// The attention block of one microbatch on one GPU (no context parallelism): projections, norm and core.
Time attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                    int tp = 1);
Time attention_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             const workload::TrainingConfig& t, int tp = 1);
// Its pieces, forward, for `tokens` tokens: the norm and the Q, K, V projections; the output projection.
Time qkv_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                         double dtype_bytes, int tp = 1);
Time output_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
// The attention core (QK^T, softmax, PV) of a microbatch's whole sequence, heads split over tp,
// forward and backward.
Time attention_core_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                         int tp = 1);
Time attention_core_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp = 1);
// Router GeMM, softmax/top-k and permuting the k copies into the send buffer, for `tokens` tokens.
Time gate_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double dtype_bytes);
// Un-permute, weighted sum of the k expert outputs, residual add (and the norm with attention).
Time combine_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double dtype_bytes);
// A dense FFN block and its norm over `tokens` tokens, FFN columns split over `tp` GPUs.
Time dense_ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double dtype_bytes,
                    int tp = 1);
// The embedding lookup of `tokens` tokens (a gather of their rows).
Time embedding_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double dtype_bytes);
// Logits of `tokens` tokens over the vocabulary split over `tp` GPUs, and their fp32 softmax.
Time lm_head_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);

}  // namespace moesim::blocks
