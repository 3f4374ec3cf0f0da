// The conventions of NVIDIA's nccl-tests (src/common.cu, src/*.cu, doc/PERFORMANCE.md), in one
// place for the log importer (calibrate/fit/nccl_tests_log) and `moesim collective`, which prints
// what nccl-tests would measure:
//   - `size` is bytes: all_reduce's buffer on each rank; all_gather's gathered output and
//     reduce_scatter's input (count·4·n, `count` per rank); alltoall's buffer on each rank
//     (count·4·n, `count` per peer); sendrecv's one message. Sizes are rounded down to whole
//     4-byte (float) elements per rank or peer, as the tests do.
//   - time in µs; algbw = size / time in GB/s (1e9 B/s); busbw = algbw × factor: all_reduce
//     2(n − 1)/n, all_gather, reduce_scatter and alltoall (n − 1)/n, sendrecv 1.
//   - numbers as getFloatStr prints them: 2 decimals if they fit the column, else 1, else none.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moesim::calibration::nccl_tests {

// moesim's name of a test (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv) from
// nccl-tests' binary or -t names (all_reduce_perf, allreduce, alltoall, ...); empty if none.
std::string canonical(std::string name);

double busbw_factor(const std::string& collective, int ranks);

struct Shape {
  double size = 0;   // bytes, after rounding to whole elements
  double count = 0;  // elements of 4 bytes: per rank, or per peer for alltoall
};
Shape shape(const std::string& collective, double requested_bytes, int ranks);

// getFloatStr: `value` in at most `width` characters.
std::string format_number(double value, int width);

struct Row {
  double size = 0, count = 0;
  double time_us = 0;
  // The size it was asked for (a log's row: `size` is it rounded down to whole elements per rank,
  // as nccl-tests rounds its own sweep).
  double requested = 0;
  // What moesim ran for it (Simulation::describe_collective): "nvls", "ring Simple", ...
  std::string algorithm;
};
// The table nccl-tests prints for these rows (both halves the same: a simulation has one time),
// with its header lines; `#wrong` is N/A (nothing validated).
std::string table(const std::string& collective, int ranks, const std::vector<Row>& rows);

}  // namespace moesim::calibration::nccl_tests
