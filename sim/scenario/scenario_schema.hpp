// The declared schema of scenario files and of the presets they reference (models/,
// topologies/, the GPU catalogue topologies/gpus.json). docs/scenario.md explains every key.
// A section whose keys fill one struct is declared as schema::Options of it (core/bound_options.hpp):
// its schema node and the loader's reading derive from the one declaration.
#pragma once

#include <string>

#include "sim/core/bound_options.hpp"
#include "sim/core/json_schema.hpp"
#include "sim/core/schema.hpp"

namespace moesim::cluster {
struct AttentionMeasurement;
struct GpuSpec;
struct HostSpec;
struct InSwitchReduction;
struct Level;
struct LinkTech;
struct MatmulMeasurement;
}  // namespace moesim::cluster
namespace moesim::compute {
struct ComputeOptions;
}
namespace moesim::parallel {
struct ParallelConfig;
}
namespace moesim::software {
struct Software;
}
namespace moesim::workload {
struct ModelShape;
struct RoutingConfig;
struct TrainingConfig;
}  // namespace moesim::workload

namespace moesim::scenario {

struct Scenario;

schema::NodePtr gpu_schema();
schema::NodePtr link_schema();  // an entry of topologies/links.json
schema::NodePtr cluster_schema();
schema::NodePtr model_schema();
schema::NodePtr software_schema();  // a scenario's "software" section or a software/ preset
schema::NodePtr scenario_schema();  // the "strategy" object is checked by the strategy's own schema

// The scenario file as JSON Schema (draft 2020-12; `moesim schema`, docs/scenario.schema.json):
// the declared schema, with what the loader's preset expansion and the strategy registry add: a
// section named by a preset ("NAME" or {"preset": "NAME", ...overrides}), and the strategy object as
// one of the registered strategies' options.
schema::Json scenario_json_schema();
// The same as a Markdown reference, a table per section (`moesim schema --markdown`,
// docs/scenario-reference.md), the strategies' options after the scenario's.
std::string scenario_reference_markdown();

// The sections bound to the structs they fill.
const schema::Options<cluster::GpuSpec>& gpu_options();  // an entry of gpus.json or a scenario's "gpus"
const schema::Options<cluster::MatmulMeasurement>& matmul_options();  // a GPU's "mamf" entry
const schema::Options<cluster::AttentionMeasurement>& attention_kernel_options();
const schema::Options<cluster::LinkTech>& link_options();  // an entry of links.json
const schema::Options<cluster::InSwitchReduction>& nvls_options();
const schema::Options<cluster::HostSpec>& host_options();  // cluster.hosts
const schema::Options<cluster::Level>& level_options();       // an entry of cluster.levels
const schema::Options<workload::ModelShape>& model_options();
const schema::Options<workload::TrainingConfig>& training_options();
const schema::Options<parallel::ParallelConfig>& parallel_options();
const schema::Options<workload::RoutingConfig>& routing_options();
const schema::Options<Scenario>& network_options();  // fills Scenario::network_model and all_reduce
const schema::Options<compute::ComputeOptions>& compute_options();
const schema::Options<software::Software>& software_options();

// The scenario key that another framework's name means (Megatron-Core's arguments and
// TransformerConfig, Hugging Face's config.json, torchtitan's model args: "num_experts_per_tok" is
// "top_k"), from the synonyms the options declare; nullptr if none does. What `moesim import
// megatron` maps.
const std::string* moesim_name_of(const std::string& foreign);

}  // namespace moesim::scenario
