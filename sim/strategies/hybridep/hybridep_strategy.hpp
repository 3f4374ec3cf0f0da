// HybridEP (seed 000, "HybridEP: Scaling Expert Parallelism to Cross-Datacenter Scenario via
// Hybrid Expert/Data Transmission"): expert parallelism over all GPUs in which, inside an expert
// domain, experts travel instead of tokens.
//   - Domain sizes per level (§IV-A): explicit, from a fixed proportion p (G − p(G−1) GPUs spread
//     over the levels from the coarsest one, as the paper's Table VI: 4 GPUs on Cluster-L are
//     S_ED = (4 DCs, 1 GPU)), or "auto": the stream-based model (stream_model.hpp) over the levels
//     ranks every candidate (one divisor of each level's workers) from the data size D, the
//     transmitted expert size P_E, each level's per-GPU bandwidth and the slowest GPU kind's
//     pre-expert compute, and takes the fastest; the best kSimulatedDomainCandidates are also
//     simulated on their own (choice_was_fastest in the results). The paper's Eq. 10–12 on one
//     bandwidth (the slowest share) are reported beside it.
//   - Each MoE layer: the domain's experts are all-gathered level by level over Algorithm 1's
//     groups (coarsest first, so the slow level carries only each GPU's own experts); tokens for
//     experts of another domain go by all-to-all to the GPU of that domain with the sender's
//     offsets (the same-offset group); each GPU computes the tokens of its group for every expert
//     of its domain. p = 1 (all sizes 1) is exactly the `ep` strategy.
//   - Parameter-efficient migration (§IV-B), each part switchable for the ablation of Table VI:
//     experts travel as top-k residuals over a shared expert (compression ratio, paper: 50×);
//     SREncode (fused with the previous optimizer step, §V-E: 30 % saved) and SRDecode (fused with
//     expert compute, 45 % saved) are memory-bound compute tasks; the shared expert is all-reduced
//     in backward; the asynchronous communicator issues every layer's all-gather at iteration start
//     on the migration stream (off: each layer's all-gather starts when its MoE block is reached).
//   - Backward: gathered experts' gradients return to their owners by a reduce-scatter per level
//     (finest first), whole (the paper does not say how they return; "gradient_return":
//     "compressed" sends them like the parameters, an option not in the paper); the dense
//     data-parallel all-reduce is its own collective on the gradient stream (§VI), contending with
//     the rest.
//   - A compressed expert on the wire: 1/ratio of its values, each with a 4-byte index
//     (kSrIndexBytes), as SREncode writes it and the receive queue holds it.
// It is the expert-parallel plan (ep/expert_parallel_plan.hpp) with the same-offset groups, the
// domain's experts as replicas, an expert fetch per layer and the reduce-scatters as its expert
// gradient steps.
#pragma once

#include <optional>

#include "sim/strategies/ep/ep_strategy.hpp"
#include "sim/strategies/hybridep/stream_model.hpp"

namespace moesim::strategies::hybridep {

StrategyInfo info();

// Bytes of one index of the SR-compressed residual: an int32 position, enough for any expert under
// 2^31 parameters (assumption: the paper does not give the index width).
inline constexpr double kSrIndexBytes = 4;

struct HybridEpOptions {
  ep::EpOptions ep;               // pipelining and gradient sync; the EP group is every GPU
  schema::Json domain = "auto";   // "auto", [S_ED per level], or {"p": proportion}
  double compression_ratio = 50;  // 1: experts travel whole, no SREncode/SRDecode/shared expert
  bool async_communicator = true;
  double encode_fusion_saving = 0.3;
  double decode_fusion_saving = 0.45;
  bool compress_gradients = false;  // "gradient_return": "compressed" (not in the paper)
  network::Algorithm migration_algorithm = network::Algorithm::Ring;
};

// How the domain sizes were chosen.
struct DomainChoice {
  std::vector<std::uint32_t> sizes;  // S_ED per level, coarsest first
  std::string source;                // "auto", "explicit" or "proportion"
  StreamInputs inputs;               // the stream model's inputs for this scenario
  StreamSolution model;              // Eq. 10–12 on them
  double p = 1;                      // proportion the sizes realise: (G − ΠS)/(G − 1)
  std::uint32_t domain_gpus = 1;     // ΠS
  // Under "auto": every candidate (one divisor per level) with its per-level model latency,
  // fastest first; the first is the choice.
  std::vector<std::pair<std::vector<std::uint32_t>, double>> ranked;
};

// How many of the ranked candidates an "auto" run also simulates, each on its own, to report
// whether the model's choice was the fastest (Strategy::alternatives).
inline constexpr std::size_t kSimulatedDomainCandidates = 8;

// The all-to-all groups of the plan: rank j of a same-offset group is the GPU of expert domain j
// (domains numbered coarse-major, as Eq. 13 numbers GPUs); it computes every expert its domain's
// GPUs own.
struct SameOffsetLayout {
  std::vector<std::vector<std::uint32_t>> groups;
  std::vector<std::vector<int>> experts_of_rank;
};

class HybridEpStrategy final : public Strategy {
 public:
  explicit HybridEpStrategy(HybridEpOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "hybridep"; }
  void check(const StrategyContext& ctx) const override;
  std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const override;
  ProgramSize program_per_iteration(const StrategyContext& ctx) const override;
  parallel::PlanPtr plan(const StrategyContext& ctx, int iteration, const parallel::RunState& state) override;
  schema::Json describe(const StrategyContext& ctx) const override;
  std::vector<Alternative> alternatives(const StrategyContext& ctx) const override;

  const DomainChoice& domain(const StrategyContext& ctx) const;
  SameOffsetLayout layout(const StrategyContext& ctx) const;

 private:
  bool migrates(const StrategyContext& ctx) const { return domain(ctx).domain_gpus > 1; }
  bool compresses() const { return options_.compression_ratio > 1; }
  // Bytes of one GPU's experts of one layer in the dtype.
  double own_expert_bytes(const StrategyContext& ctx) const;
  // What `bytes` of experts (or their gradients) put on the wire: with SR compression the top-k
  // residual's values and their indices, else the bytes themselves.
  double transmitted_bytes(const StrategyContext& ctx, double bytes) const;
  // Parameters each GPU holds (and steps the optimizer over): EP's, and every MoE layer's shared
  // expert of the SR compression.
  double params_on_gpu(const StrategyContext& ctx) const;
  Time encode_time(const StrategyContext& ctx, std::size_t kind) const;
  Time decode_time(const StrategyContext& ctx, std::size_t kind) const;

  HybridEpOptions options_;
  mutable std::optional<DomainChoice> domain_;
  parallel::PlanPtr plan_;
};

// The divisors of n, ascending: the domain sizes a level of n workers allows.
std::vector<std::uint32_t> divisors(std::uint32_t n);

// The domain sizes, coarsest level first, that hold about `gpus` GPUs: each level takes the largest
// divisor of its worker count not above what is still to place.
std::vector<std::uint32_t> sizes_for_domain(const cluster::Topology& topology, double gpus);

}  // namespace moesim::strategies::hybridep
