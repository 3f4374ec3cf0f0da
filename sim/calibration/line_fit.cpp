#include "sim/calibration/line_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moesim::calibration {

LineFit fit_line(const std::vector<double>& x, const std::vector<double>& t) {
  if (x.size() != t.size() || x.size() < 2 || std::all_of(x.begin(), x.end(), [&](double v) { return v == x[0]; }))
    throw std::invalid_argument("fit_line needs at least two points with distinct x");
  const Eigen::Index n = static_cast<Eigen::Index>(x.size());
  Eigen::MatrixXd a(n, 2);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    a(i, 0) = 1.0;
    a(i, 1) = x[static_cast<std::size_t>(i)];
    b(i) = t[static_cast<std::size_t>(i)];
  }
  const Eigen::Vector2d sol = a.colPivHouseholderQr().solve(b);
  LineFit f{sol(0), sol(1), 0};
  for (std::size_t i = 0; i < x.size(); ++i)
    if (t[i] != 0) f.max_relative_error = std::max(f.max_relative_error, std::abs(f.alpha + f.beta * x[i] - t[i]) / std::abs(t[i]));
  return f;
}

LineFit fit_line_relative(const std::vector<double>& count, const std::vector<double>& x, const std::vector<double>& t) {
  const std::size_t n = x.size();
  bool distinct = false;
  for (std::size_t i = 1; i < n && count.size() == n; ++i) distinct |= x[i] * count[0] != x[0] * count[i];
  if (count.size() != n || t.size() != n || n < 2 || !distinct ||
      std::any_of(t.begin(), t.end(), [](double v) { return !(v > 0); }))
    throw std::invalid_argument("fit_line_relative needs two points with distinct x per count and positive times");
  Eigen::MatrixXd a(static_cast<Eigen::Index>(n), 2);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(n));
  for (std::size_t i = 0; i < n; ++i) {
    a(static_cast<Eigen::Index>(i), 0) = count[i] / t[i];
    a(static_cast<Eigen::Index>(i), 1) = x[i] / t[i];
  }
  Eigen::Vector2d sol = a.colPivHouseholderQr().solve(b);
  if (sol(0) < 0) sol = {0.0, a.col(1).dot(b) / a.col(1).squaredNorm()};
  LineFit f{sol(0), sol(1), 0};
  for (std::size_t i = 0; i < n; ++i)
    f.max_relative_error = std::max(f.max_relative_error, std::abs(f.alpha * count[i] + f.beta * x[i] - t[i]) / t[i]);
  return f;
}

}  // namespace moesim::calibration
