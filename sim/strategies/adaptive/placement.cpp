// Algorithms 1 and 2 of adaptive expert replication (seed 004 §3.4, §4.3; see placement.hpp).
#include "sim/strategies/adaptive/placement.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fmt/format.h>
#include <limits>
#include <numeric>
#include <string>

#include "sim/core/error.hpp"

namespace moesim::strategies::adaptive {

namespace {
void require(bool ok, const std::string& field, const std::string& problem, const std::string& fix) {
  if (!ok) throw InputError("", "adaptive." + field, problem, fix);
}

// Ranks and slots per rank: both ≥ 1 and their product (the slots of the layer) an int.
std::int64_t layer_slots(int ranks, int slots_per_rank) {
  require(ranks >= 1, "ranks", fmt::format("{} ranks", ranks), "give N ≥ 1");
  require(slots_per_rank >= 1, "slots_per_rank", fmt::format("{} expert slots per rank", slots_per_rank), "give s ≥ 1");
  const std::int64_t slots = static_cast<std::int64_t>(ranks) * slots_per_rank;
  require(slots <= std::numeric_limits<int>::max(), "slots_per_rank",
          fmt::format("{} ranks × {} slots per rank is too many slots", ranks, slots_per_rank), "give fewer");
  return slots;
}

// ranks_hosting of every class in one pass over the slots; checks that the placement is whole
// (a bug otherwise: the factories below build only whole ones).
std::vector<std::vector<int>> hosts_by_class(const Placement& p) {
  if (p.classes < 1 || p.ranks < 1 || p.slots_per_rank < 1 ||
      p.slot_class.size() != static_cast<std::size_t>(p.ranks) * static_cast<std::size_t>(p.slots_per_rank))
    invariant_failed(fmt::format("adaptive placement of {} slots for {} ranks × {} slots, {} classes",
                                 p.slot_class.size(), p.ranks, p.slots_per_rank, p.classes));
  std::vector<std::vector<int>> hosts(p.classes);
  for (std::size_t k = 0; k < p.slot_class.size(); ++k) {
    const int cls = p.slot_class[k], rank = static_cast<int>(k) / p.slots_per_rank;
    if (cls < 0 || cls >= p.classes) invariant_failed(fmt::format("adaptive placement: slot {} holds class {} of {}", k, cls, p.classes));
    if (hosts[cls].empty() || hosts[cls].back() != rank) hosts[cls].push_back(rank);  // slots run in rank order
  }
  for (int cls = 0; cls < p.classes; ++cls)
    if (hosts[cls].empty()) invariant_failed(fmt::format("adaptive placement: class {} has no replica", cls));
  return hosts;
}

// Algorithm 2's get_source given the class's hosting ranks (ascending, unique, non-empty).
int source_among(const std::vector<int>& hosts, int dst) {
  if (std::binary_search(hosts.begin(), hosts.end(), dst)) return dst;  // local copy: PCIe only
  return hosts[static_cast<std::size_t>(dst) % hosts.size()];          // round-robin over replica ranks
}
}  // namespace

int Placement::replicas(int cls) const { return static_cast<int>(std::count(slot_class.begin(), slot_class.end(), cls)); }

int Placement::local_replicas(int rank, int cls) const {
  if (rank < 0 || rank >= ranks) return 0;
  const auto first = slot_class.begin() + static_cast<std::ptrdiff_t>(rank) * slots_per_rank;
  return static_cast<int>(std::count(first, first + slots_per_rank, cls));
}

std::vector<int> Placement::ranks_hosting(int cls) const {
  std::vector<int> hosts;
  for (std::size_t k = 0; k < slot_class.size(); ++k) {
    const int rank = static_cast<int>(k) / slots_per_rank;
    if (slot_class[k] == cls && (hosts.empty() || hosts.back() != rank)) hosts.push_back(rank);
  }
  return hosts;
}

std::vector<int> replica_counts(const std::vector<double>& popularity, int ranks, int slots_per_rank) {
  const std::int64_t slots = layer_slots(ranks, slots_per_rank);
  const std::size_t E = popularity.size();
  require(E >= 1, "popularity", "no expert classes", "give one token count per expert class");
  for (std::size_t i = 0; i < E; ++i)
    require(std::isfinite(popularity[i]) && popularity[i] >= 0, "popularity",
            fmt::format("class {} has popularity {}", i, popularity[i]), "give finite, non-negative token counts");
  const double total = std::accumulate(popularity.begin(), popularity.end(), 0.0);
  require(total > 0, "popularity", fmt::format("all {} classes have popularity 0", E),
          "give the token counts of an iteration that routed tokens");
  require(static_cast<std::int64_t>(E) <= slots, "popularity",
          fmt::format("{} expert classes but only {} slots ({} ranks × {} slots per rank); Algorithm 1 gives every class "
                      "at least one replica",
                      E, slots, ranks, slots_per_rank),
          "give at least as many slots as expert classes");

  std::vector<double> goal(E), diff(E);
  std::vector<int> counts(E);
  for (std::size_t i = 0; i < E; ++i) {
    goal[i] = popularity[i] / total * ranks * slots_per_rank;  // (p / Σp)·G·S, the printed order
    counts[i] = static_cast<int>(std::floor(std::max(goal[i], 1.0)));
    diff[i] = counts[i] - goal[i];
  }
  std::int64_t sum = std::accumulate(counts.begin(), counts.end(), std::int64_t{0});
  // Too many instances, only through the min-one clamp (fewer than E extra). Decrementing diff[i]
  // even when class i keeps its single replica moves the argmax on (ambiguity 1); since E ≤ G·S
  // some class holds two or more while the sum exceeds G·S, so the loop ends.
  while (sum > slots) {
    const auto i = static_cast<std::size_t>(std::max_element(diff.begin(), diff.end()) - diff.begin());  // first on ties
    if (counts[i] > 1) {
      --counts[i];
      --sum;
    }
    diff[i] -= 1;
  }
  // Largest-remainder fill: the most under-provisioned class first.
  while (sum < slots) {
    const auto i = static_cast<std::size_t>(std::min_element(diff.begin(), diff.end()) - diff.begin());  // first on ties
    ++counts[i];
    ++sum;
    diff[i] += 1;
  }
  return counts;
}

Placement contiguous_placement(const std::vector<int>& counts, int ranks, int slots_per_rank) {
  const std::int64_t slots = layer_slots(ranks, slots_per_rank);
  require(!counts.empty(), "counts", "no expert classes", "give one replica count per expert class");
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    require(counts[i] >= 1, "counts", fmt::format("class {} has {} replicas", i, counts[i]),
            "give every class at least one replica, as Algorithm 1 does");
    sum += counts[i];
  }
  require(sum == slots, "counts",
          fmt::format("{} replicas for {} slots ({} ranks × {} slots per rank)", sum, slots, ranks, slots_per_rank),
          "give counts that fill every slot exactly once");
  Placement p{static_cast<int>(counts.size()), ranks, slots_per_rank, {}};
  p.slot_class.reserve(static_cast<std::size_t>(slots));
  for (std::size_t i = 0; i < counts.size(); ++i) p.slot_class.insert(p.slot_class.end(), counts[i], static_cast<int>(i));
  return p;
}

std::vector<int> capped_replica_counts(std::vector<int> counts, const std::vector<double>& popularity, int ranks,
                                       int slots_per_rank) {
  const std::int64_t slots = layer_slots(ranks, slots_per_rank);
  require(counts.size() == popularity.size(), "counts",
          fmt::format("{} replica counts for {} classes' popularity", counts.size(), popularity.size()),
          "give one count and one popularity per class");
  require(static_cast<std::int64_t>(counts.size()) * ranks >= slots, "counts",
          fmt::format("{} classes on distinct ranks fill at most {} of {} slots", counts.size(),
                      static_cast<std::int64_t>(counts.size()) * ranks, slots),
          "give at least as many classes as slots per rank, or allow intra-rank replicas");
  int freed = 0;
  for (int& c : counts)
    if (c > ranks) freed += c - ranks, c = ranks;
  for (; freed > 0; --freed) {
    std::size_t best = counts.size();
    for (std::size_t i = 0; i < counts.size(); ++i)
      if (counts[i] < ranks && (best == counts.size() || popularity[i] / counts[i] > popularity[best] / counts[best]))
        best = i;
    ++counts[best];
  }
  return counts;
}

Placement spread_placement(const std::vector<int>& counts, int ranks, int slots_per_rank) {
  Placement p = contiguous_placement(counts, ranks, slots_per_rank);  // validates the counts
  for (std::size_t i = 0; i < counts.size(); ++i)
    require(counts[i] <= ranks, "counts", fmt::format("class {} has {} replicas on {} ranks", i, counts[i], ranks),
            "give at most one replica per rank and class");
  std::vector<int> order(counts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return counts[a] > counts[b]; });
  std::vector<int> free(static_cast<std::size_t>(ranks), slots_per_rank);
  for (const int cls : order) {
    std::vector<int> by_room(static_cast<std::size_t>(ranks));
    std::iota(by_room.begin(), by_room.end(), 0);
    std::stable_sort(by_room.begin(), by_room.end(), [&](int a, int b) { return free[a] > free[b]; });
    for (int k = 0; k < counts[cls]; ++k) {
      const int rank = by_room[static_cast<std::size_t>(k)];
      if (free[rank] == 0) invariant_failed(fmt::format("spread placement: no free slot for class {}", cls));
      p.slot_class[static_cast<std::size_t>(rank * slots_per_rank + (slots_per_rank - free[rank]))] = cls;
      --free[rank];
    }
  }
  return p;
}

Placement static_placement(int classes, int ranks, int slots_per_rank) {
  const std::int64_t slots = layer_slots(ranks, slots_per_rank);
  require(classes >= 1, "classes", fmt::format("{} expert classes", classes), "give E ≥ 1");
  require(slots % classes == 0, "classes",
          fmt::format("{} slots ({} ranks × {} slots per rank) do not split into equal replicas of {} classes", slots,
                      ranks, slots_per_rank, classes),
          "give sN a multiple of E (static replication r = sN/E, Eq. 1)");
  require(slots / classes <= ranks, "classes",
          fmt::format("r = sN/E = {} replicas per class cannot sit on distinct ranks of {}", slots / classes, ranks),
          "give at least as many classes as slots per rank (DeepSpeed has no intra-rank replicas)");
  Placement p{classes, ranks, slots_per_rank, std::vector<int>(static_cast<std::size_t>(slots))};
  for (std::int64_t g = 0; g < slots; ++g) p.slot_class[static_cast<std::size_t>(g)] = static_cast<int>(g % classes);
  return p;
}

int gradient_source(const Placement& placement, int cls, int dst_rank) {
  if (cls < 0 || cls >= placement.classes || dst_rank < 0 || dst_rank >= placement.ranks)
    invariant_failed(fmt::format("gradient_source of class {} for rank {} in a placement of {} classes on {} ranks", cls,
                                 dst_rank, placement.classes, placement.ranks));
  const std::vector<int> hosts = placement.ranks_hosting(cls);
  if (hosts.empty()) invariant_failed(fmt::format("adaptive placement: class {} has no replica", cls));
  return source_among(hosts, dst_rank);
}

std::vector<ShardTransfer> collection_transfers(const Placement& placement) {
  const auto hosts = hosts_by_class(placement);
  std::vector<ShardTransfer> transfers;
  transfers.reserve(static_cast<std::size_t>(placement.classes) * static_cast<std::size_t>(placement.ranks));
  for (int cls = 0; cls < placement.classes; ++cls)
    for (int dst = 0; dst < placement.ranks; ++dst) transfers.push_back({source_among(hosts[cls], dst), dst, cls});
  return transfers;
}

CollectionCounts collection_counts(const Placement& placement) {
  const std::vector<ShardTransfer> transfers = collection_transfers(placement);  // checks the placement
  CollectionCounts c{std::vector<int>(placement.ranks, 0), std::vector<int>(placement.ranks, 0)};
  for (const ShardTransfer& t : transfers)
    if (t.remote()) {
      ++c.receives[t.dst];
      ++c.sends[t.src];
    }
  return c;
}

}  // namespace moesim::strategies::adaptive
