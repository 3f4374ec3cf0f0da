// The strategies moesim knows, by name: each with a one-line description, the paper it follows,
// the schema of its options, and a factory from validated options.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/strategies/strategy.hpp"

namespace moesim::strategies {

struct StrategyInfo {
  std::string name;
  std::string description;
  std::string paper;
  schema::NodePtr options;  // schema of the scenario's "strategy" object, "name" included
  // Whether its paper allows a parallel layout (tensor and pipeline parallelism, parallel.ep);
  // the loader refuses one for the others.
  bool takes_layout = false;
  // Whether its MoE blocks can exchange tokens over a fused backend (parallel.ep_backend deepep or
  // hybridep): the strategies built on ep::make_plan's all-to-all groups.
  bool takes_ep_backend = false;
  // Set where the strategy's data-parallel ranks are not the cluster's GPUs over the layout's
  // model-parallel sizes (zebra trains the attention GPUs' tokens only): why it refuses
  // training.global_batch_size, which counts them so.
  std::string refuses_global_batch;
  std::function<std::unique_ptr<Strategy>(const schema::Json& options)> make;
};

const std::vector<StrategyInfo>& registry();
const StrategyInfo* find_strategy(const std::string& name);

}  // namespace moesim::strategies
