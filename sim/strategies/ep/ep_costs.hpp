// Compute durations of the pieces of an MoE transformer layer on one GPU kind, forward (backward
// through the compute model's backward factor, except the attention core whose backward has its
// own measured throughput when a calibration table gives it): attention with its projections and norm, the
// router, the experts' FFN, the combine, dense FFN blocks, embedding, LM head and optimizer step.
// Shared by the strategies that schedule these pieces differently.
#pragma once

#include "sim/compute/compute_model.hpp"
#include "sim/workload/model_shape.hpp"

namespace moesim::strategies::ep {

struct LayerCosts {
  Time embed = 0, lm_head = 0, attention = 0, attention_backward = 0, gate = 0, shared = 0, post = 0, dense_ffn = 0, optimizer = 0;
};

// FFN of `tokens` tokens through an expert (or dense FFN) of size `ffn`: H→ffn (twice for SwiGLU),
// then ffn→H.
Time ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn);

// The pieces of layer_costs for `tokens` tokens, with attention and its projections split over a
// tensor-parallel group of `tp` GPUs (Megatron-LM: heads and projection columns per rank).
Time attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                    int tp = 1);
Time attention_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             const workload::TrainingConfig& t, int tp = 1);
Time gate_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double dtype_bytes);
Time combine_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double dtype_bytes);

LayerCosts layer_costs(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                       double params_on_gpu);

}  // namespace moesim::strategies::ep
