// Max-min fair rates by progressive filling (Bertsekas & Gallager, Data Networks, §6.5): every
// flow's rate rises at the same pace until a link saturates; the flows crossing it freeze; the
// others go on. A flow here may load its links unevenly (a collective's phase puts different
// bytes on different links): it uses a fraction a ∈ (0, 1] of its rate on each link, a = the
// link's bytes over the flow's largest link bytes. With a = 1 on every link of its path this is
// the classic max-min allocation of single-path transfers.
#pragma once

#include <vector>

#include "sim/network/flow_demand.hpp"

namespace moesim::network {

class MaxMinSolver {
 public:
  explicit MaxMinSolver(std::size_t links);
  // shares[f]: (link, a) pairs of flow f. rates[f] receives its rate in bytes per second.
  void solve(const std::vector<const std::vector<LinkDemand>*>& shares, const std::vector<double>& capacity,
             std::vector<double>& rates);
  std::size_t rounds() const { return rounds_; }  // saturation rounds of the last solve

 private:
  std::vector<double> residual_, weight_;
  std::vector<std::uint32_t> users_;  // unfrozen flow entries per link
  std::vector<std::uint32_t> stamp_;
  std::vector<std::uint32_t> touched_;
  std::uint32_t epoch_ = 0;
  std::size_t rounds_ = 0;
};

}  // namespace moesim::network
