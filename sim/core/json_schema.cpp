#include "sim/core/json_schema.hpp"

#include <fmt/format.h>

namespace moesim::schema {

std::string unit_pattern(UnitKind kind) {
  // The number std::from_chars reads (units.cpp split_number): digits with an optional fraction
  // and exponent, never a sign; the unit after optional spaces.
  return fmt::format("^\\s*([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?\\s*({})\\s*$", fmt::join(unit_names(kind), "|"));
}

namespace {

Json unit_value(UnitKind kind) {
  return Json{{"type", "string"}, {"pattern", unit_pattern(kind)}};
}

// A bound of an integer or number as JSON Schema writes it: a whole bound as an integer.
Json bound_value(double v) {
  if (v == static_cast<double>(static_cast<std::int64_t>(v))) return Json(static_cast<std::int64_t>(v));
  return Json(v);
}

}  // namespace

Json to_json_schema(const Node& n) {
  Json out = Json::object();
  switch (n.type) {
    case Type::Any: return out;
    case Type::Object: {
      out["type"] = "object";
      Json properties = Json::object();
      Json required = Json::array();
      for (const Field& f : n.fields) {
        Json p = to_json_schema(*f.node);
        if (!f.help.empty()) p["description"] = f.help;
        if (!f.default_value.is_null()) p["default"] = f.default_value;
        properties[f.key] = std::move(p);
        if (f.required) required.push_back(f.key);
      }
      out["properties"] = std::move(properties);
      if (!required.empty()) out["required"] = std::move(required);
      out["additionalProperties"] = false;
      return out;
    }
    case Type::Map:
      out["type"] = "object";
      out["additionalProperties"] = to_json_schema(*n.items);
      return out;
    case Type::Array:
      out["type"] = "array";
      out["items"] = to_json_schema(*n.items);
      if (n.min_items > 0) out["minItems"] = n.min_items;
      return out;
    case Type::Integer:
    case Type::Number:
      out["type"] = n.type == Type::Integer ? "integer" : "number";
      if (n.min) out[n.exclusive_min ? "exclusiveMinimum" : "minimum"] = bound_value(*n.min);
      if (n.max) out["maximum"] = bound_value(*n.max);
      return out;
    case Type::Boolean: out["type"] = "boolean"; return out;
    case Type::String: out["type"] = "string"; return out;
    case Type::Enum:
      out["type"] = "string";
      out["enum"] = n.choices;
      return out;
    case Type::Time: return unit_value(UnitKind::Time);
    case Type::Bandwidth: return unit_value(UnitKind::Bandwidth);
    case Type::Bytes: return unit_value(UnitKind::Bytes);
    case Type::Flops: return unit_value(UnitKind::Flops);
  }
  return out;
}

}  // namespace moesim::schema
