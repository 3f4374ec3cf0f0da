// Chrome trace event format (the JSON Perfetto and chrome://tracing open): one process per GPU,
// one thread per stream, a complete ("X") event per task. Timestamps are microseconds printed
// with six decimals, so picosecond times survive exactly. A collective member shows its wait
// at the rendezvous ("wait: NAME") before the collective itself.
//
// The recorder keeps the tasks of the traced GPUs as they finish (the engine retires them), so
// its memory grows with the traced GPUs' tasks only; the trace lists them in the order they were
// added to the program.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/engine/engine.hpp"

namespace moesim::report {

class TraceRecorder final : public engine::TaskObserver {
 public:
  // `include`: per GPU, whether it is traced (empty: all). Attaches itself to `engine`.
  TraceRecorder(engine::Engine& engine, std::vector<bool> include);
  void on_finish(const engine::Engine& engine, engine::TaskId id, const engine::Task& task, Time began) override;
  // `gpu_names`: per GPU, e.g. "GPU 3 (h100-sxm5-80gb)"; streams are named by the engine's specs.
  void write(std::ostream& out, const engine::Engine& engine, const std::vector<std::string>& gpu_names) const;

 private:
  struct Record {
    engine::TaskId id;
    std::uint32_t gpu;
    std::uint8_t stream;
    bool member;
    engine::Label label;
    Time start, began, end;
  };
  bool wanted(std::uint32_t g) const { return include_.empty() || include_[g]; }
  std::vector<bool> include_;
  std::vector<Record> records_;
};

}  // namespace moesim::report
