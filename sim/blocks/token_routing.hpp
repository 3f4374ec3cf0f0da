// Where one MoE layer's tokens go in one microbatch: the dispatch traffic of each all-to-all group
// after capacity drops (combine is its transpose), each GPU's expert compute for one chunk, and
// the token copies every expert received.
//   - Routed: each source GPU (one that runs attention) keeps at most the capacity of each expert
//     and sends each expert's copies to the expert's replicas in its group, split by their shares
//     (MoeLayerPlan's ReplicaTable); a GPU computes the replicas it holds on the copies they get, as
//     grouped GeMMs (experts_time).
//     Sources draw their routing per layer and microbatch (a dense matrix per group) or send their
//     expected shares (one factored matrix shared by all groups), as RoutingModel::sampled says.
//     Without a capacity, a source draws over bins of experts placed alike (a rank's experts) and
//     each bin's total is split over its experts once: the same multinomial, fewer draws.
//   - Expert tensor parallel (ETP > 1): each GPU of an ETP group computes its slice of every copy
//     its group received (over the group's EP groups), so all its members' expert compute is that
//     of the union; the gather sends each member's copies (hidden·b each) to the others.
//   - Without a fused backend a GPU with several local experts regroups the copies it received by
//     expert and back (regroup_time); a fused one writes them in that order itself.
//   - A fused backend (parallel.ep_backend) de-duplicates the copies per rank, and across NVLink
//     domains per domain (fused_dispatch.hpp).
//   - Padded (DeepSpeed's capacity padding, Parm): an even exchange of the plan's bytes and a
//     fixed expert compute; drops are the capacity overflow of the routing over the gate's tokens.
#pragma once

#include <vector>

#include "sim/blocks/context.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/fused_dispatch.hpp"
#include "sim/network/traffic_matrix.hpp"

namespace moesim::blocks {

// One GPU's expert work for one chunk of a microbatch.
struct ExpertChunk {
  ExpertsWork experts;  // its local experts' forward and backward (experts_work)
  // The regroup of its received copies into local-expert order and back (regroup_time), where the
  // backend does not permute in its dispatch; the same forward and backward.
  compute::Work regroup;
  // The experts' activation alone, which they run again before their backward where the training
  // recomputes it (workload::RecomputeModule::MoeAct); none where it does not.
  compute::Work activation;
  // The part of `activation` issued after the launching thread syncs with the GPU
  // (expert_activation_after_sync); empty where it does not.
  compute::Work activation_after_sync;
  // The bytes its copies' offloaded modules (expert_fc1, moe_act) send to the host; 0 where the
  // training offloads neither.
  double offloaded_bytes = 0;
  friend bool operator==(const ExpertChunk&, const ExpertChunk&) = default;
};

struct LayerRouting {
  std::vector<network::TrafficPtr> dispatch, combine;  // per all-to-all group, or one shared by all
  // Alongside, where a fused exchange spans NVLink domains, the stages its bytes take on the wire
  // (fused_dispatch.hpp); empty for a group (or all) that runs one exchange.
  std::vector<std::vector<network::TrafficPtr>> dispatch_stages, combine_stages;
  // Expert tensor parallelism: per ETP group (or one shared by all), each GPU's received copies
  // to every other member (the all-gather), and its transpose (the reduce-scatter).
  std::vector<network::TrafficPtr> etp_gather, etp_scatter;
  std::vector<ExpertChunk> expert;                     // per GPU, one chunk
  std::vector<double> expert_tokens;                   // per expert: token copies received over all groups
  std::vector<double> expert_routed;                   // per expert: copies the routers sent it, before drops
  double routed_copies = 0;                            // token copies routed by all sources (top-k counted k times)
  double dropped_copies = 0;                           // of which dropped over capacity

  // Appends a group's exchanges; keeps only the first group's when all groups share it.
  void add(FusedTraffic traffic);
  void share_first();
};

LayerRouting route_layer(const Context& ctx, const parallel::IterationPlan& plan, const parallel::MoeLayerPlan& layer_plan,
                         int iteration, int layer, int microbatch);

}  // namespace moesim::blocks
