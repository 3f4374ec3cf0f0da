// The measurements JSON written by every GPU calibration binary ("format": "moesim-measurements/1",
// read by the fitter `moesim calibrate fit`): provenance (GPU, driver, CUDA, cuBLAS, NCCL, hosts,
// date, command), settings, units, and the summary statistics of timed repetitions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "options.hpp"

namespace moesim::calibrate {

// Keys keep the order they are written in: "format" first, as in calibrate/gpu/README.md.
using Json = nlohmann::ordered_json;

struct Provenance {
  std::string gpu;
  int gpu_count = 1;
  std::vector<std::string> hosts;
  std::string driver;        // kernel module release (/proc/driver/nvidia/version) or "unknown"
  std::string cuda_runtime;  // cudaRuntimeGetVersion, "13.0"
  std::string cuda_driver;   // cudaDriverGetVersion: the newest CUDA the driver supports
  std::string cublas = "n/a";  // cublasLtGetVersion, where the tool uses cuBLAS
  std::string nccl = "n/a";    // ncclGetVersion, where the tool uses NCCL
  std::string date;            // UTC, ISO 8601
  std::string command;
};

// Fills everything but the library versions for `device`: CUDA runtime calls (not for --dry-run).
Provenance local_provenance(int device, const std::string& command);

std::string hostname();
// "13.0" from 13000 (CUDA's 1000 * major + 10 * minor).
std::string cuda_version_string(int version);
// "13.1.0" from 130100 (10000 * major + 100 * minor + patch: cuBLAS, and NCCL from 2.9 on;
// NCCL before 2.9 used 1000 * major + 100 * minor + patch).
std::string library_version_string(long long version);

// The document skeleton: format, tool, provenance, settings, units; the tool adds its array.
Json measurement_document(const std::string& tool, const Provenance& provenance, const CommonOptions& common);

// Median (the reported time), minimum and maximum of a non-empty sample.
struct Stats {
  double median = 0, min = 0, max = 0;
};
Stats summarize(std::vector<double> values);

// Microseconds rounded to nanoseconds, to keep the JSON readable.
double round_us(double us);

// The --out destination: opened (and checked) before measuring, written once at the end.
class Output {
 public:
  explicit Output(const std::string& path);  // empty: stdout; throws UsageError naming --out
  void write(const Json& document);

 private:
  std::string path_;
};

}  // namespace moesim::calibrate
