#include "calibrate/fit/piecewise_fit.hpp"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace moesim::calibrate {

namespace {

struct Line {
  double alpha = 0, beta = 0;
};

// Least squares of Σ ((α + β·x − t)/t)² with α, β ≥ 0.
Line relative_least_squares(const std::vector<const Sample*>& pts) {
  const auto n = static_cast<Eigen::Index>(pts.size());
  Eigen::MatrixXd a(n, 2);
  for (Eigen::Index i = 0; i < n; ++i) {
    a(i, 0) = 1.0 / pts[i]->seconds;
    a(i, 1) = pts[i]->bytes / pts[i]->seconds;
  }
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(n);
  // Scale the columns to unit norm: 1/t and x/t differ by ~10 orders of magnitude.
  const Eigen::Vector2d norms(a.col(0).norm(), std::max(a.col(1).norm(), 1e-300));
  const Eigen::MatrixXd scaled = a * norms.cwiseInverse().asDiagonal();
  const Eigen::Vector2d z = scaled.colPivHouseholderQr().solve(ones);
  Line l{z(0) / norms(0), z(1) / norms(1)};
  if (l.alpha < 0 || l.beta < 0 || a.col(1).norm() == 0) {
    // Refit with the offending parameter at 0: a one-column least squares.
    const bool keep_beta = l.alpha < 0 && a.col(1).norm() > 0;
    const Eigen::VectorXd col = a.col(keep_beta ? 1 : 0);
    const double v = col.dot(ones) / col.squaredNorm();
    l = keep_beta ? Line{0, v} : Line{v, 0};
  }
  return l;
}

double residual(const Line& l, const Sample& s) { return (l.alpha + l.beta * s.bytes - s.seconds) / s.seconds; }

struct PieceFit {
  Line line;
  std::vector<const Sample*> kept;
  std::vector<const Sample*> dropped;
  double sse = 0;  // over kept samples, plus threshold² per dropped one
  double max = 0;
};

PieceFit fit_piece(std::vector<const Sample*> pts, int distinct_sizes, const FitOptions& o) {
  PieceFit f;
  const auto max_drop = static_cast<std::size_t>(std::floor(o.max_outlier_fraction * static_cast<double>(pts.size())));
  for (;;) {
    f.line = relative_least_squares(pts);
    std::vector<double> abs_r;
    std::size_t worst = 0;
    for (std::size_t i = 0; i < pts.size(); ++i) {
      abs_r.push_back(std::abs(residual(f.line, *pts[i])));
      if (abs_r[i] > abs_r[worst]) worst = i;
    }
    std::vector<double> sorted = abs_r;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    const double sigma = 1.4826 * sorted[sorted.size() / 2];
    const bool last_at_size = std::count_if(pts.begin(), pts.end(), [&](const Sample* s) {
                                return s->bytes == pts[worst]->bytes;
                              }) == 1;
    // Keep at least min_sizes distinct sizes and three points for a two-parameter fit.
    const bool can_drop = f.dropped.size() < max_drop && pts.size() > 3 &&
                          !(last_at_size && distinct_sizes <= o.min_sizes);
    if (can_drop && abs_r[worst] > std::max(o.outlier_threshold, 6 * sigma)) {
      if (last_at_size) --distinct_sizes;
      f.dropped.push_back(pts[worst]);
      pts.erase(pts.begin() + static_cast<std::ptrdiff_t>(worst));
      continue;
    }
    f.sse = 0;
    f.max = 0;
    for (double r : abs_r) {
      f.sse += r * r;
      f.max = std::max(f.max, r);
    }
    f.sse += static_cast<double>(f.dropped.size()) * o.outlier_threshold * o.outlier_threshold;
    f.kept = std::move(pts);
    return f;
  }
}

}  // namespace

const Piece& PiecewiseFit::piece(double bytes) const {
  for (std::size_t i = 1; i < pieces.size(); ++i)
    if (bytes < pieces[i].from_bytes) return pieces[i - 1];
  return pieces.back();
}

double PiecewiseFit::predict(double bytes) const {
  const Piece& p = piece(bytes);
  return p.alpha + p.beta * bytes;
}

PiecewiseFit fit_piecewise(std::vector<Sample> samples, const FitOptions& o) {
  std::stable_sort(samples.begin(), samples.end(), [](const Sample& a, const Sample& b) { return a.bytes < b.bytes; });
  // Distinct sizes and the samples at each.
  std::vector<std::vector<const Sample*>> at;
  std::vector<double> sizes;
  for (const Sample& s : samples) {
    if (!(s.bytes > 0) || !(s.seconds > 0)) throw std::invalid_argument("fit_piecewise: sizes and times must be > 0");
    if (sizes.empty() || s.bytes != sizes.back()) {
      sizes.push_back(s.bytes);
      at.emplace_back();
    }
    at.back().push_back(&s);
  }
  const int m = static_cast<int>(sizes.size());
  if (m < o.min_sizes) throw std::invalid_argument("fit_piecewise: too few distinct sizes");

  // cost[i][j]: the piece over sizes i..j (inclusive).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<PieceFit>> fits(m, std::vector<PieceFit>(m));
  std::vector<std::vector<double>> cost(m, std::vector<double>(m, inf));
  for (int i = 0; i < m; ++i)
    for (int j = i + o.min_sizes - 1; j < m; ++j) {
      std::vector<const Sample*> pts;
      for (int s = i; s <= j; ++s) pts.insert(pts.end(), at[s].begin(), at[s].end());
      fits[i][j] = fit_piece(std::move(pts), j - i + 1, o);
      cost[i][j] = fits[i][j].sse;
    }

  // best[k][j]: least cost of sizes 0..j in k pieces; from[k][j]: where the last piece starts.
  const int max_k = std::max(1, std::min(o.max_pieces, m / o.min_sizes));
  std::vector<std::vector<double>> best(max_k + 1, std::vector<double>(m, inf));
  std::vector<std::vector<int>> from(max_k + 1, std::vector<int>(m, -1));
  for (int j = 0; j < m; ++j) {
    best[1][j] = cost[0][j];
    from[1][j] = 0;
  }
  for (int k = 2; k <= max_k; ++k)
    for (int j = 0; j < m; ++j)
      for (int i = 1; i <= j; ++i)
        if (best[k - 1][i - 1] + cost[i][j] < best[k][j]) {
          best[k][j] = best[k - 1][i - 1] + cost[i][j];
          from[k][j] = i;
        }
  const double n = static_cast<double>(samples.size());
  int chosen = 1;
  double chosen_bic = inf;
  for (int k = 1; k <= max_k; ++k) {
    if (!std::isfinite(best[k][m - 1])) continue;
    const double bic = n * std::log(std::max(best[k][m - 1] / n, 1e-8)) + (3.0 * k - 1) * std::log(n);
    if (bic < chosen_bic - 1e-9) {
      chosen_bic = bic;
      chosen = k;
    }
  }

  PiecewiseFit out;
  out.sizes = m;
  out.samples = static_cast<int>(samples.size());
  std::vector<std::pair<int, int>> ranges;
  for (int k = chosen, j = m - 1; k >= 1; --k) {
    const int i = from[k][j];
    ranges.emplace_back(i, j);
    j = i - 1;
  }
  std::reverse(ranges.begin(), ranges.end());
  double sse = 0;
  int kept = 0;
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    const auto [i, j] = ranges[r];
    const PieceFit& f = fits[i][j];
    if (r > 0) {
      // The bridge from the previous piece's last size to this piece's first: the line through
      // both pieces' values there (kept ≥ 0: flat if time falls, through the origin if steep).
      const Piece& prev = out.pieces.back();
      const double x1 = prev.last_bytes, x2 = sizes[i];
      const double t1 = prev.alpha + prev.beta * x1, t2 = f.line.alpha + f.line.beta * x2;
      Piece b;
      b.bridge = true;
      b.first_bytes = b.from_bytes = x1;
      b.last_bytes = b.to_bytes = x2;
      b.beta = std::max(0.0, (t2 - t1) / (x2 - x1));
      b.alpha = t1 - b.beta * x1;
      if (b.alpha < 0) {
        b.alpha = 0;
        b.beta = t2 / x2;
      }
      out.pieces.back().to_bytes = x1;
      out.pieces.push_back(b);
    }
    Piece p;
    p.first_bytes = sizes[i];
    p.last_bytes = sizes[j];
    p.from_bytes = r == 0 ? 0.0 : sizes[i];
    p.to_bytes = -1;
    p.alpha = f.line.alpha;
    p.beta = f.line.beta;
    p.points = static_cast<int>(f.kept.size());
    double piece_sse = 0;
    for (const Sample* s : f.kept) piece_sse += residual(f.line, *s) * residual(f.line, *s);
    p.rms_relative_error = std::sqrt(piece_sse / std::max(1, p.points));
    p.max_relative_error = f.max;
    for (const Sample* s : f.dropped) p.dropped.push_back(*s);
    sse += piece_sse;
    kept += p.points;
    out.max_relative_error = std::max(out.max_relative_error, p.max_relative_error);
    out.pieces.push_back(std::move(p));
  }
  out.rms_relative_error = std::sqrt(sse / std::max(1, kept));
  return out;
}

}  // namespace moesim::calibrate
