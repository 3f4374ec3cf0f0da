// libFuzzer harness of `moesim validate`: any bytes as a scenario file. Bad input must end in an
// InputError or InfeasibleError; a crash, a sanitizer report or any other exception is a bug.
//
// One bound keeps each input's time about the work's, not the sanitizers' (ASan+UBSan run the
// code ~10x slower): at most 65,536 GPUs are validated per input, over the scenario and its sweep
// points in order (each further GPU or point repeats the same code; validation is linear in GPUs:
// 2.9 s for 2^20, the most moesim accepts, in a release build). Larger inputs are only loaded.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sim/core/error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/sweep/runner.hpp"
#include "sim/sweep/validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Presets from $MOESIM_DATA if set (a copy of the tree elsewhere), else the source tree.
  static const moesim::scenario::Loader loader(moesim::scenario::Loader::default_data_dir());
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    constexpr std::uint64_t kGpus = 65536;
    const auto raw = moesim::parse_json(text, "fuzz.json");
    const auto resolved = loader.resolve(raw, "fuzz.json");
    std::uint64_t gpus = loader.build(resolved, "fuzz.json").gpu_count();
    if (gpus > kGpus) return 0;
    std::size_t points = 0;
    if (resolved.contains("sweep"))
      for (const auto& point : moesim::sweep::plan_sweep(loader, resolved, "fuzz.json", 256).scenarios) {
        if ((gpus += point.gpu_count()) > kGpus) break;
        ++points;
      }
    moesim::sweep::validate(loader, raw, "fuzz.json", points);
  } catch (const moesim::InputError&) {
  } catch (const moesim::InfeasibleError&) {
  }
  return 0;
}
