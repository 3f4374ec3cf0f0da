#include "sim/sweep/grid.hpp"

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::sweep {

using schema::Json;

std::vector<Axis> parse_axes(const Json& sweep) {
  std::vector<Axis> axes;
  for (const Json& a : sweep.at("axes")) axes.push_back({a.at("path").get<std::string>(), a.at("values").get<std::vector<Json>>()});
  return axes;
}

std::size_t point_count(const std::vector<Axis>& axes) {
  std::size_t n = 1;
  for (const auto& a : axes) n *= a.values.size();
  return n;
}

std::vector<Json> point_values(const std::vector<Axis>& axes, std::size_t index) {
  std::vector<Json> v(axes.size());
  for (std::size_t i = axes.size(); i-- > 0;) {
    v[i] = axes[i].values[index % axes[i].values.size()];
    index /= axes[i].values.size();
  }
  return v;
}

void set_path(Json& doc, const std::string& path, const Json& value, const std::string& file, const std::string& where) {
  Json* node = &doc;
  std::size_t i = 0;
  const auto fail = [&](const std::string& why) {
    throw InputError(file, where, fmt::format("path \"{}\" {}", path, why),
                     "name an existing value of the scenario, e.g. \"cluster.levels[0].bandwidth\" or \"model.experts\"");
  };
  while (i < path.size()) {
    if (path[i] == '.') ++i;
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      if (close == std::string::npos) fail("has an unclosed [");
      const std::string digits = path.substr(i + 1, close - i - 1);
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) fail("has a bad index");
      const std::size_t k = std::stoul(digits);
      if (!node->is_array() || k >= node->size()) fail(fmt::format("indexes [{}] past the end of an array", k));
      node = &(*node)[k];
      i = close + 1;
      continue;
    }
    const std::size_t end = path.find_first_of(".[", i);
    const std::string key = path.substr(i, end == std::string::npos ? std::string::npos : end - i);
    if (key.empty()) fail("has an empty key");
    if (!node->is_object()) fail(fmt::format("reaches \"{}\" inside something that is not an object", key));
    const bool last = end == std::string::npos;
    if (!last && !node->contains(key)) fail(fmt::format("has no \"{}\"", key));
    node = &(*node)[key];
    i = last ? path.size() : end;
  }
  *node = value;
}

}  // namespace moesim::sweep
