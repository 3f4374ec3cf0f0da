// The event engine: stream order, dependencies, collective rendezvous, a hand-computed timeline.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <map>

#include "sim/engine/engine.hpp"
#include "sim/engine/task_log.hpp"
#include "sim/report/metrics.hpp"

using namespace moesim;
using namespace moesim::engine;

namespace {
// Every collective takes a fixed duration once its last member has arrived.
class FixedExecutor : public CollectiveExecutor {
 public:
  explicit FixedExecutor(std::map<CollectiveId, Time> d) : durations_(std::move(d)) {}
  void start(Engine& e, CollectiveId id, Time now) override {
    starts.push_back(id);
    e.finish_collective_at(id, now + durations_.at(id));
  }
  std::vector<CollectiveId> starts;

 private:
  std::map<CollectiveId, Time> durations_;
};

Label label(WorkKind kind) {
  Label l;
  l.kind = kind;
  return l;
}
}  // namespace

TEST(Engine, TwoGpuTimelineWithOverlapComputedByHand) {
  // GPU 0: A (10) on compute; all-to-all X on stream 1 after A; C (20) on compute, independent
  //        of X, so it overlaps X; D (5) after X.
  // GPU 1: B (25) on compute; X after B; E (40) on compute after B.
  // By hand: A 0–10, B 0–25. X members arrive at 10 (GPU 0) and 25 (GPU 1): X runs 25–55.
  // C 10–30 overlaps X; D waits for X: 55–60. E 25–65. Makespan 65.
  Engine e(2, 2);
  const TaskId a = e.add_compute(0, 0, 10, label(WorkKind::Attention));
  const TaskId b = e.add_compute(1, 0, 25, label(WorkKind::Attention));
  const CollectiveId x = e.add_collective(2, WorkKind::AllToAll);
  const TaskId x0 = e.add_member(x, 0, 1, label(WorkKind::AllToAll));
  const TaskId x1 = e.add_member(x, 1, 1, label(WorkKind::AllToAll));
  e.depend(a, x0);
  e.depend(b, x1);
  const TaskId c = e.add_compute(0, 0, 20, label(WorkKind::Expert));
  const TaskId d = e.add_compute(0, 0, 5, label(WorkKind::Expert));
  e.depend(x0, d);
  const TaskId ee = e.add_compute(1, 0, 40, label(WorkKind::Expert));
  FixedExecutor fx({{x, 30}});
  TaskLog log(e);
  report::MetricsRecorder recorder(e, 1);
  e.run(fx);
  const auto& t = log.tasks();
  EXPECT_EQ(t[a].start, 0);
  EXPECT_EQ(t[a].end, 10);
  EXPECT_EQ(t[c].start, 10);
  EXPECT_EQ(t[c].end, 30);
  EXPECT_EQ(log.collectives()[x].start, 25);
  EXPECT_EQ(log.collectives()[x].end, 55);
  EXPECT_EQ(t[x0].start, 10);  // arrival
  EXPECT_EQ(t[x0].end, 55);
  EXPECT_EQ(t[d].start, 55);
  EXPECT_EQ(t[d].end, 60);
  EXPECT_EQ(t[ee].start, 25);
  EXPECT_EQ(t[ee].end, 65);
  EXPECT_EQ(e.makespan(), 65);

  // GPU 0: communication 25–55, compute 0–30 and 55–60: exposed = 55 − 30 = 25; it waited
  // 15 at the rendezvous (10 → 25). GPU 1: communication 25–55 hidden behind E (25–65).
  const auto m = recorder.result(e);
  EXPECT_EQ(m.gpus[0].exposed_communication, 25);
  EXPECT_EQ(m.gpus[0].collective_wait, 15);
  EXPECT_EQ(m.gpus[0].compute, 35);
  EXPECT_EQ(m.gpus[1].exposed_communication, 0);
  EXPECT_EQ(m.gpus[1].collective_wait, 0);
  EXPECT_EQ(m.gpus[0].busy[static_cast<int>(WorkKind::AllToAll)], 30);
  EXPECT_EQ(m.iteration_time[0], 65);
}

TEST(Engine, RendezvousWaitsForTheLastMember) {
  // Members become ready at 5, 17 and 3: the collective starts at 17 and all end together.
  Engine e(3, 2);
  const CollectiveId x = e.add_collective(3, WorkKind::AllReduce);
  const Time ready[3] = {5, 17, 3};
  std::vector<TaskId> members;
  for (std::uint32_t g = 0; g < 3; ++g) {
    const TaskId pre = e.add_compute(g, 0, ready[g], label(WorkKind::OtherCompute));
    members.push_back(e.add_member(x, g, 1, label(WorkKind::AllReduce)));
    e.depend(pre, members.back());
  }
  FixedExecutor fx({{x, 100}});
  TaskLog log(e);
  e.run(fx);
  EXPECT_EQ(log.collectives()[x].start, 17);
  for (std::uint32_t g = 0; g < 3; ++g) {
    EXPECT_EQ(log.tasks()[members[g]].start, ready[g]);
    EXPECT_EQ(log.tasks()[members[g]].end, 117);
  }
}

TEST(Engine, StreamsAreInOrderAndIndependent) {
  // Two tasks on one stream run back to back; a task on another stream of the same GPU runs at
  // once, in parallel.
  Engine e(1, 2);
  const TaskId a = e.add_compute(0, 0, 7, label(WorkKind::Expert));
  const TaskId b = e.add_compute(0, 0, 3, label(WorkKind::Expert));
  const TaskId c = e.add_compute(0, 1, 4, label(WorkKind::HostCopy));
  FixedExecutor fx({});
  TaskLog log(e);
  e.run(fx);
  EXPECT_EQ(log.tasks()[b].start, 7);
  EXPECT_EQ(log.tasks()[b].end, 10);
  EXPECT_EQ(log.tasks()[c].start, 0);
  EXPECT_EQ(log.tasks()[c].end, 4);
  EXPECT_EQ(log.tasks()[a].end, 7);
}

TEST(Engine, EqualTimesRunInInsertionOrder) {
  // Two collectives become ready at the same instant; the one whose member was added first starts
  // first, every time.
  for (int repeat = 0; repeat < 3; ++repeat) {
    Engine e(2, 3);
    const CollectiveId x = e.add_collective(2, WorkKind::AllToAll);
    const CollectiveId y = e.add_collective(2, WorkKind::AllGather);
    for (std::uint32_t g = 0; g < 2; ++g) {
      const TaskId pre = e.add_compute(g, 0, 10, label(WorkKind::Gate));
      e.depend(pre, e.add_member(x, g, 1, label(WorkKind::AllToAll)));
      e.depend(pre, e.add_member(y, g, 2, label(WorkKind::AllGather)));
    }
    FixedExecutor fx({{x, 5}, {y, 5}});
    e.run(fx);
    ASSERT_EQ(fx.starts.size(), 2u);
    EXPECT_EQ(fx.starts[0], x);
    EXPECT_EQ(fx.starts[1], y);
  }
}

TEST(EngineDeathTest, DeadlockNamesTheStuckTask) {
  // A collective whose second member waits on a task that waits on the collective.
  EXPECT_DEATH(
      {
        Engine e(2, 2);
        const CollectiveId x = e.add_collective(2, WorkKind::AllToAll);
        const TaskId m0 = e.add_member(x, 0, 1, label(WorkKind::AllToAll));
        const TaskId after = e.add_compute(1, 0, 1, label(WorkKind::Expert));
        const TaskId m1 = e.add_member(x, 1, 1, label(WorkKind::AllToAll));
        e.depend(m0, after);
        e.depend(after, m1);
        FixedExecutor fx({{x, 1}});
        e.run(fx);
      },
      "deadlock.*collective 0 \\(1 of 2 members arrived\\)");
}

namespace {
// One GPU: stream 0 computes, stream 1 is a communication stream (its compute tasks keep their
// duration: a fixed delay here).
struct SmCase {
  Engine e{1, 2};
  TaskLog log{e};
  FixedExecutor fx{{}};
};
}  // namespace

TEST(EngineSmSharing, ReservingKernelStretchesTheOverlappingGemmByTheShareItTakes) {
  // A 10 ms GeMM on the compute stream from 0; from 2 ms to 6 ms a kernel reserving 25 % of the
  // SMs (after a 2 ms delay on the other stream). By hand: 2 ms of the GeMM's work at full rate;
  // 4 ms at 0.75 do 3 ms of work; the 5 ms left run at full rate from 6 ms: the GeMM ends at
  // 11 ms, stretched by 4 ms × 0.25 = 1 ms. The reserving kernel keeps its own 4 ms.
  SmCase c;
  const TaskId gemm = c.e.add_compute(0, 0, 10 * kMillisecond, label(WorkKind::Expert));
  c.e.add_compute(0, 1, 2 * kMillisecond, label(WorkKind::Wait));
  const TaskId fused = c.e.add_compute(0, 1, 4 * kMillisecond, label(WorkKind::AllToAll), 0.25);
  c.e.run(c.fx);
  EXPECT_EQ(c.log.tasks()[gemm].end, 11 * kMillisecond);
  EXPECT_EQ(c.log.tasks()[fused].start, 2 * kMillisecond);
  EXPECT_EQ(c.log.tasks()[fused].end, 6 * kMillisecond);
}

TEST(EngineSmSharing, ReservationsAddUpAndComputeStartingUnderThemIsSlowedFromItsStart) {
  // Kernels reserving 0.5 (0–4 ms) and 0.25 (1–3 ms) on two communication streams; on the compute
  // stream a GeMM of 1 ms of work, then one of 6 ms. By hand: the first runs at 0.5 from 0 to 1 ms
  // (0.5 ms of work) and at 1 − 0.75 = 0.25 from 1 ms, so its last 0.5 ms of work take until 3 ms.
  // The second starts at 3 ms, runs at 0.5 until 4 ms (0.5 ms of work), then the 5.5 ms left at
  // full rate: it ends at 9.5 ms.
  Engine e(1, 3);
  TaskLog log(e);
  FixedExecutor fx({});
  e.add_compute(0, 1, 4 * kMillisecond, label(WorkKind::AllToAll), 0.5);
  e.add_compute(0, 2, 1 * kMillisecond, label(WorkKind::Wait));
  e.add_compute(0, 2, 2 * kMillisecond, label(WorkKind::AllToAll), 0.25);
  e.add_compute(0, 0, 1 * kMillisecond, label(WorkKind::Expert));
  const TaskId gemm = e.add_compute(0, 0, 6 * kMillisecond, label(WorkKind::Expert));
  e.run(fx);
  EXPECT_EQ(log.tasks()[gemm].start, 3 * kMillisecond);
  EXPECT_EQ(log.tasks()[gemm].end, 9500 * kMicrosecond);
}

TEST(EngineSmSharing, ComputeOnTwoComputeStreamsSharesTheGpu) {
  // Two computing streams: kernels of 4 ms and 2 ms start together and share the SMs (rate 1/2
  // each): the short one ends at 4 ms, then the long one, with 2 ms of work left, at 6 ms.
  Engine e(1, std::vector<StreamSpec>{{"compute", true}, {"compute 2", true}});
  TaskLog log(e);
  FixedExecutor fx({});
  const TaskId a = e.add_compute(0, 0, 4 * kMillisecond, label(WorkKind::Expert));
  const TaskId b = e.add_compute(0, 1, 2 * kMillisecond, label(WorkKind::Attention));
  e.run(fx);
  EXPECT_EQ(log.tasks()[b].end, 4 * kMillisecond);
  EXPECT_EQ(log.tasks()[a].end, 6 * kMillisecond);
}

TEST(EngineSmSharing, ACollectiveMemberReservesFromItsArrivalToTheCollectiveEnd) {
  // A communication kernel that polls for its peers holds its SMs while it waits: GPU 0's member
  // (share 0.5) arrives at 0, GPU 1's at 2 ms; the collective takes 1 ms (2–3 ms). GPU 0's 4 ms
  // GeMM runs at 0.5 from 0 to 3 ms (1.5 ms of work) and ends 2.5 ms later, at 5.5 ms.
  Engine e(2, 2);
  TaskLog log(e);
  const CollectiveId x = e.add_collective(2, WorkKind::AllToAll);
  e.add_member(x, 0, 1, label(WorkKind::AllToAll), 0.5);
  const TaskId late = e.add_compute(1, 0, 2 * kMillisecond, label(WorkKind::Gate));
  e.depend(late, e.add_member(x, 1, 1, label(WorkKind::AllToAll)));
  const TaskId gemm = e.add_compute(0, 0, 4 * kMillisecond, label(WorkKind::Expert));
  FixedExecutor fx({{x, 1 * kMillisecond}});
  e.run(fx);
  EXPECT_EQ(log.collectives()[x].end, 3 * kMillisecond);
  EXPECT_EQ(log.tasks()[gemm].end, 5500 * kMicrosecond);
}

TEST(Engine, TasksAppendedWhileRunningStartAfterTheFinishedOnesTheyDependOn) {
  // A 5 ps task runs; at time 5 (after it finished) a task depending on it and one behind it on
  // the same stream are appended: the dependency is met at once, both run 5–8 and 8–10.
  Engine e(1, 2);
  TaskLog log(e);
  FixedExecutor fx({});
  const TaskId a = e.add_compute(0, 0, 5, label(WorkKind::Expert));
  e.begin(fx);
  EXPECT_TRUE(e.advance([&] { return e.finished(a); }));
  const TaskId b = e.add_compute(0, 1, 3, label(WorkKind::Expert));
  e.depend(a, b);
  const TaskId c = e.add_compute(0, 0, 2, label(WorkKind::Expert));
  e.depend(b, c);
  EXPECT_FALSE(e.advance());
  e.finish();
  EXPECT_EQ(log.tasks()[b].start, 5);
  EXPECT_EQ(log.tasks()[b].end, 8);
  EXPECT_EQ(log.tasks()[c].end, 10);
  // Finished tasks are retired: nothing is held after the run.
  EXPECT_EQ(e.live_tasks(), 0u);
  EXPECT_EQ(e.task_count(), 3u);
}

TEST(EngineSmSharing, TasksOnHostStreamsShareTheirHostsCpu) {
  // GPUs 0 and 1 share host 0, GPU 2 has host 1. 2 ms of CPU work for each GPU, started together:
  // the two on host 0 run at 1/2 and end at 4 ms; GPU 2's, alone on its host, at 2 ms. The GPUs'
  // own compute is untouched.
  Engine e(3, std::vector<StreamSpec>{{"compute", true, false}, {"host cpu", false, true}});
  e.set_hosts({0, 0, 1});
  TaskLog log(e);
  FixedExecutor fx({});
  const TaskId a = e.add_compute(0, 1, 2 * kMillisecond, label(WorkKind::HostCompute));
  const TaskId b = e.add_compute(1, 1, 2 * kMillisecond, label(WorkKind::HostCompute));
  const TaskId c = e.add_compute(2, 1, 2 * kMillisecond, label(WorkKind::HostCompute));
  const TaskId gemm = e.add_compute(0, 0, 3 * kMillisecond, label(WorkKind::Expert));
  e.run(fx);
  EXPECT_EQ(log.tasks()[a].end, 4 * kMillisecond);
  EXPECT_EQ(log.tasks()[b].end, 4 * kMillisecond);
  EXPECT_EQ(log.tasks()[c].end, 2 * kMillisecond);
  EXPECT_EQ(log.tasks()[gemm].end, 3 * kMillisecond);
}

// The host launches the GPU's work: one launch thread per GPU issues its tasks in the order they
// are added (engine.hpp).
namespace {
// One GPU's chain of kernels of `kernel` each, kernel i launched in launches[i]: the engine run,
// its log.
struct Chain {
  Engine e{1, 1};
  TaskLog log{e};
  std::vector<TaskId> k;
  Chain(Time kernel, const std::vector<Time>& launches) {
    FixedExecutor fx({});
    for (const Time launch : launches)
      k.push_back(e.add_compute(0, 0, kernel, label(WorkKind::OtherCompute), 0, Launch{launch}));
    e.run(fx);
  }
};
constexpr Time us = kMicrosecond;
}  // namespace

TEST(EngineLaunch, KernelsShorterThanTheirLaunchRunAtTheLaunchRate) {
  // Five 2 us kernels, each launched in 5 us: kernel i is issued at 5(i + 1) us and starts then
  // (its predecessor ended at 5i + 2): the chain ends at 25 + 2 = 27 us, not at 10 us. The GPU
  // waited 5 us for the first and 3 us for each of the four others: 17 us.
  const Chain c(2 * us, {5 * us, 5 * us, 5 * us, 5 * us, 5 * us});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(c.log.tasks()[c.k[i]].start, 5 * (i + 1) * kMicrosecond) << i;
  EXPECT_EQ(c.e.makespan(), 27 * kMicrosecond);
  EXPECT_EQ(c.e.launch_wait(0), 17 * kMicrosecond);
}

TEST(EngineLaunch, AGraphReplayIssuesEveryKernelAtOnce) {
  // The same five kernels captured in one CUDA graph: the replay costs 10 us and issues all of
  // them; they then run back to back, 10-20 us. The GPU waited 10 us, for the replay.
  const Chain c(2 * us, {10 * us, 0, 0, 0, 0});
  EXPECT_EQ(c.e.makespan(), 20 * kMicrosecond);
  EXPECT_EQ(c.e.launch_wait(0), 10 * kMicrosecond);
}

TEST(EngineLaunch, KernelsLongerThanTheirLaunchHideAllButTheFirst) {
  // Three 10 us kernels launched in 4 us each are issued at 4, 8 and 12 us; each after the first
  // was issued before its predecessor ended: 4-14, 14-24, 24-34 us; only the first launch shows.
  const Chain c(10 * us, {4 * us, 4 * us, 4 * us});
  EXPECT_EQ(c.e.makespan(), 34 * kMicrosecond);
  EXPECT_EQ(c.e.launch_wait(0), 4 * kMicrosecond);
}

TEST(EngineLaunch, ASyncStopsTheLaunchThreadUntilTheReadReturns) {
  // Kernel A (10 us, launched in 2 us), a device-to-host read S (1 us, launched in 2 us; the host
  // then waits for it and 20 us more), kernel B (5 us, launched in 3 us). A is issued at 2 and
  // runs 2-12; S is issued at 4 and runs 12-13; the thread resumes at 13 + 20 = 33 and issues B
  // at 36: B runs 36-41. The GPU waited 2 us for A and 36 - 13 = 23 us for B.
  Engine e(1, 1);
  TaskLog log(e);
  FixedExecutor fx({});
  const TaskId a = e.add_compute(0, 0, 10 * kMicrosecond, label(WorkKind::Gate), 0, Launch{2 * kMicrosecond});
  const TaskId s = e.add_compute(0, 0, 1 * kMicrosecond, label(WorkKind::OtherCompute), 0,
                                 Launch{2 * kMicrosecond, 20 * kMicrosecond});
  const TaskId b = e.add_compute(0, 0, 5 * kMicrosecond, label(WorkKind::Expert), 0, Launch{3 * kMicrosecond});
  EXPECT_EQ(e.issued_at(b), -1);  // held back: the thread has not passed the read
  e.run(fx);
  EXPECT_EQ(log.tasks()[a].end, 12 * kMicrosecond);
  EXPECT_EQ(log.tasks()[s].end, 13 * kMicrosecond);
  EXPECT_EQ(log.tasks()[b].start, 36 * kMicrosecond);
  EXPECT_EQ(e.makespan(), 41 * kMicrosecond);
  EXPECT_EQ(e.launch_wait(0), 25 * kMicrosecond);
}

TEST(EngineLaunch, EachGpuHasItsOwnThreadAndACollectiveWaitsForItsLastIssuedMember) {
  // GPU 0 launches a 1 us kernel in 30 us before its all-to-all member (launched in 5 us); GPU 1
  // launches only its member (5 us). GPU 1's member is issued at 5 us, GPU 0's at 35 us: the 10 us
  // all-to-all runs 35-45 us. A read after GPU 0's member (launched in 15 us, 4 us to wake) is
  // issued at 35 + 15 = 50 us and runs 50-51 us. A kernel appended at 45 us, while the thread waits
  // behind the read, is held back and issued when the thread resumes: at 51 + 4 + 1 = 56 us.
  Engine e(2, 2);
  TaskLog log(e);
  const CollectiveId x = e.add_collective(2, WorkKind::AllToAll);
  e.add_compute(0, 0, 1 * kMicrosecond, label(WorkKind::Gate), 0, Launch{30 * kMicrosecond});
  e.add_member(x, 0, 1, label(WorkKind::AllToAll), 0, Launch{5 * kMicrosecond});
  e.add_member(x, 1, 1, label(WorkKind::AllToAll), 0, Launch{5 * kMicrosecond});
  const TaskId read = e.add_compute(0, 0, 1 * kMicrosecond, label(WorkKind::OtherCompute), 0,
                                    Launch{15 * kMicrosecond, 4 * kMicrosecond});
  e.depend(e.stream_tail(0, 1), read);
  FixedExecutor fx({{x, 10 * kMicrosecond}});
  e.begin(fx);
  EXPECT_TRUE(e.advance([&] { return e.now() >= 40 * kMicrosecond; }));
  const TaskId late = e.add_compute(0, 0, 2 * kMicrosecond, label(WorkKind::Expert), 0, Launch{1 * kMicrosecond});
  EXPECT_EQ(e.issued_at(late), -1);
  EXPECT_FALSE(e.advance());
  e.finish();
  EXPECT_EQ(log.collectives()[x].start, 35 * kMicrosecond);
  EXPECT_EQ(log.collectives()[x].end, 45 * kMicrosecond);
  EXPECT_EQ(log.tasks()[read].start, 50 * kMicrosecond);
  EXPECT_EQ(log.tasks()[read].end, 51 * kMicrosecond);
  EXPECT_EQ(log.tasks()[late].start, 56 * kMicrosecond);
}

TEST(EngineLaunch, ATaskHeldBehindAReadThatNeverEndsSaysWhy) {
  // The read waits for a collective member that no other GPU joins: the kernel after it is never
  // issued, and its description (what a deadlock report prints) says why.
  Engine e(2, 2);
  const CollectiveId x = e.add_collective(2, WorkKind::AllToAll);
  const TaskId m = e.add_member(x, 0, 1, label(WorkKind::AllToAll));
  const TaskId read = e.add_compute(0, 0, 1, label(WorkKind::OtherCompute), 0, Launch{1, 1});
  e.depend(m, read);
  const TaskId held = e.add_compute(0, 0, 1, label(WorkKind::Expert), 0, Launch{1});
  FixedExecutor fx({});
  e.begin(fx);
  EXPECT_FALSE(e.advance());
  EXPECT_FALSE(e.finished(held));
  EXPECT_NE(e.describe(held).find(fmt::format("not yet issued: GPU 0's launch thread waits for task {} to finish", read)),
            std::string::npos)
      << e.describe(held);
}

#include "sim/engine/block_queue.hpp"

namespace moesim::engine {
namespace {

TEST(BlockQueue, RecordsKeepTheirNumbersAndRetiredBlocksAreReused) {
  // Blocks of 4 records. Push 12 (blocks 0-2), retire the first 8: blocks 0 and 1 are given
  // back, and the next two blocks pushed (records 12-19) reuse their storage, latest first.
  BlockQueue<std::uint64_t, 2> q;
  std::vector<const std::uint64_t*> address;
  for (std::uint64_t i = 0; i < 12; ++i) {
    q.push_back() = 100 + i;
    address.push_back(&q[i]);
  }
  for (int i = 0; i < 8; ++i) q.pop_front();
  EXPECT_EQ(q.front(), 8u);
  EXPECT_FALSE(q.live(7));
  for (std::uint64_t i = 12; i < 20; ++i) q.push_back() = 100 + i;
  for (std::uint64_t i = 8; i < 20; ++i) EXPECT_EQ(q[i], 100 + i);
  EXPECT_EQ(&q[12], address[4]);  // block 1's storage
  EXPECT_EQ(&q[16], address[0]);  // block 0's
  // The first block is a chunk of its own (small pages: a small run touches no 2 MiB); the
  // second starts a 2 MiB-aligned chunk, which the third follows inside.
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(address[4]) % (2u << 20), 0u);
  EXPECT_EQ(address[8], address[4] + 4);
}

}  // namespace
}  // namespace moesim::engine

TEST(Engine, ABusyGpuSlowsToItsSustainedClockAndRecoversWhenIdle) {
  // One GPU whose clock settles at half its rate when kept busy, time constant τ; three tasks of
  // d = τ·ln 2 (so e^(−d/τ) = 1/2) back to back on its compute stream, then one after an idle gap
  // of 2τ (a dependency on a task of another stream: a second stream computes nothing, so it does
  // not heat the GPU).
  constexpr Time tau = 1'000'000'000;  // 1 ms
  const Time d = static_cast<Time>(std::llround(tau * std::log(2.0)));
  Engine e(1, 2);
  e.set_sustained_clock(0, 0.5, tau);
  const TaskId a = e.add_compute(0, 0, d, label(WorkKind::Expert));
  const TaskId b = e.add_compute(0, 0, d, label(WorkKind::Expert));
  const TaskId c = e.add_compute(0, 0, d, label(WorkKind::Expert));
  const TaskId wait = e.add_compute(0, 1, 0, label(WorkKind::HostCopy));
  const TaskId gap = e.add_compute(0, 1, 2 * tau, label(WorkKind::HostCopy));
  const TaskId late = e.add_compute(0, 0, d, label(WorkKind::Expert));
  e.depend(c, wait);
  e.depend(wait, gap);
  e.depend(gap, late);
  FixedExecutor fx({});
  TaskLog log(e);
  e.run(fx);
  const auto took = [&](TaskId t) { return static_cast<double>(log.tasks()[t].end - log.tasks()[t].start); };
  // a starts cold (heat 0): its measured d. By its end the heat is 1 − e^(−d/τ) = 1/2, so b runs
  // d / (1 − 0.5·0.5) = 4d/3; after b the heat is 1 − (1/2)·e^(−4d/(3τ)) = 1 − 2^(−7/3), and c runs
  // d / (1 − 0.5·h).
  EXPECT_EQ(log.tasks()[a].end - log.tasks()[a].start, d);
  EXPECT_NEAR(took(b), 4.0 * d / 3, 1);
  const double h_c = 1 - std::pow(2.0, -7.0 / 3);
  EXPECT_NEAR(took(c), d / (1 - 0.5 * h_c), 1);
  // After c the heat is 1 − (1 − h_c)·e^(−took(c)/τ); two time constants idle leave e^(−2) of it.
  const double h_end = 1 - (1 - h_c) * std::exp(-took(c) / tau);
  const double h_late = h_end * std::exp(-2.0);
  EXPECT_NEAR(took(late), d / (1 - 0.5 * h_late), 1);
  EXPECT_LT(took(late), took(c));  // the GPU recovered while it waited
}
