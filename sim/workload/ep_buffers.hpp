// The buffers of fused expert-parallel dispatch/combine backends (DeepEP, HybridEP) and the
// tokens a non-blocking dispatch drops, after torchtitan's HybridEP integration (seed 001, PR
// thread; spec seeds-001-002-004.md 001.A.4-A.6, A.8, A.10):
//  - the all-to-all buffer, allocated once and shared by every MoE layer, forward and backward:
//    slots = max_tokens_per_rank × EP (the worst-case receive, tokens de-duplicated per rank),
//    grown to the largest token count any dispatch has seen, × h × bytes per element;
//  - the permuted (expert-input) buffer, one per dispatch call: in non-blocking mode
//    roundup_align(N × EP × min(K, E_local) × cf) rows (alignment 32 for MXFP8, 16 for FP8, 8
//    otherwise), the rank's budget shared by all its local experts; in blocking mode the exact rows the
//    device-to-host sync reports, Σ_e roundup_align(n_e), so it never drops;
//  - a non-blocking dispatch whose permuted rows exceed the budget drops the tail of the
//    expert-major layout (the highest local experts' last rows), deterministically.
#pragma once

#include <cstdint>
#include <vector>

namespace moesim::workload {

// Rows (token slots) of the shared all-to-all buffer: N × EP.
double all_to_all_buffer_rows(double max_tokens_per_rank, int ep);

// Rows of the non-blocking permuted buffer: roundup_align(N × EP × min(K, E_local) × cf).
// cf in (0, 1] (Megatron's moe_expert_capacity_factor; the scenario's schema checks it).
double permuted_buffer_rows(double tokens_per_rank, int ep, int top_k, int local_experts, double capacity_factor,
                            int alignment);

// The capacity factor whose budget holds the balanced case, N × K rows: K / (EP × min(K, E_local)).
double balanced_capacity_factor(int ep, int top_k, int local_experts);

// Rows the permuted layout needs for these token copies per local expert: Σ roundup_align(n_e).
double permuted_rows(const std::vector<double>& copies_per_local_expert, int alignment);

// What a non-blocking dispatch keeps of each local expert's copies within a budget of `rows`:
// expert 0's group (padded to the alignment) first, then expert 1's, ...; the group that crosses
// the budget keeps the rows before it, the later ones none. Blocking mode never calls this.
struct PermutedFit {
  std::vector<double> kept;  // copies per local expert
  double dropped = 0;        // Σ (copies − kept)
};
PermutedFit fit_permuted(const std::vector<double>& copies_per_local_expert, double rows, int alignment);

}  // namespace moesim::workload
