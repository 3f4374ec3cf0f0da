#include "sim/network/collective.hpp"

#include <string>

namespace moesim::network {

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::P2P: return "p2p";
  }
  return "?";
}

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Direct: return "direct";
    case Algorithm::Ring: return "ring";
    case Algorithm::Hierarchical: return "hierarchical";
    case Algorithm::Tree: return "tree";
  }
  return "?";
}

GroupId GroupTable::intern(std::vector<std::uint32_t> gpus) {
  std::string key(reinterpret_cast<const char*>(gpus.data()), gpus.size() * sizeof(std::uint32_t));
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  const auto id = static_cast<GroupId>(groups_.size());
  groups_.push_back(std::move(gpus));
  index_.emplace(std::move(key), id);
  return id;
}

}  // namespace moesim::network
