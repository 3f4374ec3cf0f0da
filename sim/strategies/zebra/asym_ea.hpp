// HeterMoE's asymmetric expert assignment (Asym-EA), seed 002 §4.2: Algorithm 1 "gather and
// squeeze" chooses, per MoE layer, how many experts each expert GPU hands back to the attention
// GPUs of a zebra-parallel group (M attention GPUs, N expert GPUs). Each layer leaves a bubble
// T_gather = T^Exp_E − T^Attn_A on the attention GPUs; the bubbles are gathered over consecutive
// layers until one chunk (n1 experts acquired by each attention GPU, n2 offloaded by each expert
// GPU) squeezes T_squeeze of them, with the memory coefficients α (upper bound n_max) and β (lower
// bound n_min) of §4.2 scaling the gathered bubble. A pure function of profiled forward times;
// spec: seeds-001-002-004.md, 002 A.5–A.6 and ambiguities 1 and 3.
// Choices where the paper is silent or inconsistent (each made in asym_ea.cpp):
//   * T_squeeze as printed (n1 with T^Exp_E) by default; SqueezeFormula::Consistent swaps n1 and n2
//     as the paper's own definitions imply (ambiguity 1; identical when M = N).
//   * n_min ("experts that must be offloaded", a total) and n_max ("experts each attention GPU can
//     hold") are converted to the per-expert-GPU count summed over layers before α and β, as
//     ambiguity 3 recommends: n_min' = ⌈n_min/N⌉, n_max' = ⌊n_max·M/N⌋.
//   * The comparisons carry ε = 1e-9 relative to T_squeeze (A.6: the gathered bubbles fall on
//     exact multiples of T_squeeze, which IEEE doubles miss by an ulp).
//   * T_gather ≤ 0 (no bubble) with n_min > 0 leaves β undefined: the ⌈n_min'/n2⌉ chunks are
//     spread over the layers as lines 8–11 spread them with a positive bubble (ambiguity 3).
//   * A layer offloads at most the n/N experts an expert GPU holds.
#pragma once

#include <vector>

#include "sim/core/enum_names.hpp"

namespace moesim::strategies::zebra {

// T_squeeze as printed in Algorithm 1 line 6 (default), or with n1 and n2 swapped as the spec
// derives from the paper's definitions of n1 and n2 (ambiguity 1).
enum class SqueezeFormula { Paper, Consistent };
inline constexpr auto kSqueezeFormulaNames =
    enum_names<SqueezeFormula>({{SqueezeFormula::Paper, "paper"}, {SqueezeFormula::Consistent, "consistent"}});

struct OffloadInputs {
  int experts = 0;        // n: experts per MoE layer
  int layers = 0;         // L: MoE layers
  int attention_gpus = 0; // M
  int expert_gpus = 0;    // N
  double t_attn_a = 0;    // T^Attn_A: one microbatch's attention module (attention + gate) on an attention GPU, forward, seconds
  double t_exp_e = 0;     // T^Exp_E: one FFN over B tokens on an expert GPU
  double t_attn_e = 0;    // T^Attn_E: the same FFN on an attention GPU
  int n_min = 0;          // experts that must be offloaded in total (expert GPUs' memory), 0: no bound
  int n_max = -1;         // experts each attention GPU can hold in total over all layers, <0: no bound
  SqueezeFormula formula = SqueezeFormula::Paper;
};

struct OffloadPlan {
  std::vector<int> offloaded;   // o_l per MoE layer: experts offloaded FROM EACH expert GPU in layer l
  int n1 = 0, n2 = 0;           // experts each attention GPU acquires / each expert GPU offloads per chunk
  double t_gather = 0, t_squeeze = 0, alpha = 1, beta = 1;
  int total() const;            // sum of offloaded
};

// The divisibility rule of Asym-EA (§4.2): M a multiple of N or N a multiple of M (false for M or
// N ≤ 0). Without it n1 and n2 are not integers and Asym-EA is unavailable (Fig. 10: only 4:2,
// 4:4 and 4:8 of 4 A40s with 2–8 V100s).
bool asym_ea_divisible(int attention_gpus, int expert_gpus);

// Algorithm 1 with the memory coefficients (spec 002 A.6). Throws InputError for inputs that make
// no sense (M, N, n or L below 1, M and N not divisible, n not a multiple of N, negative or
// non-finite times, negative n_min) and InfeasibleError where the memory bounds cannot both hold
// (more experts must leave the expert GPUs than the attention GPUs can hold, or than there are).
OffloadPlan gather_and_squeeze(const OffloadInputs& in);

}  // namespace moesim::strategies::zebra
