#include "sim/core/schema_reference.hpp"

#include <fmt/format.h>

namespace moesim::schema {

namespace {

// The Markdown of a table cell: no line breaks, no unescaped column bars.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

// What a value of `n` is, as the reference states it.
std::string type_text(const Node& n) {
  // Bounds the declaration did not choose are left out: an integer's 32-bit limits (schema.cpp
  // integer()), and the zero below every time and size.
  Node shown = n;
  if (n.type == Type::Integer && n.min == -2147483648.0) shown.min.reset();
  if (n.type == Type::Integer && n.max == 2147483647.0) shown.max.reset();
  if ((n.type == Type::Time || n.type == Type::Bytes) && n.min == 0.0 && !n.exclusive_min) shown.min.reset();
  const std::string range = range_text(shown);
  const std::string bounded = range.empty() ? "" : ", " + range;
  switch (n.type) {
    case Type::Object: return "object";
    case Type::Map: return fmt::format("object of {}", type_text(*n.items));
    case Type::Array:
      return fmt::format("array of {}{}", type_text(*n.items), n.min_items > 0 ? fmt::format(" (at least {})", n.min_items) : "");
    case Type::Integer: return "integer" + bounded;
    case Type::Number: return "number" + bounded;
    case Type::Boolean: return "boolean";
    case Type::String: return "string";
    case Type::Enum: return fmt::format("one of `{}`", fmt::join(n.choices, "`, `"));
    case Type::Time: return "time" + bounded;
    case Type::Bandwidth: return "bandwidth" + bounded;
    case Type::Bytes: return "size" + bounded;
    case Type::Flops: return "FLOP/s" + bounded;
    case Type::Any: return "any JSON";
  }
  return "";
}

std::string join(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }

void tables(const Node& n, const std::string& path, std::string& out) {
  if (n.type == Type::Map) return tables(*n.items, path + ".NAME", out);
  if (n.type == Type::Array) return tables(*n.items, path + "[]", out);
  if (n.type != Type::Object) return;
  out += fmt::format("### {}\n\n| key | type | default | meaning | also |\n|---|---|---|---|---|\n",
                     path.empty() ? std::string("the scenario") : "`" + path + "`");
  for (const Field& f : n.fields) {
    const std::string def = f.required ? "required" : f.default_value.is_null() ? "—" : "`" + f.default_value.dump() + "`";
    std::string also;
    for (const auto& s : f.synonyms) also += (also.empty() ? "`" : ", `") + s + "`";
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", f.key, cell(type_text(*f.node)), cell(def), cell(f.help), also);
  }
  out += "\n";
  for (const Field& f : n.fields) tables(*f.node, join(path, f.key), out);
}

}  // namespace

std::string markdown_reference(const Node& node, const std::string& path) {
  std::string out;
  tables(node, path, out);
  return out;
}

}  // namespace moesim::schema
