#include "sim/workload/ep_buffers.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::workload {
namespace {

double round_up(double rows, int alignment) { return std::ceil(rows / alignment) * alignment; }

void require_alignment(int alignment) {
  if (alignment < 1) invariant_failed(fmt::format("permuted buffer alignment {} (give 8, or 32 for MXFP8)", alignment));
}

}  // namespace

double all_to_all_buffer_rows(double max_tokens_per_rank, int ep) {
  if (max_tokens_per_rank < 0 || ep < 1)
    invariant_failed(fmt::format("all-to-all buffer of {} tokens per rank over {} ranks", max_tokens_per_rank, ep));
  return max_tokens_per_rank * ep;
}

double permuted_buffer_rows(double tokens_per_rank, int ep, int top_k, int local_experts, double capacity_factor,
                            int alignment) {
  require_alignment(alignment);
  if (tokens_per_rank < 0 || ep < 1 || top_k < 1 || local_experts < 1)
    invariant_failed(fmt::format("permuted buffer of {} tokens, EP {}, top-{}, {} local experts", tokens_per_rank, ep,
                                 top_k, local_experts));
  if (!(capacity_factor > 0 && capacity_factor <= 1))
    invariant_failed(fmt::format("permuted buffer capacity factor {} outside (0, 1]", capacity_factor));
  return round_up(tokens_per_rank * ep * std::min(top_k, local_experts) * capacity_factor, alignment);
}

double balanced_capacity_factor(int ep, int top_k, int local_experts) {
  return static_cast<double>(top_k) / (static_cast<double>(ep) * std::min(top_k, local_experts));
}

double permuted_rows(const std::vector<double>& copies_per_local_expert, int alignment) {
  require_alignment(alignment);
  double rows = 0;
  for (const double n : copies_per_local_expert) rows += round_up(n, alignment);
  return rows;
}

PermutedFit fit_permuted(const std::vector<double>& copies_per_local_expert, double rows, int alignment) {
  require_alignment(alignment);
  PermutedFit fit;
  double offset = 0;  // the first row of the next expert's group
  for (const double n : copies_per_local_expert) {
    const double kept = std::clamp(rows - offset, 0.0, n);
    fit.kept.push_back(kept);
    fit.dropped += n - kept;
    offset += round_up(n, alignment);
  }
  return fit;
}

}  // namespace moesim::workload
