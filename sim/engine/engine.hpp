// The discrete-event engine. Time is integer picoseconds; events at equal times run in the order
// they were scheduled (a sequence number breaks ties), so a scenario always replays identically.
//
// Each GPU has the same set of in-order streams (StreamSpec: a name, and whether its kernels
// compute on the GPU's SMs), as CUDA streams. A task starts when it is at the head of its stream,
// the task before it on that stream has finished, and all its dependencies are done. A collective
// is a set of member tasks, one per participating GPU; it starts when the last member has arrived
// (NCCL semantics) and its duration comes from a CollectiveExecutor (the network model), which may
// also set timers.
//
// SM sharing. A task may reserve a share s of its GPU's SMs while it runs (a fused dispatch kernel,
// a communication kernel polling for peers: from its start, or its arrival at a rendezvous, to its
// end). Compute tasks on computing streams that reserve nothing share what is left: with reserved
// shares S (at most 1) and n of them running, each progresses at (1 − S)/n of its full rate, and
// its end moves whenever S or n changes. With nothing reserved and one compute stream, every
// compute task simply takes its duration. Tasks on host streams share their host's CPU the same
// way (n running on one host: 1/n each; set_hosts says which GPUs share a host).
//
// The clock under sustained load (set_sustained_clock; flashinfer-ai/flashinfer#2899 measured a
// B200's SM clock falling from 1965 to about 1580 MHz once kept busy past about 5 ms). A GPU's heat
// h follows its computing streams' compute tasks: while one runs, h → 1 − (1 − h)·e^(−dt/τ), while
// none does, h → h·e^(−dt/τ); a compute task starting at heat h takes its duration over
// 1 − (1 − factor)·h. Without it (the default) every task keeps its duration.
//
// The host launches the GPU's work (DESIGN §8). Each GPU has one launch thread on its host (the
// framework's Python thread and the autograd thread that takes over in the backward run one at a
// time): it issues the GPU's tasks, whatever their stream, in the order they are added, each
// Launch::cost after the one before, and a task cannot start before it is issued. The thread runs
// ahead of the GPU as far as the program lets it; it stops only at a synchronising task
// (Launch::sync: a device-to-host read, a stream synchronize), and issues the next task no earlier
// than that task's end plus its sync time. A chain of kernels shorter than their launches thus
// runs at the launch rate, and a CUDA graph (one replay's cost for many tasks, the others issued
// with it at no cost) removes that; a task's wait for its launch while its GPU could have run it is
// counted per GPU (launch_wait). With every cost 0 and no syncs nothing waits: tasks start as they
// did before the thread was modelled.
//
// Appending while running. Tasks may be added at any time, also between begin() and finish(): a
// dependency on a task that has already finished is met at once, and a new task that can start
// starts at the current time, before the next event. Finished tasks and collectives are retired
// from the front of the program (memory stays bounded however many iterations are appended);
// observers (TaskObserver) see every task start and finish, which is how results are recorded.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/engine/block_queue.hpp"
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

// Sees every task start and finish (recorders of results, traces, the run loop).
class TaskObserver {
 public:
  virtual ~TaskObserver() = default;
  virtual void on_start(const Engine& /*engine*/, TaskId /*id*/, const Task& /*task*/) {}
  // `began`: when the task's work began (its start; for a collective member, its collective's
  // start, after the wait at the rendezvous).
  virtual void on_finish(const Engine& /*engine*/, TaskId /*id*/, const Task& /*task*/, Time /*began*/) {}
};

// 40 bytes, no allocation of its own: millions of two-member tensor-parallel collectives make up
// half of a large pipeline-parallel program.
struct Collective {
  std::uint32_t expected = 0;  // members, declared up front
  std::uint32_t added = 0;
  std::uint32_t arrived = 0;
  WorkKind kind = WorkKind::AllToAll;
  Time start = -1;
  Time end = -1;
  std::uint64_t first_member = 0;  // rank r's task is slot first_member + r of the engine's member pool
};

struct StreamSpec {
  std::string name;       // for traces, e.g. "compute", "comm: dispatch"
  bool computes = false;  // its compute kernels share the GPU's SMs (see the header comment)
  bool on_host = false;   // its tasks run on the GPU's host CPU, shared with the host's other such tasks
};

class Engine {
 public:
  Engine(std::uint32_t gpus, std::vector<StreamSpec> streams);
  // `streams` streams per GPU: stream 0 computes, the others communicate.
  Engine(std::uint32_t gpus, std::uint8_t streams);

  std::uint16_t intern(std::string_view name);
  const std::vector<std::string>& names() const { return names_; }

  // `sm_share`: share of the GPU's SMs the task reserves while it runs (0: none); `launch`: how the
  // GPU's launch thread issues it.
  TaskId add_compute(std::uint32_t gpu, std::uint8_t stream, Time duration, const Label& label, double sm_share = 0,
                     const Launch& launch = {});
  CollectiveId add_collective(std::uint32_t members, WorkKind kind);
  // The member task of `gpu` in collective `id`; members are numbered in the order they are added.
  TaskId add_member(CollectiveId id, std::uint32_t gpu, std::uint8_t stream, const Label& label, double sm_share = 0,
                    const Launch& launch = {});
  // `after` cannot start before `before` has finished (met at once if it has).
  void depend(TaskId before, TaskId after);
  void add_observer(TaskObserver* observer) { observers_.push_back(observer); }
  // The host each GPU's host streams run on (default: a host per GPU). Before begin().
  void set_hosts(std::vector<std::uint32_t> host_of_gpu);
  // GPU `gpu`'s clock under sustained load: kept busy, its SMs slow toward `factor` of the rate its
  // kernels were measured at (a power limit pulling the clock down), with time constant
  // `time_constant`; idle, they recover as fast. A computing stream's task starting while the GPU
  // has been busy for a fraction h of its recent past (h: the busy time filtered by the time
  // constant) runs 1 / (1 − (1 − factor)·h) times as long. Default: none (factor 1). Before begin().
  void set_sustained_clock(std::uint32_t gpu, double factor, Time time_constant);

  // Runs to completion: begin, advance until no event is left, finish.
  void run(CollectiveExecutor& executor);
  // Starts what can start at time 0.
  void begin(CollectiveExecutor& executor);
  // Processes events until `stop()` holds (checked before each; returns true) or none is left (false).
  bool advance(const std::function<bool()>& stop = {});
  // Aborts naming the first stuck task if any task has not finished (a deadlocked program).
  void finish();

  // For executors.
  void finish_collective_at(CollectiveId id, Time when);
  void set_timer(std::uint32_t token, Time when);
  Time now() const { return now_; }

  // A live (not yet retired) task or collective; null once retired.
  const Task* task(TaskId id) const { return tasks_.live(id) ? &tasks_[id] : nullptr; }
  const Collective* collective(CollectiveId id) const { return collectives_.live(id) ? &collectives_[id] : nullptr; }
  // Rank r's member task of a live collective (members are ranked in the order they were added).
  TaskId member(const Collective& c, std::uint32_t r) const { return members_[c.first_member + r]; }
  bool finished(TaskId id) const;
  // The last task added to a stream (kNone if none yet).
  TaskId stream_tail(std::uint32_t gpu, std::uint8_t stream) const { return streams_[index(gpu, stream)].tail; }
  // The earliest time a task running on `gpu` now began its work (a collective member: when its
  // collective started; one still waiting at the rendezvous begins later), or now() if none runs:
  // every task of the GPU that finishes from now on began at or after it.
  Time running_since(std::uint32_t gpu) const;

  std::uint32_t gpus() const { return gpus_; }
  std::uint8_t streams_per_gpu() const { return static_cast<std::uint8_t>(specs_.size()); }
  const std::vector<StreamSpec>& stream_specs() const { return specs_; }
  std::uint64_t task_count() const { return tasks_.end(); }
  std::uint64_t collective_count() const { return collectives_.end(); }
  std::size_t live_tasks() const { return tasks_.size(); }
  std::uint64_t events_processed() const { return events_; }
  Time makespan() const { return makespan_; }
  std::string describe(TaskId id) const;
  // When the launch thread issued a live task that has not started yet (-1: not yet issued).
  Time issued_at(TaskId id) const;
  // How long kernels on `gpu`'s computing streams were ready to run (dependencies met, first on
  // their stream) but not yet issued by its launch thread: the GPU's compute held up by its host
  // (two computing streams waiting at once count twice; a collective whose member is issued late
  // shows as the compute that waits for it).
  Time launch_wait(std::uint32_t gpu) const { return launchers_[gpu].waited; }

  // For the host-memory estimate (simulation/memory_estimate.hpp). A program's records, counted
  // per queue.
  struct Records {
    double tasks = 0, members = 0, collectives = 0, edges = 0;
  };
  // Bytes of the queues of a run that holds `held` records at once of the `written` it adds in
  // all (edges are never retired: freed ones are reused, so the most held is what is written),
  // each queue in its blocks and 2 MiB chunks (block_queue.hpp; `huge_pages`: core/huge_pages.hpp).
  static double program_bytes(const Records& held, const Records& written, bool huge_pages);
  // What an engine of `gpus` GPUs with `streams` streams each holds besides its program: per GPU
  // its streams, its SM share and host of its host streams (`hosts` hosts as set_hosts gives them,
  // 0: none beyond the engine's own one per GPU), a pending event per stream at most, and the
  // tasks added at once while running (`added_while_running`, an iteration written during the
  // previous one), and the tasks `pending` over all GPUs their launch threads may hold back at once
  // (written while the threads wait behind a read: up to every task a run holds).
  static double state_bytes(std::uint32_t gpus, std::size_t streams, std::uint32_t hosts, double added_while_running,
                            double pending = 0);

 private:
  // Launch: a task's launch thread has issued it (it was ready before).
  enum class EventType : std::uint8_t { TaskEnd, CollectiveEnd, Timer, Launch };
  struct Event {
    Time time;
    std::uint64_t seq;
    std::uint32_t id;
    std::uint32_t version;
    EventType type;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Stream {
    TaskId head = kNone;
    TaskId tail = kNone;
  };
  struct Edge {
    TaskId to;
    std::uint32_t next;
  };
  // A compute task whose rate changed (SM sharing): work left, in picoseconds at the full rate,
  // and the version of its pending end event (older ones are stale).
  struct Slowed {
    double remaining = 0;
    std::uint32_t version = 0;
  };
  // A GPU's launch thread: when it will have issued every task given to it so far, the synchronising
  // task it waits for (kNone: none) and how long after that task's end it resumes, and the tasks
  // added while it waits, in order (from `next` on), to issue when it resumes.
  struct Pending {
    TaskId id;
    Launch launch;
  };
  struct LaunchThread {
    Time free = 0;
    TaskId blocked_on = kNone;
    Time resume = 0;
    std::vector<Pending> pending;
    std::size_t next = 0;
    Time waited = 0;
    Time stalled_since = -1;  // a computing stream's task was ready, not issued, from then on
  };

  // A shared resource (a GPU's SMs, a host's CPU; see the header comment); `generic` while a rate
  // may differ from 1.
  struct GpuRate {
    double reserved = 0;
    std::uint32_t reservers = 0;
    std::uint32_t sharing = 0;
    bool generic = false;
    Time since = 0;
    double rate = 1;
  };

  std::size_t index(std::uint32_t gpu, std::uint8_t stream) const { return static_cast<std::size_t>(gpu) * specs_.size() + stream; }
  Task& at(TaskId id) { return tasks_[id]; }
  const Task& at(TaskId id) const { return tasks_[id]; }
  Collective& coll(CollectiveId id) { return collectives_[id]; }
  TaskId add_task(std::uint32_t gpu, std::uint8_t stream, Time duration, const Label& label, double sm_share,
                  const Launch& launch);
  // The launch thread of the task's GPU issues it now (it is the thread's next).
  void issue(TaskId id, const Launch& launch);
  // The task the launch thread of `gpu` waited for has finished: issue what was held back.
  void resume(std::uint32_t gpu);
  void push(Time time, std::uint32_t id, EventType type, std::uint32_t version = 0);
  void try_start(TaskId id);
  void finish_task(TaskId id);
  void start_fresh();
  void retire();
  // The resource a task shares (rates_ index: a GPU's SMs, then the hosts' CPUs), kNone if none.
  std::uint32_t resource_of(const Task& t) const {
    if (t.type != TaskType::Compute) return kNone;
    if (specs_[t.stream].computes && t.sm_share == 0) return t.gpu;
    if (specs_[t.stream].on_host) return gpus_ + host_of_gpu_[t.gpu];
    return kNone;
  }
  // Sharing: bring running tasks' work up to now, then set their new rate and ends.
  template <typename F>
  void for_running_shared(std::uint32_t resource, F f);
  void enter_generic(std::uint32_t resource);
  void settle(std::uint32_t resource);
  void reschedule(std::uint32_t resource);
  void reserve(const Task& t, int sign);

  std::uint32_t gpus_;
  std::vector<StreamSpec> specs_;
  BlockQueue<Task> tasks_;              // live tasks, by id
  BlockQueue<Collective, 10> collectives_;
  BlockQueue<TaskId, 14> members_;  // every collective's member tasks, in collective order
  std::vector<Stream> streams_;
  std::vector<GpuRate> rates_;                      // per GPU, then per host
  // A GPU's clock state (set_sustained_clock): its computing streams' running tasks and how busy
  // it has been (`heat`, at `since`).
  struct SustainedClock {
    double factor = 1;
    double time_constant = 0;  // ps
    double heat = 0;
    Time since = 0;
    std::uint32_t running = 0;
  };
  std::vector<SustainedClock> clocks_;  // per GPU; empty: no GPU has one
  // Brings the clock of `gpu` to now; its computing streams ran `running` tasks since it was last
  // brought.
  SustainedClock& warm(std::uint32_t gpu);
  // Whether task t heats its GPU's clock: a compute task on a computing stream, once some GPU has one.
  bool clocked(const Task& t) const { return !clocks_.empty() && t.type == TaskType::Compute && specs_[t.stream].computes; }
  std::vector<LaunchThread> launchers_;             // per GPU
  std::vector<std::uint32_t> host_of_gpu_;
  std::vector<std::vector<std::uint32_t>> host_gpus_;  // the GPUs of each host
  std::unordered_map<TaskId, Slowed> slowed_;
  BlockQueue<Edge, 14> edges_;  // never retired: freed edges are reused through free_edge_
  std::uint32_t free_edge_ = kNone;
  std::vector<TaskId> fresh_;  // added while running, not yet tried
  std::vector<TaskObserver*> observers_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, std::uint16_t> name_index_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> queue_;
  CollectiveExecutor* executor_ = nullptr;
  Time now_ = 0;
  Time makespan_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t events_ = 0;
  bool began_ = false;
};

}  // namespace moesim::engine
