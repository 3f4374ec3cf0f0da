// Max-min fair rates by progressive filling (Bertsekas & Gallager, Data Networks, 2nd ed., §6.5):
// every flow's rate rises at the same pace until a link saturates; the flows crossing it freeze;
// the others go on. A flow here may load its links unevenly (a collective's phase puts different
// bytes on different links): it uses a fraction a ∈ (0, 1] of its rate on each link, a = the
// link's bytes over the flow's largest link bytes. With a = 1 on every link of its path this is
// the classic max-min allocation of single-path transfers (weighted water-filling as in Nace &
// Pióro, "Max-min fairness and its applications to routing and load-balancing in communication
// networks: a tutorial", IEEE Comm. Surveys & Tutorials 10(4), 2008).
//
// The filling is driven by events rather than by a scan of every link and flow per round: each
// link with unfrozen flows has the level at which it saturates, λ_l = level + residual_l / (Σ a of
// its unfrozen flows), kept in an addressable binary heap (a link's key is changed in place). A
// round takes the smallest λ, raises the common level to it, freezes the unfrozen flows
// crossing that link (a link → flows index) and re-keys only the links of the flows it froze:
// O((links + Σ path lengths) · log links) per solve, where a scan per round costs
// O(rounds · (links + Σ path lengths)) and rounds reach the number of distinct bottleneck levels
// (thousands of DC uplinks under a skewed all-to-all beside per-expert gradient all-reduces).
// Links that cannot saturate (even with every flow crossing them at the largest rate any of those
// flows could get from its own links' capacities) are left out first: they never bound a rate.
// Most solves take one round (a pipeline's point-to-point transfers, each over its GPUs' links):
// the first round is a scan of the links, the heaps are built only when a second round is needed,
// and the solve stops as soon as every flow is frozen.
//
// The round semantics of the scanning version are kept: a round freezes the flows of every link
// whose residual is within 1e-9 of its capacity at the new level (found by a second heap, keyed by
// the level at which that happens), flows freeze in index order, a frozen flow's rate is the common
// level (the running sum of the rounds' increments), and a link's residual is lowered by the
// round's increment times its weight when its weight is about to change. Solves of one or two
// rounds give bit-identical rates; deeper ones may differ from a rescan at rounding level only (a
// link left untouched for several rounds is lowered once by the sum of their increments).
#pragma once

#include <vector>

#include "sim/network/flow_demand.hpp"

namespace moesim::network {

class MaxMinSolver {
 public:
  explicit MaxMinSolver(std::size_t links);
  // Bytes per link of its per-link state below (the arrays the constructor sizes, and each heap's
  // index), for the host-memory estimate; the per-flow lists (crossing_) grow with the flows.
  static constexpr double kBytesPerLink = 3 * sizeof(double) + 5 * sizeof(std::uint32_t) + sizeof(std::size_t) +
                                          sizeof(char) + 2 * sizeof(std::uint32_t);
  // shares[f]: (link, a) pairs of flow f. rates[f] receives its rate in bytes per second.
  void solve(const std::vector<const std::vector<LinkDemand>*>& shares, const std::vector<double>& capacity,
             std::vector<double>& rates);
  std::size_t rounds() const { return rounds_; }  // saturation rounds of the last solve

 private:
  // A binary min-heap of links by (key, order), addressable: each link at most once, re-keyed in place.
  class LinkHeap {
   public:
    void reset(std::size_t links);
    bool empty() const { return heap_.empty(); }
    std::uint32_t top() const { return heap_.front().link; }
    void set(std::uint32_t link, double key, std::uint32_t order);
    void erase(std::uint32_t link);
    // Filling an empty heap: `add` appends without ordering, `order_all` then orders every entry
    // bottom-up (Floyd's heap construction, O(n) where n pushes cost O(n log n)).
    void add(std::uint32_t link, double key, std::uint32_t order);
    void order_all();
    // Calls visit(link) for links with key <= reach, leaving the heap as it is (they form a subtree
    // at its root: O(their number)), in no particular order, until visit returns false.
    template <class Visit>
    void visit_upto(double reach, Visit&& visit) {
      if (heap_.empty() || heap_.front().key > reach) return;
      stack_.assign(1, 0);
      while (!stack_.empty()) {
        const std::size_t i = stack_.back();
        stack_.pop_back();
        if (!visit(heap_[i].link)) return;
        for (std::size_t c = 2 * i + 1; c <= 2 * i + 2 && c < heap_.size(); ++c)
          if (heap_[c].key <= reach) stack_.push_back(c);
      }
    }

   private:
    struct Entry {
      double key;
      std::uint32_t order, link;
      bool operator<(const Entry& o) const { return key < o.key || (key == o.key && order < o.order); }
    };
    void place(std::size_t i, const Entry& e) { heap_[i] = e, at_[e.link] = static_cast<std::uint32_t>(i); }
    void sift(std::size_t i);       // up or down, wherever heap_[i] belongs
    void sift_down(std::size_t i);  // down only: heap_[i]'s subtrees are heaps, its parent may not be
    std::vector<Entry> heap_;
    std::vector<std::uint32_t> at_;  // at_[link]: its index in heap_, or kAbsent
    std::vector<std::size_t> stack_;  // visit_upto's entries still to look at
  };
  // Whether a link is in the heaps: it may saturate and unfrozen flows load it.
  bool keyed(std::uint32_t link) const { return live_[link] && users_[link] > 0 && weight_[link] > 0; }
  // Re-keys a link whose weight or residual changed: out of both heaps once no unfrozen flow crosses it.
  void rekey(std::uint32_t link, const std::vector<double>& capacity);
  // A link's two keys: the level at which it saturates, and the one at which its residual falls to
  // 1e-9 of its capacity.
  double saturation_key(std::uint32_t link) const;
  double tolerance_key(std::uint32_t link, const std::vector<double>& capacity) const;
  // The residual of `link` at the level reached after `round` rounds (`below`: the level before the
  // last of them, `step`: its increment).
  double residual_at(std::uint32_t link, std::size_t round, double below, double step) const;

  // Per link, valid where stamp_ == epoch_: residual_ at level_ (after round_ rounds), the weight
  // and count of its unfrozen flow entries, its first appearance among the flows (ties break as a
  // rescan's do), its slice [first_, fill_) of crossing_ (the flows crossing it).
  std::vector<double> residual_, weight_, level_;
  std::vector<std::uint32_t> users_, stamp_, order_, first_, fill_;
  std::vector<std::size_t> round_;
  std::vector<std::uint32_t> touched_, crossing_, freeze_, dirty_;
  // saturate_: λ, the level at which a link saturates; tolerate_: the level at which its residual
  // falls to 1e-9 of its capacity (a round freezes the flows of every link that reached it).
  LinkHeap saturate_, tolerate_;
  std::vector<char> frozen_, live_;  // live_[link]: it may saturate (others are left out)
  std::uint32_t epoch_ = 0;
  std::size_t rounds_ = 0;
};

}  // namespace moesim::network
