#include "sim/software/software.hpp"

namespace moesim::software {

bool parse_graph_scope(std::string_view name, CudaGraphs& graphs) {
  const auto capture = [&](Module m) { graphs.modules |= static_cast<std::uint8_t>(1u << static_cast<int>(m)); };
  if (name == "full_iteration") graphs.full_iteration = true;
  else if (name == "attn") capture(Module::Attention);
  else if (name == "moe_router") capture(Module::Router);
  else if (name == "moe_preprocess") {
    // Megatron-Core captures the preprocessing in the router's graph (it needs moe_router).
    capture(Module::Router);
    graphs.preprocess = true;
  } else if (name == "moe") capture(Module::Experts);
  else if (name == "mlp") capture(Module::DenseMlp);
  else return false;
  return true;
}

}  // namespace moesim::software
