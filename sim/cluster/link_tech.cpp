#include "sim/cluster/link_tech.hpp"

namespace moesim::cluster {

std::string_view to_string(Protocol p) { return p == Protocol::LL ? "LL" : "Simple"; }

}  // namespace moesim::cluster
