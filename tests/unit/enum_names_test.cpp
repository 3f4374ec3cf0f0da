// Each enumeration's names are written once (sim/core/enum_names.hpp): the scenario schema offers
// them, the loader reads them and to_string writes them. A table that names one value twice, or
// gives two values one name, would read a scenario's name as another value.
#include <gtest/gtest.h>

#include <set>

#include "sim/cluster/fabric.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/core/enum_names.hpp"
#include "sim/network/collective.hpp"
#include "sim/parallel/layout.hpp"
#include "sim/scenario/scenario_schema.hpp"
#include "sim/software/software.hpp"
#include "sim/workload/model_shape.hpp"
#include "sim/workload/routing.hpp"

using namespace moesim;

namespace {

// Every name reads back the value it names, and every value and name appear once.
template <class E, std::size_t N>
void expect_one_name_each(const std::array<EnumName<E>, N>& names, std::size_t values) {
  std::set<std::string_view> seen_names;
  std::set<E> seen_values;
  for (const auto& n : names) {
    EXPECT_TRUE(seen_names.insert(n.name).second) << n.name;
    EXPECT_TRUE(seen_values.insert(n.value).second) << n.name;
    EXPECT_EQ(value_of(names, n.name), n.value) << n.name;
    EXPECT_EQ(name_of(names, n.value), n.name);
  }
  EXPECT_EQ(seen_values.size(), values);  // the enum's values, counted from its declaration
  EXPECT_FALSE(value_of(names, "no such name").has_value());
}

}  // namespace

TEST(EnumNames, EveryValueHasOneNameAndEveryNameOneValue) {
  expect_one_name_each(cluster::kFabricNames, 3);
  expect_one_name_each(cluster::kDtypeNames, 6);
  expect_one_name_each(parallel::kPipelineScheduleNames, 4);
  expect_one_name_each(parallel::kShardingNames, 3);
  expect_one_name_each(parallel::kEpBackendNames, 3);
  expect_one_name_each(network::kAlgorithmNames, 6);
  expect_one_name_each(compute::kGroupedGemmNames, 3);
  expect_one_name_each(compute::kPermuteNames, 3);
  expect_one_name_each(compute::kCrossEntropyNames, 3);
  expect_one_name_each(compute::kOptimizerKernelNames, 3);
  expect_one_name_each(workload::kExpertKindNames, 3);
  expect_one_name_each(workload::kFp8ScalingNames, 2);
  expect_one_name_each(workload::kRecomputeNames, 3);
  expect_one_name_each(workload::kRecomputeModuleNames, static_cast<std::size_t>(workload::RecomputeModule::Count));
  expect_one_name_each(workload::kOffloadModuleNames, static_cast<std::size_t>(workload::OffloadModule::Count));
  expect_one_name_each(workload::kRoutingKindNames, 4);
  expect_one_name_each(workload::kRoutingSamplingNames, 3);
  expect_one_name_each(software::kGraphScopeNames, 6);
}

// to_string writes what the scenario reads: the names a results file echoes are scenario names.
TEST(EnumNames, ToStringWritesTheScenarioName) {
  EXPECT_EQ(cluster::to_string(cluster::Fabric::FullMesh), "full_mesh");
  EXPECT_EQ(cluster::to_string(cluster::Dtype::mxfp8), "mxfp8");
  EXPECT_EQ(cluster::parse_dtype("bf16"), cluster::Dtype::bf16);
  EXPECT_FALSE(cluster::parse_dtype("BF16").has_value());
  EXPECT_EQ(parallel::to_string(parallel::PipelineSchedule::Interleaved), "interleaved_1f1b");
  EXPECT_EQ(parallel::to_string(parallel::EpBackendKind::HybridEp), "hybridep");
  EXPECT_EQ(network::to_string(network::Algorithm::Nvls), "nvls");
}

// The schema offers exactly the table's names, in its order (what an error's "one of" lists).
TEST(EnumNames, TheScenarioSchemaOffersTheTablesNames) {
  const auto parallel_section = [] {
    for (const auto& f : scenario::scenario_schema()->fields)
      if (f.key == "parallel") return f.node;
    return schema::NodePtr();
  }();
  ASSERT_TRUE(parallel_section);
  const auto choices = [&](const std::string& key) {
    for (const auto& f : parallel_section->fields)
      if (f.key == key) return f.node->choices;
    return std::vector<std::string>();
  };
  EXPECT_EQ(choices("sharding"), (std::vector<std::string>{"none", "distributed_optimizer", "fsdp"}));
  EXPECT_EQ(choices("ep_backend"), (std::vector<std::string>{"nccl", "deepep", "hybridep"}));
  EXPECT_EQ(choices("schedule"), (std::vector<std::string>{"1f1b", "gpipe", "interleaved_1f1b", "dualpipev"}));
}
