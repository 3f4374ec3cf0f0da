#include "sim/software/software.hpp"

namespace moesim::software {

bool parse_graph_scope(std::string_view name, CudaGraphs& graphs) {
  const auto capture = [&](Module m) { graphs.modules |= static_cast<std::uint8_t>(1u << static_cast<int>(m)); };
  const auto scope = value_of(kGraphScopeNames, name);
  if (!scope) return false;
  switch (*scope) {
    case GraphScope::FullIteration: graphs.full_iteration = true; break;
    case GraphScope::Attn: capture(Module::Attention); break;
    case GraphScope::MoeRouter: capture(Module::Router); break;
    case GraphScope::MoePreprocess:
      // Megatron-Core captures the preprocessing in the router's graph (it needs moe_router).
      capture(Module::Router);
      graphs.preprocess = true;
      break;
    case GraphScope::Moe: capture(Module::Experts); break;
    case GraphScope::Mlp: capture(Module::DenseMlp); break;
  }
  return true;
}

}  // namespace moesim::software
