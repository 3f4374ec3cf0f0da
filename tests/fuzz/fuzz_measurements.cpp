// libFuzzer harness of the measurements JSON that the calibrate/gpu binaries write and
// `moesim calibrate fit` reads, fitting what it reads as the command does.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "calibrate/fit/measurements.hpp"
#include "calibrate/fit/profile_builder.hpp"
#include "sim/core/error.hpp"
#include "sim/core/json_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto doc = moesim::parse_json(text, "measurements.json");
    moesim::calibrate::build_profile({moesim::calibrate::read_measurements(doc, "measurements.json")}, {});
  } catch (const moesim::InputError&) {
  }
  return 0;
}
