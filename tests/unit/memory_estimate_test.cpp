// The host-memory estimate: what a strategy says an iteration writes (strategies/program_size.hpp).
#include <gtest/gtest.h>

#include "test_support.hpp"

namespace moesim {
namespace {

// What a run writes against what its strategy's program_per_iteration says one iteration writes
// (× the iterations): a bound, and not far above.
TEST(MemoryEstimate, ProgramSizeBoundsWhatTheRunWrites) {
  const struct {
    const char* path;
    double slack;  // how far above what the run writes each count may be
  } cases[] = {
      {"scenarios/quickstart.json", 1.05},        // ep, pipelining 2
      {"scenarios/hetermoe-pp.json", 1.05},       // ep, 2 pipeline stages
      {"scenarios/hetermoe-o2-w2.json", 1.5},     // zebra
      {"scenarios/hybridep-table6.json", 1.5},    // hybridep
      {"scenarios/parm-table3-a.json", 2.0},      // parm
      // adaptive: a class whose replicas share a rank needs no collective; the bound takes every class
      {"scenarios/seed004-gpt-small.json", 2.0},
  };
  for (const auto& c : cases) {
    const int iterations = 3;
    auto doc = schema::Json::parse(test::repository_file(c.path));
    doc.erase("sweep");
    doc["training"]["iterations"] = iterations;
    simulation::Simulation sim(test::scenario_from(doc.dump(), c.path));
    const strategies::ProgramSize size = sim.program_per_iteration();
    sim.run(test::with_task_log());
    double members = 0;
    for (const auto& t : sim.task_log().tasks()) members += t.type == engine::TaskType::CollectiveMember ? 1 : 0;
    const double tasks = static_cast<double>(sim.results().engine.tasks);
    const double collectives = static_cast<double>(sim.results().engine.collectives);
    for (const auto& [what, counted, run] : {std::tuple{"tasks", size.tasks, tasks}, {"members", size.members, members},
                                             {"collectives", size.collectives, collectives}}) {
      EXPECT_GE(iterations * counted, run) << c.path << ": " << what;
      EXPECT_LE(iterations * counted, c.slack * run) << c.path << ": " << what;
    }
  }
}

}  // namespace
}  // namespace moesim
