// Least-squares fit of t = α + β·x (Hockney's model; Parm §V-A Eq. 12 fits collectives the same
// way), with the fit's largest relative error. Solved with Eigen's column-pivoting QR.
#pragma once

#include <vector>

namespace moesim::calibration {

struct LineFit {
  double alpha = 0;               // t at x = 0
  double beta = 0;                // slope
  double max_relative_error = 0;  // max |fit − t| / t over the points
};

// Needs at least two distinct x; throws std::invalid_argument otherwise (callers give clean input).
LineFit fit_line(const std::vector<double>& x, const std::vector<double>& t);
// t_i = α·count_i + β·x_i by relative least squares (each point's error over its own t, so short
// and long kernels weigh alike): α a fixed cost paid count_i times (an op of count_i kernels).
// α is kept ≥ 0 (refitted as β alone otherwise). Needs two points with distinct x / count and t > 0.
LineFit fit_line_relative(const std::vector<double>& count, const std::vector<double>& x, const std::vector<double>& t);

}  // namespace moesim::calibration
