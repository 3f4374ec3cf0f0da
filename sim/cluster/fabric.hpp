// The tiers of the cluster's link hierarchy and how each joins its workers: the one interface the
// network models and the link graph ask (DESIGN.md §8), instead of switching on the kind of
// fabric. A tier is a level of the cluster description, or — for a level split into NVLink
// domains — the level's links between domains (an outer tier whose workers are the domains) and
// its links inside one (the level itself, its workers grouped by domain).
//   switch:    each worker reaches its parent's switch through its ports (one by default; a node's
//              NICs; a GPU's own link between NVLink domains), each `bandwidth` per direction; an
//              oversubscribed switch has a core of ports·count·bandwidth/o every byte crosses;
//   full_mesh: a directed link between every ordered pair of siblings;
//   ring:      links between ring neighbours, both ways round; a transfer takes the shorter way.
// Links are numbered per parent (0 … links()−1); a model multiplies by the parent count.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/cluster/link_tech.hpp"
#include "sim/core/enum_names.hpp"
#include "sim/core/units.hpp"

namespace moesim::cluster {

enum class Fabric { Switch, FullMesh, Ring };
inline constexpr auto kFabricNames =
    enum_names<Fabric>({{Fabric::Switch, "switch"}, {Fabric::FullMesh, "full_mesh"}, {Fabric::Ring, "ring"}});
std::string_view to_string(Fabric f);

inline constexpr std::uint32_t kNoLink = UINT32_MAX;

struct Tier {
  std::string name;
  int level = 0;            // the description level it belongs to (reports add tiers up by level)
  std::uint32_t count = 1;  // workers of this tier inside one worker of the tier above
  Fabric fabric = Fabric::Switch;
  Bandwidth bandwidth{};    // per port and direction
  std::uint32_t ports = 1;  // per worker (switch): GPU m of a worker uses port ⌊local(m)·ports/gpus⌋
  Time latency = 0;
  double oversubscription = 1.0;
  LinkTechPtr link;         // null: an ideal link (link_tech.hpp)
};

class TierFabric {
 public:
  static std::unique_ptr<TierFabric> make(const Tier& tier);
  virtual ~TierFabric() = default;

  // A switch: every transfer between siblings leaves by the sender's port link, crosses the core
  // (when oversubscribed) and enters by the receiver's port link, so loads add up per port.
  virtual bool switched() const { return false; }
  virtual double port_capacity() const { return 0; }  // bytes per second, each direction
  virtual double core_capacity() const { return 0; }  // 0: no core link

  // Otherwise: links of their own between siblings, numbered under one parent (0 … links()−1),
  // each of `link_capacity()`, and the links a transfer from sibling i to sibling j crosses.
  virtual std::uint32_t links() const { return 0; }
  virtual double link_capacity() const { return 0; }
  virtual void route(std::uint32_t /*i*/, std::uint32_t /*j*/, std::vector<std::uint32_t>& /*out*/) const {}

  // Bytes per second one worker drives into the tier when it sends evenly to all its siblings:
  // the α-β model's default 1/β (exact for even traffic over a mesh's n − 1 dedicated links; a
  // ring's two neighbour links carry an average of max(1, n/4) hops per byte).
  virtual double worker_bandwidth() const = 0;
  // Sibling pairs joined by a link of their own (the link graph's edges besides the parent's hub).
  virtual std::vector<std::pair<std::uint32_t, std::uint32_t>> direct_links() const { return {}; }
};

}  // namespace moesim::cluster
