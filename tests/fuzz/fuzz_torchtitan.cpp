// libFuzzer harness of the torchtitan configuration importer (`moesim import torchtitan`): any
// bytes are either a scenario's sections or an InputError naming the key.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/core/error.hpp"
#include "sim/scenario/torchtitan_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    moesim::scenario::from_torchtitan_toml(text, "config.toml");
  } catch (const moesim::InputError&) {
  }
  return 0;
}
