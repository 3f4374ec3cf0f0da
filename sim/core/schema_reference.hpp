// A declared schema as a Markdown reference: one table per object (its keys, types with units and
// bounds, defaults, help, and other frameworks' names for them), nested objects, array entries and
// map values each in a table of their own under their JSON path. docs/scenario-reference.md is the
// scenario's (`moesim schema --markdown`), so the reference is never out of step with what the
// loader accepts.
#pragma once

#include <string>

#include "sim/core/schema.hpp"

namespace moesim::schema {

// The tables of `node` and of every object under it, titled by their path from `path`
// ("training", "cluster.levels[]", "gpus.KIND").
std::string markdown_reference(const Node& node, const std::string& path);

}  // namespace moesim::schema
