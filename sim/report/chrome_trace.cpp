#include "sim/report/chrome_trace.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace moesim::report {

namespace {
std::string us(Time t) { return fmt::format("{}.{:06}", t / 1'000'000, t % 1'000'000); }
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }
}  // namespace

void write_chrome_trace(std::ostream& out, const engine::Engine& eng, const TraceNames& names) {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  const auto emit = [&](const std::string& event) {
    if (!first) out << ",\n";
    first = false;
    out << event;
  };
  const auto wanted = [&](std::uint32_t g) { return names.include.empty() || names.include[g]; };
  for (std::uint32_t g = 0; g < eng.gpus(); ++g) {
    if (!wanted(g)) continue;
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", g, quoted(names.gpu.at(g))));
    emit(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", g, g));
    for (std::uint8_t s = 0; s < eng.streams_per_gpu(); ++s)
      emit(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", g, s,
                       quoted(s < names.stream.size() ? names.stream[s] : fmt::format("stream {}", s))));
  }
  const auto& tasks = eng.tasks();
  for (const auto& t : tasks) {
    if (!wanted(t.gpu)) continue;
    const std::string& name = eng.names()[t.label.name];
    const std::string title = fmt::format("{} {} L{}", engine::to_string(t.label.phase), name, t.label.layer);
    const std::string args = fmt::format(R"({{"iteration":{},"layer":{},"microbatch":{},"chunk":{},"kind":"{}"}})",
                                         t.label.iteration, t.label.layer, t.label.microbatch, t.label.chunk,
                                         engine::to_string(t.label.kind));
    Time start = t.start;
    if (t.type == engine::TaskType::CollectiveMember) {
      const Time began = eng.collectives()[t.collective].start;
      if (began > t.start)
        emit(fmt::format(R"({{"ph":"X","name":{},"cat":"wait","pid":{},"tid":{},"ts":{},"dur":{},"args":{}}})",
                         quoted("wait: " + title), t.gpu, t.stream, us(t.start), us(began - t.start), args));
      start = began;
    }
    emit(fmt::format(R"({{"ph":"X","name":{},"cat":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{}}})", quoted(title),
                     engine::to_string(t.label.kind), t.gpu, t.stream, us(start), us(t.end - start), args));
  }
  out << "\n]}\n";
}

}  // namespace moesim::report
