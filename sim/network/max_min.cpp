#include "sim/network/max_min.hpp"

#include <algorithm>
#include <limits>

namespace moesim::network {

MaxMinSolver::MaxMinSolver(std::size_t links) : residual_(links), weight_(links), users_(links, 0), stamp_(links, 0) {}

void MaxMinSolver::solve(const std::vector<const std::vector<LinkDemand>*>& shares, const std::vector<double>& capacity,
                         std::vector<double>& rates) {
  const std::size_t flows = shares.size();
  rates.assign(flows, 0.0);
  rounds_ = 0;
  if (++epoch_ == 0) {
    std::fill(stamp_.begin(), stamp_.end(), 0);
    epoch_ = 1;
  }
  touched_.clear();
  for (const auto* s : shares)
    for (const LinkDemand& d : *s) {
      if (stamp_[d.link] != epoch_) {
        stamp_[d.link] = epoch_;
        residual_[d.link] = capacity[d.link];
        weight_[d.link] = 0;
        users_[d.link] = 0;
        touched_.push_back(d.link);
      }
      weight_[d.link] += d.bytes;
      ++users_[d.link];
    }
  std::vector<char> frozen(flows, 0);
  std::size_t unfrozen = flows;
  while (unfrozen > 0) {
    ++rounds_;
    // The increment every unfrozen flow can still take before the first link saturates. Links
    // are counted by their unfrozen users, not by a floating weight, so rounding cannot stall it.
    double step = std::numeric_limits<double>::infinity();
    std::uint32_t bottleneck = kNoLink;
    for (std::uint32_t l : touched_)
      if (users_[l] > 0 && weight_[l] > 0) {
        const double s = std::max(0.0, residual_[l]) / weight_[l];
        if (s < step) step = s, bottleneck = l;
      }
    if (bottleneck == kNoLink) break;
    for (std::size_t f = 0; f < flows; ++f)
      if (!frozen[f]) rates[f] += step;
    for (std::uint32_t l : touched_)
      if (users_[l] > 0) residual_[l] -= step * weight_[l];
    residual_[bottleneck] = 0;
    // Freeze the flows crossing a saturated link (the bottleneck at least).
    for (std::size_t f = 0; f < flows; ++f) {
      if (frozen[f]) continue;
      bool saturated = false;
      for (const LinkDemand& d : *shares[f])
        if (residual_[d.link] <= 1e-9 * capacity[d.link]) {
          saturated = true;
          break;
        }
      if (!saturated) continue;
      frozen[f] = 1;
      --unfrozen;
      for (const LinkDemand& d : *shares[f]) {
        weight_[d.link] -= d.bytes;
        --users_[d.link];
      }
    }
  }
}

}  // namespace moesim::network
