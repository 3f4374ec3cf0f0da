#include "sim/strategies/registry.hpp"

#include "sim/strategies/adaptive/adaptive_strategy.hpp"
#include "sim/strategies/ep/ep_strategy.hpp"
#include "sim/strategies/hybridep/hybridep_strategy.hpp"
#include "sim/strategies/parm/parm_strategy.hpp"
#include "sim/strategies/zebra/zebra_strategy.hpp"

namespace moesim::strategies {

const std::vector<StrategyInfo>& registry() {
  static const std::vector<StrategyInfo> all{ep::info(), hybridep::info(), parm::info(), zebra::info(), adaptive::info()};
  return all;
}

const StrategyInfo* find_strategy(const std::string& name) {
  for (const auto& s : registry())
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace moesim::strategies
