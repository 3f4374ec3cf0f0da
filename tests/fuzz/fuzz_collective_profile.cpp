// libFuzzer harness of calibration profiles on any cluster (issue 45: the shipped B200 profile on a
// DGX H100 aborted the flow model). The input bytes pick a shipped profile and mutate its
// segments' α and β (0, the smallest double, huge, or as shipped), a shipped topology, a
// collective, its rank count and size, the all-reduce algorithm and the network model; the
// collective is then simulated as `moesim collective` would. It must run, or end in an InputError
// or InfeasibleError; an abort, a sanitizer report or any other exception is a bug.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <fuzzer/FuzzedDataProvider.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/core/input_file.hpp"
#include "sim/core/json_input.hpp"
#include "sim/simulation/collective_bench.hpp"
#include "sim/simulation/simulation.hpp"

namespace {

namespace fs = std::filesystem;
using moesim::schema::Json;

template <typename T>
T pick(FuzzedDataProvider& in, const std::vector<T>& choices) {
  return choices[in.ConsumeIntegralInRange<std::size_t>(0, choices.size() - 1)];
}

// The shipped files of a folder, sorted (the same input picks the same file).
std::vector<fs::path> files(const fs::path& folder, const std::vector<std::string>& skip) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(folder))
    if (e.path().extension() == ".json" && std::find(skip.begin(), skip.end(), e.path().stem().string()) == skip.end())
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fs::path source = MOESIM_SOURCE_DIR;
  static const moesim::scenario::Loader loader(moesim::scenario::Loader::default_data_dir());
  static const std::vector<fs::path> profiles = files(source / "calibrations", {});
  // The topologies small enough to simulate a collective in milliseconds (not the 1000-DC ones).
  static const std::vector<fs::path> clusters = files(source / "topologies", {"gpus", "links", "hybridep-1000dc"});
  static const fs::path scratch = fs::temp_directory_path() / ("moesim-fuzz-profile-" + std::to_string(::getpid()) + ".json");
  FuzzedDataProvider in(data, size);
  Json profile = moesim::parse_json(moesim::read_input_file(pick(in, profiles)), "profile.json");
  for (auto& c : profile["collectives"])
    for (auto& s : c["segments"]) {
      if (in.ConsumeBool()) s["beta_s_per_byte"] = pick<double>(in, {0.0, 5e-324, 1e-300, 1e-15, 1e-3});
      if (in.ConsumeBool()) s["alpha"] = pick<std::string>(in, {"0us", "1ps", "1ms", "1s"});
    }
  std::ofstream(scratch) << profile.dump();
  const std::string collective = pick<std::string>(in, {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"});
  const Json doc = {{"name", "fuzz"},
                    {"cluster", {{"preset", pick(in, clusters).stem().string()}}},
                    {"model", {{"layers", 1}, {"hidden", 1024}, {"ffn_hidden", 1024}, {"experts", 1}, {"top_k", 1}, {"heads", 8}}},
                    {"training", {{"sequence_length", 1024}}},
                    {"strategy", {{"name", "ep"}}},
                    {"network",
                     {{"model", pick<std::string>(in, {"flow", "analytic"})},
                      {"all_reduce", pick<std::string>(in, {"auto", "ring", "hierarchical", "tree", "nvls", "direct"})}}},
                    {"calibration", scratch.string()}};
  const int ranks = in.ConsumeIntegralInRange<int>(2, 128);
  const double bytes = pick<double>(in, {0.0, 1.0, 8.0, 31.0, 32.0, 4096.0, 1048576.0, 1.5e9});
  try {
    const moesim::simulation::Simulation sim(loader.build(loader.resolve(doc, "fuzz.json"), "fuzz.json"));
    const int gpus = static_cast<int>(std::min<std::uint64_t>(sim.topology().gpu_count(), static_cast<std::uint64_t>(ranks)));
    if (gpus >= 2) moesim::simulation::bench_collective(sim, collective, gpus, {bytes});
  } catch (const moesim::InputError&) {
  } catch (const moesim::InfeasibleError&) {
  }
  return 0;
}
