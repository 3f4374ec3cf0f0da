// One declared schema for every JSON input (scenarios, presets, calibration profiles). Validation
// refuses unknown keys (suggesting the nearest known one), wrong types, values without units and
// impossible values with an InputError naming the file, the JSON path and the fix, and returns the
// document completed with the declared defaults: the "effective" document a run echoes.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/units.hpp"

namespace moesim::schema {

using Json = nlohmann::ordered_json;

enum class Type { Object, Map, Array, Integer, Number, Boolean, String, Enum, Time, Bandwidth, Bytes, Flops, Any };

struct Node;
using NodePtr = std::shared_ptr<const Node>;

struct Field {
  std::string key;
  NodePtr node;
  bool required = false;
  Json default_value;  // null: no default (the key stays absent)
  std::string help;
};

struct Node {
  Type type = Type::Any;
  std::vector<Field> fields;          // Object
  NodePtr items;                      // Array element, Map value
  std::vector<std::string> choices;   // Enum
  std::optional<double> min, max;     // Integer, Number, and the magnitude of unit values
  bool exclusive_min = false;
  std::size_t min_items = 0;          // Array
};

NodePtr object(std::vector<Field> fields);
NodePtr map_of(NodePtr values);
NodePtr array_of(NodePtr items, std::size_t min_items = 0);
NodePtr integer(std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt);
NodePtr number(std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt, bool exclusive_min = false);
NodePtr boolean();
NodePtr string();
NodePtr enumeration(std::vector<std::string> choices);
NodePtr time();
NodePtr latency();  // a time up to 10 s
NodePtr bandwidth();  // must be > 0
NodePtr bytes();
NodePtr flops();      // must be > 0
NodePtr any();

Field required(std::string key, NodePtr node, std::string help);
Field optional(std::string key, NodePtr node, Json default_value, std::string help);

// Throws InputError(file, path, problem, fix) on the first problem.
Json validate(const NodePtr& schema, const Json& doc, const std::string& file, const std::string& path = "$");

// Typed readers for validated unit values.
Time as_time(const Json& v);
Bandwidth as_bandwidth(const Json& v);
double as_bytes(const Json& v);
double as_flops(const Json& v);

// Levenshtein distance, for "did you mean".
std::size_t edit_distance(const std::string& a, const std::string& b);
// The scenario key that another framework's name means (Megatron-Core's arguments and
// TransformerConfig, Hugging Face's config.json, torchtitan's model args: "num_experts_per_tok" is
// "top_k"), or nullptr: what an unknown key's refusal names, and what `moesim import megatron` maps.
const std::string* moesim_name_of(const std::string& foreign);

// For error messages: "an integer", "a string", … and the value itself, cut to 60 characters.
std::string json_kind(const Json& v);
std::string show(const Json& v);

}  // namespace moesim::schema
