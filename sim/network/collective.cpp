#include "sim/network/collective.hpp"

#include <fmt/format.h>
#include <string>

#include "sim/core/error.hpp"
#include "sim/core/heap.hpp"
#include "sim/network/executor.hpp"

namespace moesim::network {

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::P2P: return "p2p";
    case CollectiveKind::HostCopy: return "host_copy";
    case CollectiveKind::Count: break;
  }
  return "?";
}

std::string_view to_string(Algorithm a) { return name_of(kAlgorithmNames, a); }

GroupId GroupTable::intern(std::vector<std::uint32_t> gpus) {
  std::string key(reinterpret_cast<const char*>(gpus.data()), gpus.size() * sizeof(std::uint32_t));
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  const auto id = static_cast<GroupId>(groups_.size());
  groups_.push_back(std::move(gpus));
  index_.emplace(std::move(key), id);
  return id;
}

void CollectiveProgram::add(engine::CollectiveId id, CollectiveOp op) {
  if (id < base_ + ops_.size()) invariant_failed(fmt::format("collective {} added twice", id));
  while (base_ + ops_.size() < id) ops_.push_back({{}, true});
  ops_.push_back({std::move(op), false});
}

double CollectiveProgram::bytes_per_op() {
  const double per_node = sizeof(Entry) < 512 ? 512 / sizeof(Entry) : 1;
  return (heap_block_bytes(per_node * sizeof(Entry)) + sizeof(Entry*)) / per_node;
}

const CollectiveOp& CollectiveProgram::op(engine::CollectiveId id) const {
  if (id < base_ || id - base_ >= ops_.size() || ops_[id - base_].released)
    invariant_failed(fmt::format("collective {} has no op (never added, or already released)", id));
  return ops_[id - base_].op;
}

void CollectiveProgram::release(engine::CollectiveId id) {
  if (id < base_ || id - base_ >= ops_.size()) invariant_failed(fmt::format("release of unknown collective {}", id));
  ops_[id - base_].released = true;
  ops_[id - base_].op.traffic.reset();
  ops_[id - base_].op.stages.clear();
  while (!ops_.empty() && ops_.front().released) {
    ops_.pop_front();
    ++base_;
  }
}

}  // namespace moesim::network
