// libFuzzer harness of the GeMM table reader (`moesim calibrate fit TABLE.csv`), fitting what it
// reads as the command does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "calibrate/fit/gemm_table_csv.hpp"
#include "calibrate/fit/profile_builder.hpp"
#include "sim/core/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    moesim::calibrate::build_profile({moesim::calibrate::read_gemm_table_csv(text, "gemm.csv")}, {});
  } catch (const moesim::InputError&) {
  }
  return 0;
}
