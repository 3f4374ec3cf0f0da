#include "sim/strategies/ep/ep_strategy.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/strategies/ep/expert_parallel_plan.hpp"

namespace moesim::strategies::ep {

namespace sc = moesim::schema;

parallel::GradientTiming timing(const EpOptions& o) {
  return o.overlap_gradient_sync ? parallel::GradientTiming::Overlap : parallel::GradientTiming::AfterBackward;
}

const sc::Options<EpOptions>& ep_options() {
  using T = EpOptions;
  const auto self = [](T& t) -> T& { return t; };
  static const sc::Options<T> o({
      sc::declared<T>(sc::required("name", sc::enumeration({"ep"}), "the strategy name")),
      sc::option<T>("ep_size", &T::ep_size, sc::integer(0),
                    "GPUs per expert-parallel group (0: all GPUs); experts and GPUs must divide by it"),
      pipelining_degree_option<T>(self),
      sc::enum_option<T>("all_to_all", &T::all_to_all, network::kAlgorithmNames,
                         "all-to-all algorithm: direct, or hierarchical (2-D: inside the node, then across)",
                         {"direct", "hierarchical"}),
      gradient_sync_option<T>(self),
  });
  return o;
}

StrategyInfo info() {
  StrategyInfo s;
  s.name = "ep";
  s.description = "plain expert parallelism: all-to-all dispatch and combine around the local experts";
  s.paper = "GShard (Lepikhin et al. 2021), DeepSpeed-MoE, Tutel; the baseline of HybridEP, Parm, HeterMoE and adaptive replication";
  s.options = ep_options().node();
  s.takes_layout = true;
  s.takes_ep_backend = true;
  s.make = [](const sc::Json& o) {
    EpOptions opt;
    ep_options().read(o, opt);
    return std::make_unique<EpStrategy>(opt);
  };
  return s;
}

int EpStrategy::ep_size(const StrategyContext& ctx) const {
  const auto& s = ctx.parallel.sizes;
  if (s.ep > 0) return s.ep;
  if (options_.ep_size > 0) return options_.ep_size;
  return static_cast<int>(ctx.topology.gpu_count() / static_cast<std::uint32_t>(s.pp * s.etp));
}

parallel::ParallelLayout EpStrategy::layout(const StrategyContext& ctx) const {
  parallel::LayoutSizes sizes = ctx.parallel.sizes;
  sizes.ep = ep_size(ctx);
  return parallel::ParallelLayout(sizes, ctx.topology.gpu_count());
}

void EpStrategy::check(const StrategyContext& ctx) const {
  const auto& sizes = ctx.parallel.sizes;
  if (sizes.ep > 0 && options_.ep_size > 0 && sizes.ep != options_.ep_size)
    throw InputError("", "$.parallel.ep", fmt::format("parallel.ep {} and strategy.ep_size {} disagree", sizes.ep, options_.ep_size),
                     "give the expert-parallel size once");
  if (!ctx.parallel.trivial() || sizes.ep > 0) {
    parallel::LayoutSizes s = sizes;
    s.ep = ep_size(ctx);
    const auto problems = parallel::layout_problems(s, ctx.topology.gpu_count(), ctx.model.experts);
    if (!problems.empty())
      throw InputError("", "$.parallel." + problems[0].field, problems[0].problem, problems[0].fix);
  }
  const int n = ep_size(ctx);
  const int g = static_cast<int>(ctx.topology.gpu_count());
  const int e = ctx.model.experts;
  if (n > g)
    throw InputError("", "$.strategy.ep_size", fmt::format("ep_size {} exceeds the cluster's {} GPUs", n, g),
                     fmt::format("use at most {}", g));
  if (g % n != 0)
    throw InputError("", "$.strategy.ep_size", fmt::format("{} GPUs do not split into EP groups of {}", g, n),
                     "choose an ep_size that divides the GPU count");
  if (e % n != 0) {
    std::vector<int> good;
    for (int d = 1; d <= std::min(e, g); ++d)
      if (e % d == 0 && g % d == 0) good.push_back(d);
    throw InputError("", "$.strategy.ep_size",
                     fmt::format("the model's {} experts are not divisible by ep_size {}", e, n),
                     fmt::format("choose an ep_size dividing both {} experts and {} GPUs (e.g. {}), or change "
                                 "model.experts",
                                 e, g, fmt::join(good, ", ")));
  }
  if (ctx.parallel.ep_backend.fused() && sizes.etp > 1)
    throw InputError("", "$.parallel.ep_backend",
                     fmt::format("moesim models the {} backend without expert tensor parallelism (etp {})",
                                 parallel::to_string(ctx.parallel.ep_backend.kind), sizes.etp),
                     "set etp 1, or ep_backend \"nccl\"");
  if (ctx.parallel.ep_backend.fused() && options_.pipelining_degree > 1)
    throw InputError("", "$.strategy.pipelining_degree",
                     fmt::format("the {} backend's fused dispatch sends each microbatch's tokens in one call",
                                 parallel::to_string(ctx.parallel.ep_backend.kind)),
                     "set pipelining_degree 1, or ep_backend \"nccl\"");
  if (options_.all_to_all == network::Algorithm::Hierarchical && ctx.topology.level_count() >= 2) {
    const std::uint32_t per_node = ctx.topology.gpus_per_worker(ctx.topology.level_count() - 2);
    if (static_cast<std::uint32_t>(n) % per_node != 0)
      throw InputError("", "$.strategy.all_to_all",
                       fmt::format("hierarchical all-to-all needs EP groups of whole nodes ({} GPUs), not {}", per_node, n),
                       "use \"direct\" or an ep_size that is a multiple of the node size");
  }
}

std::vector<workload::MemoryFootprint> EpStrategy::memory(const StrategyContext& ctx) const {
  return ep::memory(ctx, ep_size(ctx), layout(ctx));
}

ProgramSize program_per_iteration(const StrategyContext& ctx, int chunks,
                                  const std::optional<parallel::ParallelLayout>& layout_in, double exchange_group) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const parallel::ParallelLayout layout = layout_in ? *layout_in : parallel::ParallelLayout({}, ctx.topology.gpu_count());
  const auto& s = layout.sizes();
  const parallel::PipelinePlan pipeline = pipeline_of(ctx, layout);
  const bool fsdp = ctx.parallel.sharding == parallel::Sharding::Fsdp;
  const bool sharded = ctx.parallel.sharding != parallel::Sharding::None;
  using P = ProgramSize;
  // The groups the collectives span: tensor parallel, context parallel (the K/V ring), the
  // all-to-all's, expert tensor parallel, the dense parameters' data-parallel groups (dp·cp) and
  // the experts' (edp); a pipeline send is a pair.
  const double dense_group = static_cast<double>(layout.dp()) * s.cp;
  const double ep_group = exchange_group > 0 ? exchange_group : layout_in ? s.ep : ctx.topology.gpu_count();
  // Tasks a GPU writes per block, as the blocks write them: a tensor-parallel block's
  // collective members (an all-gather and a reduce-scatter with sequence parallelism, else an
  // all-reduce), the attention's kernels (with context parallelism its projections, cp steps and
  // the cp − 1 ring exchanges between them), a MoE layer's router and output kernels around each
  // chunk's expert kernel and exchanges (two with EP, two more with ETP), its shared experts.
  const P tp = s.tp > 1 ? P::collective(ctx.parallel.sequence_parallel ? 2 : 1, s.tp) : P{};
  const P attention = !m.attention ? P{}
                      : s.cp > 1   ? tp + P::kernels(2 + s.cp) + P::collective(s.cp - 1, s.cp)
                                   : tp + P::kernels(1);
  const bool exchanges = ep_group > 1;
  const P chunk = P::kernels(1) + (exchanges ? P::collective(2, ep_group) : P{}) + (s.etp > 1 ? P::collective(2, s.etp) : P{});
  const P moe = attention + P::kernels(2) + chunks * chunk + (m.shared_experts > 0 ? P::kernels(1) + tp : P{});
  const P dense = attention + P::kernels(1) + tp;
  // Per microbatch: forward and backward, the recomputed forward, FSDP's gathers before each and
  // its reduce-scatter after the backward.
  const double passes = 2 + (t.recompute == workload::Recompute::Full ? 1 : 0);
  const P extra = fsdp ? P::collective(3, dense_group) : P{};
  // Selective recomputation's tasks (recompute_block.hpp): the attention side's (the norm and up
  // projections in one, the core), the pre-MLP norm, a dense FFN with its collectives, the shared
  // experts with theirs, each chunk's expert activation.
  using workload::RecomputeModule;
  const auto again = [&](RecomputeModule r) { return t.recomputes(r) ? 1.0 : 0.0; };
  const P recomputed = P::kernels(std::max(again(RecomputeModule::Layernorm), again(RecomputeModule::MlaUpProj)) +
                                  again(RecomputeModule::CoreAttn) + again(RecomputeModule::Layernorm));
  const P recomputed_dense = recomputed + again(RecomputeModule::Mlp) * (P::kernels(1) + tp);
  const P recomputed_moe = recomputed + (m.shared_experts > 0 ? again(RecomputeModule::SharedExperts) * (P::kernels(1) + tp) : P{}) +
                           P::kernels(std::max(again(RecomputeModule::MoeAct), again(RecomputeModule::RoutedExperts)) * chunks);
  // The optimizer step and its waits; on the host two of them are the copies to and from it.
  const P optimizer = t.optimizer_on_host ? P::kernels(2) + P::host_copies(2) : P::kernels(4);
  P total;
  for (int st = 0; st < s.pp; ++st) {
    const std::vector<int> layers = pipeline.layers_of_stage(st);
    P per_microbatch, per_iteration = optimizer;
    for (const int l : layers) {
      per_microbatch += passes * (m.is_moe(l) ? moe : dense) + extra + (m.is_moe(l) ? recomputed_moe : recomputed_dense);
      // An MTP module's embedding, projection and head, forward and backward, with the TP
      // collectives of the embedding and the head.
      if (m.is_mtp(l)) per_microbatch += 2 * (P::kernels(3) + (s.tp > 1 ? P::collective(2, s.tp) : P{}));
      // Gradient sync (dense, and the experts' over edp), and the distributed optimizer's gathers.
      per_iteration += P::collective(sharded ? 2 : 1, dense_group);
      if (m.is_moe(l) && layout.edp() > 1) per_iteration += P::collective(sharded ? 2 : 1, layout.edp());
    }
    const bool first = st == 0, last = pipeline.stage_of_virtual(pipeline.virtual_stages() - 1) == st;
    // The vocabulary ends (a kernel and a TP collective each, forward and backward) and their
    // gradients; the pipeline's sends and receives, forward and backward, at each boundary of the
    // stage's chunks (v − 1 → v and v → v + 1 of its virtual stages v but the model's two ends and
    // DualPipeV's tip, where both virtual stages are this stage's).
    const double ends = (first ? 1 : 0) + (last ? 1 : 0);
    per_microbatch += 2 * ends * (P::kernels(1) + (s.tp > 1 ? P::collective(1, s.tp) : P{}));
    per_iteration += ends * P::collective(1, dense_group);
    // A blocking send is followed by a zero-length wait (PipelinePlan::blocking_sends).
    const int stages = layout.virtual_stages();
    const bool blocking_sends = pipeline.blocking_sends();
    for (int c = 0; c < s.vp; ++c) {
      const int v = pipeline.virtual_of(st, c);
      const auto crosses = [&](int w) { return w >= 0 && w < stages && pipeline.stage_of_virtual(w) != st; };
      const double boundaries = (crosses(v - 1) ? 1 : 0) + (crosses(v + 1) ? 1 : 0);
      per_microbatch += P::collective(2.0 * boundaries, 2) + (blocking_sends ? P::kernels(boundaries) : P{});
    }
    total += static_cast<double>(layout.stage_size()) * (t.microbatches * per_microbatch + per_iteration);
  }
  return total;
}

ProgramSize EpStrategy::program_per_iteration(const StrategyContext& ctx) const {
  return ep::program_per_iteration(ctx, options_.pipelining_degree, layout(ctx));
}

parallel::PlanPtr EpStrategy::plan(const StrategyContext& ctx, int, const parallel::RunState&) {
  if (plan_) return plan_;
  const auto& m = ctx.model;
  const int n = ep_size(ctx);
  const parallel::ParallelLayout lay = layout(ctx);
  ExpertParallelPlan in;
  in.streams = {parallel::StreamRole::Compute, parallel::StreamRole::Dispatch, parallel::StreamRole::Combine,
                parallel::StreamRole::Gradient};
  const auto replicas = parallel::ReplicaTable::contiguous(m.experts, n);
  for (auto& gpus : lay.groups(parallel::Dim::Ep)) in.groups.push_back({std::move(gpus), replicas});
  in.all_to_all = options_.all_to_all;
  in.chunks = options_.pipelining_degree;
  in.timing = timing(options_);
  // The expert-data-parallel group of EP rank r holds the GPUs with rank r in every EP group of
  // its stage.
  auto edp = lay.groups(parallel::Dim::Edp);
  parallel::CollectiveStep expert_grads;
  expert_grads.name = "expert_grads";
  expert_grads.kind = network::CollectiveKind::AllReduce;
  expert_grads.algorithm = ctx.all_reduce_algorithm;
  expert_grads.bytes = (m.experts / n) * m.expert_params() / lay.sizes().etp * ctx.dtype_bytes();
  expert_grads.groups = parallel::family(std::move(edp));
  expert_grads.stream = parallel::StreamRole::Gradient;
  if (ctx.parallel.sharding != parallel::Sharding::None && lay.edp() > 1) {
    // Reduce-scattered to the rank that steps them; the updated slices all-gathered before use.
    expert_grads.kind = network::CollectiveKind::ReduceScatter;
    parallel::CollectiveStep gather = expert_grads;
    gather.name = "expert_param_gather";
    gather.kind = network::CollectiveKind::AllGather;
    gather.bytes = expert_grads.bytes / lay.edp();
    in.expert_param_gather.push_back(std::move(gather));
  }
  if (expert_grads.bytes > 0) in.expert_gradients.push_back(std::move(expert_grads));
  in.experts_per_gpu = m.experts / n;
  in.layout = lay;
  plan_ = make_plan(ctx, in);
  return plan_;
}

schema::Json EpStrategy::describe(const StrategyContext& ctx) const {
  const int n = ep_size(ctx);
  schema::Json j;
  j["ep_size"] = n;
  j["experts_per_gpu"] = ctx.model.experts / n;
  const auto lay = layout(ctx);
  j["expert_data_parallel_size"] = lay.edp();
  j["ep_groups"] = static_cast<int>(lay.groups(parallel::Dim::Ep).size());
  if (!ctx.parallel.trivial()) {
    const auto& s = lay.sizes();
    j["layout"] = {{"tp", s.tp}, {"cp", s.cp}, {"pp", s.pp}, {"vp", s.vp}, {"dp", lay.dp()}, {"ep", s.ep}, {"etp", s.etp},
                   {"edp", lay.edp()}, {"sequence_parallel", ctx.parallel.sequence_parallel && s.tp > 1},
                   {"schedule", std::string(parallel::to_string(ctx.parallel.schedule))}};
  }
  j["pipelining_degree"] = options_.pipelining_degree;
  j["all_to_all"] = std::string(network::to_string(options_.all_to_all));
  j["gradient_sync"] = options_.overlap_gradient_sync ? "overlap" : "after_backward";
  const auto& b = ctx.parallel.ep_backend;
  j["ep_backend"] = {{"name", std::string(parallel::to_string(b.kind))}};
  if (b.host_sync) j["ep_backend"]["host_sync_us"] = time_to_seconds(*b.host_sync) * 1e6;  // else the software's
  if (b.fused()) {
    j["ep_backend"]["sms"] = {b.dispatch_sms, b.combine_sms};
    j["ep_backend"]["non_blocking"] = b.non_blocking;
    if (b.non_blocking) j["ep_backend"]["capacity_factor"] = b.capacity_factor;
  }
  return j;
}

}  // namespace moesim::strategies::ep
