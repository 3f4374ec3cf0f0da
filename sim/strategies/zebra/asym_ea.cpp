// Asym-EA's Algorithm 1 (HeterMoE §4.2; see asym_ea.hpp). Line numbers below are the paper's.
#include "sim/strategies/zebra/asym_ea.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <string>

#include "sim/core/error.hpp"

namespace moesim::strategies::zebra {

namespace {
// Spec 002 A.6: the gathered bubbles fall on (near-)exact multiples of T_squeeze (the n_min example
// gathers 1.7999999999999998 against 1.8000000000000003 at layer 4), so the comparison of line 9
// and the floor of line 9's chunk count carry ε = 1e-9. It is taken relative to T_squeeze (one
// test, ⌊t/T_squeeze + ε⌋ ≥ 1, for both) so that it does not depend on the unit of the times.
constexpr double kEpsilon = 1e-9;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }  // a ≥ 0, b > 0

void require(bool ok, const std::string& field, const std::string& problem, const std::string& fix) {
  if (!ok) throw InputError("", "asym_ea." + field, problem, fix);
}

void require_time(double t, const char* field) {
  require(std::isfinite(t) && t >= 0, field, fmt::format("{} = {} is not a duration", field, t),
          "give a finite, non-negative profiled forward time in seconds");
}
}  // namespace

int OffloadPlan::total() const { return std::accumulate(offloaded.begin(), offloaded.end(), 0); }

bool asym_ea_divisible(int attention_gpus, int expert_gpus) {
  if (attention_gpus <= 0 || expert_gpus <= 0) return false;
  return attention_gpus % expert_gpus == 0 || expert_gpus % attention_gpus == 0;
}

OffloadPlan gather_and_squeeze(const OffloadInputs& in) {
  const int M = in.attention_gpus, N = in.expert_gpus, n = in.experts, L = in.layers;
  require(M >= 1, "attention_gpus", fmt::format("a ZP group of {} attention GPUs", M), "give M ≥ 1");
  require(N >= 1, "expert_gpus", fmt::format("a ZP group of {} expert GPUs", N), "give N ≥ 1");
  require(asym_ea_divisible(M, N), "expert_gpus",
          fmt::format("Asym-EA needs M a multiple of N or N a multiple of M (HeterMoE §4.2); M = {}, N = {} is neither", M, N),
          "choose a divisible ratio (e.g. 4:2, 4:4, 4:8) or run zebra parallelism without Asym-EA");
  require(L >= 1, "layers", fmt::format("{} MoE layers", L), "give L ≥ 1");
  require(n >= 1 && n % N == 0, "experts",
          fmt::format("{} experts per layer do not split evenly over {} expert GPUs", n, N),
          "give a number of experts that is a multiple of the expert GPUs (as in EP, HeterMoE §4.2)");
  require_time(in.t_attn_a, "t_attn_a");
  require_time(in.t_exp_e, "t_exp_e");
  require_time(in.t_attn_e, "t_attn_e");
  require(in.n_min >= 0, "n_min", fmt::format("n_min = {} experts", in.n_min), "give 0 (no lower bound) or more");

  OffloadPlan p;
  p.n1 = std::max(1, N / M);  // line 3: experts each attention GPU acquires per chunk
  p.n2 = p.n1 * M / N;        // line 4: experts each expert GPU offloads per chunk
  p.t_gather = in.t_exp_e - in.t_attn_a;  // line 5: the attention GPUs' bubble per layer
  // Line 6: per offloaded expert, N·T^Exp_E/n leaves each expert GPU and N·T^Attn_E/n joins each
  // attention GPU. As printed the first is counted n1 times and the second n2 times; by the
  // definitions of n1 and n2 it is the other way round (spec ambiguity 1).
  const double removed = in.t_exp_e * N / n, added = in.t_attn_e * N / n;
  p.t_squeeze = in.formula == SqueezeFormula::Paper ? removed * p.n1 + added * p.n2 : removed * p.n2 + added * p.n1;
  p.offloaded.assign(L, 0);

  // Memory bounds in chunks per expert GPU summed over the layers (spec ambiguity 3): n_min is the
  // total the expert GPUs must shed, ⌈n_min/N⌉ each; n_max is what each attention GPU can hold,
  // M·n_max in all, ⌊n_max·M/N⌋ per expert GPU. α counts ⌊n_max'/n2⌋ chunks, β ⌈n_min'/n2⌉ (§4.2).
  const std::int64_t min_chunks = ceil_div(ceil_div(in.n_min, N), p.n2);
  const bool bounded = in.n_max >= 0;
  const std::int64_t max_chunks =
      bounded ? static_cast<std::int64_t>(in.n_max) * M / N / p.n2 : std::numeric_limits<std::int64_t>::max();
  // A layer cannot offload more than an expert GPU holds: n/N experts, ⌊(n/N)/n2⌋ whole chunks.
  const int cap = n / N / p.n2;
  if (min_chunks > max_chunks)
    throw InfeasibleError(fmt::format(
        "Asym-EA: the expert GPUs must offload {} experts (n_min) but the {} attention GPUs hold at most {} each (n_max): "
        "{} chunks of {} per expert GPU needed, {} allowed",
        in.n_min, M, in.n_max, min_chunks, p.n2, max_chunks));
  if (min_chunks > static_cast<std::int64_t>(L) * cap)
    throw InfeasibleError(fmt::format("Asym-EA: the expert GPUs must offload {} experts (n_min) but hold only {} per GPU in "
                                      "{} layers ({} chunks of {} needed, {} possible)",
                                      in.n_min, n / N, L, min_chunks, p.n2, static_cast<std::int64_t>(L) * cap));

  if (p.t_gather <= 0) {
    // No bubble to gather (T^Attn_A ≥ T^Exp_E): nothing is offloaded unless memory forces it, and
    // then β (divided by T_gather) is undefined and α, β stay 1. The chunks the lower bound needs,
    // R = ⌈n_min'/n2⌉, go where lines 8–11 would put them with a bubble of R·T_squeeze/L per layer
    // (what β makes of any positive one): after layer l, ⌊l·R/L⌋ chunks in all, i.e. evenly
    // spaced, each in the last layer of its stretch of L/R layers (R = 2, L = 8: layers 4 and 8).
    // Integer arithmetic: the spread is exact. R ≤ L·cap (checked above), so no layer exceeds cap.
    for (int l = 1; l <= L; ++l)
      p.offloaded[l - 1] = static_cast<int>((l * min_chunks) / L - ((l - 1) * min_chunks) / L) * p.n2;
    return p;
  }

  // §4.2's coefficients on line 8: α < 1 when the bubbles of all layers would squeeze more than
  // ⌊n_max'/n2⌋ chunks, β > 1 when fewer than ⌈n_min'/n2⌉; never both (excluded above).
  const double gathered = L * p.t_gather;
  if (bounded) p.alpha = std::min(static_cast<double>(max_chunks) * p.t_squeeze / gathered, 1.0);
  if (min_chunks > 0) p.beta = std::max(static_cast<double>(min_chunks) * p.t_squeeze / gathered, 1.0);

  double t_bubble = 0;  // line 7's accumulator
  std::int64_t chunks = 0;
  for (int l = 0; l < L; ++l) {
    t_bubble += p.alpha * p.beta * p.t_gather;                                       // line 8
    const auto c = static_cast<std::int64_t>(std::floor(t_bubble / p.t_squeeze + kEpsilon));  // line 9's chunk count
    if (c < 1) continue;                                                             // line 9's test
    // Capped at the layer's experts (the bubble beyond stays gathered for later layers; with one
    // T_gather for every layer the cap binds either at every layer or at none).
    const std::int64_t squeezed = std::min<std::int64_t>(c, cap);
    t_bubble -= static_cast<double>(squeezed) * p.t_squeeze;  // line 10
    p.offloaded[l] = static_cast<int>(squeezed) * p.n2;     // line 11
    chunks += squeezed;
  }
  if (chunks < min_chunks || chunks > max_chunks)
    invariant_failed(fmt::format("Asym-EA offloaded {} chunks outside the memory bounds [{}, {}]", chunks, min_chunks, max_chunks));
  return p;
}

}  // namespace moesim::strategies::zebra
