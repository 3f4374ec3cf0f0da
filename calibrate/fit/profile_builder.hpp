// Turns measurements (calibration binaries' JSON, nccl-tests logs) into a calibration profile
// (sim/calibration/profile.hpp), the only thing the simulator reads:
//  - collectives: samples of one collective and group shape (ranks, nodes) from all inputs are
//    merged and fitted piecewise (piecewise_fit.hpp); all_to_all entries are fitted to even
//    splits, uneven ones are fitted too and reported beside them (the simulator derives uneven
//    costs from its traffic matrices);
//  - gemm: achieved FLOP/s (2·M·N·K / median time) per dtype and shape, the median of repeats;
//  - attention: achieved forward and backward FLOP/s per dtype, masking and (L, d).
// Every entry carries its fit error. Refused, with the file, the place and the fix: fewer than
// `min_sizes` sizes for a collective (or 2 shapes for a table), times ≤ 0, times that fall with the
// size by more than `monotone_tolerance` (shuffled or mislabelled data; nccl-tests' own noise and
// protocol switches stay well inside it), inputs that give one curve in different time units, and
// shapes whose node count is unknown.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "calibrate/fit/measurements.hpp"
#include "calibrate/fit/piecewise_fit.hpp"
#include "sim/calibration/profile.hpp"

namespace moesim::calibrate {

struct BuildOptions {
  std::string name = "calibrated";
  FitOptions fit;
  int min_sizes = 4;
  double monotone_tolerance = 0.5;  // a time below (1 − this) × a smaller size's time is refused
  // GeMM and attention samples measured in one dtype filed under another, e.g. fp32 → tf32 for
  // XLA's f32 matmuls, which Ampere and later GPUs run on TF32 tensor cores by default.
  std::map<std::string, std::string> dtype_as;
  // The attention kernel whose timings make the tables (an entry's "implementation", e.g.
  // cudnn-fused-sdpa); empty: the inputs must time one implementation only (a table of two
  // kernels' rates interpolates between them).
  std::string attention_implementation;
};

calibration::Profile build_profile(const std::vector<Measurements>& inputs, const BuildOptions& options);

// Reads one input file: measurements JSON when it starts with '{', a GeMM table when its name ends
// in .csv (gemm_table_csv.hpp), else an nccl-tests log.
Measurements read_input(const std::string& path, const struct NcclTestsOptions& log_options);

}  // namespace moesim::calibrate
