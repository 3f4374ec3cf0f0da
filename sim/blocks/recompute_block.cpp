#include "sim/blocks/recompute_block.hpp"

#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/tensor_parallel_block.hpp"

namespace moesim::blocks {

namespace {
using workload::RecomputeModule;

bool recomputes(const Emission& em, RecomputeModule m) { return em.ctx.training.recomputes(m); }

// The attention core's forward again (core_attn; Korthikanti et al. 2022 §5), on GPUs without
// FlashAttention: FlashAttention's backward recomputes the scores anyway and keeps none.
void recompute_attention_core(Emission& em, int layer, int mb, Frontier& f) {
  const auto& m = em.ctx.model;
  const auto& t = em.ctx.training;
  const int tp = em.plan.tensor_parallel.size;
  const int cp = em.plan.context_parallel.size;
  const auto label = em.label(engine::Phase::Recompute, engine::WorkKind::Attention, "attention_core", layer, mb);
  for (const std::uint32_t g : em.active()) {
    if (!em.runs_attention(g) || em.ctx.topology.gpu(g).flash_attention) continue;
    // The rank's share of the core: its s/cp queries against every key. With context parallelism
    // the ring is not replayed (Transformer Engine runs CP only with fused attention, where
    // selective recomputation adds nothing: such GPUs do not get here).
    const compute::Work core = attention_core_time(em.ctx.compute_of(g), m, t, tp, layer);
    f[g] = em.pb.compute(g, core.divided(cp), label, f[g]);
  }
}
}  // namespace

void recompute_before_attention_backward(Emission& em, int layer, int mb, Frontier& f) {
  const auto& m = em.ctx.model;
  if (!m.attention) return;
  const ProgramBuilder::InModule in(em.pb, software::Module::Attention);
  // The input norm (layernorm) and MLA's up projections (mla_up_proj), output-discarding
  // checkpoints both: their outputs, the QKV projection's input and the core's Q, K, V, come back.
  const bool norm = recomputes(em, RecomputeModule::Layernorm);
  const bool up = m.mla && recomputes(em, RecomputeModule::MlaUpProj);
  if (norm || up) {
    const double tokens = em.rank_tokens();
    const int tp = em.plan.tensor_parallel.size;
    const auto label = em.label(engine::Phase::Recompute, engine::WorkKind::Attention, "attention", layer, mb);
    auto cost = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
      return (norm ? norm_time(cm, m, tokens) : compute::Work{}) +
             (up ? mla_up_projection_time(cm, m, tokens, tp) : compute::Work{});
    });
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) f[g] = em.pb.compute(g, cost(g), label, f[g]);
  }
  if (recomputes(em, RecomputeModule::CoreAttn)) recompute_attention_core(em, layer, mb, f);
}

void recompute_before_mlp_backward(Emission& em, int layer, int mb, bool moe, Frontier& f) {
  const auto& m = em.ctx.model;
  const double tokens = em.rank_tokens();
  // A dense layer's FFN from its input (mlp, a normal checkpoint: its forward with the tensor-
  // parallel collectives around it; the norm and residual add outside it are not).
  if (!moe && recomputes(em, RecomputeModule::Mlp)) {
    const ProgramBuilder::InModule in(em.pb, software::Module::DenseMlp);
    const int tp = em.plan.tensor_parallel.size;
    const auto label = em.label(engine::Phase::Recompute, engine::WorkKind::DenseFfn, "dense_ffn", layer, mb);
    tensor_parallel_enter(em, engine::Phase::Recompute, layer, mb, f);
    auto cost = PerKind(em.ctx, [&](const compute::ComputeModel& cm) { return ffn_time(cm, m, tokens, m.dense_ffn_hidden / tp); });
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) f[g] = em.pb.compute(g, cost(g), label, f[g]);
    tensor_parallel_exit(em, engine::Phase::Recompute, layer, mb, f);
  }
  // The pre-MLP norm (layernorm), whose output the router and shared experts (or the FFN) read.
  if (m.attention && recomputes(em, RecomputeModule::Layernorm)) {
    const ProgramBuilder::InModule in(em.pb, moe ? software::Module::Router : software::Module::DenseMlp);
    const auto label = em.label(engine::Phase::Recompute, engine::WorkKind::OtherCompute, "pre_mlp_norm", layer, mb);
    auto cost = PerKind(em.ctx, [&](const compute::ComputeModel& cm) { return norm_time(cm, m, tokens); });
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) f[g] = em.pb.compute(g, cost(g), label, f[g]);
  }
}

}  // namespace moesim::blocks
