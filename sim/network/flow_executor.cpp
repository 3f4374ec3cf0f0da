#include "sim/network/flow_executor.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/error.hpp"
#include "sim/core/heap.hpp"

namespace moesim::network {

namespace {
constexpr std::uint32_t kDrain = 0x80000000u;
constexpr std::uint32_t kResolve = kDrain - 1;  // timer token of a batched re-solve
constexpr std::uint32_t kAbsentFlow = 0xffffffffu;
}

FlowExecutor::FlowExecutor(const cluster::Topology& topology, const AlphaBetaTable& params, CollectiveProgram& program)
    : topology_(topology),
      params_(params),
      program_(program),
      resolver_(topology, params),
      links_(topology),
      demands_(links_, params),
      solver_(links_.size()) {
  capacity_.resize(links_.size());
  for (std::uint32_t l = 0; l < links_.size(); ++l) capacity_[l] = links_.capacity(l);
  left_ = capacity_;
  crossing_.resize(links_.size());
  link_rate_.assign(links_.size(), 0.0);
  link_bytes_.assign(links_.size(), 0.0);
  link_peak_.assign(links_.size(), 0.0);
  link_busy_.assign(links_.size(), 0);
  link_since_.assign(links_.size(), 0);
  seed_rate_.assign(links_.size(), std::numeric_limits<double>::infinity());
  link_mark_.assign(links_.size(), 0);
  stats_.bytes_by_level.assign(topology.tier_count(), 0.0);
  demand_cache_limit_ = demand_cache_entries(topology);
  matrix_cache_limit_ = demand_cache_matrix_bytes(topology);
}

double FlowExecutor::demand_cache_matrix_bytes(const cluster::Topology& topology) {
  // 64 dense matrices over every GPU, at most 64 MiB.
  const double n = static_cast<double>(topology.gpu_count());
  return std::min(64 * n * n * sizeof(double), 64.0 * (1 << 20));
}

std::size_t FlowExecutor::demand_cache_entries(const cluster::Topology& topology) {
  // Room for 64 collectives over every GPU, at most 2^22 demands (64 MiB): a 1F1B schedule
  // alternates the all-to-alls of every layer a GPU holds (DeepSeek-V3 at PP 4: 16 layers a stage,
  // a dispatch and a combine matrix each, 32 per group), and the cache must outlast that round to
  // be of use (scenarios/deepseek-v3-gb200.json: 14,986 of its 15,104 exchanges reuse demands).
  const std::size_t one = 2 * (static_cast<std::size_t>(topology.tier_count()) + 1) * topology.gpu_count();
  return std::min<std::size_t>(64 * one, std::size_t{1} << 22);
}

FlowPhase FlowExecutor::phase_demand(const CollectivePhase& phase, GroupId group, std::span<const std::uint32_t> members) {
  const auto* e = std::get_if<ExchangePhase>(&phase.work);
  if (!e || !e->traffic || e->traffic->is_tiered() || params_.calibrated(phase.kind)) return demands_.demand(phase, members);
  const DemandKey key{e->traffic.get(), group, phase.kind};
  if (const auto it = demand_cache_.find(key); it != demand_cache_.end()) {
    ++demands_reused_;
    return it->second;
  }
  FlowPhase out = demands_.demand(phase, members);
  const double matrix = e->traffic->value_bytes();
  if (out.demand.size() > demand_cache_limit_ || matrix > matrix_cache_limit_) return out;
  while (cached_demands_ + out.demand.size() > demand_cache_limit_ || cached_matrix_bytes_ + matrix > matrix_cache_limit_) {
    const auto oldest = demand_cache_.find(demand_order_.front().second);
    cached_demands_ -= oldest->second.demand.size();
    cached_matrix_bytes_ -= demand_order_.front().first->value_bytes();
    demand_cache_.erase(oldest);
    demand_order_.pop_front();
  }
  cached_demands_ += out.demand.size();
  cached_matrix_bytes_ += matrix;
  demand_cache_.emplace(key, out);
  demand_order_.emplace_back(e->traffic, key);
  return out;
}

double FlowExecutor::memory_estimate(const cluster::Topology& topology) {
  const double links = static_cast<double>(FlowLinks::count(topology));
  // capacity_, left_, link_rate_, link_bytes_, link_peak_, seed_rate_, link_busy_, link_since_,
  // link_mark_, crossing_; FlowDemands' scratch; the solver's.
  const double per_link = 6 * sizeof(double) + 2 * sizeof(Time) + sizeof(std::uint32_t) +
                          sizeof(std::vector<Crossing>) + sizeof(double) + MaxMinSolver::kBytesPerLink;
  // Per link of a flow in flight: its share's entry, its place in the link's list (Flow::at), the
  // list's entry, the solver's (crossing_ there), and a component's list of links.
  const double gpus = static_cast<double>(topology.gpu_count());
  const double in_flight = 2.0 * (topology.tier_count() + 1) * gpus *
                           (sizeof(LinkDemand) + sizeof(Crossing) + 3 * sizeof(std::uint32_t));
  // Per flow (one a GPU): its slot, its mark and place in a component, its finishing time in the
  // heap (boost's mutable heap: a std::list node of the entry and its index, prev and next
  // pointers, and the node's iterator in the heap's array).
  const double heap_entry = heap_block_bytes(2 * sizeof(void*) + sizeof(Finish) + sizeof(std::size_t)) + sizeof(void*);
  const double per_flow = sizeof(Flow) + 2 * sizeof(std::uint32_t) + heap_entry;
  const double cached = static_cast<double>(demand_cache_entries(topology)) * sizeof(LinkDemand);
  // The matrices it holds beyond their iteration (expected routing's dense ones are not in the
  // run's routing estimate): at most demand_cache_matrix_bytes.
  const double matrices = demand_cache_matrix_bytes(topology);
  return links * per_link + grown_capacity(links) * FlowLinks::kBytesPerLink + in_flight + gpus * per_flow + cached + matrices;
}

void FlowExecutor::start(engine::Engine& engine, engine::CollectiveId id, Time now) {
  const CollectiveOp& op = program_.op(id);
  const auto& members = program_.groups.members(op.group);
  const std::uint32_t r = begin_running(op, members, now);
  running_[r].id = id;
  if (op.copies <= 1 || !images_) {
    next_phase(engine, r, now);
    return;
  }
  // The images of a group, interned once: every layer and microbatch repeats its collectives.
  auto [known, fresh] = image_groups_.try_emplace(op.group);
  if (fresh)
    for (auto& image : images_(members, op.copies)) known->second.push_back(program_.groups.intern(std::move(image)));
  const CollectiveOp copy = op;  // program_ releases op once its collective is done
  next_phase(engine, r, now);
  for (const GroupId image : known->second) {
    CollectiveOp own = copy;
    own.group = image;
    own.copies = 1;
    const std::uint32_t i = begin_running(own, program_.groups.members(own.group), now);
    running_[i].image = true;
    running_[i].own = std::move(own);
    next_phase(engine, i, now);
  }
}

std::uint32_t FlowExecutor::begin_running(const CollectiveOp& op, std::span<const std::uint32_t> members, Time now) {
  std::uint32_t r;
  if (free_running_.empty()) {
    r = static_cast<std::uint32_t>(running_.size());
    if (r >= kResolve) invariant_failed("more than 2^31 collectives in flight");
    running_.emplace_back();
  } else {
    r = free_running_.back();
    free_running_.pop_back();
  }
  Running& run = running_[r];
  run.image = false;
  if (op.algorithm == Algorithm::Auto || op.algorithm == Algorithm::Nvls) {
    CollectiveOp resolved = op;
    resolved.algorithm = resolve(op, members);
    run.phases = plan_collective(resolved, members, topology_, params_);
  } else {
    run.phases = plan_collective(op, members, topology_, params_);
  }
  run.next = 0;
  run.started = now;
  const double n = static_cast<double>(members.size());
  run.pairs = members.size() <= 1                        ? 0.0
              : op.traffic ? static_cast<double>(op.traffic->pairs())
              : op.kind == CollectiveKind::P2P      ? (op.bytes > 0 ? 1.0 : 0.0)
                                                    : n * (n - 1);
  return r;
}

Algorithm FlowExecutor::resolve(const CollectiveOp& op, std::span<const std::uint32_t> members) {
  auto& by_size = resolved_[(static_cast<std::uint64_t>(op.group) << 8) | static_cast<std::uint64_t>(op.kind)];
  auto it = by_size.find(op.bytes);
  if (it == by_size.end()) it = by_size.emplace(op.bytes, resolver_.resolve(op, members)).first;
  return it->second;
}

void FlowExecutor::next_phase(engine::Engine& engine, std::uint32_t r, Time now) {
  Running& run = running_[r];
  const CollectiveOp& op = op_of(run);
  if (run.next == run.phases.size()) {
    if (!run.image) engine.finish_collective_at(run.id, now);
    KindStats& k = stats_.by_kind[static_cast<std::size_t>(op.kind)];
    ++k.collectives;
    k.pairs += static_cast<std::uint64_t>(run.pairs);
    k.time += now - run.started;
    run.phases.clear();
    free_running_.push_back(r);
    if (run.image) run.own = {};
    else program_.release(run.id);
    return;
  }
  const auto& members = program_.groups.members(op.group);
  FlowPhase phase = phase_demand(run.phases[run.next], op.group, members);
  // Pipelined phases drain as one flow: demands added per link, latencies added.
  if (run.phases[run.next].overlaps_next) {
    std::unordered_map<std::uint32_t, std::size_t> at;  // link → its entry in phase.demand
    for (std::size_t i = 0; i < phase.demand.size(); ++i) at.emplace(phase.demand[i].link, i);
    while (run.phases[run.next].overlaps_next && run.next + 1 < run.phases.size()) {
      const FlowPhase more = phase_demand(run.phases[++run.next], op.group, members);
      phase.latency += more.latency;
      phase.host_bytes += more.host_bytes;
      for (std::size_t l = 0; l < more.bytes_by_level.size(); ++l) phase.bytes_by_level[l] += more.bytes_by_level[l];
      for (const LinkDemand& d : more.demand) {
        auto [it, fresh] = at.emplace(d.link, phase.demand.size());
        if (fresh) phase.demand.push_back(d);
        else phase.demand[it->second].bytes += d.bytes;
      }
    }
  }
  ++run.next;
  for (std::size_t l = 0; l < phase.bytes_by_level.size(); ++l) {
    stats_.bytes_by_level[l] += phase.bytes_by_level[l];
    stats_.by_kind[static_cast<std::size_t>(op.kind)].bytes += phase.bytes_by_level[l];
  }
  stats_.by_kind[static_cast<std::size_t>(op.kind)].bytes += phase.host_bytes;
  if (phase.demand.empty()) {  // nothing crosses a link: only the latency
    engine.set_timer(r, now + phase.latency);
    return;
  }
  std::uint32_t slot;
  if (free_flows_.empty()) {
    slot = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
  } else {
    slot = free_flows_.back();
    free_flows_.pop_back();
  }
  Flow& f = flows_[slot];
  f.running = r;
  f.seq = next_seq_++;
  f.latency = phase.latency;
  f.remaining = 0;
  for (const LinkDemand& d : phase.demand) f.remaining = std::max(f.remaining, d.bytes);
  f.rate = 0;
  f.updated = now;
  f.finish = INT64_MAX;
  f.share = phase.demand;
  f.at.resize(f.share.size());
  for (std::uint32_t e = 0; e < f.share.size(); ++e) {
    LinkDemand& d = f.share[e];
    link_bytes_[d.link] += d.bytes;
    auto& on = crossing_[d.link];
    if (on.empty()) link_since_[d.link] = now;
    f.at[e] = static_cast<std::uint32_t>(on.size());
    on.push_back({slot, e});
    d.bytes /= f.remaining;
  }
  fresh_.push_back(slot);
  // Phases often start by the thousand at one instant (every group of a layer's collective): the
  // rates are solved once for all of them, by a timer at this same time.
  if (!resolve_pending_) {
    resolve_pending_ = true;
    engine.set_timer(kResolve, now);
  }
}

void FlowExecutor::on_timer(engine::Engine& engine, std::uint32_t token, Time now) {
  if (token == kResolve) {
    resolve_pending_ = false;
    reschedule(engine, now);
    return;
  }
  if (!(token & kDrain)) {
    next_phase(engine, token, now);  // a phase's latency has passed
    return;
  }
  if ((token & ~kDrain) != (generation_ & ~kDrain)) return;  // rates changed since: stale
  drained_.clear();
  while (!finishing_.empty() && finishing_.top().at <= now) {
    drained_.push_back(finishing_.top().flow);
    finishing_.pop();
  }
  // In start order, as their phases' next steps are queued.
  std::sort(drained_.begin(), drained_.end(), [&](std::uint32_t a, std::uint32_t b) { return flows_[a].seq < flows_[b].seq; });
  for (const std::uint32_t f : drained_) {
    engine.set_timer(flows_[f].running, now + flows_[f].latency);
    drop(f, now);
  }
  reschedule(engine, now);
}

void FlowExecutor::drop(std::uint32_t slot, Time now) {
  Flow& f = flows_[slot];
  for (std::uint32_t e = 0; e < f.share.size(); ++e) {
    const std::uint32_t l = f.share[e].link;
    if (seed_rate_[l] == std::numeric_limits<double>::infinity()) seed_links_.push_back(l);
    seed_rate_[l] = std::min(seed_rate_[l], f.rate);
    auto& on = crossing_[l];
    const Crossing last = on.back();
    on[f.at[e]] = last;
    flows_[last.flow].at[last.entry] = f.at[e];
    on.pop_back();
    if (on.empty()) link_busy_[l] += now - link_since_[l];
  }
  f.share = {};
  f.at = {};
  free_flows_.push_back(slot);
}

void FlowExecutor::gather(std::uint32_t from_flow, std::uint32_t from_link, double keep_below) {
  component_.clear();
  component_links_.clear();
  const auto flow = [&](std::uint32_t f) {
    if (flow_mark_[f] == mark_) return;
    flow_mark_[f] = mark_;
    component_.push_back(f);
  };
  const auto link = [&](std::uint32_t l) {
    if (link_mark_[l] == mark_) return;
    link_mark_[l] = mark_;
    component_links_.push_back(l);
    for (const Crossing& c : crossing_[l])
      if (!(flows_[c.flow].rate < keep_below)) flow(c.flow);
  };
  if (from_flow != kAbsentFlow) flow(from_flow);
  else link(from_link);
  for (std::size_t i = 0; i < component_.size(); ++i)
    for (const LinkDemand& d : flows_[component_[i]].share) link(d.link);
  std::sort(component_.begin(), component_.end(), [&](std::uint32_t a, std::uint32_t b) { return flows_[a].seq < flows_[b].seq; });
}

void FlowExecutor::reschedule(engine::Engine& engine, Time now) {
  last_ = now;
  ++generation_;
  if (++mark_ == 0) {
    std::fill(flow_mark_.begin(), flow_mark_.end(), 0);
    std::fill(link_mark_.begin(), link_mark_.end(), 0);
    mark_ = 1;
  }
  // A started flow's component is filled anew (every rate in it may change). A drain re-solves, of
  // what its flow leaves, the flows at least as fast as it that its links reach through such flows:
  // the drains slowest first, so that each reaches what a slower one has not.
  for (const std::uint32_t f : fresh_)
    if (flow_mark_[f] != mark_) {
      gather(f, 0, 0.0);
      solve_component(0.0, now);
    }
  std::sort(seed_links_.begin(), seed_links_.end(),
            [&](std::uint32_t a, std::uint32_t b) { return seed_rate_[a] != seed_rate_[b] ? seed_rate_[a] < seed_rate_[b] : a < b; });
  for (const std::uint32_t l : seed_links_)
    if (link_mark_[l] != mark_) {
      gather(kAbsentFlow, l, seed_rate_[l]);
      if (!component_.empty()) solve_component(seed_rate_[l], now);
    }
  for (const std::uint32_t l : seed_links_) seed_rate_[l] = std::numeric_limits<double>::infinity();
  seed_links_.clear();
  fresh_.clear();
  if (!finishing_.empty()) engine.set_timer(kDrain | (generation_ & ~kDrain), finishing_.top().at);
}

void FlowExecutor::solve_component(double keep_below, Time now) {
  // Flows only left since the last solve (keep_below: the slowest of them, 0 where one started):
  // those slower than it keep their rates. Progressive filling of the remaining flows replays the
  // last solve's rounds up to the level at which the first of those that left froze:
  // no link that saturated below it carried one of them (it would have frozen there), and their
  // links only have more room without them. Every flow that froze below that level froze as
  // before; else the others are filled anew, on what the kept flows leave of each link (below that
  // level every one of them rose with the kept flows and no link they cross saturated, so filling
  // them from zero on the remaining capacity is the same filling). The kept flows being constants,
  // the others' rates are those of each set connected through links they share (gather), and only
  // the sets a drained flow's links reach can change: staggered drains of per-expert gradient
  // all-reduces beside a slow all-to-all re-solve a few flows, not the ten thousands in flight.
  // Each link's rate: the kept flows' (the capacity they leave), then the solved flows'.
  for (const std::uint32_t l : component_links_) {
    double kept = 0;
    for (const Crossing& c : crossing_[l]) {
      const Flow& f = flows_[c.flow];
      if (f.rate < keep_below) kept += f.share[c.entry].bytes * f.rate;
    }
    link_rate_[l] = kept;
    left_[l] = capacity_[l] - kept;
  }
  shares_.clear();
  for (const std::uint32_t i : component_) shares_.push_back(&flows_[i].share);
  solver_.solve(shares_, keep_below > 0 ? left_ : capacity_, rates_);
  ++solves_;
  flows_solved_ += shares_.size();
  for (std::size_t j = 0; j < component_.size(); ++j) {
    Flow& f = flows_[component_[j]];
    if (rates_[j] <= 0) invariant_failed("a flow got no bandwidth");
    // Its bytes left at the rate it had, then its finishing time at the new one.
    f.remaining = std::max(0.0, f.remaining - f.rate * time_to_seconds(now - f.updated));
    f.updated = now;
    f.rate = rates_[j];
    const bool solved_before = f.finish != INT64_MAX;
    f.finish = now + ps_to_time(std::ceil(f.remaining / f.rate * 1e12));
    const Finish at{f.finish, f.seq, component_[j]};
    if (solved_before) finishing_.update(f.handle, at);
    else f.handle = finishing_.push(at);
    for (const LinkDemand& d : f.share) link_rate_[d.link] += d.bytes * f.rate;
  }
  for (const std::uint32_t l : component_links_) link_peak_[l] = std::max(link_peak_[l], link_rate_[l] / capacity_[l]);
}

NetworkStats FlowExecutor::stats() const {
  NetworkStats s = stats_;
  // One entry per tier, and one for the PCIe links when any carried bytes.
  const int tiers = topology_.tier_count();
  s.link_levels.resize(tiers + 1);
  for (int l = 0; l < tiers; ++l) {
    s.link_levels[l].name = topology_.tiers()[l].name;
    s.link_levels[l].level = l;
  }
  s.link_levels[tiers].name = "pcie";
  s.link_levels[tiers].level = tiers;
  // Its busy time, flows still on it included.
  const auto busy = [&](std::uint32_t l) { return link_busy_[l] + (!crossing_[l].empty() ? last_ - link_since_[l] : 0); };
  std::vector<std::uint32_t> used;
  for (std::uint32_t l = 0; l < links_.size(); ++l) {
    if (link_bytes_[l] <= 0) continue;
    used.push_back(l);
    LinkStat& lv = s.link_levels[links_.tier(l)];
    lv.bytes += link_bytes_[l];
    lv.busy = std::max(lv.busy, busy(l));
    lv.peak_utilization = std::max(lv.peak_utilization, link_peak_[l]);
  }
  if (s.link_levels[tiers].bytes <= 0) s.link_levels.pop_back();
  const std::size_t top = std::min<std::size_t>(10, used.size());
  std::partial_sort(used.begin(), used.begin() + static_cast<std::ptrdiff_t>(top), used.end(),
                    [&](std::uint32_t a, std::uint32_t b) { return link_bytes_[a] != link_bytes_[b] ? link_bytes_[a] > link_bytes_[b] : a < b; });
  for (std::size_t i = 0; i < top; ++i) {
    const std::uint32_t l = used[i];
    s.hottest_links.push_back({links_.name(l), links_.tier(l), link_bytes_[l], busy(l), link_peak_[l]});
  }
  return s;
}

}  // namespace moesim::network
