// Helpers shared by the unit tests: load scenarios from inline JSON with the repository's presets.
#pragma once

#include <string>

#include "sim/scenario/scenario.hpp"

namespace moesim::test {

inline scenario::Loader loader() { return scenario::Loader(MOESIM_SOURCE_DIR); }

inline scenario::Scenario scenario_from(const std::string& json, const std::string& file = "test.json") {
  const auto l = loader();
  return l.build(l.resolve(schema::Json::parse(json), file), file);
}

}  // namespace moesim::test
