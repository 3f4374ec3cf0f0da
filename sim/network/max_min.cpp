#include "sim/network/max_min.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace moesim::network {

namespace {
constexpr std::uint32_t kAbsent = 0xffffffffu;
}

void MaxMinSolver::LinkHeap::reset(std::size_t links) {
  for (const Entry& e : heap_) at_[e.link] = kAbsent;
  heap_.clear();
  if (at_.size() < links) at_.resize(links, kAbsent);
}

void MaxMinSolver::LinkHeap::sift(std::size_t i) {
  const Entry e = heap_[i];
  if (i == 0 || !(e < heap_[(i - 1) / 2])) return sift_down(i);
  do {
    place(i, heap_[(i - 1) / 2]);
    i = (i - 1) / 2;
  } while (i > 0 && e < heap_[(i - 1) / 2]);
  place(i, e);
}

void MaxMinSolver::LinkHeap::sift_down(std::size_t i) {
  const Entry e = heap_[i];
  for (;;) {
    std::size_t c = 2 * i + 1;
    if (c >= heap_.size()) break;
    if (c + 1 < heap_.size() && heap_[c + 1] < heap_[c]) ++c;
    if (!(heap_[c] < e)) break;
    place(i, heap_[c]);
    i = c;
  }
  place(i, e);
}

void MaxMinSolver::LinkHeap::set(std::uint32_t link, double key, std::uint32_t order) {
  std::uint32_t i = at_[link];
  if (i == kAbsent) {
    i = static_cast<std::uint32_t>(heap_.size());
    heap_.push_back({key, order, link});
  } else {
    heap_[i].key = key;
  }
  sift(i);
}

void MaxMinSolver::LinkHeap::add(std::uint32_t link, double key, std::uint32_t order) {
  at_[link] = static_cast<std::uint32_t>(heap_.size());
  heap_.push_back({key, order, link});
}

void MaxMinSolver::LinkHeap::order_all() {
  for (std::size_t i = heap_.size() / 2; i-- > 0;) sift_down(i);
}

void MaxMinSolver::LinkHeap::erase(std::uint32_t link) {
  const std::uint32_t i = at_[link];
  if (i == kAbsent) return;
  at_[link] = kAbsent;
  const Entry last = heap_.back();
  heap_.pop_back();
  if (last.link == link) return;
  heap_[i] = last;
  sift(i);
}

MaxMinSolver::MaxMinSolver(std::size_t links)
    : residual_(links),
      weight_(links),
      level_(links),
      users_(links, 0),
      stamp_(links, 0),
      order_(links, 0),
      first_(links, 0),
      fill_(links, 0),
      round_(links, 0),
      live_(links, 0) {
  saturate_.reset(links);
  tolerate_.reset(links);
}

double MaxMinSolver::residual_at(std::uint32_t link, std::size_t round, double below, double step) const {
  // Lowered as the rescan lowers it each round (residual − step·weight), the rounds it sat out folded
  // into one subtraction; the weight has not changed since round_[link] (it is brought up to date
  // before it changes).
  double r = residual_[link];
  if (round_[link] == round) return r;
  if (round_[link] + 1 < round) r -= (below - level_[link]) * weight_[link];
  return r - step * weight_[link];
}

double MaxMinSolver::saturation_key(std::uint32_t l) const {
  return level_[l] + std::max(0.0, residual_[l]) / weight_[l];
}

double MaxMinSolver::tolerance_key(std::uint32_t l, const std::vector<double>& capacity) const {
  return level_[l] + (residual_[l] - 1e-9 * capacity[l]) / weight_[l];
}

void MaxMinSolver::rekey(std::uint32_t l, const std::vector<double>& capacity) {
  if (!keyed(l)) {
    saturate_.erase(l);
    tolerate_.erase(l);
    return;
  }
  saturate_.set(l, saturation_key(l), order_[l]);
  tolerate_.set(l, tolerance_key(l, capacity), order_[l]);
}

void MaxMinSolver::solve(const std::vector<const std::vector<LinkDemand>*>& shares, const std::vector<double>& capacity,
                         std::vector<double>& rates) {
  const std::size_t flows = shares.size();
  rates.assign(flows, 0.0);
  rounds_ = 0;
  if (++epoch_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  // Each link's weight and users, summed in flow order (as a rescan does), then its flows.
  touched_.clear();
  for (const auto* s : shares) {
    for (const LinkDemand& d : *s) {
      if (stamp_[d.link] != epoch_) {
        stamp_[d.link] = epoch_;
        residual_[d.link] = capacity[d.link];
        weight_[d.link] = 0;
        level_[d.link] = 0;
        round_[d.link] = 0;
        users_[d.link] = 0;
        order_[d.link] = static_cast<std::uint32_t>(touched_.size());
        touched_.push_back(d.link);
      }
      weight_[d.link] += d.bytes;
      ++users_[d.link];
    }
  }
  // A link can saturate only if its flows, all at the highest rate any of them can reach (a flow's
  // rate never exceeds capacity / a on any of its links), would fill it: the others (a GPU's links
  // beside its DC's uplink) never bound a rate nor come within the tolerance, and are left out.
  for (std::size_t f = 0; f < flows; ++f) {
    double cap = std::numeric_limits<double>::infinity();
    for (const LinkDemand& d : *shares[f]) cap = std::min(cap, capacity[d.link] / d.bytes);
    for (const LinkDemand& d : *shares[f]) level_[d.link] = std::max(level_[d.link], cap);  // level_: bound for now
  }
  std::uint32_t offset = 0;
  for (std::uint32_t l : touched_) {
    live_[l] = !(weight_[l] * level_[l] < capacity[l] * (1 - 1e-6));
    level_[l] = 0;
    first_[l] = fill_[l] = offset;
    if (live_[l]) offset += users_[l];
  }
  crossing_.resize(offset);
  for (std::uint32_t f = 0; f < flows; ++f)
    for (const LinkDemand& d : *shares[f])
      if (live_[d.link]) crossing_[fill_[d.link]++] = f;
  // The first round scans the links (most solves of a pipeline's point-to-point transfers end
  // there); the heaps are built when a second round is needed, holding then what they would hold
  // had they been built first and re-keyed. Ties break alike: by the order of first appearance.
  saturate_.reset(residual_.size());
  tolerate_.reset(residual_.size());
  bool heaped = false;
  frozen_.assign(flows, 0);

  std::size_t unfrozen = flows;
  double level = 0, below = 0, step = 0;  // after rounds_ rounds: the level, the one before, their difference
  const auto collect = [&](std::uint32_t l) {
    for (std::uint32_t i = first_[l]; i < fill_[l]; ++i) {
      const std::uint32_t f = crossing_[i];
      if (!frozen_[f]) frozen_[f] = 1, freeze_.push_back(f);
    }
  };
  while (unfrozen > 0) {
    // The bottleneck: the link that saturates first; the increment takes every rate to its level.
    std::uint32_t bottleneck = kAbsent;
    if (heaped) {
      if (!saturate_.empty()) bottleneck = saturate_.top();
    } else {
      double lowest = 0;
      for (std::uint32_t l : touched_) {
        if (!keyed(l)) continue;
        const double key = saturation_key(l);
        if (bottleneck == kAbsent || key < lowest) bottleneck = l, lowest = key;
      }
    }
    if (bottleneck == kAbsent) break;
    const double increment = std::max(0.0, residual_at(bottleneck, rounds_, below, step)) / weight_[bottleneck];
    below = level;
    step = increment;
    level += increment;
    ++rounds_;
    // Freeze the flows crossing a saturated link: the bottleneck and every link whose residual is
    // now within 1e-9 of its capacity.
    freeze_.clear();
    collect(bottleneck);
    const double reach = level + 1e-12 * std::abs(level);
    // Candidates are the links tolerate_ puts at or below the new level; they stay in it (those whose
    // flows freeze are re-keyed below). Once every flow is frozen no further link is looked at.
    const auto check = [&](std::uint32_t l) {
      if (l != bottleneck && residual_at(l, rounds_, below, step) <= 1e-9 * capacity[l]) collect(l);
      return freeze_.size() < unfrozen;
    };
    if (heaped)
      tolerate_.visit_upto(reach, check);
    else
      for (std::uint32_t l : touched_)
        if (keyed(l) && tolerance_key(l, capacity) <= reach && !check(l)) break;
    if (freeze_.size() == unfrozen) {  // the last round: nothing left to re-key
      for (std::uint32_t f : freeze_) rates[f] = level;
      return;
    }
    // In flow order, so that each link's weight loses its entries in the order a rescan removes them.
    std::sort(freeze_.begin(), freeze_.end());
    dirty_.clear();
    for (std::uint32_t f : freeze_) {
      rates[f] = level;
      --unfrozen;
      for (const LinkDemand& d : *shares[f]) {
        const std::uint32_t l = d.link;
        if (!live_[l]) continue;
        if (round_[l] != rounds_) {
          residual_[l] = residual_at(l, rounds_, below, step);
          level_[l] = level;
          round_[l] = rounds_;
          dirty_.push_back(l);
        }
        weight_[l] -= d.bytes;
        --users_[l];
      }
    }
    if (heaped) {
      for (std::uint32_t l : dirty_) rekey(l, capacity);
    } else {
      for (std::uint32_t l : touched_) {
        if (!keyed(l)) continue;
        saturate_.add(l, saturation_key(l), order_[l]);
        tolerate_.add(l, tolerance_key(l, capacity), order_[l]);
      }
      saturate_.order_all();
      tolerate_.order_all();
      heaped = true;
    }
  }
  // Flows no saturating link stops (none in a well-formed instance) keep the level reached.
  if (unfrozen > 0)
    for (std::size_t f = 0; f < flows; ++f)
      if (!frozen_[f]) rates[f] = level;
}

}  // namespace moesim::network
