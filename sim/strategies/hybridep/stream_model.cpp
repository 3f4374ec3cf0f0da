#include "sim/strategies/hybridep/stream_model.hpp"

#include <algorithm>
#include <cmath>

namespace moesim::strategies::hybridep {

std::string to_string(StreamCase c) {
  switch (c) {
    case StreamCase::Case1: return "1";
    case StreamCase::Case2_1: return "2.1";
    case StreamCase::Case2_2: return "2.2";
  }
  return "?";
}

double final_latency(const StreamInputs& in, double p) {
  const double g = in.gpus;
  const double a2a = p * in.data_bytes * (g - 1) / (g * in.bandwidth);
  const double ag = (1 - p) * in.expert_bytes * (g - 1) / in.bandwidth;
  return std::max(in.pre_expert_seconds, ag) + 2 * a2a;
}

StreamSolution solve(const StreamInputs& in) {
  const double g = in.gpus;
  StreamSolution s;
  s.p_star = (in.expert_bytes * (g - 1) - in.bandwidth * in.pre_expert_seconds) / (in.expert_bytes * (g - 1));
  if (s.p_star <= 0) {
    s.which = StreamCase::Case1;
    s.p = 0;
  } else if (2 * in.data_bytes >= g * in.expert_bytes) {
    s.which = StreamCase::Case2_2;
    s.p = 0;
  } else {
    s.which = StreamCase::Case2_1;
    // The smallest grid point at or above p* (a hair of tolerance for p* landing on the grid).
    s.p = std::min(1.0, std::ceil(s.p_star * (g - 1) - 1e-9) / (g - 1));
  }
  s.latency = final_latency(in, s.p);
  s.domain = static_cast<std::uint32_t>(std::llround(g - s.p * (g - 1)));
  return s;
}

double domain_latency(const MultiLevelInputs& in, const std::vector<std::uint32_t>& sizes) {
  const std::size_t levels = in.levels.size();
  double ag = 0, held = in.expert_bytes;
  double domains = 1;  // N: domains, one GPU of each in an all-to-all group
  for (std::size_t l = 0; l < levels; ++l) {
    if (sizes[l] > 1) ag += held * (sizes[l] - 1) / in.levels[l].bandwidth;
    held *= sizes[l];
    domains *= static_cast<double>(in.levels[l].count / sizes[l]);
  }
  double a2a = 0;
  double finer = domains;  // domains per worker of the level above
  for (std::size_t l = 0; l < levels; ++l) {
    const double here = in.levels[l].count / sizes[l];
    finer /= here;
    // Destinations first differing at l: (here − 1) domains at l times every finer combination.
    const double differing = (here - 1) * finer;
    if (differing > 0) a2a = std::max(a2a, in.data_bytes * differing / (domains * in.levels[l].bandwidth));
  }
  const double rs = in.expert_bytes > 0 ? ag * in.gradient_bytes / in.expert_bytes : 0;
  const double forward = std::max(in.pre_expert_seconds, ag) + 2 * a2a;
  const double backward = std::max(in.backward_factor * in.pre_expert_seconds, rs) + 2 * a2a;
  return forward + backward;
}

}  // namespace moesim::strategies::hybridep
