// A scenario, fully resolved: presets expanded, defaults filled, units parsed. `effective` is
// the same as JSON; a run writes it next to its results so that it can be re-run from there.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sim/calibration/profile.hpp"
#include "sim/cluster/topology.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/core/schema.hpp"
#include "sim/network/collective.hpp"
#include "sim/parallel/layout.hpp"
#include "sim/software/software.hpp"
#include "sim/strategies/registry.hpp"
#include "sim/workload/model_shape.hpp"
#include "sim/workload/routing.hpp"

namespace moesim::scenario {

struct Scenario {
  std::string file;
  schema::Json effective;
  std::string name;
  std::uint64_t seed = 1;
  std::vector<cluster::Level> levels;
  std::vector<cluster::GpuSpec> kinds;
  std::vector<std::uint16_t> kind_of_gpu;  // empty: every GPU is kinds[0]
  std::optional<cluster::HostSpec> hosts;
  workload::ModelShape model;
  workload::TrainingConfig training;
  workload::RoutingConfig routing;
  parallel::ParallelConfig parallel;
  compute::ComputeOptions compute;
  software::Software software;  // what trains the model (its grouped GeMM backend is also in `compute`)
  network::Algorithm all_reduce = network::Algorithm::Auto;
  std::string network_model = "flow";  // or "analytic"
  const strategies::StrategyInfo* strategy = nullptr;
  schema::Json strategy_options;
  std::shared_ptr<const calibration::Profile> calibration;  // null: defaults only
  std::vector<std::string> warnings;  // plausibility (scenario/plausibility.hpp): "FILE: PATH: problem; hint"

  cluster::Topology topology() const { return cluster::Topology(levels, kinds, kind_of_gpu, hosts); }
  std::uint64_t gpu_count() const;
};

struct PresetEntry {
  std::string kind;  // "model", "topology", "gpu", "strategy"
  std::string name;
  std::string description;
};

// Finds presets in DATA/models and DATA/topologies. DATA is --data, else $MOESIM_DATA, else the
// source tree moesim was built from.
class Loader {
 public:
  explicit Loader(std::filesystem::path data_dir = default_data_dir());
  static std::filesystem::path default_data_dir();

  // Reads a JSON file; malformed JSON is an InputError naming line and column.
  schema::Json read_json(const std::filesystem::path& file) const;
  // Expands {"preset": NAME} in cluster and model (overrides on top) and attaches the GPU specs.
  schema::Json resolve(const schema::Json& raw, const std::string& file) const;
  // Validates a resolved scenario and builds it. Throws InputError.
  Scenario build(const schema::Json& resolved, const std::string& file) const;
  Scenario load(const std::filesystem::path& file) const { return build(resolve(read_json(file), file.string()), file.string()); }

  std::vector<PresetEntry> presets() const;
  const std::filesystem::path& data_dir() const { return data_dir_; }

 private:
  schema::Json preset(const std::string& folder, const std::string& name, const std::string& file,
                      const std::string& path) const;
  schema::Json gpu_catalogue() const;
  // A file a scenario names at `path` (a calibration profile, a routing trace): from the data
  // folder, else next to the scenario file; an InputError naming `what` and `example` if absent.
  std::filesystem::path data_file(const std::string& name, const std::string& file, const std::string& path,
                                  const std::string& what, const std::string& example) const;
  schema::Json link_catalogue() const;
  // topologies/FILE's object under KEY, each entry checked against `entry` and then by `check`
  // (the entry's key and value; what a schema cannot say), read once into `cache`: an entry no
  // scenario names is checked too.
  schema::Json catalogue(const char* file, const char* key, const schema::NodePtr& entry, std::optional<schema::Json>& cache,
                         const std::function<void(const std::string&, const schema::Json&, const std::string&)>& check = {}) const;
  std::filesystem::path data_dir_;
  // Read once; a sweep's jobs (and the ranks of SweepRanks' test) build points from one Loader
  // on several threads, so the first read is made under the lock.
  mutable std::mutex cache_mu_;
  mutable std::optional<schema::Json> catalogue_;  // topologies/gpus.json, read once
  mutable std::optional<schema::Json> links_;      // topologies/links.json, read once
};

}  // namespace moesim::scenario
