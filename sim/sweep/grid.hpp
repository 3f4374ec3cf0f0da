// A sweep's parameter grid: axes over JSON paths of the scenario ("cluster.levels[0].bandwidth",
// "model.experts", "strategy.name"), expanded as a Cartesian product, the first axis slowest.
// An axis is plain, {"path": P, "values": [v0, v1, ...]}, or zipped, {"paths": [P, Q, ...],
// "values": [[p0, q0, ...], [p1, q1, ...], ...]}: its paths move together, one grid dimension.
// Every path is one CSV column, in axis order and, inside a zipped axis, in the order of "paths".
#pragma once

#include <string>
#include <vector>

#include "sim/core/schema.hpp"

namespace moesim::sweep {

struct Axis {
  std::vector<std::string> paths;    // one for a plain axis; one or more for a zipped one
  std::vector<schema::Json> values;  // plain: the values; zipped: arrays with one entry per path
  bool zipped = false;

  // The value path `entry` takes at value `v` of the axis.
  const schema::Json& value(std::size_t v, std::size_t entry) const { return zipped ? values[v].at(entry) : values[v]; }
  // The JSON path, in the scenario file, of that value: $.sweep.axes[A].values[V] (plain) or
  // $.sweep.axes[A].values[V][K] (zipped).
  std::string value_where(std::size_t axis, std::size_t v, std::size_t entry) const;
  // The JSON path of path `entry`: $.sweep.axes[A].path or $.sweep.axes[A].paths[K].
  std::string path_where(std::size_t axis, std::size_t entry) const;
};

// Reads the sweep block's axes and checks their shape (exactly one of "path" and "paths", every
// value of a zipped axis an array with one entry per path, no path varied twice); throws
// InputError naming `file` and the exact JSON path ($.sweep.axes[1].values[2]).
std::vector<Axis> parse_axes(const schema::Json& sweep_block, const std::string& file);
// At most this many points per sweep (each is validated and held before the first one runs).
inline constexpr std::size_t kMaxSweepPoints = 100000;
std::size_t point_count(const std::vector<Axis>& axes);
// The paths of the grid, one per CSV column: every axis' paths, in order.
std::vector<std::string> column_paths(const std::vector<Axis>& axes);
// The value index of point `index` on each axis.
std::vector<std::size_t> point_indices(const std::vector<Axis>& axes, std::size_t index);
// Values of point `index`, one per column (a zipped axis gives one value per path).
std::vector<schema::Json> point_values(const std::vector<Axis>& axes, std::size_t index);
// Sets `path` in `doc`. The parent must exist; the last key may be new. Throws InputError naming
// `where` (the sweep axis) when the path does not lead anywhere.
void set_path(schema::Json& doc, const std::string& path, const schema::Json& value, const std::string& file,
              const std::string& where);

}  // namespace moesim::sweep
