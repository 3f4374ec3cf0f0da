#include "sim/engine/engine.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/heap.hpp"

namespace moesim::engine {

static_assert(sizeof(Task) == 64, "a task record is 64 bytes");

namespace {
// A task's start field before it starts: -1 until its launch thread issues it, then -2 - the time
// it was issued (task.hpp).
constexpr Time kNotIssued = -1;
constexpr Time issued(Time when) { return -2 - when; }
constexpr Time issue_time(Time start) { return -2 - start; }

std::vector<StreamSpec> default_streams(std::uint8_t n) {
  std::vector<StreamSpec> s;
  for (std::uint8_t i = 0; i < n; ++i) s.push_back({i == 0 ? "compute" : fmt::format("stream {}", i), i == 0});
  return s;
}
}  // namespace

Engine::Engine(std::uint32_t gpus, std::vector<StreamSpec> streams)
    : gpus_(gpus), specs_(std::move(streams)), streams_(static_cast<std::size_t>(gpus) * specs_.size()), launchers_(gpus) {
  if (specs_.empty() || specs_.size() > 255) invariant_failed(fmt::format("{} streams per GPU", specs_.size()));
  intern("");
  std::vector<std::uint32_t> own(gpus);
  for (std::uint32_t g = 0; g < gpus; ++g) own[g] = g;
  set_hosts(std::move(own));
}

void Engine::set_hosts(std::vector<std::uint32_t> host_of_gpu) {
  if (began_ || host_of_gpu.size() != gpus_) invariant_failed("set_hosts: one host per GPU, before begin()");
  host_of_gpu_ = std::move(host_of_gpu);
  host_gpus_.clear();
  for (std::uint32_t g = 0; g < gpus_; ++g) {
    if (host_of_gpu_[g] >= host_gpus_.size()) host_gpus_.resize(host_of_gpu_[g] + 1);
    host_gpus_[host_of_gpu_[g]].push_back(g);
  }
  rates_.assign(gpus_ + host_gpus_.size(), GpuRate{});
}

Engine::Engine(std::uint32_t gpus, std::uint8_t streams) : Engine(gpus, default_streams(streams)) {}

void Engine::set_sustained_clock(std::uint32_t gpu, double factor, Time time_constant) {
  if (began_ || gpu >= gpus_) invariant_failed("set_sustained_clock: a GPU of the engine, before begin()");
  if (!(factor > 0 && factor <= 1) || time_constant <= 0)
    invariant_failed(fmt::format("sustained clock factor {} outside (0, 1] or time constant {} ps", factor, time_constant));
  if (clocks_.empty()) clocks_.resize(gpus_);
  clocks_[gpu].factor = factor;
  clocks_[gpu].time_constant = static_cast<double>(time_constant);
}

Engine::SustainedClock& Engine::warm(std::uint32_t gpu) {
  SustainedClock& c = clocks_[gpu];
  if (const Time dt = now_ - c.since; dt > 0 && c.factor < 1) {
    const double decay = std::exp(-static_cast<double>(dt) / c.time_constant);
    c.heat = c.running > 0 ? 1 - (1 - c.heat) * decay : c.heat * decay;
  }
  c.since = now_;
  return c;
}

double Engine::program_bytes(const Records& held, const Records& written, bool huge_pages) {
  return decltype(tasks_)::resident_bytes(held.tasks, written.tasks, huge_pages) +
         decltype(collectives_)::resident_bytes(held.collectives, written.collectives, huge_pages) +
         decltype(members_)::resident_bytes(held.members, written.members, huge_pages) +
         decltype(edges_)::resident_bytes(held.edges, held.edges, huge_pages);
}

double Engine::state_bytes(std::uint32_t gpus, std::size_t streams, std::uint32_t hosts, double added_while_running,
                           double pending) {
  const double g = gpus;
  // The constructor gives every GPU a host of its own (rates_ for 2·gpus resources, a list of one
  // GPU each, host_gpus_ grown to gpus lists); set_hosts keeps those capacities and lists each
  // host's GPUs instead.
  const double lists = hosts > 0 ? hosts * heap_block_bytes(sizeof(std::uint32_t) * grown_capacity(g / hosts))
                                 : g * heap_block_bytes(sizeof(std::uint32_t));
  // A launch thread per GPU, each with its pending launches (`pending` tasks over the GPUs, each
  // thread's vector grown by push_back).
  const double pending_bytes =
      pending > 0 ? g * heap_block_bytes(sizeof(Pending) * grown_capacity(std::ceil(pending / g))) : 0.0;
  return g * streams * sizeof(Stream) + 2 * g * sizeof(GpuRate) + g * sizeof(SustainedClock) + g * sizeof(std::uint32_t) +
         g * sizeof(LaunchThread) + pending_bytes +
         grown_capacity(g) * sizeof(std::vector<std::uint32_t>) + lists +
         // Events pending: at most the end of each stream's running task (a collective's end and
         // the network model's timers stand for its members').
         g * streams * sizeof(Event) + grown_capacity(added_while_running) * sizeof(TaskId);
}

std::uint16_t Engine::intern(std::string_view name) {
  auto it = name_index_.find(std::string(name));
  if (it != name_index_.end()) return it->second;
  if (names_.size() >= UINT16_MAX) invariant_failed("more than 65535 distinct task names");
  const auto id = static_cast<std::uint16_t>(names_.size());
  names_.emplace_back(name);
  name_index_.emplace(std::string(name), id);
  return id;
}

TaskId Engine::add_task(std::uint32_t gpu, std::uint8_t stream, Time duration, const Label& label, double sm_share,
                        const Launch& launch) {
  if (gpu >= gpus_ || stream >= specs_.size())
    invariant_failed(fmt::format("task on GPU {} stream {} outside the {} GPUs x {} streams", gpu, stream, gpus_,
                                 specs_.size()));
  if (duration < 0) invariant_failed(fmt::format("negative duration {} ps", duration));
  if (!(sm_share >= 0 && sm_share <= 1)) invariant_failed(fmt::format("SM share {} outside [0, 1]", sm_share));
  if (launch.cost < 0) invariant_failed(fmt::format("negative launch cost {} ps", launch.cost));
  if (task_count() >= kNone - 1) invariant_failed("more than 2^32 tasks in one run");
  const auto id = static_cast<TaskId>(task_count());
  Task& t = tasks_.push_back();
  t.duration = duration;
  t.gpu = gpu;
  t.stream = stream;
  t.label = label;
  t.sm_share = static_cast<float>(sm_share);
  Stream& s = streams_[index(gpu, stream)];
  // A stream whose head is gone has run everything added to it: the new task is its head.
  if (s.head != kNone) at(s.tail).next_in_stream = id;
  else s.head = id;
  s.tail = id;
  LaunchThread& h = launchers_[gpu];
  if (h.blocked_on == kNone) issue(id, launch);
  else h.pending.push_back({id, launch});
  if (began_) fresh_.push_back(id);
  return id;
}

void Engine::issue(TaskId id, const Launch& launch) {
  Task& t = at(id);
  LaunchThread& h = launchers_[t.gpu];
  h.free += launch.cost;
  if (h.free > kMaxTime) past_the_clock(static_cast<double>(h.free));
  t.start = issued(h.free);
  if (launch.sync >= 0) {
    h.blocked_on = id;
    h.resume = launch.sync;
  }
}

void Engine::resume(std::uint32_t gpu) {
  LaunchThread& h = launchers_[gpu];
  h.free = std::max(h.free, now_ + h.resume);
  h.blocked_on = kNone;
  if (h.stalled_since >= 0) {
    h.waited += now_ - h.stalled_since;
    h.stalled_since = -1;
  }
  while (h.next < h.pending.size() && h.blocked_on == kNone) {
    const Pending p = h.pending[h.next++];
    issue(p.id, p.launch);
    // Tried before the next event, with the tasks added while running.
    if (began_) fresh_.push_back(p.id);
  }
  if (h.next == h.pending.size()) {
    h.pending.clear();
    h.next = 0;
  }
}

Time Engine::issued_at(TaskId id) const {
  const Task* t = task(id);
  if (!t || t->start >= 0) invariant_failed(fmt::format("issued_at: task {} is not waiting to start", id));
  return t->start == kNotIssued ? -1 : issue_time(t->start);
}

TaskId Engine::add_compute(std::uint32_t gpu, std::uint8_t stream, Time duration, const Label& label, double sm_share,
                           const Launch& launch) {
  return add_task(gpu, stream, duration, label, sm_share, launch);
}

CollectiveId Engine::add_collective(std::uint32_t members, WorkKind kind) {
  if (members == 0) invariant_failed("collective with no members");
  if (collective_count() >= kNone - 1) invariant_failed("more than 2^32 collectives in one run");
  const auto id = static_cast<CollectiveId>(collective_count());
  Collective& c = collectives_.push_back();
  c.expected = members;
  c.kind = kind;
  c.first_member = members_.end();
  for (std::uint32_t r = 0; r < members; ++r) members_.push_back() = kNone;
  return id;
}

TaskId Engine::add_member(CollectiveId id, std::uint32_t gpu, std::uint8_t stream, const Label& label, double sm_share,
                          const Launch& launch) {
  if (!collectives_.live(id)) invariant_failed(fmt::format("member of unknown collective {}", id));
  if (coll(id).added == coll(id).expected)
    invariant_failed(fmt::format("collective {} has more members than the {} declared", id, coll(id).expected));
  const TaskId t = add_task(gpu, stream, 0, label, sm_share, launch);
  at(t).type = TaskType::CollectiveMember;
  at(t).collective = id;
  Collective& c = coll(id);
  members_[c.first_member + c.added++] = t;
  return t;
}

bool Engine::finished(TaskId id) const { return id < tasks_.front() || at(id).end >= 0; }

void Engine::depend(TaskId before, TaskId after) {
  if (before >= task_count() || !tasks_.live(after) || before == after)
    invariant_failed(fmt::format("bad dependency {} -> {}", before, after));
  if (at(after).start >= 0) invariant_failed(fmt::format("dependency {} -> {} added after {} started", before, after, after));
  if (finished(before)) return;
  std::uint32_t e;
  if (free_edge_ != kNone) {
    e = free_edge_;
    free_edge_ = edges_[e].next;
  } else {
    e = static_cast<std::uint32_t>(edges_.end());
    edges_.push_back();
  }
  Task& b = at(before);
  // Successors are kept in the order added (they are started in that order), in a circular list
  // whose last edge points to the first.
  if (b.last_successor != kNone) {
    edges_[e] = {after, edges_[b.last_successor].next};
    edges_[b.last_successor].next = e;
  } else {
    edges_[e] = {after, e};
  }
  b.last_successor = e;
  ++at(after).deps_left;
}

Time Engine::running_since(std::uint32_t gpu) const {
  Time since = now_;
  for (std::uint8_t s = 0; s < specs_.size(); ++s) {
    const TaskId h = streams_[index(gpu, s)].head;
    if (h == kNone || at(h).start < 0) continue;
    const Task& t = at(h);
    // A member's work begins when its collective starts; one still waiting at the rendezvous
    // begins it now or later.
    Time began = t.start;
    if (t.type == TaskType::CollectiveMember) {
      const Time collective_start = collectives_[t.collective].start;
      began = collective_start >= 0 ? collective_start : now_;
    }
    since = std::min(since, began);
  }
  return since;
}

void Engine::push(Time time, std::uint32_t id, EventType type, std::uint32_t version) {
  if (time < now_) invariant_failed(fmt::format("event scheduled in the past ({} < {} ps)", time, now_));
  if (time > kMaxTime) past_the_clock(static_cast<double>(time));
  queue_.push(Event{time, seq_++, id, version, type});
}

void Engine::finish_collective_at(CollectiveId id, Time when) { push(when, id, EventType::CollectiveEnd); }

void Engine::set_timer(std::uint32_t token, Time when) { push(when, token, EventType::Timer); }

template <typename F>
void Engine::for_running_shared(std::uint32_t resource, F f) {
  const auto heads = [&](std::uint32_t gpu) {
    for (std::uint8_t s = 0; s < specs_.size(); ++s) {
      const TaskId h = streams_[index(gpu, s)].head;
      if (h == kNone) continue;
      Task& t = at(h);
      if (t.start >= 0 && t.end < 0 && resource_of(t) == resource) f(h, t);
    }
  };
  if (resource < gpus_) heads(resource);
  else
    for (std::uint32_t g : host_gpus_[resource - gpus_]) heads(g);
}

void Engine::enter_generic(std::uint32_t resource) {
  GpuRate& r = rates_[resource];
  if (r.generic) return;
  // Until now every running shared task had the resource to itself.
  for_running_shared(resource, [&](TaskId id, Task& t) { slowed_[id].remaining = static_cast<double>(t.duration - (now_ - t.start)); });
  r.generic = true;
  r.since = now_;
  r.rate = 1;
}

void Engine::settle(std::uint32_t resource) {
  GpuRate& r = rates_[resource];
  const double done = static_cast<double>(now_ - r.since) * r.rate;
  if (done > 0)
    for_running_shared(resource, [&](TaskId id, Task&) {
      double& left = slowed_[id].remaining;
      left = std::max(0.0, left - done);
    });
  r.since = now_;
}

void Engine::reschedule(std::uint32_t resource) {
  GpuRate& r = rates_[resource];
  r.rate = std::max(0.0, 1.0 - std::min(1.0, r.reserved)) / std::max<std::uint32_t>(1, r.sharing);
  for_running_shared(resource, [&](TaskId id, Task&) {
    Slowed& s = slowed_[id];
    ++s.version;
    // With every SM reserved the task stalls until a reservation ends.
    if (r.rate > 0) push(now_ + ps_to_time(std::ceil(s.remaining / r.rate)), id, EventType::TaskEnd, s.version);
  });
}

void Engine::reserve(const Task& t, int sign) {
  // Reservations are of a GPU's SMs.
  GpuRate& r = rates_[t.gpu];
  enter_generic(t.gpu);
  settle(t.gpu);
  r.reservers = static_cast<std::uint32_t>(static_cast<int>(r.reservers) + sign);
  r.reserved = r.reservers == 0 ? 0.0 : r.reserved + sign * static_cast<double>(t.sm_share);
  reschedule(t.gpu);
}

void Engine::try_start(TaskId id) {
  Task& t = at(id);
  if (t.deps_left != 0 || t.start >= 0 || streams_[index(t.gpu, t.stream)].head != id) return;
  // Not issued yet: tried again when its launch thread issues it (resume), or when it is issued
  // later than now (a Launch event, set once), its wait counted if the GPU could compute it now.
  if (t.start == kNotIssued) {
    LaunchThread& h = launchers_[t.gpu];
    if (specs_[t.stream].computes && h.stalled_since < 0) h.stalled_since = now_;
    return;
  }
  if (const Time at_issue = issue_time(t.start); at_issue > now_) {
    if (!t.awaiting_launch) {
      t.awaiting_launch = 1;
      if (specs_[t.stream].computes) launchers_[t.gpu].waited += at_issue - now_;
      push(at_issue, id, EventType::Launch);
    }
    return;
  }
  t.start = now_;
  if (clocked(t)) {
    SustainedClock& c = warm(t.gpu);
    ++c.running;
    if (c.factor < 1 && t.duration > 0)
      t.duration = static_cast<Time>(std::llround(static_cast<double>(t.duration) / (1 - (1 - c.factor) * c.heat)));
  }
  for (TaskObserver* o : observers_) o->on_start(*this, id, t);
  if (t.sm_share > 0) reserve(t, +1);
  if (t.type == TaskType::Compute) {
    const std::uint32_t res = resource_of(t);
    if (res == kNone) {
      push(now_ + t.duration, id, EventType::TaskEnd);
      return;
    }
    GpuRate& r = rates_[res];
    if (!r.generic && r.sharing == 0 && r.reserved == 0) {
      ++r.sharing;
      push(now_ + t.duration, id, EventType::TaskEnd);
    } else {
      enter_generic(res);
      settle(res);
      slowed_[id].remaining = static_cast<double>(t.duration);
      ++r.sharing;
      reschedule(res);
    }
    return;
  }
  Collective& c = coll(t.collective);
  if (++c.arrived == c.expected) {
    c.start = now_;
    executor_->start(*this, t.collective, now_);
  }
}

void Engine::finish_task(TaskId id) {
  Task& t = at(id);
  t.end = now_;
  if (now_ > makespan_) makespan_ = now_;
  const Time began = t.type == TaskType::CollectiveMember ? coll(t.collective).start : t.start;
  for (TaskObserver* o : observers_) o->on_finish(*this, id, t, began);
  Stream& s = streams_[index(t.gpu, t.stream)];
  s.head = t.next_in_stream;
  if (clocked(t)) --warm(t.gpu).running;
  if (launchers_[t.gpu].blocked_on == id) resume(t.gpu);
  if (const std::uint32_t res = resource_of(t); res != kNone) {
    GpuRate& r = rates_[res];
    if (r.generic) settle(res);
    --r.sharing;
    if (r.generic) {
      if (r.sharing == 0 && r.reservers == 0) r.generic = false;
      else reschedule(res);
    }
  } else if (t.sm_share > 0) {
    reserve(t, -1);
    GpuRate& r = rates_[t.gpu];
    if (r.sharing == 0 && r.reservers == 0) r.generic = false;
  }
  if (t.last_successor != kNone) {
    const std::uint32_t last = t.last_successor;
    t.last_successor = kNone;
    for (std::uint32_t e = edges_[last].next;;) {
      const Edge edge = edges_[e];
      edges_[e].next = free_edge_;
      free_edge_ = e;
      if (--at(edge.to).deps_left == 0) try_start(edge.to);
      if (e == last) break;
      e = edge.next;
    }
  }
  if (s.head != kNone) try_start(s.head);
}

void Engine::start_fresh() {
  // Tasks added while running: start those that can, in the order they were added.
  for (std::size_t i = 0; i < fresh_.size(); ++i) try_start(fresh_[i]);
  fresh_.clear();
}

void Engine::retire() {
  while (!tasks_.empty() && tasks_[tasks_.front()].end >= 0) tasks_.pop_front();
  while (!collectives_.empty() && collectives_[collectives_.front()].end >= 0) {
    for (std::uint32_t r = collectives_[collectives_.front()].expected; r > 0; --r) members_.pop_front();
    collectives_.pop_front();
  }
}

void Engine::begin(CollectiveExecutor& executor) {
  if (began_) invariant_failed("engine run twice");
  began_ = true;
  executor_ = &executor;
  for (const Stream& s : streams_)
    if (s.head != kNone) try_start(s.head);
}

bool Engine::advance(const std::function<bool()>& stop) {
  if (!began_) invariant_failed("engine advanced before begin");
  for (;;) {
    if (!fresh_.empty()) start_fresh();
    if (stop && stop()) return true;
    if (queue_.empty()) return false;
    const Event ev = queue_.top();
    queue_.pop();
    now_ = ev.time;
    ++events_;
    switch (ev.type) {
      case EventType::TaskEnd: {
        // An end event is stale when the task's end moved since (SM sharing changed its rate).
        const Task* t = task(ev.id);
        if (!t || t->end >= 0) break;
        const auto slow = slowed_.find(ev.id);
        if (ev.version != (slow == slowed_.end() ? 0 : slow->second.version)) break;
        if (slow != slowed_.end()) slowed_.erase(slow);
        finish_task(ev.id);
        break;
      }
      case EventType::CollectiveEnd: {
        Collective& c = coll(ev.id);
        c.end = now_;
        for (std::uint32_t r = 0; r < c.expected; ++r) finish_task(members_[c.first_member + r]);
        break;
      }
      case EventType::Timer: executor_->on_timer(*this, ev.id, now_); break;
      case EventType::Launch: {
        Task& t = at(ev.id);
        t.awaiting_launch = 0;
        try_start(ev.id);
        break;
      }
    }
    retire();
  }
}

void Engine::finish() {
  if (!fresh_.empty()) start_fresh();
  if (!queue_.empty()) invariant_failed("engine finished with events pending");
  std::uint64_t done = tasks_.front(), stuck = kNone;
  for (std::uint64_t i = tasks_.front(); i < tasks_.end(); ++i) {
    if (tasks_[i].end >= 0) ++done;
    else if (stuck == kNone) stuck = i;
  }
  if (stuck != kNone)
    invariant_failed(fmt::format("deadlock: {} of {} tasks finished; first stuck: {}", done, task_count(),
                                 describe(static_cast<TaskId>(stuck))));
}

void Engine::run(CollectiveExecutor& executor) {
  begin(executor);
  advance();
  finish();
}

std::string Engine::describe(TaskId id) const {
  const Task* t = task(id);
  if (!t) return fmt::format("task {} (finished)", id);
  std::string what = fmt::format("task {} '{}' ({} {}, iteration {} layer {} microbatch {} chunk {}) on GPU {} stream {}",
                                 id, names_[t->label.name], to_string(t->label.phase), to_string(t->label.kind),
                                 t->label.iteration, t->label.layer, t->label.microbatch, t->label.chunk, t->gpu,
                                 t->stream);
  if (const Collective* c = collective(t->collective)) {
    what += fmt::format(", member of collective {} ({} of {} members arrived)", t->collective, c->arrived, c->expected);
  }
  if (t->deps_left) what += fmt::format(", waiting on {} dependencies", t->deps_left);
  if (t->start == kNotIssued) {
    const TaskId sync = launchers_[t->gpu].blocked_on;
    what += fmt::format(", not yet issued: GPU {}'s launch thread waits for task {} to finish", t->gpu, sync);
  }
  return what;
}

}  // namespace moesim::engine
