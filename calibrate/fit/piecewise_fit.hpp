// Fits t = α + β·size to measured collective times, piecewise over size ranges where one line
// does not fit (NCCL switches protocol and algorithm with the size: LL → LL128 → Simple, ring →
// tree/NVLS, so a log spanning bytes to GiB is rarely one line).
//  - Each piece: least squares on the relative error (α + β·x − t)/t, so a 10 us point and a 10 ms
//    point weigh alike, solved with Eigen's column-pivoting QR on column-scaled data; α and β are
//    kept ≥ 0 (a piece that wants a negative one is refitted with it at 0).
//  - Outliers: within a piece, the worst point is dropped while its relative residual exceeds both
//    `outlier_threshold` and 6 robust standard deviations (1.4826·median |r|), up to
//    `max_outlier_fraction` of the piece (a 1272 us spike among 300 us neighbours in nccl-tests
//    issue 309 is one). Dropped points are reported.
//  - Pieces: for each count k, dynamic programming (Bellman's segmented least squares) finds the
//    split minimising the summed squared relative error; k is chosen by the Bayesian information
//    criterion N·ln(SSE/N) + (3k − 1)·ln N (α, β per piece and the k − 1 split points), with
//    SSE/N floored at (1e-4)² so exact data stays one line. Each piece spans ≥ `min_sizes` sizes.
//  - Between the last size of one piece and the first of the next, a bridge piece joins the two
//    lines' values there, so the cost stays continuous in the size (NCCL's switch point lies
//    somewhere between; a held-out-size test on real logs predicts better with bridges than with
//    a jump at the midpoint). A bridge is an α-β line too, marked as fitted to no sample.
#pragma once

#include <vector>

#include "calibrate/fit/measurements.hpp"

namespace moesim::calibrate {

struct FitOptions {
  int min_sizes = 3;                  // distinct sizes per piece
  double outlier_threshold = 0.25;    // relative residual a point must exceed to be dropped
  double max_outlier_fraction = 0.2;  // of a piece's points
  int max_pieces = 8;
};

struct Piece {
  double first_bytes = 0, last_bytes = 0;  // measured sizes it was fitted to
  double from_bytes = 0, to_bytes = -1;    // sizes it covers (to_bytes < 0: no upper end)
  double alpha = 0, beta = 0;              // seconds, seconds per byte
  int points = 0;                          // samples kept
  double rms_relative_error = 0, max_relative_error = 0;
  std::vector<Sample> dropped;
  bool bridge = false;  // joins two fitted pieces between their measured sizes (fitted to none)
};

struct PiecewiseFit {
  std::vector<Piece> pieces;
  double rms_relative_error = 0, max_relative_error = 0;  // over kept samples
  int sizes = 0, samples = 0;
  double predict(double bytes) const;
  const Piece& piece(double bytes) const;
};

// Needs samples at ≥ min_sizes distinct sizes > 0 and positive times (callers validate and report
// with file context; this throws std::invalid_argument).
PiecewiseFit fit_piecewise(std::vector<Sample> samples, const FitOptions& options = {});

}  // namespace moesim::calibrate
