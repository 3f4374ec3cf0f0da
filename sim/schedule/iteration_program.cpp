#include "sim/schedule/iteration_program.hpp"

#include <map>
#include <optional>

#include "sim/blocks/attention_block.hpp"
#include "sim/blocks/dense_ffn_block.hpp"
#include "sim/blocks/expert_fetch.hpp"
#include "sim/blocks/gradient_sync.hpp"
#include "sim/blocks/moe_block.hpp"
#include "sim/blocks/optimizer_step.hpp"
#include "sim/blocks/vocabulary_block.hpp"
#include "sim/schedule/schedule.hpp"

namespace moesim::schedule {

using blocks::Frontier;
using engine::Phase;

parallel::IterationOutcome write_iteration(blocks::ProgramBuilder& pb, const blocks::Context& ctx,
                                           const parallel::PlanPtr& plan_ptr, int iteration) {
  const parallel::IterationPlan& plan = *plan_ptr;
  const auto& m = ctx.model;
  const int layers = m.layers;
  const int microbatches = ctx.training.microbatches;
  const std::uint32_t gpus = ctx.topology.gpu_count();
  parallel::IterationOutcome outcome;
  outcome.iteration = iteration;
  outcome.plan = plan_ptr;
  outcome.tokens = plan.tokens;
  outcome.expert_tokens.resize(layers);
  blocks::Emission em{pb, ctx, plan, iteration, outcome};

  // Each GPU's last task of the previous iteration: what this one starts after.
  Frontier anchor(gpus);
  for (std::uint32_t g = 0; g < gpus; ++g) anchor[g] = pb.engine().stream_tail(g, pb.stream(parallel::StreamRole::Compute));
  std::vector<Frontier> fetched;
  blocks::fetch_at_iteration_start(em, anchor, fetched);

  std::vector<Frontier> front(microbatches, Frontier(gpus, engine::kNone));
  std::map<std::pair<int, int>, blocks::LayerRouting> routing;  // (microbatch, layer), forward to backward
  std::vector<Frontier> attention_done(layers), experts_done(layers);
  Frontier end(gpus, engine::kNone);
  blocks::GradientSync sync(gpus);

  for (const WorkItem& item : order(plan.schedule, layers, microbatches)) {
    const int l = item.layer, mb = item.microbatch;
    Frontier& f = front[mb];
    const parallel::MoeLayerPlan* moe = item.segment == Segment::Layer && l < layers ? plan.moe[l].get() : nullptr;
    switch (item.work) {
      case Work::Forward:
        if (item.segment == Segment::Embedding) {
          if (plan.vocabulary) blocks::embedding(em, Phase::Forward, mb, f);
        } else if (item.segment == Segment::Head) {
          if (plan.vocabulary) blocks::lm_head(em, Phase::Forward, mb, f);
        } else {
          blocks::attention(em, Phase::Forward, l, mb, f);
          if (!moe) {
            blocks::dense_ffn(em, Phase::Forward, l, mb, f);
            break;
          }
          blocks::LayerRouting& rt = routing[{mb, l}] = blocks::route_layer(ctx, plan, *moe, iteration, l, mb);
          outcome.routed_copies += rt.routed_copies;
          outcome.dropped_copies += rt.dropped_copies;
          auto& tokens = outcome.expert_tokens[l];
          tokens.resize(rt.expert_tokens.size(), 0.0);
          for (std::size_t e = 0; e < tokens.size(); ++e) tokens[e] += rt.expert_tokens[e];
          if (moe->fetch && !moe->fetch->at_iteration_start && mb == 0) blocks::fetch_layer(em, *moe, l, f, fetched[l]);
          blocks::moe_forward(em, *moe, l, mb, rt, moe->fetch ? &fetched[l] : nullptr, f);
        }
        break;
      case Work::Backward:
        if (item.segment == Segment::Embedding) {
          if (plan.vocabulary) blocks::embedding(em, Phase::Backward, mb, f);
          end = f;
        } else if (item.segment == Segment::Head) {
          if (plan.vocabulary) blocks::lm_head(em, Phase::Backward, mb, f);
        } else {
          if (moe) {
            const auto it = routing.find({mb, l});
            blocks::moe_backward(em, *moe, l, mb, it->second, f, experts_done[l]);
            routing.erase(it);
          } else {
            blocks::dense_ffn(em, Phase::Backward, l, mb, f);
          }
          blocks::attention(em, Phase::Backward, l, mb, f);
          attention_done[l] = f;
        }
        break;
      case Work::SyncLayer:
        if (plan.gradients.timing == parallel::GradientTiming::Overlap)
          sync.layer(em, l, attention_done[l], experts_done[l].empty() ? attention_done[l] : experts_done[l]);
        break;
      case Work::SyncRest:
        if (plan.gradients.timing == parallel::GradientTiming::AfterBackward)
          for (int layer = layers - 1; layer >= 0; --layer) sync.layer(em, layer, end, end);
        sync.embedding(em, end);
        break;
      case Work::Optimizer: blocks::optimizer_step(em, end, sync.last()); break;
    }
  }
  return outcome;
}

}  // namespace moesim::schedule
