#include "sim/report/chrome_trace.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace moesim::report {

namespace {
std::string us(Time t) { return fmt::format("{}.{:06}", t / 1'000'000, t % 1'000'000); }
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }
}  // namespace

TraceRecorder::TraceRecorder(engine::Engine& engine, std::vector<bool> include) : include_(std::move(include)) {
  engine.add_observer(this);
}

void TraceRecorder::on_finish(const engine::Engine&, engine::TaskId id, const engine::Task& t, Time began) {
  if (!wanted(t.gpu)) return;
  records_.push_back({id, t.gpu, t.stream, t.type == engine::TaskType::CollectiveMember, t.label, t.start, began, t.end});
}

void TraceRecorder::write(std::ostream& out, const engine::Engine& eng, const std::vector<std::string>& gpu_names) const {
  out << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  const auto emit = [&](const std::string& event) {
    if (!first) out << ",\n";
    first = false;
    out << event;
  };
  for (std::uint32_t g = 0; g < eng.gpus(); ++g) {
    if (!wanted(g)) continue;
    emit(fmt::format(R"({{"ph":"M","name":"process_name","pid":{},"tid":0,"args":{{"name":{}}}}})", g, quoted(gpu_names.at(g))));
    emit(fmt::format(R"({{"ph":"M","name":"process_sort_index","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", g, g));
    for (std::uint8_t s = 0; s < eng.streams_per_gpu(); ++s)
      emit(fmt::format(R"({{"ph":"M","name":"thread_name","pid":{},"tid":{},"args":{{"name":{}}}}})", g, s,
                       quoted(eng.stream_specs()[s].name)));
  }
  std::vector<const Record*> order;
  order.reserve(records_.size());
  for (const Record& r : records_) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const Record* a, const Record* b) { return a->id < b->id; });
  for (const Record* r : order) {
    const std::string& name = eng.names()[r->label.name];
    const std::string title = fmt::format("{} {} L{}", engine::to_string(r->label.phase), name, r->label.layer);
    const std::string args = fmt::format(R"({{"iteration":{},"layer":{},"microbatch":{},"chunk":{},"kind":"{}"}})",
                                         r->label.iteration, r->label.layer, r->label.microbatch, r->label.chunk,
                                         engine::to_string(r->label.kind));
    if (r->member && r->began > r->start)
      emit(fmt::format(R"({{"ph":"X","name":{},"cat":"wait","pid":{},"tid":{},"ts":{},"dur":{},"args":{}}})",
                       quoted("wait: " + title), r->gpu, r->stream, us(r->start), us(r->began - r->start), args));
    emit(fmt::format(R"({{"ph":"X","name":{},"cat":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{}}})", quoted(title),
                     engine::to_string(r->label.kind), r->gpu, r->stream, us(r->began), us(r->end - r->began), args));
  }
  out << "\n]}\n";
}

}  // namespace moesim::report
