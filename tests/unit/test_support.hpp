// Helpers shared by the unit tests: load scenarios from inline JSON with the repository's presets.
#pragma once

#include <string>

#include "sim/cluster/topology.hpp"
#include "sim/scenario/scenario.hpp"

namespace moesim::test {

// A GPU kind for network tests: its compute figures do not matter there.
inline cluster::GpuSpec any_gpu() {
  cluster::GpuSpec g;
  g.key = "test-gpu";
  g.peak_flops[static_cast<std::size_t>(cluster::Dtype::bf16)] = 1e15;
  g.hbm_bytes_per_second = 1e12;
  g.memory_bytes = 80e9;
  return g;
}

// A switch level from unit strings.
inline cluster::Level level(const char* name, std::uint32_t count, const char* bw, const char* latency,
                            double oversubscription = 1) {
  return cluster::Level{name, count, cluster::Fabric::Switch, *parse_bandwidth(bw), *parse_time(latency), oversubscription};
}

inline scenario::Loader loader() { return scenario::Loader(MOESIM_SOURCE_DIR); }

inline scenario::Scenario scenario_from(const std::string& json, const std::string& file = "test.json") {
  const auto l = loader();
  return l.build(l.resolve(schema::Json::parse(json), file), file);
}

}  // namespace moesim::test
