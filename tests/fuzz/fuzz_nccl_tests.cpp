// libFuzzer harness of the nccl-tests log importer (`moesim calibrate fit LOG`), fitting what it
// reads as the command does.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "calibrate/fit/nccl_tests_log.hpp"
#include "calibrate/fit/profile_builder.hpp"
#include "sim/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    moesim::calibrate::Measurements m;
    m.file = "log.txt";
    m.series = moesim::calibrate::read_nccl_tests_log(text, "log.txt", {});
    moesim::calibrate::build_profile({m}, {});
  } catch (const moesim::InputError&) {
  }
  return 0;
}
