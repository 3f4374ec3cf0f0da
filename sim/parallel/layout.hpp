// The parallel layout of a run (DESIGN.md §8): how the GPUs split into tensor (TP), context (CP),
// pipeline (PP, with VP virtual stages per pipeline rank) and data (DP) parallel groups for the
// attention and dense blocks, and, folded over the same GPUs, expert-tensor (ETP), expert (EP) and
// expert-data (EDP) parallel groups for the MoE blocks ("MoE parallel folding").
//
// Rank order follows Megatron-Core's RankGenerator (megatron/core/parallel_state.py, order
// "tp-cp-ep-dp-pp", the first dimension varying fastest):
//   dense:   rank = tp + TP·(cp + CP·(dp + DP·pp))
//   experts: rank = etp + ETP·(ep + EP·(edp + EDP·pp))        EDP = world / (ETP·EP·PP)
// so both views share the pipeline groups: pipeline stage s holds ranks [s·W/PP, (s+1)·W/PP).
// Megatron's docstring example (16 GPUs, TP 2, PP 4): TP groups [0,1], [2,3], …; PP groups
// [0,4,8,12], [1,5,9,13], …; DP groups [0,2], [1,3], [4,6], … (pinned in tests/unit/layout_test.cpp).
// Every group of every dimension is computed here, once; blocks and strategies ask for them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/enum_names.hpp"
#include "sim/parallel/ep_backend.hpp"

namespace moesim::parallel {

struct LayoutSizes {
  int tp = 1, cp = 1, pp = 1, vp = 1, ep = 1, etp = 1;
};

// The dimensions a group varies over.
enum class Dim : std::uint8_t {
  Tp,    // tensor parallel (attention, dense FFN, LM head)
  Cp,    // context parallel (sequence split of attention)
  Dp,    // data parallel of the dense parameters
  DpCp,  // the dense parameters' gradient group (Megatron's data-parallel group "with context parallel")
  TpCp,  // the GPUs that share one microbatch's tokens in a stage
  Pp,    // pipeline: rank r of a group is pipeline stage r
  Etp,   // expert tensor parallel
  Ep,    // expert parallel: the MoE block's all-to-all group
  Edp,   // expert data parallel: the expert parameters' gradient group
};

class ParallelLayout {
 public:
  // Sizes must divide the GPU count (check with layout_problem first).
  ParallelLayout(LayoutSizes sizes, std::uint32_t gpus);

  const LayoutSizes& sizes() const { return s_; }
  std::uint32_t gpus() const { return gpus_; }
  int dp() const { return dp_; }
  int edp() const { return edp_; }
  int stages() const { return s_.pp; }
  int virtual_stages() const { return s_.pp * s_.vp; }
  std::uint32_t stage_size() const { return gpus_ / static_cast<std::uint32_t>(s_.pp); }
  int stage_of(std::uint32_t gpu) const { return static_cast<int>(gpu / stage_size()); }
  // The GPUs of pipeline stage s, in rank order.
  std::vector<std::uint32_t> stage_gpus(int stage) const;
  // Every group of dimension `dim`, each in rank order (Megatron's order of groups).
  std::vector<std::vector<std::uint32_t>> groups(Dim dim) const;
  // The groups of `dim` inside pipeline stage `stage` (all groups but Pp's lie inside one stage).
  std::vector<std::vector<std::uint32_t>> groups_in_stage(Dim dim, int stage) const;
  // Coordinates of a GPU.
  int tp_rank(std::uint32_t gpu) const { return static_cast<int>(gpu % s_.tp); }
  int ep_rank(std::uint32_t gpu) const { return static_cast<int>(gpu / s_.etp % s_.ep); }
  int dp_rank(std::uint32_t gpu) const { return static_cast<int>(gpu / (s_.tp * s_.cp) % dp_); }

 private:
  LayoutSizes s_;
  std::uint32_t gpus_;
  int dp_, edp_;
};

// The order of a pipeline's work (sim/schedule/schedule.hpp). DualPipeV: DeepSeek's DualPipe cut in
// half (deepseek-ai/DualPipe dualpipev.py), two chunks per rank in a V.
enum class PipelineSchedule : std::uint8_t { OneFOneB, GPipe, Interleaved, DualPipeV };
inline constexpr auto kPipelineScheduleNames =
    enum_names<PipelineSchedule>({{PipelineSchedule::OneFOneB, "1f1b"}, {PipelineSchedule::GPipe, "gpipe"},
                                  {PipelineSchedule::Interleaved, "interleaved_1f1b"}, {PipelineSchedule::DualPipeV, "dualpipev"}});
std::string_view to_string(PipelineSchedule schedule);

// How parameters and optimizer state are spread over the data-parallel ranks: replicated (DDP:
// gradients all-reduced), or Megatron-Core's distributed optimizer (ZeRO-1, Rajbhandari et al.
// 2020): gradients reduce-scattered, each rank steps its 1/dp of the optimizer state, updated
// parameters all-gathered, each layer's before its first forward (overlap_param_gather); or
// fully sharded data parallelism (FSDP, ZeRO-3: PyTorch FSDP2 as torchtitan runs it, Zhao et al.
// 2023): parameters sharded too, each layer's all-gathered before its forward and again before its
// backward of every microbatch (the next layer's prefetched during the current one), its gradients
// reduce-scattered after each microbatch's backward.
enum class Sharding : std::uint8_t { None, DistributedOptimizer, Fsdp };
inline constexpr auto kShardingNames = enum_names<Sharding>(
    {{Sharding::None, "none"}, {Sharding::DistributedOptimizer, "distributed_optimizer"}, {Sharding::Fsdp, "fsdp"}});

// What a scenario's "parallel" says.
struct ParallelConfig {
  Sharding sharding = Sharding::None;
  LayoutSizes sizes;  // ep 0: the strategy's choice
  bool sequence_parallel = true;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int first_stage_layers = -1, last_stage_layers = -1;  // -1: an even split
  EpBackend ep_backend;  // the MoE blocks' dispatch and combine (not part of the layout: trivial() ignores it)
  bool trivial() const { return sharding == Sharding::None && sizes.tp == 1 && sizes.cp == 1 && sizes.pp == 1 && sizes.vp == 1 && sizes.etp == 1; }
};

// The layers of each virtual stage (index c·PP + s for chunk c of pipeline rank s), first and last
// as given and the rest split evenly; empty when they do not split (then `why` says how).
std::vector<int> stage_layers(int layers, int virtual_stages, int first, int last, std::string* why = nullptr);

// What is wrong with these sizes on `gpus` GPUs for a model of `experts` experts, as
// {field, problem, fix}; empty when they fit. Fields are the keys of the scenario's "parallel".
struct LayoutProblem {
  std::string field, problem, fix;
};
std::vector<LayoutProblem> layout_problems(const LayoutSizes& sizes, std::uint64_t gpus, int experts);

}  // namespace moesim::parallel
