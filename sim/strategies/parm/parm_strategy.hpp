// Parm (seed 003): MoE training with model (tensor) parallelism, expert parallelism and expert
// sharding (MP+EP+ESP), in DeepSpeed-MoE's baseline schedule (Fig. 3a) or Parm's S1 (Fig. 3b) and
// S2 (Fig. 3c), chosen by Algorithm 1 (§V) with "schedule": "auto".
//
// Groups (§II-B, Fig. 2): all P GPUs form the expert grid, N_EP × N_ESP = P; EP rank j holds experts
// [j·E/N_EP, (j+1)·E/N_EP), ESP rank s the s-th 1/N_ESP slice of their FFN hidden size. §IV-A's
// placements: "esp_in_node" puts ESP groups on consecutive GPUs (inside a node when they fit),
// "ep_in_node" EP groups. MP groups are N_MP consecutive GPUs (inside the node "whenever possible",
// Eq. 9); dense parameters are data-parallel across MP groups (same MP rank).
//
// Per MoE layer and microbatch (sizes per GPU, B·L tokens of M = hidden bytes, T = k·f·B·L/E,
// DeepSpeed pads every expert to capacity T, so the all-to-alls are even):
//   baseline fwd: ESP-AllGather(BLM) → gate on B·L·N_ESP tokens → EP-A2A(ETM·N_ESP) → experts on
//                 E·T·N_ESP tokens (the same in all N_MP ranks: redundant) → ESP-AllReduce(ETM·N_ESP)
//                 → EP-A2A → combine → ESP-Split (local);
//            bwd: ESP-Split's AllGather → combine → EP-A2A → experts → ESP-AllReduce of the input
//                 gradient partial sums (Megatron's conjugate of the copy) → EP-A2A → gate.
//   S1 fwd: MP-Split (local) → gate on B·L/N_MP → local dump → EP&ESP-A2A(ETM·N_ESP/N_MP) over the
//           grid → experts on E·T·N_ESP/N_MP tokens → EP&ESP-A2A → local combine → MP-AllGather(BLM);
//      bwd: mirror, the MP-AllGather moving to the MP-Split's backward.
//   S2 fwd: gate on B·L → MP-Split (local) → EP&ESP-A2A → experts → EP&ESP-A2A with MP-AllGather(ETM)
//           by SAA (§III-D: the all-to-all in P phases, phase i receiving from rank r−i, each phase's
//           slice all-gathered in the MP group during the next, on the side stream) → combine;
//      bwd: mirror, SAA on the dispatch all-to-all (the MP-Split's backward gathers its gradients).
// Attention (when the model has it) is tensor-parallel over the MP group with one MP all-reduce
// per direction (Megatron-LM); the gradient all-reduce of dense parameters runs over the
// data-parallel groups, and can be left out as Parm's measurements do (§VI-A).
// The plan places these collectives at the MoE block's points (blocks/moe_block.hpp): the
// ESP all-gather before the gate, the ESP all-reduce after the experts, the MP all-gather after
// the combine (S1), beside the combine all-to-all by phases (S2 with SAA) or after it (S2, AAS).
//
// Algorithm 1 (§V) reads α-β per collective and group: a calibration profile's entries for "mp",
// "ep_esp" (§VI-B gives α_MP^AG, β_MP^AG) are bound to the simulated network where those groups
// sit (named_groups, calibration_binding.hpp), so the simulated collective costs what Algorithm 1
// reads; what the profile lacks is fitted to the same network model: the all-to-all alone, and
// Overlap(y) as SAA runs it (its P phases, each all-to-all step with the previous slice's gather).
#pragma once

#include <optional>

#include "sim/core/enum_names.hpp"
#include "sim/strategies/parm/parm_model.hpp"
#include "sim/strategies/registry.hpp"

namespace moesim::strategies::parm {

StrategyInfo info();

enum class Placement { EspInNode, EpInNode };
inline constexpr auto kPlacementNames =
    enum_names<Placement>({{Placement::EspInNode, "esp_in_node"}, {Placement::EpInNode, "ep_in_node"}});
enum class GradientSync { Overlap, AfterBackward, None };
inline constexpr auto kGradientSyncNames = enum_names<GradientSync>(
    {{GradientSync::Overlap, "overlap"}, {GradientSync::AfterBackward, "after_backward"}, {GradientSync::None, "none"}});
// The schedules a scenario names (strategy.schedule), "auto" (Algorithm 1's choice) aside.
inline constexpr auto kScheduleNames =
    enum_names<Schedule>({{Schedule::Baseline, "baseline"}, {Schedule::S1, "s1"}, {Schedule::S2, "s2"}});

struct ParmOptions {
  int mp = 1;   // N_MP
  int esp = 1;  // N_ESP
  Placement placement = Placement::EspInNode;
  std::optional<Schedule> schedule;  // empty: auto (Algorithm 1)
  bool saa = true;
  GradientSync gradient_sync = GradientSync::Overlap;
};

// The parallel groups of every GPU.
struct ParmGroups {
  int n_mp = 1, n_ep = 1, n_esp = 1;
  std::vector<std::vector<std::uint32_t>> mp, ep, esp, dp;  // dp: same MP rank, for dense gradients
  std::vector<int> ep_rank;                                 // per GPU: which experts it holds
  static ParmGroups build(std::uint32_t gpus, int n_mp, int n_esp, Placement placement);
};

// An α-β parameter of Algorithm 1 with where it came from.
struct SourcedAlphaBeta {
  AlphaBeta value;
  std::string source;     // "profile NAME" or "network model fit"
  double fit_error = 0;   // max relative error of the fit (network model only)
};

struct AlgorithmOneInputs {
  SourcedAlphaBeta ag_mp, a2a_ep_esp, overlap;
  ChoiceParams params() const { return {ag_mp.value, a2a_ep_esp.value, overlap.value}; }
};

class ParmStrategy : public Strategy {
 public:
  explicit ParmStrategy(ParmOptions options) : options_(options) {}
  std::string name() const override { return "parm"; }
  void check(const StrategyContext& ctx) const override;
  std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const override;
  ProgramSize program_per_iteration(const StrategyContext& ctx) const override;
  parallel::PlanPtr plan(const StrategyContext& ctx, int iteration, const parallel::RunState& state) override;
  schema::Json describe(const StrategyContext& ctx) const override;
  std::vector<Alternative> alternatives(const StrategyContext& ctx) const override;
  // "mp", "ep", "esp" (the first group of each) and "ep_esp" (the grid): where a profile's
  // per-group α-β (§VI-B) are bound to the network, so Algorithm 1 and the simulation agree.
  NamedGroups named_groups(const cluster::Topology& topology) const override;

  // The paper's symbols for this scenario (one microbatch of one GPU).
  ParmInputs inputs(const StrategyContext& ctx) const;
  // Algorithm 1's α-β: the calibration profile's entries, else fitted to the network model. A
  // strategy serves one simulation, whose context does not change: fitted once, then reused.
  AlgorithmOneInputs algorithm_one_inputs(const StrategyContext& ctx) const;
  // The schedule that runs: the option, or Algorithm 1's choice.
  Schedule schedule(const StrategyContext& ctx) const;

 private:
  AlgorithmOneInputs fit_algorithm_one_inputs(const StrategyContext& ctx) const;
  double params_on_gpu(const StrategyContext& ctx) const;

  ParmOptions options_;
  mutable std::optional<AlgorithmOneInputs> algorithm_one_;
  parallel::PlanPtr plan_;  // the same every iteration
};

}  // namespace moesim::strategies::parm
