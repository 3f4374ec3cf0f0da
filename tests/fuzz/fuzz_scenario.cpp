// libFuzzer harness of `moesim validate`: any bytes as a scenario file. Bad input must end in an
// InputError or InfeasibleError; a crash, a sanitizer report or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/sweep/validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const moesim::scenario::Loader loader(MOESIM_SOURCE_DIR);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    moesim::sweep::validate(loader, moesim::parse_json(text, "fuzz.json"), "fuzz.json");
  } catch (const moesim::InputError&) {
  } catch (const moesim::InfeasibleError&) {
  }
  return 0;
}
