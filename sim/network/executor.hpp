// What every network model offers the engine and the report: it runs collectives (an engine
// CollectiveExecutor) over the collective programme the strategy wrote, and keeps statistics.
#pragma once

#include <array>
#include <deque>
#include <string>
#include <vector>

#include "sim/engine/engine.hpp"
#include "sim/network/collective.hpp"

namespace moesim::network {

// The collective programme: the op of every engine collective, by CollectiveId. Ops are added as
// the program grows and released by the executor once their collective is done, so a long run
// holds only the collectives in flight and ahead.
class CollectiveProgram {
 public:
  GroupTable groups;

  // Ids increase; an id skipped (an engine collective without an op) is never asked for.
  void add(engine::CollectiveId id, CollectiveOp op);
  const CollectiveOp& op(engine::CollectiveId id) const;
  void release(engine::CollectiveId id);
  // Heap bytes per op held, for the host-memory estimate: its entry in a node of the deque
  // (libstdc++ puts 512 / sizeof(Entry) entries in a 512-byte node: bits/stl_deque.h,
  // __deque_buf_size) and its share of the deque's map pointer to the node.
  static double bytes_per_op();

 private:
  struct Entry {
    CollectiveOp op;
    bool released = false;
  };
  std::deque<Entry> ops_;
  engine::CollectiveId base_ = 0;  // id of ops_.front()
};

struct KindStats {
  std::uint64_t collectives = 0;
  std::uint64_t pairs = 0;
  double bytes = 0;
  Time time = 0;  // sum of collective durations
};

struct LinkStat {
  std::string name;
  int level = 0;  // its tier (Topology::tier_count() for PCIe links)
  double bytes = 0;
  Time busy = 0;                // time with traffic on the link
  double peak_utilization = 0;  // highest fraction of its capacity in use
};

struct NetworkStats {
  std::vector<double> bytes_by_level;  // per tier (cluster::Topology::tiers)
  std::array<KindStats, kCollectiveKinds> by_kind{};  // indexed by CollectiveKind
  // Flow model only: per level, the sums over its links (bytes, busy, peak = max), and the links
  // that carried the most bytes.
  std::vector<LinkStat> link_levels;
  std::vector<LinkStat> hottest_links;
};

class NetworkExecutor : public engine::CollectiveExecutor {
 public:
  virtual std::string model_name() const = 0;
  // Statistics of the finished run.
  virtual NetworkStats stats() const = 0;
};

}  // namespace moesim::network
