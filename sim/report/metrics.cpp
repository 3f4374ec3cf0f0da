#include "sim/report/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/core/heap.hpp"

namespace moesim::report {

namespace {

using Interval = std::pair<Time, Time>;

// Sorts and merges intervals in place; returns their total length.
Time merge(std::vector<Interval>& v) {
  std::sort(v.begin(), v.end());
  std::size_t out = 0;
  for (const Interval& iv : v) {
    if (iv.second <= iv.first) continue;
    if (out > 0 && iv.first <= v[out - 1].second) v[out - 1].second = std::max(v[out - 1].second, iv.second);
    else v[out++] = iv;
  }
  v.resize(out);
  Time total = 0;
  for (const Interval& iv : v) total += iv.second - iv.first;
  return total;
}

// Total length of intervals already merged (sorted, disjoint).
Time length(const std::vector<Interval>& v) {
  Time total = 0;
  for (const Interval& iv : v) total += iv.second - iv.first;
  return total;
}

// Length of `a` not covered by `b` (both merged).
Time uncovered(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  Time total = 0;
  std::size_t j = 0;
  for (const Interval& iv : a) {
    Time cursor = iv.first;
    while (j < b.size() && b[j].second <= cursor) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < iv.second; ++k) {
      if (b[k].first > cursor) total += b[k].first - cursor;
      cursor = std::max(cursor, b[k].second);
    }
    if (cursor < iv.second) total += iv.second - cursor;
  }
  return total;
}

// Moves the parts of `v` before `until` to `before`, keeping the rest in `v`.
void split(std::vector<Interval>& v, Time until, std::vector<Interval>& before) {
  before.clear();
  std::size_t kept = 0;
  for (const Interval& iv : v) {
    if (iv.first < until) before.emplace_back(iv.first, std::min(iv.second, until));
    if (iv.second > until) v[kept++] = {std::max(iv.first, until), iv.second};
  }
  v.resize(kept);
}

constexpr std::size_t kSettleEvery = 32;   // pending intervals per GPU before settling

}  // namespace

MetricsRecorder::MetricsRecorder(engine::Engine& engine, int iterations) : pending_(engine.gpus()) {
  m_.iteration_end.assign(iterations, 0);
  m_.gpus.resize(engine.gpus());
  engine.add_observer(this);
}

void MetricsRecorder::on_finish(const engine::Engine& engine, engine::TaskId, const engine::Task& t, Time began) {
  GpuMetrics& gm = m_.gpus[t.gpu];
  if (t.label.iteration < m_.iteration_end.size())
    m_.iteration_end[t.label.iteration] = std::max(m_.iteration_end[t.label.iteration], t.end);
  if (t.type == engine::TaskType::CollectiveMember) gm.collective_wait += began - t.start;
  gm.busy[static_cast<int>(t.label.kind)] += t.end - began;
  Pending& p = pending_[t.gpu];
  if (engine::is_communication(t.label.kind)) p.communication.emplace_back(began, t.end);
  else if (engine::on_gpu_compute(t.label.kind)) p.compute.emplace_back(began, t.end);
  if (p.compute.size() + p.communication.size() >= std::max(kSettleEvery, p.settle_at))
    settle(t.gpu, engine.running_since(t.gpu));
}

void MetricsRecorder::settle(std::uint32_t g, Time until) {
  Pending& p = pending_[g];
  GpuMetrics& gm = m_.gpus[g];
  merge(p.compute);
  merge(p.communication);
  // Split merged lists stay merged: their parts before `until` are final.
  split(p.compute, until, compute_before_);
  split(p.communication, until, communication_before_);
  gm.compute += length(compute_before_);
  gm.communication += length(communication_before_);
  gm.exposed_communication += uncovered(communication_before_, compute_before_);
  p.settle_at = 2 * (p.compute.size() + p.communication.size());
}

double MetricsRecorder::memory_estimate(std::uint32_t gpus, double tasks_per_gpu) {
  // Per GPU: its metrics here and in the result, its pending lists, and in them (compute and
  // communication, about half each) the intervals waiting to be settled, grown by push_back.
  const double pending = grown_capacity(std::min<double>(kSettleEvery, std::ceil(tasks_per_gpu / 2)));
  return gpus * (2.0 * sizeof(GpuMetrics) + sizeof(Pending) + 2 * heap_block_bytes(pending * sizeof(Interval)));
}

Metrics MetricsRecorder::result(const engine::Engine& engine) {
  for (std::uint32_t g = 0; g < pending_.size(); ++g) settle(g, std::numeric_limits<Time>::max());
  m_.makespan = engine.makespan();
  for (std::uint32_t g = 0; g < m_.gpus.size(); ++g) m_.gpus[g].launch_wait = engine.launch_wait(g);
  const std::size_t iterations = m_.iteration_end.size();
  m_.iteration_time.resize(iterations);
  for (std::size_t i = 0; i < iterations; ++i)
    m_.iteration_time[i] = m_.iteration_end[i] - (i ? m_.iteration_end[i - 1] : 0);
  return m_;
}

}  // namespace moesim::report
