// The flow network model (DESIGN.md §3): each collective runs its phases (collective_plan.hpp) in
// turn; a phase is a flow that loads the directed links of the cluster with its bytes
// (flow_demand.hpp). Concurrent flows share every link max-min fairly (max_min.hpp); rates are
// recomputed whenever a flow starts or finishes and the next completion is rescheduled. A phase
// ends its latency (the α of the coarsest level it crosses) after its last byte drains. Pipelined
// phases (a hierarchical all-reduce's) run as one flow: their bytes together, their latencies
// added. With one
// collective at a time this gives the analytic model's times; with several, contention.
#pragma once

#include <cmath>
#include <deque>
#include <functional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <boost/container_hash/hash.hpp>

#include "sim/network/alpha_beta.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/network/collective_plan.hpp"
#include "sim/network/executor.hpp"
#include "sim/network/flow_demand.hpp"
#include "sim/network/flow_links.hpp"
#include "sim/network/max_min.hpp"

namespace moesim::network {

class FlowExecutor final : public NetworkExecutor {
 public:
  FlowExecutor(const cluster::Topology& topology, const AlphaBetaTable& params, CollectiveProgram& program);
  void start(engine::Engine& engine, engine::CollectiveId id, Time now) override;
  void on_timer(engine::Engine& engine, std::uint32_t token, Time now) override;
  std::string model_name() const override { return "flow"; }
  NetworkStats stats() const override;
  const FlowLinks& links() const { return links_; }
  std::uint64_t rate_solves() const { return solves_; }  // solves run (rescheduling without a change of rates is not one)
  std::uint64_t flows_solved() const { return flows_solved_; }  // flows those solves filled, in all
  std::uint64_t demands_reused() const { return demands_reused_; }  // exchange phases whose demands were kept (phase_demand)
  // Host bytes it holds for a run on `topology`, for the host-memory estimate: per link
  // (FlowLinks::count) its eight tables here, the links' own, the demands' scratch and the solver's
  // state; and the flows of one collective over every GPU at once: each GPU's links (up and down
  // at every tier, and its PCIe link) in its flow's share and in the solver's lists of the flows
  // crossing each link; and the link demands of the exchanges it keeps for reuse (phase_demand).
  static double memory_estimate(const cluster::Topology& topology);
  // Where identical replicas are simulated once (CollectiveOp::copies; simulation/replica_symmetry):
  // the groups of the other copies a collective over `members` stands for, `copies` − 1 of them.
  // Their exchanges run on the links beside the simulated one's, as every GPU's would, loading the
  // links as the full run does; they end nothing in the engine.
  using Images = std::function<std::vector<std::vector<std::uint32_t>>(const std::vector<std::uint32_t>& members,
                                                                       std::uint32_t copies)>;
  void run_images(Images images) { images_ = std::move(images); }

 private:
  struct Running {
    engine::CollectiveId id = 0;
    bool image = false;  // another copy's collective (run_images): its op is `own`, no engine collective
    CollectiveOp own;
    std::vector<CollectivePhase> phases;
    std::size_t next = 0;
    Time started = 0;
    double pairs = 0;
  };
  struct Flow {
    std::uint32_t running = 0;
    std::vector<LinkDemand> share;  // (link, fraction of the flow's rate it puts on the link)
    double remaining = 0;           // bytes on the flow's busiest link still to send
    double rate = 0;                // bytes per second on that link
    Time finish = INT64_MAX;  // until its first rate is solved
    Time latency = 0;
  };

  void next_phase(engine::Engine& engine, std::uint32_t running, Time now);
  // A running collective's place in running_, its phases planned over `members`.
  std::uint32_t begin_running(const CollectiveOp& op, std::span<const std::uint32_t> members, Time now);
  const CollectiveOp& op_of(const Running& run) const { return run.image ? run.own : program_.op(run.id); }
  Images images_;
  std::unordered_map<GroupId, std::vector<GroupId>> image_groups_;  // a group's images, interned
  // A phase's link demands (FlowDemands::demand). An exchange of a factored or dense traffic matrix
  // (expected routing's, which a layer's all-to-alls share over every microbatch, and a fused
  // dispatch's stages) over a group is kept for the next collective exchanging the same matrix over
  // the same group: the cache holds the matrix (so no other matrix can take its address), at most
  // demand_cache_entries link demands and demand_cache_matrix_bytes of matrices, the oldest out
  // first. Tiered matrices (sampled routing over large groups) are never kept. A kind a profile
  // calibrates is costed each time: the profile's report counts the steps it costed
  // (AlphaBetaTable::applied).
  FlowPhase phase_demand(const CollectivePhase& phase, GroupId group, std::span<const std::uint32_t> members);
  static std::size_t demand_cache_entries(const cluster::Topology& topology);  // the cache's limits
  static double demand_cache_matrix_bytes(const cluster::Topology& topology);
  void advance(Time now);
  void reschedule(engine::Engine& engine, Time now);

  // The algorithm an Auto or Nvls op runs, chosen by the analytic model as NCCL's tuner would
  // (AnalyticModel::resolve), once per group and size.
  Algorithm resolve(const CollectiveOp& op, std::span<const std::uint32_t> members);

  const cluster::Topology& topology_;
  const AlphaBetaTable& params_;
  CollectiveProgram& program_;
  AnalyticModel resolver_;
  std::unordered_map<std::uint64_t, std::unordered_map<double, Algorithm>> resolved_;  // group → bytes → algorithm
  FlowLinks links_;
  FlowDemands demands_;
  MaxMinSolver solver_;
  std::vector<double> capacity_;
  std::vector<Running> running_;
  std::vector<std::uint32_t> free_running_;
  std::vector<Flow> flows_;
  // Per link: its rate at the last solve (busy_links_ those with one), the bytes flows put on it
  // (added when each starts: what its phase demands), its peak utilisation (at solves: a flow that
  // drains only takes rate off its links), and its busy time: the flows on it, and since when.
  std::vector<double> link_rate_, link_bytes_, link_peak_;
  std::vector<Time> link_busy_, link_since_;
  std::vector<std::uint32_t> link_flows_;
  std::vector<std::uint32_t> busy_links_;
  // A solve's flows (solved_: their places in flows_) and rates; left_: per link, the capacity the
  // flows that keep their rates leave (set for the links of the flows solved).
  std::vector<const std::vector<LinkDemand>*> shares_;
  std::vector<std::uint32_t> solved_;
  std::vector<double> rates_, left_;
  Time last_ = 0;
  std::uint32_t generation_ = 0;
  bool resolve_pending_ = false;  // a re-solve is queued at the current time
  std::uint64_t solves_ = 0, flows_solved_ = 0;
  bool added_ = false;                   // a flow started since the last solve
  double drained_rate_ = HUGE_VAL;       // the slowest flow that drained since the last reschedule
  NetworkStats stats_;
  using DemandKey = std::tuple<const TrafficMatrix*, GroupId, CollectiveKind>;
  std::unordered_map<DemandKey, FlowPhase, boost::hash<DemandKey>> demand_cache_;
  std::deque<std::pair<TrafficPtr, DemandKey>> demand_order_;  // oldest first; holds each matrix
  std::size_t cached_demands_ = 0;  // link demands the cache holds
  std::uint64_t demands_reused_ = 0;
  std::size_t demand_cache_limit_ = 0;
  double cached_matrix_bytes_ = 0, matrix_cache_limit_ = 0;
};

}  // namespace moesim::network
