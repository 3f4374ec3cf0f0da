#include "sim/report/metrics.hpp"

#include <algorithm>

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

}  // namespace

Metrics measure(const engine::Engine& eng, int iterations) {
  Metrics m;
  const auto& tasks = eng.tasks();
  const auto& colls = eng.collectives();
  m.makespan = eng.makespan();
  m.iteration_end.assign(iterations, 0);
  // Tasks of each GPU, by counting sort (the task list is ordered by creation, not by GPU).
  std::vector<std::uint32_t> offsets(eng.gpus() + 1, 0), order(tasks.size());
  for (const auto& t : tasks) ++offsets[t.gpu + 1];
  for (std::uint32_t g = 0; g < eng.gpus(); ++g) offsets[g + 1] += offsets[g];
  {
    std::vector<std::uint32_t> fill(offsets.begin(), offsets.end() - 1);
    for (std::uint32_t i = 0; i < tasks.size(); ++i) order[fill[tasks[i].gpu]++] = i;
  }
  m.gpus.resize(eng.gpus());
  std::vector<Interval> compute, comm;
  for (std::uint32_t g = 0; g < eng.gpus(); ++g) {
    GpuMetrics& gm = m.gpus[g];
    compute.clear();
    comm.clear();
    for (std::uint32_t i = offsets[g]; i < offsets[g + 1]; ++i) {
      const engine::Task& t = tasks[order[i]];
      if (t.label.iteration < iterations) m.iteration_end[t.label.iteration] = std::max(m.iteration_end[t.label.iteration], t.end);
      Interval span{t.start, t.end};
      if (t.type == engine::TaskType::CollectiveMember) {
        const engine::Collective& c = colls[t.collective];
        gm.collective_wait += c.start - t.start;
        span.first = c.start;
      }
      gm.busy[static_cast<int>(t.label.kind)] += span.second - span.first;
      (engine::is_communication(t.label.kind) ? comm : compute).push_back(span);
    }
    gm.compute = merge(compute);
    gm.communication = merge(comm);
    gm.exposed_communication = uncovered(comm, compute);
  }
  m.iteration_time.resize(iterations);
  for (int i = 0; i < iterations; ++i) m.iteration_time[i] = m.iteration_end[i] - (i ? m.iteration_end[i - 1] : 0);
  return m;
}

}  // namespace moesim::report
