#include "sim/schedule/schedule.hpp"

#include <algorithm>
#include <deque>

namespace moesim::schedule {

namespace {

// DualPipeV's order on rank r of p (dualpipev.py `step`, steps 1-8): each chunk's forwards and
// backwards take its microbatches in order.
std::vector<Unit> dualpipev_order(int r, int p, int m) {
  std::vector<Unit> out;
  int forwards[2] = {0, 0}, backwards[2] = {0, 0};
  const auto f = [&](int c) { out.push_back({true, c, forwards[c]++}); };
  const auto b = [&](int c, bool zero_bubble = false) {
    out.push_back({false, c, backwards[c]++});
    out.back().zero_bubble = zero_bubble;
  };
  const auto w = [&] { out.push_back({false, -1, -1, false, false, true}); };
  const auto fb = [&](int fc, int bc) {  // a forward written with a backward of the other chunk
    f(fc);
    out.back().with_next = true;
    b(bc);
  };
  const bool last = r == p - 1;
  for (int i = 0; i < 2 * (p - r - 1); ++i) f(0);         // 1: nF0
  for (int i = 0; i < r + 1; ++i) f(0), f(1);             // 2: nF0F1
  for (int i = 0; i < p - r - 1; ++i) b(1, true), w(), f(1);  // 3: nB1W1F1
  for (int i = 0; i < m - 2 * p + r + 1; ++i) {           // 4: nF0B1F1B0; the last rank's first F0, B1 apart
    if (i == 0 && last) f(0), b(1);
    else fb(0, 1);
    fb(1, 0);
  }
  for (int i = 0; i < p - r - 1; ++i) b(1), fb(1, 0);  // 5: nB1F1B0
  const int pairs = r + 1;                             // 6: nB1B0, the second half zero-bubble
  bool zero_bubble = false;
  for (int i = 0; i < pairs; ++i) {
    if (i == pairs / 2 && r % 2 == 1) zero_bubble = true;
    b(1, zero_bubble);
    if (i == pairs / 2 && r % 2 == 0) zero_bubble = true;
    b(0, zero_bubble);
  }
  for (int i = 0; i < p - r - 1; ++i) w(), b(0, true);  // 7: nWB0
  for (int i = 0; i < r + 1; ++i) w();                  // 8: nW
  return out;
}

// Megatron-Core's EP overlap: each forward followed by a backward of another microbatch is written
// with it.
void pair_forward_with_backward(std::vector<Unit>& order) {
  for (std::size_t i = 0; i + 1 < order.size(); ++i)
    if (order[i].forward && !order[i + 1].forward && order[i + 1].microbatch != order[i].microbatch) {
      order[i].with_next = true;
      ++i;
    }
}

// GPipe, 1F1B and interleaved 1F1B (schedule.hpp).
std::vector<Unit> ordered(parallel::PipelineSchedule schedule, int s, int p, int v, int m, bool ep_overlap) {
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

}  // namespace

std::vector<Unit> stage_order(parallel::PipelineSchedule schedule, int s, int p, int v, int m, bool ep_overlap) {
  if (schedule == parallel::PipelineSchedule::DualPipeV) return dualpipev_order(s, p, m);
  std::vector<Unit> out = ordered(schedule, s, p, v, m, ep_overlap);
  if (ep_overlap) pair_forward_with_backward(out);
  return out;
}

namespace {
// Walks `order`, calling held(u, change) as each unit adds (+1) or frees (−1) what it holds: a
// forward written with the backward after it comes as one step (with_next, `paired`), a zero-bubble
// backward frees nothing and its W, first in first out, frees it.
template <typename Held, typename Paired>
void walk(const std::vector<Unit>& order, Held held, Paired paired) {
  std::deque<const Unit*> waiting;  // zero-bubble backwards whose W has not run
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Unit& u = order[i];
    if (u.with_next && i + 1 < order.size()) {
      paired(u, order[++i]);
    } else if (u.weight) {
      held(*waiting.front(), -1);
      waiting.pop_front();
    } else if (u.zero_bubble) {
      waiting.push_back(&u);
    } else {
      held(u, u.forward ? 1 : -1);
    }
  }
}
}  // namespace

double peak_in_flight(const std::vector<Unit>& order, double layer) {
  double now = 0, peak = 0;
  walk(
      order,
      [&](const Unit&, int change) {
        now += change;
        peak = std::max(peak, now);
      },
      [&](const Unit&, const Unit&) { peak = std::max(peak, now + layer); });
  return peak;
}

double peak_at_loss(const std::vector<Unit>& order, int chunk) {
  double now = 0, peak = 0;
  walk(
      order,
      [&](const Unit& u, int change) {
        if (u.chunk == chunk) now += change;
        peak = std::max(peak, now);
      },
      [&](const Unit& f, const Unit& b) {
        if (b.chunk == chunk) --now;
        if (f.chunk == chunk) ++now;
        peak = std::max(peak, now);
      });
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
