// A sweep's parameter grid: axes over JSON paths of the scenario ("cluster.levels[0].bandwidth",
// "model.experts", "strategy.name"), expanded as a Cartesian product, the first axis slowest.
#pragma once

#include <string>
#include <vector>

#include "sim/core/schema.hpp"

namespace moesim::sweep {

struct Axis {
  std::string path;
  std::vector<schema::Json> values;
};

std::vector<Axis> parse_axes(const schema::Json& sweep_block);
std::size_t point_count(const std::vector<Axis>& axes);
// Values of point `index` (one per axis).
std::vector<schema::Json> point_values(const std::vector<Axis>& axes, std::size_t index);
// Sets `path` in `doc`. The parent must exist; the last key may be new. Throws InputError naming
// `where` (the sweep axis) when the path does not lead anywhere.
void set_path(schema::Json& doc, const std::string& path, const schema::Json& value, const std::string& file,
              const std::string& where);

}  // namespace moesim::sweep
