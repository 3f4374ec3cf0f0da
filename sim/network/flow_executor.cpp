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
  link_rate_.assign(links_.size(), 0.0);
  link_bytes_.assign(links_.size(), 0.0);
  link_peak_.assign(links_.size(), 0.0);
  link_busy_.assign(links_.size(), 0);
  link_since_.assign(links_.size(), 0);
  link_flows_.assign(links_.size(), 0);
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
  // capacity_, left_, link_rate_, link_bytes_, link_peak_, link_busy_, link_since_, link_flows_;
  // FlowDemands' scratch; the solver's.
  const double per_link = 5 * sizeof(double) + 2 * sizeof(Time) + sizeof(std::uint32_t) + sizeof(double) +
                          MaxMinSolver::kBytesPerLink;
  const double in_flight = 2.0 * (topology.tier_count() + 1) * topology.gpu_count() * (sizeof(LinkDemand) + sizeof(std::uint32_t));
  const double cached = static_cast<double>(demand_cache_entries(topology)) * sizeof(LinkDemand);
  // The matrices it holds beyond their iteration (expected routing's dense ones are not in the
  // run's routing estimate): at most demand_cache_matrix_bytes.
  const double matrices = demand_cache_matrix_bytes(topology);
  return links * per_link + grown_capacity(links) * FlowLinks::kBytesPerLink + in_flight + cached + matrices;
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
  Flow f;
  f.running = r;
  f.latency = phase.latency;
  for (const LinkDemand& d : phase.demand) f.remaining = std::max(f.remaining, d.bytes);
  f.share = phase.demand;
  for (LinkDemand& d : f.share) d.bytes /= f.remaining;
  advance(now);
  for (const LinkDemand& d : phase.demand) {
    link_bytes_[d.link] += d.bytes;
    if (link_flows_[d.link]++ == 0) link_since_[d.link] = now;
  }
  flows_.push_back(std::move(f));
  added_ = true;
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
    advance(now);
    reschedule(engine, now);
    return;
  }
  if (!(token & kDrain)) {
    next_phase(engine, token, now);  // a phase's latency has passed
    return;
  }
  if ((token & ~kDrain) != (generation_ & ~kDrain)) return;  // rates changed since: stale
  advance(now);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < flows_.size(); ++i) {
    if (flows_[i].finish <= now) {
      drained_rate_ = std::min(drained_rate_, flows_[i].rate);
      engine.set_timer(flows_[i].running, now + flows_[i].latency);
      for (const LinkDemand& d : flows_[i].share)
        if (--link_flows_[d.link] == 0) link_busy_[d.link] += now - link_since_[d.link];
    } else {
      if (kept != i) flows_[kept] = std::move(flows_[i]);
      ++kept;
    }
  }
  flows_.resize(kept);
  reschedule(engine, now);
}

void FlowExecutor::advance(Time now) {
  const Time dt = now - last_;
  if (dt <= 0) return;
  const double seconds = time_to_seconds(dt);
  for (Flow& f : flows_) f.remaining = std::max(0.0, f.remaining - f.rate * seconds);
  last_ = now;
}

void FlowExecutor::reschedule(engine::Engine& engine, Time now) {
  last_ = now;
  ++generation_;
  if (flows_.empty()) return;
  // Flows only left since the last solve: those slower than the slowest of them keep their rates.
  // Progressive filling of the remaining flows replays the last solve's rounds, bit for bit, up to
  // the level at which the first of those that left froze: no link that saturated below it carried
  // one of them (it would have frozen there), and their links only have more room without them.
  // Every flow that froze below that level froze as before. When all of them did (a layer's
  // gradient all-reduces drain fastest first beside a slow all-to-all), nothing is solved; else
  // only the others are filled anew, on what the kept flows leave of each link (below that level
  // every one of them rose with the kept flows and no link they cross saturated, so filling them
  // from zero on the remaining capacity is the same filling). Staggered drains of an all-to-all's
  // per-source flows re-solve a few percent of tens of thousands of flows instead of all of them.
  const double keep_below = added_ ? 0.0 : drained_rate_;
  added_ = false;
  drained_rate_ = std::numeric_limits<double>::infinity();
  const auto kept = [&](const Flow& f) { return f.rate < keep_below; };
  const auto kept_flows = static_cast<std::size_t>(std::count_if(flows_.begin(), flows_.end(), kept));
  if (kept_flows < flows_.size()) {
    // Each link's rate, for the capacity the kept flows leave and for its peak utilisation.
    for (std::uint32_t l : busy_links_) link_rate_[l] = 0;
    busy_links_.clear();
    const auto load = [&](const Flow& f) {
      for (const LinkDemand& d : f.share) {
        if (link_rate_[d.link] == 0) busy_links_.push_back(d.link);
        link_rate_[d.link] += d.bytes * f.rate;
      }
    };
    shares_.clear();
    solved_.clear();
    for (std::uint32_t i = 0; i < flows_.size(); ++i) {
      if (kept(flows_[i])) {
        load(flows_[i]);
      } else {
        shares_.push_back(&flows_[i].share);
        solved_.push_back(i);
      }
    }
    const std::vector<double>* capacity = &capacity_;
    if (kept_flows > 0) {
      for (const auto* share : shares_)
        for (const LinkDemand& d : *share) left_[d.link] = capacity_[d.link] - link_rate_[d.link];
      capacity = &left_;
    }
    solver_.solve(shares_, *capacity, rates_);
    ++solves_;
    flows_solved_ += shares_.size();
    for (std::size_t j = 0; j < solved_.size(); ++j) {
      Flow& f = flows_[solved_[j]];
      f.rate = rates_[j];
      if (f.rate <= 0) invariant_failed("a flow got no bandwidth");
      load(f);
    }
    // Without a solve only drained flows' rates left: each link's rate is a sum of fewer of the
    // same terms, no higher (rounding is monotone), so its peak stays.
    for (std::uint32_t l : busy_links_) link_peak_[l] = std::max(link_peak_[l], link_rate_[l] / capacity_[l]);
  }
  Time next = INT64_MAX;
  for (Flow& f : flows_) {
    f.finish = now + ps_to_time(std::ceil(f.remaining / f.rate * 1e12));
    next = std::min(next, f.finish);
  }
  engine.set_timer(kDrain | (generation_ & ~kDrain), next);
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
  const auto busy = [&](std::uint32_t l) { return link_busy_[l] + (link_flows_[l] > 0 ? last_ - link_since_[l] : 0); };
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
