#include "sim/network/max_min.hpp"

#include <algorithm>
#include <limits>

namespace moesim::network {

MaxMinSolver::MaxMinSolver(std::size_t links) : residual_(links), weight_(links), stamp_(links, 0) {}

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
        touched_.push_back(d.link);
      }
      weight_[d.link] += d.bytes;
    }
  std::vector<char> frozen(flows, 0);
  std::size_t unfrozen = flows;
  while (unfrozen > 0) {
    ++rounds_;
    // The increment every unfrozen flow can still take before the first link saturates.
    double step = std::numeric_limits<double>::infinity();
    for (std::uint32_t l : touched_)
      if (weight_[l] > 1e-15) step = std::min(step, residual_[l] / weight_[l]);
    if (!(step < std::numeric_limits<double>::infinity())) break;
    step = std::max(step, 0.0);
    for (std::size_t f = 0; f < flows; ++f)
      if (!frozen[f]) rates[f] += step;
    for (std::uint32_t l : touched_) residual_[l] -= step * weight_[l];
    // Freeze the flows crossing a saturated link.
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
      for (const LinkDemand& d : *shares[f]) weight_[d.link] -= d.bytes;
    }
  }
}

}  // namespace moesim::network
