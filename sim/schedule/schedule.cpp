#include "sim/schedule/schedule.hpp"

#include <algorithm>

namespace moesim::schedule {

std::vector<Unit> stage_order(parallel::PipelineSchedule schedule, int s, int p, int v, int m, bool ep_overlap) {
  std::vector<Unit> out;
  if (schedule == parallel::PipelineSchedule::GPipe) {
    for (int mb = 0; mb < m; ++mb) out.push_back({true, 0, mb});
    for (int mb = 0; mb < m; ++mb) out.push_back({false, 0, mb});
    return out;
  }
  if (schedule == parallel::PipelineSchedule::OneFOneB) v = 1;
  const int total = m * v;
  // The k-th forward or backward of this stage: its chunk and microbatch.
  const auto unit = [&](int k, bool forward) {
    const int in_group = (k / p) % v;
    return Unit{forward, forward ? in_group : v - 1 - in_group, (k / (p * v)) * p + k % p};
  };
  int warmup = schedule == parallel::PipelineSchedule::OneFOneB ? p - s - 1 : (p - s - 1) * 2 + (v - 1) * p;
  if (ep_overlap && p == 1) warmup = std::max(warmup, 1);
  warmup = std::min(warmup, total);
  if (schedule == parallel::PipelineSchedule::OneFOneB) {
    // One chunk: the k-th unit is microbatch k.
    for (int k = 0; k < warmup; ++k) out.push_back({true, 0, k});
    for (int i = 0; i < total - warmup; ++i) {
      out.push_back({true, 0, warmup + i});
      out.push_back({false, 0, i});
    }
    for (int k = total - warmup; k < total; ++k) out.push_back({false, 0, k});
    return out;
  }
  for (int k = 0; k < warmup; ++k) out.push_back(unit(k, true));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(unit(warmup + i, true));
    out.push_back(unit(i, false));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(unit(k, false));
  return out;
}

double peak_in_flight(const std::vector<Unit>& order, bool ep_overlap, double layer) {
  double now = 0, peak = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Unit& u = order[i];
    const Unit* next = i + 1 < order.size() ? &order[i + 1] : nullptr;
    if (ep_overlap && u.forward && next && !next->forward && next->microbatch != u.microbatch) {
      peak = std::max(peak, now + layer);
      ++i;
      continue;
    }
    now += u.forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

std::vector<WorkItem> layer_major(int layers, int microbatches) {
  std::vector<WorkItem> items;
  const int last = layers - 1, final_mb = microbatches - 1;
  const auto each = [&](Work work, Segment segment, int layer) {
    for (int mb = 0; mb < microbatches; ++mb) items.push_back({work, segment, layer, mb});
  };
  each(Work::Forward, Segment::Embedding, 0);
  for (int l = 0; l < layers; ++l) {
    each(Work::Forward, Segment::Layer, l);
    each(Work::Deferred, Segment::Layer, l);
  }
  for (int mb = 0; mb < microbatches; ++mb) {
    items.push_back({Work::Forward, Segment::Head, layers, mb});
    items.push_back({Work::Backward, Segment::Head, layers, mb});
    items.push_back({Work::Backward, Segment::Layer, last, mb});
  }
  each(Work::Deferred, Segment::Layer, last);
  for (int l = last - 1; l >= 0; --l) {
    each(Work::Backward, Segment::Layer, l);
    items.push_back({Work::SyncLayer, Segment::Layer, l + 1, final_mb});
    each(Work::Deferred, Segment::Layer, l);
  }
  each(Work::Backward, Segment::Embedding, 0);
  items.push_back({Work::SyncLayer, Segment::Layer, 0, final_mb});
  items.push_back({Work::SyncRest, Segment::Layer, 0, final_mb});
  items.push_back({Work::Optimizer, Segment::Layer, 0, final_mb});
  return items;
}

}  // namespace moesim::schedule
