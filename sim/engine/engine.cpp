#include "sim/engine/engine.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::engine {

Engine::Engine(std::uint32_t gpus, std::uint8_t streams_per_gpu)
    : gpus_(gpus), streams_per_gpu_(streams_per_gpu), streams_(static_cast<std::size_t>(gpus) * streams_per_gpu) {
  intern("");
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

void Engine::reserve(std::size_t tasks, std::size_t edges) {
  tasks_.reserve(tasks);
  edges_.reserve(edges);
}

TaskId Engine::add_compute(std::uint32_t gpu, std::uint8_t stream, Time duration, const Label& label) {
  if (ran_) invariant_failed("task added after the engine ran");
  if (gpu >= gpus_ || stream >= streams_per_gpu_)
    invariant_failed(fmt::format("task on GPU {} stream {} outside the {} GPUs x {} streams", gpu, stream, gpus_,
                                 streams_per_gpu_));
  if (duration < 0) invariant_failed(fmt::format("negative duration {} ps", duration));
  if (tasks_.size() >= kNone - 1) invariant_failed("more than 2^32 tasks");
  const auto id = static_cast<TaskId>(tasks_.size());
  Task& t = tasks_.emplace_back();
  t.duration = duration;
  t.gpu = gpu;
  t.stream = stream;
  t.label = label;
  Stream& s = stream_of(t);
  if (s.tail != kNone) tasks_[s.tail].next_in_stream = id;
  else s.head = id;
  s.tail = id;
  return id;
}

CollectiveId Engine::add_collective(std::uint32_t members, WorkKind kind) {
  if (members == 0) invariant_failed("collective with no members");
  const auto id = static_cast<CollectiveId>(collectives_.size());
  Collective& c = collectives_.emplace_back();
  c.expected = members;
  c.kind = kind;
  return id;
}

TaskId Engine::add_member(CollectiveId id, std::uint32_t gpu, std::uint8_t stream, const Label& label) {
  Collective& c = collectives_.at(id);
  if (c.added == c.expected)
    invariant_failed(fmt::format("collective {} has more members than the {} declared", id, c.expected));
  ++c.added;
  const TaskId t = add_compute(gpu, stream, 0, label);
  tasks_[t].type = TaskType::CollectiveMember;
  tasks_[t].collective = id;
  return t;
}

void Engine::depend(TaskId before, TaskId after) {
  if (before >= tasks_.size() || after >= tasks_.size() || before == after)
    invariant_failed(fmt::format("bad dependency {} -> {}", before, after));
  edges_.emplace_back(before, after);
  ++tasks_[after].deps_left;
}

std::span<const TaskId> Engine::members(CollectiveId id) const {
  return {members_.data() + member_offsets_[id], members_.data() + member_offsets_[id + 1]};
}

void Engine::seal() {
  // Successor lists and collective member lists in compressed-row form (counting sort): two flat
  // arrays instead of one heap vector per task, which matters at millions of tasks.
  succ_offsets_.assign(tasks_.size() + 1, 0);
  for (const auto& [from, to] : edges_) ++succ_offsets_[from + 1];
  for (std::size_t i = 0; i < tasks_.size(); ++i) succ_offsets_[i + 1] += succ_offsets_[i];
  succ_.resize(edges_.size());
  {
    std::vector<std::uint32_t> fill(succ_offsets_.begin(), succ_offsets_.end() - 1);
    for (const auto& [from, to] : edges_) succ_[fill[from]++] = to;
  }
  edges_.clear();
  edges_.shrink_to_fit();

  member_offsets_.assign(collectives_.size() + 1, 0);
  for (const Task& t : tasks_)
    if (t.collective != kNone) ++member_offsets_[t.collective + 1];
  for (std::size_t i = 0; i < collectives_.size(); ++i) {
    if (collectives_[i].added != collectives_[i].expected)
      invariant_failed(fmt::format("collective {} declared {} members but {} were added", i,
                                   collectives_[i].expected, collectives_[i].added));
    member_offsets_[i + 1] += member_offsets_[i];
  }
  members_.resize(member_offsets_.back());
  std::vector<std::uint32_t> fill(member_offsets_.begin(), member_offsets_.end() - 1);
  for (std::size_t i = 0; i < tasks_.size(); ++i)
    if (tasks_[i].collective != kNone) members_[fill[tasks_[i].collective]++] = static_cast<TaskId>(i);
}

void Engine::push(Time time, std::uint32_t id, EventType type) {
  if (time < now_) invariant_failed(fmt::format("event scheduled in the past ({} < {} ps)", time, now_));
  queue_.push(Event{time, seq_++, id, type});
}

void Engine::finish_collective_at(CollectiveId id, Time when) { push(when, id, EventType::CollectiveEnd); }

void Engine::set_timer(std::uint32_t token, Time when) { push(when, token, EventType::Timer); }

void Engine::try_start(TaskId id) {
  Task& t = tasks_[id];
  if (t.deps_left != 0 || t.start >= 0 || stream_of(t).head != id) return;
  t.start = now_;
  if (t.type == TaskType::Compute) {
    push(now_ + t.duration, id, EventType::TaskEnd);
    return;
  }
  Collective& c = collectives_[t.collective];
  if (++c.arrived == c.expected) {
    c.start = now_;
    executor_->start(*this, t.collective, now_);
  }
}

void Engine::finish_task(TaskId id) {
  Task& t = tasks_[id];
  t.end = now_;
  ++finished_;
  if (now_ > makespan_) makespan_ = now_;
  Stream& s = stream_of(t);
  s.head = t.next_in_stream;
  for (std::uint32_t i = succ_offsets_[id]; i < succ_offsets_[id + 1]; ++i) {
    const TaskId n = succ_[i];
    if (--tasks_[n].deps_left == 0) try_start(n);
  }
  if (s.head != kNone) try_start(s.head);
}

void Engine::run(CollectiveExecutor& executor) {
  if (ran_) invariant_failed("engine run twice");
  ran_ = true;
  executor_ = &executor;
  seal();
  for (const Stream& s : streams_)
    if (s.head != kNone) try_start(s.head);
  while (!queue_.empty()) {
    const Event ev = queue_.top();
    queue_.pop();
    now_ = ev.time;
    ++events_;
    switch (ev.type) {
      case EventType::TaskEnd: finish_task(ev.id); break;
      case EventType::CollectiveEnd: {
        Collective& c = collectives_[ev.id];
        c.end = now_;
        for (TaskId m : members(ev.id)) finish_task(m);
        break;
      }
      case EventType::Timer: executor_->on_timer(*this, ev.id, now_); break;
    }
  }
  if (finished_ != tasks_.size()) {
    for (std::size_t i = 0; i < tasks_.size(); ++i)
      if (tasks_[i].end < 0)
        invariant_failed(fmt::format("deadlock: {} of {} tasks finished; first stuck: {}", finished_, tasks_.size(),
                                     describe(static_cast<TaskId>(i))));
  }
}

std::string Engine::describe(TaskId id) const {
  const Task& t = tasks_.at(id);
  std::string what = fmt::format("task {} '{}' ({} {}, iteration {} layer {} microbatch {} chunk {}) on GPU {} stream {}",
                                 id, names_[t.label.name], to_string(t.label.phase), to_string(t.label.kind),
                                 t.label.iteration, t.label.layer, t.label.microbatch, t.label.chunk, t.gpu, t.stream);
  if (t.collective != kNone) {
    const Collective& c = collectives_[t.collective];
    what += fmt::format(", member of collective {} ({} of {} members arrived)", t.collective, c.arrived, c.expected);
  }
  if (t.deps_left) what += fmt::format(", waiting on {} dependencies", t.deps_left);
  return what;
}

}  // namespace moesim::engine
