#include "sim/sweep/validation.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>

#include "sim/core/memory_limit.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/simulation/time_estimate.hpp"
#include "sim/sweep/runner.hpp"

namespace moesim::sweep {

Validation validate(const scenario::Loader& loader, const schema::Json& raw, const std::string& file, std::size_t points) {
  const schema::Json resolved = loader.resolve(raw, file);
  scenario::Scenario sc = loader.build(resolved, file);
  Validation v;
  v.strategy = sc.strategy->name;
  v.model = sc.model.name;
  v.gpus = sc.gpu_count();
  v.iterations = sc.training.iterations;
  v.warnings = sc.warnings;
  const std::size_t own_warnings = v.warnings.size();
  const auto add_warnings = [&](const std::vector<std::string>& ws) {
    for (const auto& w : ws)
      if (std::find(v.warnings.begin(), v.warnings.end(), w) == v.warnings.end()) {
        if (v.warnings.size() < own_warnings + Validation::kListed) v.warnings.push_back(w);
        else ++v.warnings_unlisted;  // counted once per point that says it
      }
  };
  simulation::Simulation sim(std::move(sc));
  sim.check();
  for (const auto& f : sim.memory()) v.peak_gpu_bytes = std::max(v.peak_gpu_bytes, f.total());
  v.host_bytes = sim.host_memory_estimate();
  v.host_terms = simulation::describe(sim.memory_estimate());
  v.tasks = sim.memory_estimate().tasks;
  v.cpu_seconds = simulation::cpu_seconds(sim.memory_estimate());
  v.resident_bytes = resident_bytes();
  if (resolved.contains("sweep")) {
    const double before = resident_bytes();
    const auto t0 = std::chrono::steady_clock::now();
    const auto plan = plan_sweep(loader, resolved, file, points);
    v.points = plan.scenarios.size();
    for (std::size_t p = 0; p < plan.scenarios.size(); ++p) {
      add_warnings(plan.scenarios[p].warnings);
      try {
        simulation::Simulation point(plan.scenarios[p]);
        point.check();
        v.sweep_cpu_seconds += simulation::cpu_seconds(point.memory_estimate());
      } catch (const std::runtime_error& e) {  // InfeasibleError or InputError
        if (v.refused.size() < Validation::kListed)
          v.refused.push_back(fmt::format("sweep point {} would be refused: {}", p, e.what()));
        ++v.refused_count;
      }
    }
    v.plan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    v.plan_bytes = std::max(0.0, resident_bytes() - before);
  }
  return v;
}

}  // namespace moesim::sweep
