// A declared schema (core/schema.hpp) written as JSON Schema, draft 2020-12
// (https://json-schema.org/draft/2020-12/json-schema-core): for editors that complete and check a
// scenario as it is typed, and for Python tools that check one before moesim reads it. It states
// what the declared schema states: keys, types, bounds, choices, defaults, help, and the unit
// strings as patterns of the units moesim parses. The magnitude bounds of unit values and the rules
// the loader checks across keys (one of "gpu" and "groups", divisibility) are moesim's alone; each
// property's description says what the value means, and `moesim validate` checks the rest.
#pragma once

#include "sim/core/schema.hpp"

namespace moesim::schema {

Json to_json_schema(const Node& node);

// The regular expression (ECMA-262, as JSON Schema's "pattern") of a value with a unit of `kind`:
// a non-negative number and one of the unit names moesim parses, spaces allowed around them.
std::string unit_pattern(UnitKind kind);

}  // namespace moesim::schema
