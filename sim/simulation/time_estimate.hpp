// The CPU time a run takes, estimated before anything is built from the tasks it writes
// (memory_estimate.hpp: MemoryEstimate::tasks, its alternatives' included): what `validate` says a
// run or a sweep will cost (issue 49: a 50-layout grid of DeepSeek-V3 on 1024 GB200 costs minutes
// of CPU a point, and nothing said so before it ran).
//
// One rate for every scenario, measured, not derived: the median CPU time (user + system) per
// estimated task of the shipped scenarios of at least 10^5 tasks, each run once with `moesim run`
// on this project's CI machine (2 cores, release build; 2026-11-29): 13 scenarios, 0.12 to 19
// million tasks, 0.08 to 13.4 CPU-s. Per scenario the rate spreads from kCpuSecondsPerTaskLow
// (deepseek-v3-gb300) to kCpuSecondsPerTaskHigh (ep-1000dc: sampled routing over 8000 GPUs and the
// flow model's max-min solver re-solved for each staggered exchange); DeepSeek-V3 and Qwen3-235B on
// 256 GB200 0.47 and 0.61 us, simai-deepseek-9216 0.71 us. So the estimate holds to about that
// factor, on a machine like that one; startup (data, presets) is not in it.
#pragma once

#include <fmt/format.h>
#include <string>

#include "sim/simulation/memory_estimate.hpp"

namespace moesim::simulation {

inline constexpr double kCpuSecondsPerTask = 0.42e-6;     // median of the shipped scenarios
inline constexpr double kCpuSecondsPerTaskLow = 0.28e-6;   // their fastest
inline constexpr double kCpuSecondsPerTaskHigh = 2.9e-6;   // their slowest

inline double cpu_seconds(const MemoryEstimate& e) { return e.tasks * kCpuSecondsPerTask; }

// A CPU time as people read it: seconds below two minutes, then minutes, then hours.
inline std::string format_cpu_time(double seconds) {
  if (seconds < 120) return fmt::format("{:.2g} s", seconds);
  if (seconds < 7200) return fmt::format("{:.3g} min", seconds / 60);
  return fmt::format("{:.3g} h", seconds / 3600);
}

// How far to trust an estimate.
inline std::string cpu_time_caveat() {
  return fmt::format("at {:.2g} us a task, the median of the shipped scenarios on a 2-core machine; they spread from {:.2g} to "
                     "{:.2g} us",
                     kCpuSecondsPerTask * 1e6, kCpuSecondsPerTaskLow * 1e6, kCpuSecondsPerTaskHigh * 1e6);
}

}  // namespace moesim::simulation
