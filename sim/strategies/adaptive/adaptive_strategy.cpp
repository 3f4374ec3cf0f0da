#include "sim/strategies/adaptive/adaptive_strategy.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <numeric>

#include "sim/blocks/layer_costs.hpp"
#include "sim/core/bound_options.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/ep/ep_strategy.hpp"
#include "sim/strategies/ep/expert_parallel_plan.hpp"
#include "sim/workload/ep_buffers.hpp"

namespace moesim::strategies::adaptive {

namespace sc = moesim::schema;
using parallel::CollectiveStep;
using parallel::StreamRole;

// The strategy's options, each declared once beside the member it fills (core/bound_options.hpp).
const sc::Options<AdaptiveOptions>& adaptive_options() {
  using T = AdaptiveOptions;
  static const sc::Options<T> o({
      sc::declared<T>(sc::required("name", sc::enumeration({"adaptive"}), "the strategy name")),
      sc::enum_option<T>("placement", [](T& t) -> PolicyKind& { return t.policy.kind; }, kPolicyKindNames,
                         "adaptive: Algorithm 1 every iteration; static: DeepSpeed's sN/E replicas on distinct ranks; "
                         "flexmoe: DeepSpeed's layout rebalanced every rebalance_every iterations"),
      sc::option<T>("slots_per_gpu", &T::slots_per_gpu, sc::integer(1, 4096), "expert slots (instances) per GPU and MoE layer: s"),
      sc::option<T>("rebalance_every", [](T& t) -> int& { return t.policy.rebalance_every; }, sc::integer(1),
                    "flexmoe: iterations between rebalances (FlexMoE-k)"),
      sc::option<T>("max_moves", [](T& t) -> int& { return t.policy.max_moves; }, sc::integer(0),
                    "flexmoe: replicas one rebalance may move per layer"),
      sc::switch_option<T>("move_rule", [](T& t) -> bool& { return t.policy.cost_threshold; }, {"cost", "balance"}, "cost",
                           "flexmoe: move while the time saved over the interval exceeds the move's (the spec's reading "
                           "of FlexMoE's threshold), or while the largest load per replica falls"),
      sc::option<T>("intra_rank_replicas", [](T& t) -> bool& { return t.policy.intra_rank; }, sc::boolean(),
                    "adaptive: replicas of a class may share a rank (section 4.1's all-reduce); false places each on its "
                    "own rank, at most N per class (section 4.1's counterfactual)"),
      sc::switch_option<T>("capacity", &T::pooled_capacity, {"pooled", "per_source"}, "pooled",
                           "a class's capacity slot_capacity x r_i over all ranks' tokens together (the paper's reading) "
                           "or per source rank (DeepSpeed's implementation)"),
      sc::switch_option<T>("gradient_reduction", &T::direct_reduction, {"all_reduce", "direct"}, "direct",
                           "all_reduce: replicas all-reduce, then each optimizer shard is collected from one (as "
                           "implemented); direct: every replica's shard sent to its owner (the paper's §3.3 cost model)"),
  });
  return o;
}

StrategyInfo info() {
  StrategyInfo s;
  s.name = "adaptive";
  s.description = "expert replicas placed every iteration from the previous one's popularity (or DeepSpeed's static "
                  "replicas, or FlexMoE's periodic rebalancing), the optimizer sharded on the hosts";
  s.paper = "Accelerating Mixture-of-Experts Training with Adaptive Expert Replication: per-iteration replication vs DeepSpeed and FlexMoE (§3-4, Algorithms 1-2)";
  s.options = adaptive_options().node();
  s.takes_ep_backend = true;
  s.make = [](const sc::Json& o) {
    AdaptiveOptions opt;
    adaptive_options().read(o, opt);
    return std::make_unique<AdaptiveStrategy>(opt);
  };
  return s;
}

namespace {

// Bytes FlexMoE moves with a replica: its weights in the training dtype and its optimizer state,
// 16 B per parameter (fp32 master weights and Adam's two moments; spec A.9, paper §2.2).
constexpr double kOptimizerBytesPerParam = 16;

// A layer's replicas as the routing reads them: one entry per slot, rank = slot / s, each slot an
// equal share of its class's tokens (§3.2 step 2).
std::shared_ptr<const parallel::ReplicaTable> replica_table(const Placement& p) {
  auto t = std::make_shared<parallel::ReplicaTable>();
  t->of_expert.resize(p.classes);
  for (std::size_t k = 0; k < p.slot_class.size(); ++k) {
    const int cls = p.slot_class[k];
    t->of_expert[cls].push_back({static_cast<std::uint32_t>(k / p.slots_per_rank), 1.0 / p.replicas(cls)});
  }
  return t;
}

std::vector<std::uint32_t> as_gpus(const std::vector<int>& ranks) { return {ranks.begin(), ranks.end()}; }

CollectiveStep step(std::string name, network::CollectiveKind kind, network::Algorithm algorithm, double bytes,
                    parallel::FamilyPtr groups, network::TrafficPtr traffic = nullptr) {
  CollectiveStep s;
  s.name = std::move(name);
  s.kind = kind;
  s.algorithm = algorithm;
  s.bytes = bytes;
  s.groups = std::move(groups);
  s.stream = StreamRole::Gradient;
  s.traffic = std::move(traffic);
  return s;
}

// Classes whose replicas sit on more than one rank, grouped by that rank count ρ (ascending),
// each with its hosting ranks: the groups of the replicas' collectives, in one order on every rank.
std::map<int, std::vector<std::vector<std::uint32_t>>> replica_groups(const Placement& p) {
  std::map<int, std::vector<std::vector<std::uint32_t>>> out;
  for (int c = 0; c < p.classes; ++c) {
    const std::vector<int> hosts = p.ranks_hosting(c);
    if (hosts.size() >= 2) out[static_cast<int>(hosts.size())].push_back(as_gpus(hosts));
  }
  return out;
}

network::TrafficPtr matrix(std::uint32_t n, std::vector<double> bytes) {
  return std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(n, std::move(bytes)));
}

}  // namespace

void AdaptiveStrategy::check(const StrategyContext& ctx) const {
  const auto& m = ctx.model;
  const int n = static_cast<int>(ctx.topology.gpu_count()), s = options_.slots_per_gpu, e = m.experts;
  if (m.moe_layers() <= 0 || e < 1)
    throw InputError("", "$.model.experts", "the adaptive strategy replicates experts but the model has no MoE layer",
                     "use a model with experts");
  if (static_cast<long long>(s) * n < e)
    throw InputError("", "$.strategy.slots_per_gpu",
                     fmt::format("{} GPUs x {} slots hold fewer than the model's {} experts (every class needs a slot)", n,
                                 s, e),
                     fmt::format("use at least {} slots per GPU", (e + n - 1) / n));
  if (options_.policy.kind != PolicyKind::Adaptive && ((static_cast<long long>(s) * n) % e != 0 || s > e))
    throw InputError("", "$.strategy.slots_per_gpu",
                     fmt::format("DeepSpeed's layout places sN/E replicas of every class on distinct ranks: {} GPUs x {} "
                                 "slots is not a multiple of {} experts, or {} slots exceed them",
                                 n, s, e, s),
                     "choose slots_per_gpu with slots x GPUs a multiple of the experts and at most the experts");
  if (!ctx.training.optimizer_on_host)
    throw InputError("", "$.training.optimizer",
                     "the adaptive strategy steps the optimizer on the hosts, each class's state sharded over the ranks "
                     "(the adaptive replication paper, §3.2, as its DeepSpeed baseline: ZeRO with CPU offload)",
                     "set training.optimizer to \"host\" and describe cluster.hosts");
}

MoveCost AdaptiveStrategy::move_cost(const StrategyContext& ctx) const {
  MoveCost c;
  if (options_.policy.kind != PolicyKind::FlexMoE) return c;
  const auto& m = ctx.model;
  const std::uint32_t n = ctx.topology.gpu_count();
  // Per token copy: a replica's forward and backward over a full slot (slot_capacity at f = 1).
  const double copies = ctx.training.tokens_per_microbatch() * ctx.training.microbatches * n * m.top_k;
  const double slot = std::max(1.0, copies / (static_cast<double>(options_.slots_per_gpu) * n));
  const auto& cm = ctx.compute_of(0);
  const std::vector<double> rows{slot};
  const Time forward = blocks::experts_time(cm, m, rows, m.ffn_hidden).time;
  c.seconds_per_token = time_to_seconds(forward + cm.backward(forward)) / slot;
  // One replica's weights and optimizer state from one rank to another across the network.
  if (ctx.network && n > 1) {
    const std::vector<std::uint32_t> pair{0, n - 1};
    const network::CollectiveOp op{network::CollectiveKind::P2P, network::Algorithm::Direct, 0,
                                   m.expert_params() * (ctx.dtype_bytes() + kOptimizerBytesPerParam), nullptr};
    c.seconds_per_move = time_to_seconds(ctx.network->cost(op, pair).duration);
  }
  return c;
}

parallel::PlanPtr AdaptiveStrategy::plan(const StrategyContext& ctx, int iteration, const parallel::RunState& state) {
  const auto& m = ctx.model;
  if (iteration == 0 || !policy_) {
    std::vector<bool> moe(m.layers);
    for (int l = 0; l < m.layers; ++l) moe[l] = m.is_moe(l);
    policy_ = std::make_unique<ReplicationPolicy>(options_.policy, m.experts, static_cast<int>(ctx.topology.gpu_count()),
                                                  options_.slots_per_gpu, std::move(moe));
    move_cost_ = move_cost(ctx);
    migrated_bytes_ = 0;
    moves_ = 0;
    return build(ctx, {});
  }
  if (!state.previous) invariant_failed("adaptive: an iteration after the first without the previous one's counts");
  const std::vector<Move> moves = policy_->advance(iteration, state.previous->expert_routed, move_cost_);
  moves_ += static_cast<int>(moves.size());
  auto plan = build(ctx, moves);
  migrated_bytes_ += plan->migrated_bytes;
  return plan;
}

parallel::PlanPtr AdaptiveStrategy::build(const StrategyContext& ctx, const std::vector<Move>& moves) const {
  const auto& m = ctx.model;
  const std::uint32_t n = ctx.topology.gpu_count();
  const int s = options_.slots_per_gpu;
  const bool adaptive = options_.policy.kind == PolicyKind::Adaptive;
  const double params = m.expert_params();
  const double g_bytes = params * ctx.dtype_bytes();  // G = W: one instance's gradients, or weights

  std::vector<std::uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0u);
  const parallel::FamilyPtr everyone = parallel::family({all});
  ep::ExpertParallelPlan in;
  in.streams = {StreamRole::Compute, StreamRole::Dispatch, StreamRole::Combine, StreamRole::Gradient};
  in.groups.push_back({all, std::make_shared<parallel::ReplicaTable>()});  // each layer's table below
  in.params_per_gpu = 1;  // each GPU's optimizer share below
  in.local_experts = s;   // a fused backend's permuted budget is shared by the rank's slots
  auto plan = std::make_shared<parallel::IterationPlan>(*ep::make_plan(ctx, in));
  // The dense parameters as ZeRO with CPU offload runs them (the paper's systems, spec A.9): their
  // gradients reduce-scattered over all ranks, each rank's host stepping 1/N, the updated
  // parameters all-gathered before their first forward.
  plan->gradients.sharded = true;
  plan->gradients.shards = static_cast<int>(n);

  // Each rank's optimizer partition: 1/N of the dense parameters and, per MoE layer, 1/N of every class (adaptive) or 1/ρ of each class it hosts on
  // ρ ranks (static, FlexMoE).
  const double dense = ep::dense_params_on_stage(m, plan->pipeline, 0, 1) / n;
  plan->optimizer_params.assign(n, dense);

  std::vector<double> migration(static_cast<std::size_t>(n) * n, 0.0);
  for (const Move& mv : moves)
    if (mv.src_rank != mv.dst_rank)
      migration[static_cast<std::size_t>(mv.src_rank) * n + mv.dst_rank] += params * (ctx.dtype_bytes() + kOptimizerBytesPerParam);
  plan->migrated_bytes = std::accumulate(migration.begin(), migration.end(), 0.0);
  bool first_moe = true;

  for (int l = 0; l < m.layers; ++l) {
    if (!plan->moe[l]) continue;
    const Placement& p = policy_->placement(l);
    auto lp = std::make_shared<parallel::MoeLayerPlan>(*plan->moe[l]);
    lp->dispatch = {{all, replica_table(p)}};
    lp->capacity_shares.resize(m.experts);
    for (int c = 0; c < m.experts; ++c) lp->capacity_shares[c] = static_cast<double>(p.replicas(c)) / p.slot_class.size();
    lp->pooled_capacity = options_.pooled_capacity;
    // 1. The popularity all-reduce: E token counts (int64, as torch counts them) over all ranks.
    if (adaptive) {
      CollectiveStep count = step("popularity_all_reduce", network::CollectiveKind::AllReduce, ctx.all_reduce_algorithm,
                                  8.0 * m.experts, everyone);
      count.stream = StreamRole::Dispatch;
      lp->at[static_cast<int>(parallel::MoePoint::AfterGate)] = {count};
    }
    // 3. and 4.: the replicas' gradients and the optimizer's shards.
    const auto groups = replica_groups(p);
    std::vector<CollectiveStep> grads, weights;
    if (options_.direct_reduction) {
      if (adaptive)
        grads.push_back(step("gradients_to_owners", network::CollectiveKind::AllToAll, network::Algorithm::Direct, s * g_bytes / n,
                             everyone));
      else
        for (const auto& [rho, gs] : groups)
          grads.push_back(step("replica_reduce_scatter", network::CollectiveKind::ReduceScatter, ctx.all_reduce_algorithm,
                               g_bytes, parallel::family(gs)));
    } else {
      // One all-reduce per class on more than one rank, in class order: every rank issues its own
      // in the family's order, so overlapping groups cannot wait on each other in a cycle.
      std::vector<std::vector<std::uint32_t>> hosting;
      for (int c = 0; c < m.experts; ++c)
        if (const std::vector<int> hosts = p.ranks_hosting(c); hosts.size() >= 2) hosting.push_back(as_gpus(hosts));
      if (!hosting.empty())
        grads.push_back(step("replica_all_reduce", network::CollectiveKind::AllReduce, ctx.all_reduce_algorithm, g_bytes,
                             parallel::family(std::move(hosting))));
      if (adaptive) {
        // Algorithm 2: partition d takes class c's shard from gradient_source(c, d).
        std::vector<double> bytes(static_cast<std::size_t>(n) * n, 0.0);
        for (const ShardTransfer& t : collection_transfers(p))
          if (t.remote()) bytes[static_cast<std::size_t>(t.src) * n + t.dst] += g_bytes / n;
        grads.push_back(step("gradient_collection", network::CollectiveKind::AllToAll, network::Algorithm::Direct, 0, everyone,
                             matrix(n, std::move(bytes))));
      }
    }
    if (adaptive) {
      // Every partition's W/N shard of each class to every slot of it: s·W/N to each other rank.
      weights.push_back(step("weights_to_placement", network::CollectiveKind::AllToAll, network::Algorithm::Direct,
                             s * g_bytes / n, everyone));
      for (std::uint32_t g = 0; g < n; ++g) plan->optimizer_params[g] += m.experts * params / n;
    } else {
      for (const auto& [rho, gs] : groups)
        weights.push_back(step("replica_weight_gather", network::CollectiveKind::AllGather, ctx.all_reduce_algorithm,
                               g_bytes / rho, parallel::family(gs)));
      for (int c = 0; c < m.experts; ++c) {
        const std::vector<int> hosts = p.ranks_hosting(c);
        for (const int r : hosts) plan->optimizer_params[r] += params / static_cast<double>(hosts.size());
      }
    }
    // FlexMoE's migration, every layer's, before the first MoE layer's weights: blocking.
    if (first_moe && plan->migrated_bytes > 0)
      weights.insert(weights.begin(), step("replica_migration", network::CollectiveKind::AllToAll, network::Algorithm::Direct,
                                           0, everyone, matrix(n, migration)));
    first_moe = false;
    lp->expert_gradients = std::move(grads);
    lp->expert_param_gather = std::move(weights);
    plan->moe[l] = std::move(lp);
  }
  plan->replicas = std::make_shared<const std::vector<std::vector<int>>>(policy_->replica_counts());
  return plan;
}

std::vector<workload::MemoryFootprint> AdaptiveStrategy::memory(const StrategyContext& ctx) const {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const std::uint32_t n = ctx.topology.gpu_count();
  const parallel::ParallelLayout layout({}, n);
  const parallel::PipelinePlan pipeline = ep::pipeline_of(ctx, layout);
  const double dense = ep::dense_params_on_stage(m, pipeline, 0, 1);
  workload::MemoryInputs in;
  in.params = dense + m.moe_layers() * options_.slots_per_gpu * m.expert_params();
  in.optimizer_params = dense / n + m.moe_layers() * m.experts * m.expert_params() / n;
  in.tokens = t.tokens_per_microbatch();
  // A rank's slots take at most slot_capacity each: f·(all ranks' copies)/N per layer; dropless,
  // at most s times the largest class's copies (a class has at least one replica).
  const double copies = t.tokens_per_microbatch() * m.top_k * n;
  double largest = 0;
  for (int l = m.dense_layers; l < m.layers; ++l)
    for (const double p : ctx.routing.popularity(0, l)) largest = std::max(largest, p);
  in.expert_tokens_per_layer = t.capacity_factor > 0 ? std::ceil(t.capacity_factor * copies / n)
                                                     : options_.slots_per_gpu * copies * largest;
  // A fused backend's buffers over the one EP group of all N ranks; blocking, the busiest rank's
  // copies spread over its s slots, each slot's rows aligned.
  const int s = options_.slots_per_gpu;
  const double busiest_rows = workload::permuted_rows(std::vector<double>(s, in.expert_tokens_per_layer / s),
                                                      ep::permute_alignment(ctx));
  const auto buffers = ep::fused_buffers(ctx, in.tokens, static_cast<int>(n), s, in.expert_tokens_per_layer, busiest_rows);
  in.shared_buffer_bytes = buffers.shared_bytes;
  in.moe_buffer_bytes = buffers.per_layer_bytes;
  std::vector<workload::MemoryFootprint> out(n);
  for (std::uint32_t g = 0; g < n; ++g) {
    in.flash_attention = ctx.topology.gpu(g).flash_attention;
    out[g] = workload::memory_footprint(m, t, in);
  }
  return out;
}

ProgramSize AdaptiveStrategy::program_per_iteration(const StrategyContext& ctx) const {
  // EP's blocks, plus per MoE layer (build()): under the adaptive policy the popularity
  // all-reduce of every microbatch over all GPUs; the replicas' collectives, one per class hosted
  // on two ranks or more (at most every class, each slot of every rank a member once), for their
  // gradients and, under static and FlexMoE, their weights; and over all GPUs the gradients'
  // collection (or reduction to the owners), the weights to the placement and the migration.
  const double n = ctx.topology.gpu_count(), slots = n * options_.slots_per_gpu;
  const bool adaptive = options_.policy.kind == PolicyKind::Adaptive;
  const double directions = adaptive ? (options_.direct_reduction ? 0 : 1) : 2;
  const ProgramSize replicas{directions * slots, directions * slots,
                             directions * std::min<double>(ctx.model.experts, slots / 2)};
  const ProgramSize per_layer = n * ProgramSize::collective(adaptive ? ctx.training.microbatches : 0, n) + replicas +
                                n * ProgramSize::collective(3, n);
  return ep::program_per_iteration(ctx, 1) + ctx.model.moe_layers() * per_layer;
}

schema::Json AdaptiveStrategy::describe(const StrategyContext& ctx) const {
  schema::Json j;
  j["placement"] = name_string(kPolicyKindNames, options_.policy.kind);
  j["ranks"] = ctx.topology.gpu_count();
  j["slots_per_gpu"] = options_.slots_per_gpu;
  j["classes"] = ctx.model.experts;
  j["capacity"] = options_.pooled_capacity ? "pooled" : "per_source";
  j["gradient_reduction"] = options_.direct_reduction ? "direct" : "all_reduce";
  if (options_.policy.kind == PolicyKind::Adaptive) j["intra_rank_replicas"] = options_.policy.intra_rank;
  if (options_.policy.kind == PolicyKind::FlexMoE) {
    j["rebalance_every"] = options_.policy.rebalance_every;
    j["max_moves"] = options_.policy.max_moves;
    j["move_rule"] = options_.policy.cost_threshold ? "cost" : "balance";
    j["rebalances"] = policy_ ? policy_->rebalances() : 0;
    j["moves"] = moves_;
    j["migrated_bytes"] = migrated_bytes_;
  }
  return j;
}

}  // namespace moesim::strategies::adaptive
