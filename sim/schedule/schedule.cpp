#include "sim/schedule/schedule.hpp"

namespace moesim::schedule {

namespace {
std::vector<WorkItem> data_parallel(int layers, int microbatches) {
  std::vector<WorkItem> items;
  for (int mb = 0; mb < microbatches; ++mb) {
    const bool last = mb + 1 == microbatches;
    items.push_back({Work::Forward, Segment::Embedding, 0, mb});
    for (int l = 0; l < layers; ++l) items.push_back({Work::Forward, Segment::Layer, l, mb});
    items.push_back({Work::Forward, Segment::Head, layers, mb});
    items.push_back({Work::Backward, Segment::Head, layers, mb});
    for (int l = layers - 1; l >= 0; --l) {
      items.push_back({Work::Backward, Segment::Layer, l, mb});
      if (last) items.push_back({Work::SyncLayer, Segment::Layer, l, mb});
    }
    items.push_back({Work::Backward, Segment::Embedding, 0, mb});
  }
  items.push_back({Work::SyncRest, Segment::Layer, 0, microbatches - 1});
  items.push_back({Work::Optimizer, Segment::Layer, 0, microbatches - 1});
  return items;
}
std::vector<WorkItem> layer_major(int layers, int microbatches) {
  std::vector<WorkItem> items;
  const int last = layers - 1;
  for (int mb = 0; mb < microbatches; ++mb) items.push_back({Work::Forward, Segment::Embedding, 0, mb});
  for (int l = 0; l < last; ++l)
    for (int mb = 0; mb < microbatches; ++mb) items.push_back({Work::Forward, Segment::Layer, l, mb});
  for (int mb = 0; mb < microbatches; ++mb) {
    items.push_back({Work::Forward, Segment::Layer, last, mb});
    items.push_back({Work::Forward, Segment::Head, layers, mb});
    items.push_back({Work::Backward, Segment::Head, layers, mb});
    items.push_back({Work::Backward, Segment::Layer, last, mb});
  }
  items.push_back({Work::SyncLayer, Segment::Layer, last, microbatches - 1});
  for (int l = last - 1; l >= 0; --l) {
    for (int mb = 0; mb < microbatches; ++mb) items.push_back({Work::Backward, Segment::Layer, l, mb});
    items.push_back({Work::SyncLayer, Segment::Layer, l, microbatches - 1});
  }
  for (int mb = 0; mb < microbatches; ++mb) items.push_back({Work::Backward, Segment::Embedding, 0, mb});
  items.push_back({Work::SyncRest, Segment::Layer, 0, microbatches - 1});
  items.push_back({Work::Optimizer, Segment::Layer, 0, microbatches - 1});
  return items;
}
}  // namespace

std::vector<WorkItem> order(parallel::ScheduleKind kind, int layers, int microbatches) {
  switch (kind) {
    case parallel::ScheduleKind::DataParallel: return data_parallel(layers, microbatches);
    case parallel::ScheduleKind::LayerMajor: return layer_major(layers, microbatches);
  }
  return data_parallel(layers, microbatches);
}

}  // namespace moesim::schedule
