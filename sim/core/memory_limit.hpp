// The memory this process may use: the smallest of the machine's physical memory, the cgroup's
// limit (v2 memory.max, v1 memory.limit_in_bytes: containers, CI runners, batch jobs) and the
// address-space and data-segment rlimits (`ulimit -v`, `ulimit -d`). A run whose estimate does
// not fit is refused before it starts instead of dying of std::bad_alloc half-way.
#pragma once

#include <string>

namespace moesim {

struct MemoryLimit {
  double bytes = 0;
  std::string source;  // "physical memory", "cgroup memory.max", "ulimit -v", "ulimit -d"
};

MemoryLimit memory_limit();

// The bytes this process holds in memory now (resident set, /proc/self/statm; 0 where unknown):
// the binary, its libraries and the data loaded so far, on top of which a run allocates.
double resident_bytes();

}  // namespace moesim
