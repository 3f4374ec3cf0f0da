// The declared schema of scenario files and of the presets they reference (models/,
// topologies/, the GPU catalogue topologies/gpus.json). docs/scenario.md explains every key.
#pragma once

#include "sim/core/schema.hpp"

namespace moesim::scenario {

schema::NodePtr gpu_schema();
schema::NodePtr link_schema();  // an entry of topologies/links.json
schema::NodePtr cluster_schema();
schema::NodePtr model_schema();
schema::NodePtr software_schema();  // a scenario's "software" section or a software/ preset
schema::NodePtr scenario_schema();  // the "strategy" object is checked by the strategy's own schema

}  // namespace moesim::scenario
