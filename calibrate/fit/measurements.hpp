// What the fitter reads: timings of collectives, GeMMs and attention, from the calibration
// binaries' measurements JSON (calibrate/gpu/README.md, "format": "moesim-measurements/1") or
// imported from nccl-tests logs (nccl_tests_log.hpp). Times are converted to seconds on reading,
// from the unit each input declares; the unit is kept so inputs that disagree can be refused.
#pragma once

#include <string>
#include <vector>

#include "sim/core/schema.hpp"

namespace moesim::calibrate {

struct Sample {
  double bytes = 0;    // nccl-tests `size` convention (sim/calibration/profile.hpp)
  double seconds = 0;
  std::string where;   // "table 2, line 57" or "$.collectives[0].samples[3]": for error messages
};

// One measured curve: a collective over message sizes in one group shape.
struct Series {
  std::string collective;  // all_reduce, all_gather, reduce_scatter, all_to_all, send_recv
  int ranks = 0;
  int nodes = 0;           // 0: not known
  std::string split;       // all_to_all: even or uneven
  std::string variant;     // nccl-tests: out-of-place and in-place columns are merged ("both")
  std::string time_unit;   // as declared by the input: ns, us, ms, s
  std::string file;        // input file
  std::string where;       // table or JSON path inside it
  int table = 0;           // nccl-tests logs: the result table (1-based)
  schema::Json provenance;
  std::vector<Sample> samples;
};

struct GemmSample {
  std::string dtype;
  double m = 0, n = 0, k = 0;
  double seconds = 0;
  std::string tag;
  std::string where;
};

struct AttentionSample {
  std::string dtype;
  double batch = 0, heads = 0, seq = 0, head_dim = 0;
  bool causal = false;
  double forward_s = 0, backward_s = 0;
  std::string implementation;
  std::string where;
};

// A memory-bound kernel (calibrate/torch's "kernels": copy, row gather, RMSNorm, SwiGLU, softmax):
// the HBM bytes it reads and writes and its time; `kernels`: how many launches the timed op is.
struct MemoryKernelSample {
  std::string kernel;
  double bytes = 0;
  double seconds = 0;
  int kernels = 1;
  std::string where;
};

struct Measurements {
  std::string file;
  schema::Json provenance;
  std::vector<Series> series;
  std::vector<GemmSample> gemm;
  std::vector<AttentionSample> attention;
  std::vector<MemoryKernelSample> memory_kernels;
  // Sections measured that no profile entry holds yet: "$.launch: why", for the fitter's summary.
  std::vector<std::string> not_fitted;
};

// Seconds per unit ("ns", "us", "ms", "s"); 0 for an unknown unit.
double seconds_per(const std::string& unit);

// Validates a measurements document; throws InputError naming the file, the JSON path and the fix.
Measurements read_measurements(const schema::Json& doc, const std::string& file);

}  // namespace moesim::calibrate
