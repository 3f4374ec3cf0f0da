#include "sim/calibration/throughput_table.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace moesim::calibration {

namespace {

LogTable::Point log2_of(const LogTable::Point& p) {
  LogTable::Point l;
  for (int d = 0; d < LogTable::kDims; ++d) l[d] = std::log2(p[d]);
  return l;
}

std::array<long long, LogTable::kDims> key(const LogTable::Point& logp) {
  std::array<long long, LogTable::kDims> k{};
  for (int d = 0; d < LogTable::kDims; ++d) k[d] = std::llround(logp[d] * 1e6);
  return k;
}

}  // namespace

LogTable::LogTable(std::vector<Point> points, std::vector<std::vector<double>> values)
    : points_(std::move(points)), values_(std::move(values)) {
  if (points_.size() != values_.size()) throw std::invalid_argument("LogTable: one value row per point");
  for (std::size_t i = 0; i < points_.size(); ++i) {
    for (int d = 0; d < kDims; ++d)
      if (!(points_[i][d] > 0)) throw std::invalid_argument("LogTable: coordinates must be positive");
    for (double v : values_[i])
      if (!(v > 0)) throw std::invalid_argument("LogTable: values must be positive");
    log_.push_back(log2_of(points_[i]));
    index_.emplace(key(log_.back()), static_cast<int>(i));
    for (int d = 0; d < kDims; ++d) axes_[d].push_back(log_.back()[d]);
  }
  for (auto& axis : axes_) {
    std::sort(axis.begin(), axis.end());
    axis.erase(std::unique(axis.begin(), axis.end(), [](double a, double b) { return std::abs(a - b) < 1e-9; }),
               axis.end());
  }
}

int LogTable::find(const Point& logp, int skip) const {
  const auto it = index_.find(key(logp));
  return it == index_.end() || it->second == skip ? -1 : it->second;
}

double LogTable::at(const Point& query, int channel, int skip) const {
  if (points_.empty() || (points_.size() == 1 && skip == 0)) throw std::logic_error("LogTable: no points");
  Point q = log2_of(query);
  for (int d = 0; d < kDims; ++d) q[d] = std::clamp(q[d], axes_[d].front(), axes_[d].back());
  if (const int hit = find(q, skip); hit >= 0) return values_[hit][channel];

  // Bracketing coordinates per dimension, among the measured ones.
  std::array<double, kDims> lo{}, hi{}, w{};
  for (int d = 0; d < kDims; ++d) {
    const auto& axis = axes_[d];
    auto up = std::lower_bound(axis.begin(), axis.end(), q[d] - 1e-9);
    if (up != axis.end() && std::abs(*up - q[d]) < 1e-9) {
      lo[d] = hi[d] = *up;
    } else {
      hi[d] = *up;  // q is clamped, so an upper coordinate exists and a lower one too
      lo[d] = *(up - 1);
    }
    w[d] = hi[d] > lo[d] ? (q[d] - lo[d]) / (hi[d] - lo[d]) : 0.0;
  }
  double log_value = 0;
  bool corners = true;
  for (int c = 0; c < (1 << kDims) && corners; ++c) {
    Point corner;
    double weight = 1;
    for (int d = 0; d < kDims; ++d) {
      const bool upper = (c >> d) & 1;
      corner[d] = upper ? hi[d] : lo[d];
      weight *= upper ? w[d] : 1 - w[d];
    }
    if (weight == 0) continue;
    const int i = find(corner, skip);
    if (i < 0) corners = false;
    else log_value += weight * std::log(values_[i][channel]);
  }
  if (corners) return std::exp(log_value);

  // Scattered shapes: inverse-square-distance mean of the nearest 2^d points.
  std::vector<std::pair<double, std::size_t>> by_distance;
  for (std::size_t i = 0; i < log_.size(); ++i) {
    if (static_cast<int>(i) == skip) continue;
    double d2 = 0;
    for (int d = 0; d < kDims; ++d) d2 += (log_[i][d] - q[d]) * (log_[i][d] - q[d]);
    by_distance.emplace_back(d2, i);
  }
  const std::size_t k = std::min<std::size_t>(by_distance.size(), 1u << kDims);
  std::partial_sort(by_distance.begin(), by_distance.begin() + static_cast<std::ptrdiff_t>(k), by_distance.end());
  double sum_w = 0, sum = 0;
  for (std::size_t j = 0; j < k; ++j) {
    const double weight = 1.0 / by_distance[j].first;
    sum_w += weight;
    sum += weight * std::log(values_[by_distance[j].second][channel]);
  }
  return std::exp(sum / sum_w);
}

LogTable::Error LogTable::leave_one_out(int channel) const {
  Error e;
  if (points_.size() < 2) return e;
  double total = 0;
  for (std::size_t i = 0; i < points_.size(); ++i) {
    const double predicted = at(points_[i], channel, static_cast<int>(i));
    const double err = std::abs(predicted - values_[i][channel]) / values_[i][channel];
    total += err;
    e.max = std::max(e.max, err);
  }
  e.mean = total / static_cast<double>(points_.size());
  return e;
}

}  // namespace moesim::calibration
