#include "sim/blocks/weight_gradients.hpp"

#include "sim/core/error.hpp"

namespace moesim::blocks {

void WeightGradientStore::flush(int stage, int microbatch, bool last_microbatch, std::vector<int> layers) {
  if (static_cast<int>(queues_.size()) <= stage) queues_.resize(stage + 1);
  queues_[stage].push_back({microbatch, last_microbatch, std::move(layers), std::move(cache_)});
  cache_.clear();
}

WeightGradientStore::Chunk WeightGradientStore::pop(int stage) {
  if (static_cast<int>(queues_.size()) <= stage || queues_[stage].empty())
    invariant_failed("a W step with no zero-bubble backward before it");
  Chunk c = std::move(queues_[stage].front());
  queues_[stage].pop_front();
  return c;
}

bool WeightGradientStore::empty() const {
  for (const auto& q : queues_)
    if (!q.empty()) return false;
  return cache_.empty();
}

engine::TaskId backward_compute(Emission& em, std::uint32_t g, compute::Work work, const compute::Work& wgrad,
                                const engine::Label& label, std::string_view wgrad_name, engine::TaskId after) {
  if (em.weight_gradients && wgrad.time > 0) {
    work.time -= wgrad.time;
    work.kernels -= wgrad.kernels;
    em.weight_gradients->put({g, em.pb.module(),
                              em.label(engine::Phase::Backward, label.kind, wgrad_name, label.layer, label.microbatch,
                                       label.chunk),
                              wgrad});
  }
  return em.pb.compute(g, work, label, after);
}

}  // namespace moesim::blocks
