// libFuzzer harness of the calibration profile loader (a scenario's "calibration").
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/calibration/profile.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    moesim::calibration::parse_profile(moesim::parse_json(text, "profile.json"), "profile.json");
  } catch (const moesim::InputError&) {
  }
  return 0;
}
