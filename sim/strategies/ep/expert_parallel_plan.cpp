#include "sim/strategies/ep/expert_parallel_plan.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "sim/schedule/schedule.hpp"
#include "sim/workload/ep_buffers.hpp"

namespace moesim::strategies::ep {

namespace {
int moe_layers_of(const workload::ModelShape& m, const std::vector<int>& layers) {
  return static_cast<int>(std::count_if(layers.begin(), layers.end(), [&](int l) { return m.is_moe(l); }));
}

parallel::ParallelLayout layout_or_flat(const StrategyContext& ctx, const ExpertParallelPlan& in) {
  return in.layout ? *in.layout : parallel::ParallelLayout({}, ctx.topology.gpu_count());
}
}  // namespace

parallel::PipelinePlan pipeline_of(const StrategyContext& ctx, const parallel::ParallelLayout& layout) {
  const auto& m = ctx.model;
  const auto& s = layout.sizes();
  parallel::PipelinePlan p;
  p.stages = s.pp;
  p.chunks = s.vp;
  p.schedule = ctx.parallel.schedule;
  if (s.pp == 1 && s.vp == 1) p.schedule = parallel::PipelineSchedule::OneFOneB;
  p.ep_overlap = ctx.software && ctx.software->ep_overlap;
  const auto counts = parallel::stage_layers(m.layers, layout.virtual_stages(), ctx.parallel.first_stage_layers,
                                             ctx.parallel.last_stage_layers);
  p.first_layer.assign(1, 0);
  for (int c : counts) p.first_layer.push_back(p.first_layer.back() + c);
  for (int st = 0; st < s.pp; ++st) p.stage_gpus.push_back(layout.stage_gpus(st));
  if (s.pp > 1) p.groups = parallel::family(layout.groups(parallel::Dim::Pp));
  // Each GPU sends its share of the microbatch's hidden states: the sequence split over cp, and
  // over tp with sequence parallelism (Megatron-Core's p2p_communication, tensor shape
  // (s/cp/tp, b, h)).
  const bool sp = ctx.parallel.sequence_parallel && s.tp > 1;
  p.activation_bytes = ctx.training.tokens_per_microbatch() / s.cp / (sp ? s.tp : 1) * m.hidden * ctx.dtype_bytes();
  return p;
}

parallel::ContextParallel context_parallel_of(const StrategyContext& ctx, const parallel::ParallelLayout& layout) {
  const auto& m = ctx.model;
  const auto& s = layout.sizes();
  parallel::ContextParallel cp;
  cp.size = s.cp;
  cp.groups = parallel::family(layout.groups(parallel::Dim::Cp));
  // Each step a rank passes on the K and V of s/cp tokens, its kv_heads/tp heads (Transformer
  // Engine's p2p ring; with MLA the up-projected per-head keys and values); the backward passes
  // their gradients with them.
  const double kv = ctx.training.tokens_per_microbatch() / s.cp * (m.key_width() + m.value_width()) / s.tp * ctx.dtype_bytes();
  std::vector<double> ring(static_cast<std::size_t>(s.cp) * s.cp, 0.0);
  for (int r = 0; r < s.cp; ++r) ring[static_cast<std::size_t>(r) * s.cp + (r + 1) % s.cp] = kv;
  auto forward = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(static_cast<std::uint32_t>(s.cp), ring));
  for (double& x : ring) x *= 2;
  auto backward = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(static_cast<std::uint32_t>(s.cp), ring));
  for (auto [step, traffic, name] : {std::tuple{&cp.forward_ring, forward, "CP-KV"}, {&cp.backward_ring, backward, "CP-KV-grad"}}) {
    step->name = name;
    step->kind = network::CollectiveKind::AllToAll;
    step->algorithm = network::Algorithm::Direct;
    step->groups = cp.groups;
    step->stream = cp.stream;
    step->traffic = traffic;
  }
  return cp;
}

double dense_layer_params(const workload::ModelShape& m, int layer, int tp, double extra_moe) {
  const double per_layer = m.attention_params() / tp + m.norm_params() + (m.is_mtp(layer) ? m.mtp_extra_params() : 0);
  return per_layer + (m.is_moe(layer) ? m.gate_params() + m.shared_experts * m.expert_params() / tp + extra_moe
                                      : m.dense_ffn_params() / tp);
}

double dense_params_on_stage(const workload::ModelShape& m, const parallel::PipelinePlan& pipeline, int stage, int tp) {
  // In ModelShape::replicated_params' order, so one stage of every layer gives the same sum.
  const std::vector<int> held = pipeline.layers_of_stage(stage);
  const int layers = static_cast<int>(held.size()), moe = moe_layers_of(m, held), dense = layers - moe;
  const bool first = stage == 0, last = pipeline.stage_of_virtual(pipeline.virtual_stages() - 1) == stage;
  const double per_layer = m.attention_params() / tp + m.norm_params();
  const double moe_extra = m.gate_params() + m.shared_experts * m.expert_params() / tp;
  const double vocabulary = m.embedding_params() / 2 / tp;
  const auto mtp = static_cast<double>(std::count_if(held.begin(), held.end(), [&](int l) { return m.is_mtp(l); }));
  return layers * per_layer + moe * moe_extra + dense * (m.dense_ffn_params() / tp) + (first ? vocabulary : 0) +
         (last ? vocabulary : 0) + mtp * m.mtp_extra_params();
}

int permute_alignment(const StrategyContext& ctx) {
  // Each local expert's rows padded for the grouped GeMM (spec 001.A.10), torchtitan's
  // TOKEN_GROUP_ALIGN_SIZE_M (torchtitan/models/moe/utils.py set_token_group_alignment_size_m):
  // 8 for BF16 (16-byte alignment), 16 for FP8, 32 for MXFP8 (its 1 × 32 scaling blocks along
  // the backward's contracting dimension).
  switch (ctx.training.dtype) {
    case cluster::Dtype::fp8: return 16;
    case cluster::Dtype::mxfp8: return 32;
    default: return 8;
  }
}

parallel::PlanPtr make_plan(const StrategyContext& ctx, const ExpertParallelPlan& in) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const std::uint32_t gpus = ctx.topology.gpu_count();
  const parallel::ParallelLayout layout = layout_or_flat(ctx, in);
  const auto& sizes = layout.sizes();
  auto plan = std::make_shared<parallel::IterationPlan>();
  plan->optimizer = optimizer_placement(ctx);
  plan->pipeline = pipeline_of(ctx, layout);
  auto roles = in.streams;
  if (sizes.tp > 1 && m.shared_experts > 0) roles.push_back(parallel::StreamRole::Side);
  if (sizes.cp > 1) roles.push_back(parallel::StreamRole::ContextParallel);
  if (ctx.parallel.sharding == parallel::Sharding::Fsdp) roles.push_back(parallel::StreamRole::ParamGather);
  if (sizes.pp > 1)
    roles.insert(roles.end(), {parallel::StreamRole::PipelineSend, parallel::StreamRole::PipelineRecv,
                               parallel::StreamRole::PipelineRecvGrad});
  if (plan->pipeline.v_shape())
    roles.insert(roles.end(), {parallel::StreamRole::PipelineRecvReturn, parallel::StreamRole::PipelineRecvGradReturn});
  plan->streams = parallel::streams_for(roles, plan->optimizer, t.offload_modules != 0);
  plan->vocabulary = m.vocab > 0;
  if (sizes.tp > 1) {
    auto& tp = plan->tensor_parallel;
    tp.size = sizes.tp;
    tp.groups = parallel::family(layout.groups(parallel::Dim::Tp));
    tp.algorithm = ctx.all_reduce_algorithm;
    tp.sequence_parallel = ctx.parallel.sequence_parallel;
  }
  if (sizes.cp > 1) plan->context_parallel = context_parallel_of(ctx, layout);

  // One MoE layer plan per stage, with the all-to-all groups inside it.
  const bool sp = ctx.parallel.sequence_parallel && sizes.tp > 1;
  std::vector<std::shared_ptr<parallel::MoeLayerPlan>> per_stage(sizes.pp);
  const auto etp_groups = sizes.etp > 1 ? layout.groups(parallel::Dim::Etp) : std::vector<std::vector<std::uint32_t>>{};
  for (int s = 0; s < sizes.pp; ++s) {
    auto moe = std::make_shared<parallel::MoeLayerPlan>();
    for (const auto& g : in.groups)
      if (layout.stage_of(g.gpus.front()) == s) moe->dispatch.push_back(g);
    moe->all_to_all = in.all_to_all;
    moe->chunks = in.chunks;
    // With sequence parallelism each TP rank routes its s/tp tokens (Megatron-Core's MoE layer);
    // context parallelism splits the sequence too.
    moe->gate_tokens = moe->combine_tokens = t.tokens_per_microbatch() / sizes.cp / (sp ? sizes.tp : 1);
    moe->expert_ffn_hidden = m.ffn_hidden / sizes.etp;
    if (sizes.etp > 1) {
      std::vector<std::vector<std::uint32_t>> in_stage;
      for (const auto& g : etp_groups)
        if (layout.stage_of(g.front()) == s) in_stage.push_back(g);
      moe->expert_tensor_parallel = parallel::family(std::move(in_stage));
    }
    moe->backend = ctx.parallel.ep_backend;
    moe->permute_alignment = permute_alignment(ctx);
    if (moe->backend.non_blocking && !moe->dispatch.empty())
      moe->permuted_rows = workload::permuted_buffer_rows(
          moe->gate_tokens, static_cast<int>(moe->dispatch.front().gpus.size()), m.top_k,
          in.local_experts > 0 ? in.local_experts : static_cast<int>(in.experts_per_gpu), moe->backend.capacity_factor,
          moe->permute_alignment);
    moe->fetch = in.fetch;
    moe->expert_gradients = in.expert_gradients;
    moe->expert_param_gather = in.expert_param_gather;
    per_stage[s] = std::move(moe);
  }
  plan->moe.resize(m.layers);
  for (int l = 0; l < m.layers; ++l)
    if (m.is_moe(l))
      plan->moe[l] = per_stage[plan->pipeline.stage_of_layer(l)];

  // Dense parameters are replicated over each stage's data-parallel (and context-parallel) groups.
  auto& gp = plan->gradients;
  gp.timing = in.timing;
  gp.dense_groups = parallel::family(layout.groups(parallel::Dim::DpCp));
  gp.algorithm = ctx.all_reduce_algorithm;
  for (int l = 0; l < m.layers; ++l) gp.dense_params.push_back(dense_layer_params(m, l, sizes.tp, in.extra_moe_dense_params));
  gp.embedding_params = gp.head_params = m.embedding_params() / 2 / sizes.tp;
  gp.sharded = ctx.parallel.sharding != parallel::Sharding::None;
  gp.fsdp = ctx.parallel.sharding == parallel::Sharding::Fsdp;
  gp.shards = layout.dp() * sizes.cp;

  plan->optimizer_params.assign(gpus, in.params_per_gpu);
  if (in.params_per_gpu <= 0) {
    const double expert = in.experts_per_gpu * m.expert_params() / sizes.etp;
    plan->gradient_buffer_params.assign(gpus, 0);
    for (int s = 0; s < sizes.pp; ++s) {
      const int moe_layers = moe_layers_of(m, plan->pipeline.layers_of_stage(s));
      const double dense = dense_params_on_stage(m, plan->pipeline, s, sizes.tp), experts = moe_layers * expert;
      // The distributed optimizer steps 1/(dp·cp) of the dense parameters and 1/edp of the experts';
      // the gradient buffers hold them all unless FSDP shards the gradients too.
      const double params = gp.sharded ? dense / gp.shards + experts / layout.edp() : dense + experts;
      for (const std::uint32_t g : plan->pipeline.stage_gpus[s]) {
        plan->optimizer_params[g] = params;
        plan->gradient_buffer_params[g] = gp.fsdp ? params : dense + experts;
      }
    }
  }
  plan->tokens = static_cast<double>(layout.dp()) * t.tokens_per_microbatch() * t.microbatches;
  return plan;
}

parallel::OptimizerPlacement optimizer_placement(const StrategyContext& ctx) {
  return ctx.training.optimizer_on_host ? parallel::OptimizerPlacement::Host : parallel::OptimizerPlacement::Gpu;
}

FusedBuffers fused_buffers(const StrategyContext& ctx, double tokens, int ep_size, int local_experts, double busiest_copies,
                           double busiest_rows) {
  const auto& backend = ctx.parallel.ep_backend;
  FusedBuffers out;
  if (!backend.fused() || ep_size <= 1) return out;
  const double row_bytes = ctx.model.hidden * ctx.dtype_bytes();
  out.shared_bytes = workload::all_to_all_buffer_rows(tokens, ep_size) * row_bytes;
  const double rows = backend.non_blocking ? workload::permuted_buffer_rows(tokens, ep_size, ctx.model.top_k, local_experts,
                                                                            backend.capacity_factor, permute_alignment(ctx))
                                           : busiest_rows;
  out.per_layer_bytes = std::max(0.0, rows - busiest_copies) * row_bytes;
  return out;
}

std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx, int n,
                                              const std::optional<parallel::ParallelLayout>& layout_in) {
  const auto& m = ctx.model;
  const parallel::ParallelLayout layout = layout_in ? *layout_in : parallel::ParallelLayout({}, ctx.topology.gpu_count());
  const auto& sizes = layout.sizes();
  const parallel::PipelinePlan pipeline = pipeline_of(ctx, layout);
  const int per_rank = m.experts / n;
  const bool sp = ctx.parallel.sequence_parallel && sizes.tp > 1;
  const double tokens = ctx.training.tokens_per_microbatch() / sizes.cp / (sp ? sizes.tp : 1);
  // The busiest rank's routed token copies per MoE layer, over the first iteration's routing, and
  // the rows they take in a fused backend's permuted layout (each local expert's padded).
  const int alignment = permute_alignment(ctx);
  double busiest = 0, busiest_rows = 0;
  for (int layer = m.dense_layers; layer < m.layers; ++layer) {
    const auto plan = workload::plan_dispatch(ctx.routing.popularity(0, layer), tokens, m.top_k, ctx.training.capacity_factor);
    std::vector<double> local(per_rank);
    for (int r = 0; r < n; ++r) {
      double copies = 0;
      for (int e = r * per_rank; e < (r + 1) * per_rank; ++e) copies += local[e - r * per_rank] = plan.kept_per_expert[e] * n;
      busiest = std::max(busiest, copies);
      busiest_rows = std::max(busiest_rows, workload::permuted_rows(local, alignment));
    }
  }
  // The permuted buffer's extra rows are kept per layer and microbatch in flight like the other
  // activations, one layer at a time under full recomputation.
  const FusedBuffers buffers = fused_buffers(ctx, tokens, n, per_rank, busiest, busiest_rows);
  std::vector<workload::MemoryFootprint> out(ctx.topology.gpu_count());
  for (int s = 0; s < sizes.pp; ++s) {
    const auto order = schedule::stage_order(pipeline.schedule, s, pipeline.stages, pipeline.chunks,
                                             ctx.training.microbatches, pipeline.ep_overlap);
    workload::MemoryInputs in;
    in.layers = pipeline.layers_of_stage(s);
    const int moe_layers = moe_layers_of(m, in.layers);
    const double dense = dense_params_on_stage(m, pipeline, s, sizes.tp);
    const double experts = moe_layers * per_rank * m.expert_params() / sizes.etp;
    in.params = dense + experts;
    if (ctx.parallel.sharding != parallel::Sharding::None)
      in.optimizer_params = dense / (layout.dp() * sizes.cp) + experts / layout.edp();
    if (ctx.parallel.sharding == parallel::Sharding::Fsdp) {
      // FSDP holds its shard, plus the layer being computed and the one prefetched whole; the
      // gradients of the layer being reduce-scattered whole beside their shard.
      double largest = 0;
      for (const int l : in.layers)
        largest = std::max(largest, dense_layer_params(m, l, sizes.tp) + (m.is_moe(l) ? per_rank * m.expert_params() / sizes.etp : 0));
      in.weight_params = in.optimizer_params + 2 * largest;
      in.gradient_params = in.optimizer_params + largest;
    }
    in.tokens = ctx.training.tokens_per_microbatch() / sizes.cp;
    // Under ETP each GPU computes its slice of the copies its whole ETP group received.
    in.expert_tokens_per_layer = busiest * sizes.etp;
    in.tensor_parallel = sizes.tp;
    in.sequence_parallel = sp;
    in.expert_ffn_hidden = m.ffn_hidden / sizes.etp;
    in.shared_buffer_bytes = buffers.shared_bytes;
    in.moe_buffer_bytes = buffers.per_layer_bytes;
    // Units in flight hold one chunk each: the stage's layers over its chunks.
    // A forward written with a backward (EP overlap, DualPipeV) holds one layer of its chunk more.
    const double layer = pipeline.chunks / static_cast<double>(std::max<std::size_t>(1, in.layers.size()));
    in.in_flight = schedule::peak_in_flight(order, layer) / static_cast<double>(pipeline.chunks);
    in.embedding = std::find(in.layers.begin(), in.layers.end(), 0) != in.layers.end();
    in.lm_head = std::find(in.layers.begin(), in.layers.end(), m.layers - 1) != in.layers.end();
    for (int c = 0; c < pipeline.chunks; ++c)
      if (in.lm_head && pipeline.virtual_of(s, c) == pipeline.virtual_stages() - 1)
        in.lm_head_in_flight = schedule::peak_at_loss(order, c);
    for (const std::uint32_t g : pipeline.stage_gpus[s]) {
      in.flash_attention = ctx.topology.gpu(g).flash_attention;
      out[g] = workload::memory_footprint(m, ctx.training, in);
    }
  }
  return out;
}

}  // namespace moesim::strategies::ep
