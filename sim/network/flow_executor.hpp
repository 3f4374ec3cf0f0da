// The flow network model (DESIGN.md §3): each collective runs its phases (collective_plan.hpp) in
// turn; a phase is a flow that loads the directed links of the cluster with its bytes
// (flow_demand.hpp). Concurrent flows share every link max-min fairly (max_min.hpp); rates are
// recomputed whenever a flow starts or finishes and the next completion is rescheduled. A phase
// ends its latency (the α of the coarsest level it crosses) after its last byte drains. Pipelined
// phases (a hierarchical all-reduce's) run as one flow: their bytes together, their latencies
// added. With one collective at a time this gives the analytic model's times; with several,
// contention.
//
// Max-min fair rates are those of each connected component of flows (flows sharing a link, and
// the flows sharing a link with those) on its own: no rate in one component depends on another's.
// A start or a drain re-solves only the components it touches (found from the links of the flows
// that started or left, through each link's flows in flight), as SimGrid's lazy action updates
// (Casanova et al., "Versatile, scalable, and accurate simulation of distributed applications and
// platforms", JPDC 74(10), 2014) touch only the actions a change reaches; a flow's bytes
// left are brought up to date only when its rate changes, and completions are kept in a heap of
// finishing times, so an event costs what it touches, not every flow in flight (thousands of
// per-expert gradient all-reduces between datacenter pairs drain apart from each other).
#pragma once

#include <cmath>
#include <deque>
#include <functional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <boost/container_hash/hash.hpp>
#include <boost/heap/d_ary_heap.hpp>

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
  std::uint64_t rate_solves() const { return solves_; }  // components solved (one whose rates all stand is not)
  std::uint64_t flows_solved() const { return flows_solved_; }  // flows those solves filled, in all
  std::uint64_t demands_reused() const { return demands_reused_; }  // exchange phases whose demands were kept (phase_demand)
  // Host bytes it holds for a run on `topology`, for the host-memory estimate: per link
  // (FlowLinks::count) its tables here, the links' own, the demands' scratch and the solver's
  // state; and the flows of one collective over every GPU at once: each GPU's links (up and down
  // at every tier, and its PCIe link) in its flow's share, in the lists of the flows in flight on
  // each link (here and the solver's), and each flow's slot and finishing time; and the link
  // demands of the exchanges it keeps for reuse (phase_demand).
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
  // A flow's place among the finishing times: the earliest first, ties by start order.
  struct Finish {
    Time at = 0;
    std::uint64_t seq = 0;
    std::uint32_t flow = 0;
  };
  struct Later {
    bool operator()(const Finish& a, const Finish& b) const { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };
  using Finishing = boost::heap::d_ary_heap<Finish, boost::heap::arity<4>, boost::heap::mutable_<true>,
                                            boost::heap::compare<Later>>;
  struct Flow {
    std::uint32_t running = 0;
    std::uint64_t seq = 0;          // start order: a component's flows are solved in it
    std::vector<LinkDemand> share;  // (link, fraction of the flow's rate it puts on the link)
    std::vector<std::uint32_t> at;  // at[e]: its place in crossing_[share[e].link]
    double remaining = 0;           // bytes on the flow's busiest link still to send, at `updated`
    double rate = 0;                // bytes per second on that link
    Time updated = 0;
    Time finish = INT64_MAX;  // until its first rate is solved
    Time latency = 0;
    Finishing::handle_type handle;  // in finishing_, once solved
  };
  // A flow in flight on a link: its place in flows_ and the entry of its share for the link.
  struct Crossing {
    std::uint32_t flow = 0, entry = 0;
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
  void reschedule(engine::Engine& engine, Time now);
  // Collects into component_ the flows at least `keep_below` fast connected to flow `f` (or to
  // link `l`) through links such flows share, and into component_links_ their links.
  void gather(std::uint32_t f, std::uint32_t l, double keep_below);
  // Re-solves the flows gathered; the others on their links, slower than `keep_below`, keep their rates.
  void solve_component(double keep_below, Time now);
  void drop(std::uint32_t f, Time now);  // a drained flow leaves its links

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
  std::vector<Flow> flows_;  // by slot: those in flight and free ones (free_flows_)
  std::vector<std::uint32_t> free_flows_;
  std::uint64_t next_seq_ = 0;
  Finishing finishing_;  // the flows in flight whose rates are solved, by finishing time
  // Per link: the flows in flight on it, the bytes flows put on it (added when each starts: what
  // its phase demands), its rate at the last solve of its component, its peak utilisation (at
  // solves: a flow that drains only takes rate off its links), and its busy time: since when it
  // has had flows.
  std::vector<std::vector<Crossing>> crossing_;
  std::vector<double> link_rate_, link_bytes_, link_peak_;
  std::vector<Time> link_busy_, link_since_;
  // What changed since the last reschedule: flows started (fresh_), and links drained flows left
  // (seed_links_), with the slowest of those flows' rates on each (seed_rate_, +inf elsewhere).
  std::vector<std::uint32_t> fresh_, seed_links_;
  std::vector<double> seed_rate_;
  // Gathering a component: marks (equal to mark_ once visited) and what it holds.
  std::vector<std::uint32_t> flow_mark_, link_mark_, component_, component_links_;
  std::uint32_t mark_ = 0;
  // A solve's flows (component_ in flows_) and rates; left_: per link, the capacity the flows that
  // keep their rates leave (set for the links of the flows solved).
  std::vector<const std::vector<LinkDemand>*> shares_;
  std::vector<std::uint32_t> drained_;
  std::vector<double> rates_, left_;
  Time last_ = 0;
  std::uint32_t generation_ = 0;
  bool resolve_pending_ = false;  // a re-solve is queued at the current time
  std::uint64_t solves_ = 0, flows_solved_ = 0;
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
