#include "sim/core/memory_limit.hpp"

#include <fstream>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

namespace moesim {

namespace {

// A cgroup limit file: a number of bytes, or "max" (none).
double cgroup_value(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  try {
    const double v = std::stod(text);
    return v > 0 && v < 1e18 ? v : 0;  // v1 writes ~9.2e18 for "no limit"
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

double resident_bytes() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<double>(sysconf(_SC_PAGE_SIZE));
}

MemoryLimit memory_limit() {
  MemoryLimit best{static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)),
                   "physical memory"};
  const auto consider = [&](double bytes, const char* source) {
    if (bytes > 0 && bytes < best.bytes) best = {bytes, source};
  };
  consider(cgroup_value("/sys/fs/cgroup/memory.max"), "cgroup memory.max");
  consider(cgroup_value("/sys/fs/cgroup/memory/memory.limit_in_bytes"), "cgroup memory.limit_in_bytes");
  for (const auto& [resource, source] : {std::pair{RLIMIT_AS, "ulimit -v"}, std::pair{RLIMIT_DATA, "ulimit -d"}}) {
    rlimit r{};
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY) consider(static_cast<double>(r.rlim_cur), source);
  }
  return best;
}

}  // namespace moesim
