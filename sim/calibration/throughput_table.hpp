// Measured kernel throughput over shapes, interpolated in log space: the calibration tables of the
// compute model (DESIGN.md §6). GeMM throughput is tabulated over (M, N, K), attention over
// (sequence length, head size). A query
//  1. returns the measured value at a measured shape;
//  2. else, when the 2^d points around it (the nearest measured coordinate below and above in
//     each dimension) were all measured, interpolates multi-linearly in log2(coordinate) of the
//     log of the throughput (kernel efficiency varies smoothly with the log of the size, as in
//     OpenXLA's matmul interpolator whose H100 table is in tests/data/realdata/20_*);
//  3. else takes the inverse-square-distance mean (log space) of the 2^d nearest points.
// Coordinates outside the measured range are clamped to it. Each table carries its fit error:
// leave-one-out, each point predicted from the others.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

namespace moesim::calibration {

class LogTable {
 public:
  static constexpr int kDims = 3;
  using Point = std::array<double, kDims>;

  LogTable() = default;
  // `values[i]` holds one value (> 0) per channel for `points[i]` (coordinates > 0).
  LogTable(std::vector<Point> points, std::vector<std::vector<double>> values);

  // Interpolated value of `channel` at `at`; `skip` leaves one point out (leave-one-out errors).
  double at(const Point& at, int channel = 0, int skip = -1) const;
  std::size_t size() const { return points_.size(); }
  const Point& point(std::size_t i) const { return points_[i]; }
  double value(std::size_t i, int channel = 0) const { return values_[i][channel]; }

  struct Error {
    double mean = 0, max = 0;
  };
  // Leave-one-out relative error of a channel's throughput, each point predicted from all the others.
  Error leave_one_out(int channel = 0) const;

 private:
  int find(const Point& logp, int skip) const;
  std::vector<Point> points_;  // as given
  std::vector<Point> log_;     // log2 of the coordinates
  std::vector<std::vector<double>> values_;
  std::array<std::vector<double>, kDims> axes_;  // sorted distinct log2 coordinates per dimension
  std::map<std::array<long long, kDims>, int> index_;  // log2 coordinates (to 1e-6) → point: exact hits in O(log n)
};

// GeMM C[M×N] = A[M×K]·B[K×N] in one dtype: achieved FLOP/s (2·M·N·K per GeMM).
struct GemmTable {
  std::string dtype;  // fp32, tf32, fp16, bf16, fp8, mxfp8
  LogTable table;     // coordinates (M, N, K), one channel: FLOP/s
  LogTable::Error error;
  std::string source;
  double flops_per_second(double m, double n, double k) const { return table.at({m, n, k}); }
};

// Scaled-dot-product attention in one dtype and masking: achieved FLOP/s of the forward and the
// backward pass, counting FLOPs as the compute model does (compute::attention_forward_flops:
// 4·B·h·L²·d, half when causal; backward compute::kAttentionBackwardFlopRatio = 2.5× that).
struct AttentionTable {
  std::string dtype;
  bool causal = false;
  std::string implementation;  // how it was measured, e.g. "cublas-unfused"
  LogTable table;              // coordinates (L, d, 1); channel 0 forward, 1 backward FLOP/s
  LogTable::Error forward_error, backward_error;
  std::string source;
};

}  // namespace moesim::calibration
