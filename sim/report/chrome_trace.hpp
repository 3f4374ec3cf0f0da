// Chrome trace event format (the JSON Perfetto and chrome://tracing open): one process per GPU,
// one thread per stream, a complete ("X") event per task. Timestamps are microseconds printed
// with six decimals, so picosecond times survive exactly. A collective member shows its wait
// at the rendezvous ("wait: NAME") before the collective itself.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/engine/engine.hpp"

namespace moesim::report {

struct TraceNames {
  std::vector<std::string> gpu;     // per GPU, e.g. "GPU 3 (h100-sxm5-80gb)"
  std::vector<std::string> stream;  // per stream index, e.g. "compute", "dispatch"
  std::vector<bool> include;        // per GPU: written to the trace (empty: all)
};

void write_chrome_trace(std::ostream& out, const engine::Engine& engine, const TraceNames& names);

}  // namespace moesim::report
