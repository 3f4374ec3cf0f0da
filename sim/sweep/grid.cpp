#include "sim/sweep/grid.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <utility>

#include "sim/core/error.hpp"

namespace moesim::sweep {

using schema::Json;

namespace {

constexpr const char* kAxisForms =
    "write {\"path\": \"model.experts\", \"values\": [8, 16]} for one value per point, or {\"paths\": "
    "[\"cluster.levels[0].count\", \"model.experts\"], \"values\": [[2, 16], [4, 32]]} to move several values together";

}  // namespace

std::string Axis::value_where(std::size_t axis, std::size_t v, std::size_t entry) const {
  return zipped ? fmt::format("$.sweep.axes[{}].values[{}][{}]", axis, v, entry) : fmt::format("$.sweep.axes[{}].values[{}]", axis, v);
}

std::string Axis::path_where(std::size_t axis, std::size_t entry) const {
  return zipped ? fmt::format("$.sweep.axes[{}].paths[{}]", axis, entry) : fmt::format("$.sweep.axes[{}].path", axis);
}

std::vector<Axis> parse_axes(const Json& sweep, const std::string& file) {
  if (!sweep.is_object() || !sweep.contains("axes") || !sweep.at("axes").is_array() || sweep.at("axes").empty())
    throw InputError(file, "$.sweep.axes", "expected a non-empty array of axes", kAxisForms);
  std::vector<Axis> axes;
  // Where each path is varied already: a path on two axes (or twice on one) would give two CSV
  // columns of the same name and points that override their own values.
  std::vector<std::pair<std::string, std::string>> seen;
  const Json& list = sweep.at("axes");
  std::size_t grid = 1;
  for (std::size_t a = 0; a < list.size(); ++a) {
    const Json& j = list[a];
    const std::string at = fmt::format("$.sweep.axes[{}]", a);
    if (!j.is_object()) throw InputError(file, at, fmt::format("expected an object, got {}", schema::json_kind(j)), kAxisForms);
    const bool has_path = j.contains("path"), has_paths = j.contains("paths");
    if (has_path && has_paths)
      throw InputError(file, at, "has both \"path\" and \"paths\"",
                       "keep \"path\" for one value per point, or \"paths\" (values like [[a, b], ...], one entry per "
                       "path) to move several values together");
    if (!has_path && !has_paths)
      throw InputError(file, at + ".path", "missing required key \"path\" (or \"paths\")", kAxisForms);
    Axis axis;
    axis.zipped = has_paths;
    if (has_path) {
      const Json& p = j.at("path");
      if (!p.is_string()) throw InputError(file, at + ".path", fmt::format("expected a string, got {}", schema::json_kind(p)), "write \"...\"");
      axis.paths.push_back(p.get<std::string>());
    } else {
      const Json& ps = j.at("paths");
      if (!ps.is_array() || ps.empty())
        throw InputError(file, at + ".paths",
                         ps.is_array() ? std::string("has 0 entries") : fmt::format("expected an array, got {}", schema::json_kind(ps)),
                         "give the paths that move together, e.g. [\"cluster.levels[0].count\", \"model.experts\"]");
      for (std::size_t k = 0; k < ps.size(); ++k) {
        if (!ps[k].is_string())
          throw InputError(file, fmt::format("{}.paths[{}]", at, k), fmt::format("expected a string, got {}", schema::json_kind(ps[k])),
                           "write \"...\"");
        axis.paths.push_back(ps[k].get<std::string>());
      }
    }
    for (std::size_t k = 0; k < axis.paths.size(); ++k) {
      const auto dup = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == axis.paths[k]; });
      if (dup != seen.end())
        throw InputError(file, axis.path_where(a, k), fmt::format("\"{}\" is already varied at {}", axis.paths[k], dup->second),
                         "vary each path on one axis only; put values that move together on one axis with \"paths\"");
      seen.emplace_back(axis.paths[k], axis.path_where(a, k));
    }
    if (!j.contains("values")) throw InputError(file, at + ".values", "missing required key \"values\"", "add it: the values it takes");
    const Json& vs = j.at("values");
    if (!vs.is_array() || vs.empty())
      throw InputError(file, at + ".values",
                       vs.is_array() ? std::string("has 0 entries") : fmt::format("expected an array, got {}", schema::json_kind(vs)),
                       "give at least 1 value");
    if (axis.zipped) {
      const std::size_t n = axis.paths.size();
      for (std::size_t v = 0; v < vs.size(); ++v) {
        const std::string where = fmt::format("{}.values[{}]", at, v);
        const std::string fix = fmt::format("write an array of {} value{} in the order of \"paths\": [{}]", n, n == 1 ? "" : "s",
                                            fmt::format("\"{}\"", fmt::join(axis.paths, "\", \"")));
        if (!vs[v].is_array())
          throw InputError(file, where, fmt::format("expected an array of {} (one value per path), got {} {}", n, schema::json_kind(vs[v]), schema::show(vs[v])), fix);
        if (vs[v].size() != n)
          throw InputError(file, where, fmt::format("has {} entr{} but \"paths\" names {}", vs[v].size(), vs[v].size() == 1 ? "y" : "ies", n), fix);
      }
    }
    // The grid is checked as it grows: each axis is a few values, so the product stays far from
    // wrapping before it is refused.
    grid *= vs.size();
    if (grid > kMaxSweepPoints)
      throw InputError(file, at + ".values",
                       fmt::format("the axes up to this one make {} points, more than a sweep runs ({})", grid,
                                   kMaxSweepPoints),
                       "sweep fewer values, or split the grid into several sweeps (each resumes on its own)");
    axis.values = vs.get<std::vector<Json>>();
    axes.push_back(std::move(axis));
  }
  return axes;
}

std::size_t point_count(const std::vector<Axis>& axes) {
  std::size_t n = 1;
  for (const auto& a : axes) n *= a.values.size();
  return n;
}

std::vector<std::string> column_paths(const std::vector<Axis>& axes) {
  std::vector<std::string> paths;
  for (const auto& a : axes) paths.insert(paths.end(), a.paths.begin(), a.paths.end());
  return paths;
}

std::vector<std::size_t> point_indices(const std::vector<Axis>& axes, std::size_t index) {
  std::vector<std::size_t> v(axes.size());
  for (std::size_t i = axes.size(); i-- > 0;) {
    v[i] = index % axes[i].values.size();
    index /= axes[i].values.size();
  }
  return v;
}

std::vector<Json> point_values(const std::vector<Axis>& axes, std::size_t index) {
  const auto idx = point_indices(axes, index);
  std::vector<Json> v;
  for (std::size_t a = 0; a < axes.size(); ++a)
    for (std::size_t k = 0; k < axes[a].paths.size(); ++k) v.push_back(axes[a].value(idx[a], k));
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
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos)
        fail("has a bad index");
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
