#include "sim/calibration/nccl_tests.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace moesim::calibration::nccl_tests {

std::string canonical(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* suffix : {"_perf", "_mpi"})
    if (const auto pos = name.find(suffix); pos != std::string::npos) name.erase(pos);
  name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
  if (name == "allreduce") return "all_reduce";
  if (name == "allgather") return "all_gather";
  if (name == "reducescatter") return "reduce_scatter";
  if (name == "alltoall") return "all_to_all";
  if (name == "sendrecv") return "send_recv";
  return "";
}

double busbw_factor(const std::string& collective, int n) {
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "send_recv") return 1.0;
  return static_cast<double>(n - 1) / n;  // all_gather, reduce_scatter, all_to_all
}

Shape shape(const std::string& collective, double requested, int n) {
  constexpr double kElement = 4;  // float
  const bool spread = collective == "all_gather" || collective == "reduce_scatter" || collective == "all_to_all";
  const double per = spread ? kElement * n : kElement;
  const double count = std::floor(requested / per);
  return {count * per, count};
}

std::string format_number(double v, int width) {
  for (int decimals : {2, 1, 0}) {
    std::string s = fmt::format("{:.{}f}", v, decimals);
    if (static_cast<int>(s.size()) <= width) return s;
  }
  return fmt::format("{:.0f}", v);
}

std::string table(const std::string& collective, int n, const std::vector<Row>& rows) {
  const bool reduces = collective == "all_reduce" || collective == "reduce_scatter";
  std::string out;
  out += "#\n";
  out += "#                                                              out-of-place                       in-place          \n";
  out += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
  out += "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n";
  double sum = 0;
  for (const Row& r : rows) {
    const double algbw = r.time_us > 0 ? r.size / (r.time_us * 1e-6) / 1e9 : 0;
    const double busbw = algbw * busbw_factor(collective, n);
    sum += 2 * busbw;
    const std::string half = fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", format_number(r.time_us, 7), format_number(algbw, 6),
                                         format_number(busbw, 6), "N/A");
    out += fmt::format("{:>12.0f}  {:>12.0f}  {:>8}  {:>6}  {:>6}{}{}\n", r.size, r.count, "float", reduces ? "sum" : "none", -1,
                       half, half);
  }
  out += "# Out of bounds values : 0 OK\n";
  out += fmt::format("# Avg bus bandwidth    : {}\n", rows.empty() ? "0" : format_number(sum / (2.0 * rows.size()), 8));
  out += "#\n";
  return out;
}

}  // namespace moesim::calibration::nccl_tests
