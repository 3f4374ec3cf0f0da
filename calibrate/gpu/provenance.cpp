// Provenance and measurements JSON of the GPU calibration binaries (see provenance.hpp).
#include "provenance.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "cuda_util.hpp"

namespace moesim::calibrate {

namespace {

// "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Fri Jan 10 ..." (or "... Open Kernel
// Module for x86_64  570.86.15  Release Build ...") -> "570.86.15": the first token made of digits and dots.
std::string driver_release() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  if (!in || !std::getline(in, line)) return "unknown";
  std::istringstream tokens(line);
  for (std::string t; tokens >> t;) {
    const bool version = std::isdigit(static_cast<unsigned char>(t[0])) && t.find('.') != std::string::npos &&
                         t.find_first_not_of("0123456789.") == std::string::npos;
    if (version) return t;
  }
  return "unknown";
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

std::string cuda_version_string(int version) { return fmt::format("{}.{}", version / 1000, (version % 1000) / 10); }

std::string library_version_string(long long version) {
  if (version < 10000) return fmt::format("{}.{}.{}", version / 1000, (version % 1000) / 100, version % 100);
  return fmt::format("{}.{}.{}", version / 10000, (version % 10000) / 100, version % 100);
}

Provenance local_provenance(int device, const std::string& command) {
  Provenance p;
  p.gpu = device_name(device);
  p.hosts = {hostname()};
  p.driver = driver_release();
  int version = 0;
  check_cuda(cudaRuntimeGetVersion(&version), "cudaRuntimeGetVersion");
  p.cuda_runtime = cuda_version_string(version);
  check_cuda(cudaDriverGetVersion(&version), "cudaDriverGetVersion");
  p.cuda_driver = cuda_version_string(version);
  p.date = utc_now();
  p.command = command;
  return p;
}

Json measurement_document(const std::string& tool, const Provenance& p, const CommonOptions& common) {
  std::vector<std::string> hosts = p.hosts;
  return {
      {"format", "moesim-measurements/1"},
      {"tool", tool},
      {"provenance",
       {{"gpu", p.gpu},
        {"gpu_count", p.gpu_count},
        {"hosts", hosts},
        {"nodes", hosts.size()},
        {"driver", p.driver},
        {"cuda_runtime", p.cuda_runtime},
        {"cuda_driver", p.cuda_driver},
        {"cublas", p.cublas},
        {"nccl", p.nccl},
        {"date", p.date},
        {"command", p.command}}},
      {"settings", {{"warmup", common.warmup}, {"repetitions", common.reps}, {"statistic", "median"}, {"timer", "cudaEvent"}}},
      {"units", {{"time", "us"}, {"size", "bytes"}}},
  };
}

Stats summarize(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
  return {median, values.front(), values.back()};
}

double round_us(double us) {
  const double rounded = std::round(us * 1000.0) / 1000.0;
  return rounded > 0 ? rounded : us;  // never turn a measured time into 0
}

Output::Output(const std::string& path) : path_(path) {
  if (path_.empty()) return;
  // Checked now, written at the end: a failed run leaves an existing file as it was.
  const bool existed = std::filesystem::exists(path_);
  std::ofstream probe(path_, std::ios::app);
  if (!probe) throw UsageError(fmt::format("--out {}: cannot open the file for writing", path_));
  probe.close();
  if (!existed) std::filesystem::remove(path_);
}

void Output::write(const Json& document) {
  std::ofstream file;
  if (!path_.empty()) file.open(path_);
  std::ostream& out = path_.empty() ? std::cout : static_cast<std::ostream&>(file);
  out << document.dump(2) << "\n";
  out.flush();
  if (!out) throw std::runtime_error(fmt::format("writing {} failed", path_.empty() ? "stdout" : path_));
}

}  // namespace moesim::calibrate
