#include "sim/core/schema.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::schema {

std::string json_kind(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::string show(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

namespace {

NodePtr make(Type type) {
  auto n = std::make_shared<Node>();
  n->type = type;
  return n;
}

std::optional<UnitKind> unit_kind(Type t) {
  switch (t) {
    case Type::Time: return UnitKind::Time;
    case Type::Bandwidth: return UnitKind::Bandwidth;
    case Type::Bytes: return UnitKind::Bytes;
    case Type::Flops: return UnitKind::Flops;
    default: return std::nullopt;
  }
}

std::optional<double> unit_value(Type t, const std::string& s) {
  switch (t) {
    case Type::Time: return parse_time_ps(s);
    case Type::Bandwidth:
      if (auto v = parse_bandwidth(s)) return v->bytes_per_second;
      return std::nullopt;
    case Type::Bytes: return parse_bytes(s);
    case Type::Flops: return parse_flops(s);
    default: return std::nullopt;
  }
}

// A bound as the user writes it: with its unit for unit values.
std::string bound_text(Type t, double v) {
  switch (t) {
    case Type::Time: return fmt::format("\"{}\"", format_time(static_cast<Time>(v)));
    case Type::Bandwidth: return fmt::format("\"{}\"", format_bandwidth(Bandwidth{v}));
    case Type::Bytes: return fmt::format("\"{}\"", format_bytes(v));
    case Type::Flops: return fmt::format("\"{:g}TFLOPS\"", v / 1e12);
    default: return fmt::format("{}", v);
  }
}

}  // namespace

std::string range_text(const Node& n) {
  if (n.min && n.max) return fmt::format("between {} and {}", bound_text(n.type, *n.min), bound_text(n.type, *n.max));
  if (n.min) return fmt::format("{} {}", n.exclusive_min ? ">" : ">=", bound_text(n.type, *n.min));
  if (n.max) return fmt::format("<= {}", bound_text(n.type, *n.max));
  return "";
}

namespace {

void check_range(const Node& n, double v, const Json& raw, const std::string& file, const std::string& path) {
  const bool low = n.min && (n.exclusive_min ? v <= *n.min : v < *n.min);
  const bool high = n.max && v > *n.max;
  if (low || high)
    throw InputError(file, path, fmt::format("{} is out of range", show(raw)),
                     fmt::format("use a value {}", range_text(n)));
}

Json validate_node(const Node& n, const Json& v, const std::string& file, const std::string& path) {
  switch (n.type) {
    case Type::Any: return v;
    case Type::Object: {
      if (!v.is_object())
        throw InputError(file, path, fmt::format("expected an object, got {}", json_kind(v)), "write { ... }");
      for (auto it = v.begin(); it != v.end(); ++it) {
        const auto known = std::find_if(n.fields.begin(), n.fields.end(), [&](const Field& f) { return f.key == it.key(); });
        if (known != n.fields.end()) continue;
        std::string nearest;
        std::size_t best = 4;
        for (const Field& f : n.fields) {
          const std::size_t d = edit_distance(f.key, it.key());
          if (d < best) best = d, nearest = f.key;
        }
        std::vector<std::string> keys;
        for (const Field& f : n.fields) keys.push_back(f.key);
        // Another framework's name for one of these keys (Field::synonyms): say which it is.
        const auto ours = std::find_if(n.fields.begin(), n.fields.end(), [&](const Field& f) {
          return std::find(f.synonyms.begin(), f.synonyms.end(), it.key()) != f.synonyms.end();
        });
        throw InputError(file, path + "." + it.key(), fmt::format("unknown key \"{}\"", it.key()),
                         ours != n.fields.end()
                             ? fmt::format("moesim calls it \"{}\" (allowed: {})", ours->key, fmt::join(keys, ", "))
                         : nearest.empty()
                             ? fmt::format("remove it; allowed keys here: {}", fmt::join(keys, ", "))
                             : fmt::format("did you mean \"{}\"? (allowed: {})", nearest, fmt::join(keys, ", ")));
      }
      Json out = Json::object();
      for (const Field& f : n.fields) {
        const std::string sub = path + "." + f.key;
        if (v.contains(f.key)) {
          out[f.key] = validate_node(*f.node, v.at(f.key), file, sub);
        } else if (f.required) {
          throw InputError(file, sub, fmt::format("missing required key \"{}\"", f.key), fmt::format("add it: {}", f.help));
        } else if (!f.default_value.is_null()) {
          out[f.key] = validate_node(*f.node, f.default_value, file, sub);
        }
      }
      return out;
    }
    case Type::Map: {
      if (!v.is_object())
        throw InputError(file, path, fmt::format("expected an object, got {}", json_kind(v)), "write { \"name\": ... }");
      Json out = Json::object();
      for (auto it = v.begin(); it != v.end(); ++it)
        out[it.key()] = validate_node(*n.items, it.value(), file, path + "." + it.key());
      return out;
    }
    case Type::Array: {
      if (!v.is_array()) throw InputError(file, path, fmt::format("expected an array, got {}", json_kind(v)), "write [ ... ]");
      if (v.size() < n.min_items)
        throw InputError(file, path, fmt::format("has {} entries", v.size()), fmt::format("give at least {}", n.min_items));
      Json out = Json::array();
      for (std::size_t i = 0; i < v.size(); ++i)
        out.push_back(validate_node(*n.items, v[i], file, fmt::format("{}[{}]", path, i)));
      return out;
    }
    case Type::Integer: {
      if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) {
        check_range(n, v.get<double>(), v, file, path);
        return Json(static_cast<std::int64_t>(v.get<double>()));
      }
      if (!v.is_number_integer() && !v.is_number_unsigned())
        throw InputError(file, path, fmt::format("expected an integer, got {} {}", json_kind(v), show(v)),
                         v.is_string() ? "write the number without quotes" : "write a whole number");
      check_range(n, v.get<double>(), v, file, path);
      return v;
    }
    case Type::Number: {
      if (!v.is_number())
        throw InputError(file, path, fmt::format("expected a number, got {} {}", json_kind(v), show(v)),
                         v.is_string() ? "write the number without quotes" : "write a number");
      check_range(n, v.get<double>(), v, file, path);
      return v;
    }
    case Type::Boolean:
      if (!v.is_boolean()) throw InputError(file, path, fmt::format("expected true or false, got {}", show(v)), "write true or false");
      return v;
    case Type::String:
      if (!v.is_string()) throw InputError(file, path, fmt::format("expected a string, got {}", json_kind(v)), "write \"...\"");
      return v;
    case Type::Enum: {
      const std::string choices = fmt::format("\"{}\"", fmt::join(n.choices, "\", \""));
      if (!v.is_string() || std::find(n.choices.begin(), n.choices.end(), v.get<std::string>()) == n.choices.end())
        throw InputError(file, path, fmt::format("{} is not a known choice", show(v)), fmt::format("use one of {}", choices));
      return v;
    }
    case Type::Time:
    case Type::Bandwidth:
    case Type::Bytes:
    case Type::Flops: {
      const UnitKind kind = *unit_kind(n.type);
      if (v.is_number())
        throw InputError(file, path, fmt::format("{} has no unit", show(v)), fmt::format("write {}", unit_help(kind)));
      if (!v.is_string())
        throw InputError(file, path, fmt::format("expected {}, got {}", unit_help(kind), json_kind(v)), "write it as a string");
      const auto value = unit_value(n.type, v.get<std::string>());
      if (!value)
        throw InputError(file, path, fmt::format("{} is not {}", show(v), unit_help(kind)), "fix the number or the unit");
      check_range(n, *value, v, file, path);
      return v;
    }
  }
  return v;
}

}  // namespace



NodePtr object(std::vector<Field> fields) {
  auto n = std::make_shared<Node>();
  n->type = Type::Object;
  n->fields = std::move(fields);
  return n;
}
NodePtr map_of(NodePtr values) {
  auto n = std::make_shared<Node>();
  n->type = Type::Map;
  n->items = std::move(values);
  return n;
}
NodePtr array_of(NodePtr items, std::size_t min_items) {
  auto n = std::make_shared<Node>();
  n->type = Type::Array;
  n->items = std::move(items);
  n->min_items = min_items;
  return n;
}
NodePtr integer(std::optional<double> min, std::optional<double> max) {
  // Unbounded integers are bounded by what a 32-bit int holds: readers cast to int, and a value that
  // wrapped (2^32 + 2 read as 2) would run a different scenario without a word.
  auto n = std::make_shared<Node>();
  n->type = Type::Integer;
  n->min = min ? min : std::optional<double>(-2147483648.0);
  n->max = max ? max : std::optional<double>(2147483647.0);
  return n;
}
NodePtr number(std::optional<double> min, std::optional<double> max, bool exclusive_min) {
  auto n = std::make_shared<Node>();
  n->type = Type::Number;
  n->min = min;
  n->max = max;
  n->exclusive_min = exclusive_min;
  return n;
}
NodePtr boolean() { return make(Type::Boolean); }
NodePtr string() { return make(Type::String); }
NodePtr enumeration(std::vector<std::string> choices) {
  auto n = std::make_shared<Node>();
  n->type = Type::Enum;
  n->choices = std::move(choices);
  return n;
}
namespace {
// A time from 0 up to `max_ps` picoseconds.
NodePtr time_up_to(double max_ps) {
  auto n = std::make_shared<Node>();
  n->type = Type::Time;
  n->min = 0;
  n->max = max_ps;
  return n;
}
}  // namespace
// No latency, overhead or deadline of a training step is a day long; the bound keeps every sum of
// such times far inside the clock (kMaxTime, 53 days).
NodePtr time() { return time_up_to(86400e12); }
// A link's latency: light crosses the Earth in 70 ms and a geostationary hop takes 0.25 s; ten
// seconds is no network, but a unit typed wrong ("86400s"), and its sum over a step's hops would
// pass the clock mid-run.
NodePtr latency() { return time_up_to(10e12); }
NodePtr bandwidth() {
  // At least 1 Mbps: slower links move a training step's bytes in weeks (and "1bps" is a typo).
  auto n = std::make_shared<Node>();
  n->type = Type::Bandwidth;
  n->min = 1e6 / 8;
  return n;
}
NodePtr bytes() {
  auto n = std::make_shared<Node>();
  n->type = Type::Bytes;
  n->min = 0;
  return n;
}
NodePtr flops() {
  auto n = std::make_shared<Node>();
  n->type = Type::Flops;
  n->min = 0;
  n->exclusive_min = true;
  return n;
}
NodePtr any() { return make(Type::Any); }

Field required(std::string key, NodePtr node, std::string help) {
  return Field{std::move(key), std::move(node), true, Json(), std::move(help), {}};
}
Field optional(std::string key, NodePtr node, Json default_value, std::string help) {
  return Field{std::move(key), std::move(node), false, std::move(default_value), std::move(help), {}};
}

Json validate(const NodePtr& schema, const Json& doc, const std::string& file, const std::string& path) {
  return validate_node(*schema, doc, file, path);
}

Time as_time(const Json& v) { return *parse_time(v.get<std::string>()); }
Bandwidth as_bandwidth(const Json& v) { return *parse_bandwidth(v.get<std::string>()); }
double as_bytes(const Json& v) { return *parse_bytes(v.get<std::string>()); }
double as_flops(const Json& v) { return *parse_flops(v.get<std::string>()); }

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace moesim::schema
