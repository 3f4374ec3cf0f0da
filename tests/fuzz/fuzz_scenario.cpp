// libFuzzer harness of `moesim validate`: any bytes as a scenario file. Bad input must end in an
// InputError or InfeasibleError; a crash, a sanitizer report or any other exception is a bug.
//
// Two bounds keep each input's time about the work's, not the sanitizers' (ASan+UBSan run the
// code ~10x slower): sweeps check their first 256 points (each further point repeats the same
// code), and clusters over 65,536 GPUs are only loaded, not validated (validation is linear in
// GPUs: 2.9 s for 2^20, the most moesim accepts, in a release build).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/sweep/validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Presets from $MOESIM_DATA if set (a copy of the tree elsewhere), else the source tree.
  static const moesim::scenario::Loader loader(moesim::scenario::Loader::default_data_dir());
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto raw = moesim::parse_json(text, "fuzz.json");
    if (loader.build(loader.resolve(raw, "fuzz.json"), "fuzz.json").gpu_count() > 65536) return 0;
    moesim::sweep::validate(loader, raw, "fuzz.json", 256);
  } catch (const moesim::InputError&) {
  } catch (const moesim::InfeasibleError&) {
  }
  return 0;
}
