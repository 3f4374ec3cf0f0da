// The discrete-event engine. Time is integer picoseconds; events at equal times run in the order
// they were scheduled (a sequence number breaks ties), so a scenario always replays identically.
//
// Each GPU has `streams_per_gpu` in-order streams (stream 0 computes, the others communicate, as
// CUDA streams). A task starts when it is at the head of its stream, the task before it on that
// stream has finished, and all its dependencies are done. A collective is a set of member tasks,
// one per participating GPU; it starts when the last member has arrived (NCCL semantics) and its
// duration comes from a CollectiveExecutor (the network model), which may also set timers.
#pragma once

#include <cstdint>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/engine/task.hpp"

namespace moesim::engine {

class Engine;

// Decides how long a collective takes once every member has arrived. The analytic network model
// schedules the end at once; a flow model sets timers and ends it later.
class CollectiveExecutor {
 public:
  virtual ~CollectiveExecutor() = default;
  virtual void start(Engine& engine, CollectiveId id, Time now) = 0;
  virtual void on_timer(Engine& /*engine*/, std::uint32_t /*token*/, Time /*now*/) {}
};

struct Collective {
  std::uint32_t expected = 0;  // members, declared up front
  std::uint32_t added = 0;
  std::uint32_t arrived = 0;
  Time start = -1;
  Time end = -1;
  WorkKind kind = WorkKind::AllToAll;
};

class Engine {
 public:
  Engine(std::uint32_t gpus, std::uint8_t streams_per_gpu);

  std::uint16_t intern(std::string_view name);
  const std::vector<std::string>& names() const { return names_; }

  TaskId add_compute(std::uint32_t gpu, std::uint8_t stream, Time duration, const Label& label);
  CollectiveId add_collective(std::uint32_t members, WorkKind kind);
  // The member task of `gpu` in collective `id`; members are numbered in the order they are added.
  TaskId add_member(CollectiveId id, std::uint32_t gpu, std::uint8_t stream, const Label& label);
  // `after` cannot start before `before` has finished.
  void depend(TaskId before, TaskId after);
  void reserve(std::size_t tasks, std::size_t edges);

  // Runs to completion. Aborts naming the first stuck task if the program deadlocks.
  void run(CollectiveExecutor& executor);

  // For executors.
  void finish_collective_at(CollectiveId id, Time when);
  void set_timer(std::uint32_t token, Time when);
  Time now() const { return now_; }

  // Results.
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<Collective>& collectives() const { return collectives_; }
  std::span<const TaskId> members(CollectiveId id) const;
  std::uint32_t gpus() const { return gpus_; }
  std::uint8_t streams_per_gpu() const { return streams_per_gpu_; }
  std::uint64_t events_processed() const { return events_; }
  Time makespan() const { return makespan_; }
  std::string describe(TaskId id) const;

 private:
  enum class EventType : std::uint8_t { TaskEnd, CollectiveEnd, Timer };
  struct Event {
    Time time;
    std::uint64_t seq;
    std::uint32_t id;
    EventType type;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Stream {
    TaskId head = kNone;
    TaskId tail = kNone;
  };

  void push(Time time, std::uint32_t id, EventType type);
  void seal();
  void try_start(TaskId id);
  void finish_task(TaskId id);
  Stream& stream_of(const Task& t) { return streams_[t.gpu * streams_per_gpu_ + t.stream]; }

  std::uint32_t gpus_;
  std::uint8_t streams_per_gpu_;
  std::vector<Task> tasks_;
  std::vector<Stream> streams_;
  std::vector<Collective> collectives_;
  std::vector<std::pair<TaskId, TaskId>> edges_;
  std::vector<std::uint32_t> succ_offsets_, succ_;
  std::vector<std::uint32_t> member_offsets_, members_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint16_t> name_index_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  CollectiveExecutor* executor_ = nullptr;
  Time now_ = 0;
  Time makespan_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t events_ = 0;
  std::size_t finished_ = 0;
  bool ran_ = false;
};

}  // namespace moesim::engine
