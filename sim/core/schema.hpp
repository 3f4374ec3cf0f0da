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
  // Other frameworks' names for the key (schema::Option::also): an unknown key that is one of them
  // is refused with this key.
  std::vector<std::string> synonyms;
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
// A node's bounds as the user writes them ("between 1 and 64", ">= \"1Mbps\""); empty if none.
std::string range_text(const Node& n);

// For error messages: "an integer", "a string", … and the value itself, cut to 60 characters.
std::string json_kind(const Json& v);
std::string show(const Json& v);

}  // namespace moesim::schema
