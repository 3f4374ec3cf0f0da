// The IterationPlan: what a strategy decides for one training iteration, as plain data that the
// blocks (sim/blocks) and the schedule (sim/schedule) turn into tasks (DESIGN.md §8).
//   - the streams every GPU has (StreamSet: roles, in a fixed order);
//   - each GPU's role: attention, experts, or both;
//   - tensor-parallel groups for attention and dense FFN blocks (Megatron-LM, Parm's MP);
//   - per MoE layer (MoeLayerPlan): the all-to-all groups with each expert's replicas and their
//     share of its tokens, or capacity-padded even exchanges; the collectives the strategy runs at
//     fixed points of the block; expert weights fetched before compute; expert-gradient sync;
//   - dense-gradient synchronisation and the optimizer step;
//   - the order of work (schedule) and the distinct tokens the iteration trains on.
// A plan may be shared by many iterations (plans are immutable once made).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/engine/task.hpp"
#include "sim/network/collective.hpp"
#include "sim/parallel/layout.hpp"

namespace moesim::parallel {

// What a stream is for. Only Compute streams run kernels on the GPU's SMs without a reservation.
// HostCpu: work the GPU's host CPU does for it (the optimizer step offloaded there). Offload and
// Reload: activations copied to the host and back (training.offload_modules), one stream each way. A pipeline
// stage sends on one stream in the order it computes, and receives activations and gradients on
// one stream each, so every receive stream hears from one neighbour in that neighbour's order.
enum class StreamRole : std::uint8_t {
  Compute, Dispatch, Combine, Gradient, Side, HostCopy, HostCpu, PipelineSend, PipelineRecv, PipelineRecvGrad,
  // DualPipeV's second arm of the V (chunk 1): a rank receives activations and gradients from both
  // neighbours, each in its own order, as DualPipe posts its receives for each chunk where that
  // chunk needs them; on one stream, one neighbour's receive would wait behind the other's.
  PipelineRecvReturn, PipelineRecvGradReturn,
  ContextParallel, ParamGather, Offload, Reload, Count
};
inline constexpr int kStreamRoles = static_cast<int>(StreamRole::Count);
std::string_view to_string(StreamRole role);
// The name a trace shows for a stream of this role.
std::string_view trace_name(StreamRole role);

// The streams every GPU has, numbered in the order of StreamRole.
class StreamSet {
 public:
  StreamSet(std::initializer_list<StreamRole> roles) : StreamSet(std::vector<StreamRole>(roles)) {}
  explicit StreamSet(const std::vector<StreamRole>& roles);
  bool has(StreamRole role) const { return index_[static_cast<int>(role)] != kAbsent; }
  std::uint8_t index(StreamRole role) const;
  const std::vector<StreamRole>& roles() const { return roles_; }

 private:
  static constexpr std::uint8_t kAbsent = 0xff;
  std::array<std::uint8_t, kStreamRoles> index_{};
  std::vector<StreamRole> roles_;
};

// What a GPU runs (zebra parallelism separates them; EP runs both everywhere).
enum GpuRole : std::uint8_t { kRunsAttention = 1, kRunsExperts = 2, kRunsBoth = 3 };

// Groups of GPUs (each in rank order) that run one collective each at a point of the program.
struct GroupFamily {
  std::vector<std::vector<std::uint32_t>> groups;
};
using FamilyPtr = std::shared_ptr<const GroupFamily>;
FamilyPtr family(std::vector<std::vector<std::uint32_t>> groups);

// A collective the plan places in the program: one per group of `groups`, on `stream`, each
// member after the GPU's previous step. Groups of one GPU are skipped.
struct CollectiveStep {
  std::string name;  // the task label, e.g. "ESP-AllReduce"
  network::CollectiveKind kind = network::CollectiveKind::AllReduce;
  network::Algorithm algorithm = network::Algorithm::Ring;
  // AllGather: bytes each rank brings; AllReduce/ReduceScatter: the buffer; AllToAll: bytes each
  // rank sends to every rank (an even exchange) unless `traffic` says who sends what to whom.
  double bytes = 0;
  FamilyPtr groups;
  StreamRole stream = StreamRole::Dispatch;
  network::TrafficPtr traffic;  // AllToAll: the exchange over each group's ranks (all groups alike)
};

// One replica of an expert in an all-to-all group: the rank that computes it and the share of
// the tokens the group's sources route to the expert that it receives.
struct Replica {
  std::uint32_t rank = 0;
  double share = 1;
};
// Per expert, its replicas in one all-to-all group (shares sum to 1). Groups with the same layout
// share one table.
struct ReplicaTable {
  std::vector<std::vector<Replica>> of_expert;
  // The table of `ranks` ranks where rank r holds experts [r·E/ranks, (r+1)·E/ranks) alone.
  static std::shared_ptr<const ReplicaTable> contiguous(int experts, int ranks);
};

struct DispatchGroup {
  std::vector<std::uint32_t> gpus;  // the all-to-all group, in rank order
  std::shared_ptr<const ReplicaTable> replicas;
};

// Where the MoE block runs a plan's collectives (forward, then backward).
enum class MoePoint : std::uint8_t {
  BeforeGate,        // forward: before the router (Parm's ESP all-gather)
  AfterGate,         // forward: after the router, before the dispatch (seed 004's popularity all-reduce)
  AfterExperts,      // forward: after each chunk's expert compute (ESP all-reduce)
  AfterCombine,      // forward: after each chunk's combine all-to-all
  AfterOutput,       // forward: after the un-permute and weighted sum (Parm S1's MP all-gather)
  BeforeOutputGrad,  // backward: first (the backward of a split after the output)
  AfterExpertGrads,  // backward: after each chunk's expert compute
  AfterDispatchGrad, // backward: after each chunk's second all-to-all
  AfterGateGrad,     // backward: last
  Count
};
inline constexpr int kMoePoints = static_cast<int>(MoePoint::Count);

// An all-gather run phase by phase beside an all-to-all (Parm's SAA, §III-D): the all-to-all in
// P − 1 phases, phase i sending to rank r + i; the slice a GPU holds after phase i (its own before
// the first) is all-gathered in its group during the next phase, on `stream`, by grouped
// send/recv to each other rank of the group (Parm implements SAA with ncclSend/ncclRecv).
struct PhasedGather {
  FamilyPtr groups;            // the all-gather groups
  double bytes_per_phase = 0;  // per rank, per phase
  StreamRole stream = StreamRole::Side;
  std::string name;
  std::vector<network::TrafficPtr> phases;  // the all-to-all's phases 1..P−1, over its group's ranks
};

// Expert weights that travel before they are computed (HybridEP's migration).
struct ExpertFetch {
  bool at_iteration_start = true;  // queued for every layer when the iteration starts, else at the layer's first forward
  std::vector<Time> prepare;       // per GPU kind: compute before the fetch (SREncode), at iteration start; empty: none
  std::vector<CollectiveStep> steps;  // in order, each after the previous
  std::vector<Time> prologue;      // per GPU kind: added to the layer's first expert compute of the iteration, forward and backward (SRDecode)
};

struct MoeLayerPlan {
  std::vector<DispatchGroup> dispatch;  // the all-to-all groups
  network::Algorithm all_to_all = network::Algorithm::Direct;
  int chunks = 1;  // tokens split so each chunk's all-to-all overlaps the previous chunk's experts
  // Padded (DeepSpeed's capacity padding): each rank sends `padded_bytes_per_pair` to every rank
  // of its group and computes `local_experts` experts of `padded_tokens` tokens each; otherwise
  // the traffic and the expert compute follow the routing and the replicas.
  bool padded = false;
  double padded_bytes_per_pair = 0;
  double padded_tokens = 0;
  double local_experts = 0;
  double padded_token_copies = 0;  // distinct token copies the layer routes per microbatch (drops)
  // Capacity per expert as a share of the copies routed (seed 004 §3.4: a class with r_i of the
  // sN slots may take f·r_i/(sN) of them, slot_capacity × r_i); empty: 1/E each (GShard). Per
  // source GPU (DeepSpeed's per-rank cap), or over the copies of all the group's sources at once
  // (`pooled_capacity`, the paper's global reading: each source keeps the same fraction of an
  // over-full expert's copies).
  std::vector<double> capacity_shares;
  bool pooled_capacity = false;
  double gate_tokens = 0;          // tokens the router sees per GPU and microbatch
  double combine_tokens = 0;       // tokens un-permuted and summed per GPU and microbatch
  double expert_ffn_hidden = 0;    // FFN size of the expert slice a GPU computes (M, or M/N_ESP, M/ETP)
  // Expert tensor parallelism (Megatron-Core's alltoall token dispatcher with ETP > 1): the GPUs
  // of an ETP group (the same EP rank of ETP different EP groups) each hold a 1/ETP column slice
  // of the same experts. After the dispatch they all-gather the token copies each received (uneven
  // shares), compute their slice of all of them, and reduce-scatter the partial outputs back to
  // the GPU that received each token before the combine; the backward runs the same pair. Null
  // when ETP is 1; otherwise the ETP groups of this layer's stage.
  FamilyPtr expert_tensor_parallel;
  std::array<std::vector<CollectiveStep>, kMoePoints> at;
  // Forward: the combine all-to-all with this gather; backward: the second all-to-all.
  std::shared_ptr<const PhasedGather> phased_gather;
  std::shared_ptr<const ExpertFetch> fetch;  // null: the experts are where they are computed
  // Expert gradients after the layer's last backward, step by step (expert-data-parallel
  // all-reduce; HybridEP's reduce-scatters back to the owners).
  std::vector<CollectiveStep> expert_gradients;
  // Expert parameters all-gathered before the layer's first forward (distributed optimizer).
  std::vector<CollectiveStep> expert_param_gather;
  // HeterMoE (§4.1, §4.2): the backward's exchanges on the stream of their direction (towards the
  // experts on the dispatch stream, back on the combine stream), so each stream carries one
  // direction; experts held by GPUs that also run attention (Asym-EA's offloaded experts)
  // computed after the layer's attention of every microbatch (layer-major schedule only).
  bool streams_by_direction = false;
  bool experts_after_attention = false;
  // The dispatch/combine backend (parallel.ep_backend). With a non-blocking fused dispatch each
  // rank's permuted buffer holds `permuted_rows` rows per microbatch (ep_buffers.hpp), aligned per
  // local expert to `permute_alignment`; copies beyond them are dropped.
  EpBackend backend;
  double permuted_rows = 0;  // 0: no budget (blocking: sized exactly)
  int permute_alignment = 8;
};

struct TensorParallel {
  int size = 1;
  FamilyPtr groups;  // null when size is 1
  network::Algorithm algorithm = network::Algorithm::Ring;
  StreamRole stream = StreamRole::Dispatch;
  std::string all_reduce_name = "TP-AllReduce";  // the label of its all-reduces
  // Sequence parallelism: an all-gather before and a reduce-scatter after each TP block instead
  // of the all-reduce after it (blocks/attention_block.hpp).
  bool sequence_parallel = false;
};

// Context parallelism (Megatron-Core with Transformer Engine's p2p ring, Liu et al. 2023 "Ring
// Attention"): each rank of a CP group holds s/cp tokens of every sequence (2·cp chunks, rank r
// holding chunks r and 2·cp − 1 − r so causal work balances). Its attention core runs in cp steps,
// step i against the K/V chunk of rank r − i, while the K/V it holds moves on to rank r + 1; in
// the backward the K/V and their gradients travel together (twice the bytes).
struct ContextParallel {
  int size = 1;
  FamilyPtr groups;  // null when size is 1
  StreamRole stream = StreamRole::ContextParallel;
  CollectiveStep forward_ring, backward_ring;  // one step of the ring, over each group
};

enum class GradientTiming : std::uint8_t { Overlap, AfterBackward, None };

struct GradientPlan {
  GradientTiming timing = GradientTiming::Overlap;
  FamilyPtr dense_groups;  // data-parallel groups of the dense parameters (of every stage)
  network::Algorithm algorithm = network::Algorithm::Ring;
  std::vector<double> dense_params;  // per layer, per GPU
  double embedding_params = 0;       // per GPU of the first stage: the input embedding
  double head_params = 0;            // per GPU of the last stage: the LM head
  // The distributed optimizer: gradients reduce-scattered over the dense groups (and the experts'
  // as their steps say), and at the start of the next iteration each layer's updated parameters
  // all-gathered (1/shards of them per rank) before its first forward.
  bool sharded = false;
  int shards = 1;  // ranks of a dense group
  // FSDP: the parameters stay sharded between uses; each layer's are all-gathered (on the
  // ParamGather stream) before its forward and its backward of every microbatch, the next layer's
  // while the current one runs, and its gradients reduce-scattered after every backward.
  bool fsdp = false;
};

// The order of an iteration's work on every GPU (sim/schedule/schedule.hpp): a pipeline schedule
// (one stage: microbatch after microbatch, forward then backward, as data parallelism with gradient
// accumulation runs), or HeterMoE's layer-major order (one stage only).
enum class ScheduleKind : std::uint8_t { Pipeline, LayerMajor };

// One piece of a stage's work in a schedule's order (sim/schedule/schedule.hpp writes the usual
// orders out of these): the forward or backward of a layer (or of a vocabulary end) for one
// microbatch, a layer's gradient synchronisation, and so on.
enum class Segment : std::uint8_t { Embedding, Layer, Head };
enum class Work : std::uint8_t {
  Forward,
  Backward,
  SyncLayer,  // the layer's gradients, when the plan overlaps them with the backward
  SyncRest,   // what is left after the backward: the layers' (when not overlapped), the embedding's
  Optimizer,
  Deferred    // layer-major: the experts of a microbatch's open block left for after the layer's attention, and its return exchange
};
struct WorkItem {
  Work work = Work::Forward;
  Segment segment = Segment::Layer;
  int layer = 0;
  int microbatch = 0;
};

// The pipeline: PP stages of consecutive GPUs (sim/parallel/layout.hpp), each holding VP model
// chunks; virtual stage c·PP + s (chunk c of stage s) runs layers [first_layer[v], first_layer[v+1]),
// except under DualPipeV, whose two chunks lie in a V: chunk 0 of stage s is virtual stage s, chunk
// 1 virtual stage 2·PP − 1 − s (the last stage holds the V's tip, the first both ends of the model).
// The embedding runs on virtual stage 0, the LM head on the last. Between consecutive virtual
// stages each GPU sends its activations (forward) or their gradients (backward) to the GPU of its
// pipeline group in the next (previous) stage.
struct PipelinePlan {
  int stages = 1;
  int chunks = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  std::vector<int> first_layer{0, 0};  // per virtual stage, and the layer count last
  std::vector<std::vector<std::uint32_t>> stage_gpus;  // per stage, in rank order
  FamilyPtr groups;                  // pipeline groups: rank r in stage r (null with one stage)
  double activation_bytes = 0;       // per GPU, microbatch and boundary
  // Megatron-Core's EP overlap (software::Software::ep_overlap): each forward unit of the steady
  // state written together with the backward unit after it (schedule/iteration_program.cpp).
  bool ep_overlap = false;
  int virtual_stages() const { return stages * chunks; }
  bool v_shape() const { return schedule == PipelineSchedule::DualPipeV; }
  int virtual_of(int stage, int chunk) const { return v_shape() && chunk == 1 ? 2 * stages - 1 - stage : chunk * stages + stage; }
  int stage_of_virtual(int v) const { return v_shape() && v >= stages ? 2 * stages - 1 - v : v % stages; }
  // Megatron-Core's non-interleaved 1F1B waits for each exchange with a neighbouring stage before
  // the stage computes on (p2p_communication._communicate with wait_on_reqs; the schedule refuses
  // overlap_p2p_comm); the interleaved schedule's sends run beside the compute.
  bool blocking_sends() const { return schedule == PipelineSchedule::OneFOneB && chunks == 1; }
  // The virtual stage a layer runs on, and its pipeline stage.
  int virtual_stage_of_layer(int layer) const;
  int stage_of_layer(int layer) const { return stage_of_virtual(virtual_stage_of_layer(layer)); }
  // The layers pipeline stage `stage` holds, in order (all its chunks').
  std::vector<int> layers_of_stage(int stage) const;
};

// Where the optimizer steps: on each GPU, or on its host's CPU (ZeRO-Offload): gradients copied
// to host memory, the CPU's Adam step, updated weights copied back.
enum class OptimizerPlacement : std::uint8_t { Gpu, Host };

struct IterationPlan {
  std::shared_ptr<const StreamSet> streams;
  std::vector<std::uint8_t> roles;  // per GPU (GpuRole); empty: every GPU runs both
  ScheduleKind schedule = ScheduleKind::Pipeline;
  // Layer-major only: an order of the plan's own instead of Theorem 1's (null: Theorem 1's), as
  // tests of its optimality swap pieces of it.
  std::shared_ptr<const std::vector<WorkItem>> order;
  PipelinePlan pipeline;  // with one stage of every GPU unless the plan pipelines
  TensorParallel tensor_parallel;
  ContextParallel context_parallel;
  // Whether the vocabulary ends (embedding lookup, LM head) run: models with a vocabulary.
  bool vocabulary = true;
  std::vector<std::shared_ptr<const MoeLayerPlan>> moe;  // per layer (null for dense layers)
  GradientPlan gradients;
  std::vector<double> optimizer_params;  // per GPU
  // Per GPU, the parameters whose gradients its buffers hold (its whole model share, also when the
  // distributed optimizer steps a shard of it); empty: optimizer_params.
  std::vector<double> gradient_buffer_params;
  OptimizerPlacement optimizer = OptimizerPlacement::Gpu;
  double tokens = 0;                     // distinct tokens the iteration trains on
  // Strategies that place expert replicas per iteration (seed 004's policies): per layer, the
  // replicas of each expert this iteration (empty for dense layers), and the bytes their
  // rebalancing moved before it (FlexMoE); reported per iteration. Null: a fixed placement.
  std::shared_ptr<const std::vector<std::vector<int>>> replicas;
  double migrated_bytes = 0;

  std::uint8_t role(std::uint32_t gpu) const { return roles.empty() ? std::uint8_t{kRunsBoth} : roles[gpu]; }
};
using PlanPtr = std::shared_ptr<const IterationPlan>;

// The pipeline of one stage: every GPU, every layer.
PipelinePlan single_stage(std::uint32_t gpus, int layers);

// The streams a plan of these roles needs, with the host's when the optimizer steps there and the
// activation copies' when the training offloads activations.
std::shared_ptr<const StreamSet> streams_for(std::vector<StreamRole> roles, OptimizerPlacement optimizer,
                                             bool offloads_activations);

}  // namespace moesim::parallel
