#include "sim/calibration/profile.hpp"

#include <algorithm>
#include <fmt/format.h>

#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/error.hpp"

namespace moesim::calibration {

namespace sc = moesim::schema;

namespace {

const std::vector<std::string> kCollectives = {"all_gather", "all_reduce", "reduce_scatter", "all_to_all",
                                               "send_recv",  "overlap"};
const std::vector<std::string> kDtypes = names_of(cluster::kDtypeNames);

sc::NodePtr fit_error_fields() {
  return sc::object({
      sc::optional("mean_relative_error", sc::number(0), nullptr, "leave-one-out mean |predicted − measured| / measured"),
      sc::optional("max_relative_error", sc::number(0), nullptr, "leave-one-out largest relative error"),
  });
}

}  // namespace

// β at most 1e-5 s per byte (100 KB/s): the slowest link a scenario may have is 1 Mbps (125 KB/s).
constexpr double kMaxBeta = 1e-5;

const sc::NodePtr& profile_schema() {
  static const sc::NodePtr segment = sc::object({
      sc::required("from_bytes", sc::number(0), "smallest size (nccl-tests `size`) this piece covers"),
      sc::optional("to_bytes", sc::number(0), nullptr, "first size past this piece (absent: no upper end)"),
      sc::required("alpha", sc::time(), "start-up time α of α + β·size"),
      sc::required("beta_s_per_byte", sc::number(0, kMaxBeta), "β of α + β·size, seconds per byte"),
      sc::optional("points", sc::integer(0), nullptr, "measurements the piece was fitted to"),
      sc::optional("rms_relative_error", sc::number(0), nullptr, "root mean square of (fit − t)/t"),
      sc::optional("max_relative_error", sc::number(0), nullptr, "largest |fit − t|/t"),
  });
  static const sc::NodePtr collective = sc::object({
      sc::required("collective", sc::enumeration(kCollectives),
                   "the collective measured (overlap: Parm's all-to-all run together with an all-gather, SAA)"),
      sc::optional("group", sc::string(), nullptr, "a named parallel group it ran in, e.g. \"mp\" or \"ep_esp\""),
      sc::optional("ranks", sc::integer(2), nullptr, "GPUs in the measured group"),
      sc::optional("nodes", sc::integer(1), nullptr, "nodes the group spans"),
      sc::optional("alpha", sc::time(), nullptr, "start-up time α of α + β·size (one line for all sizes)"),
      sc::optional("beta_s_per_byte", sc::number(0, kMaxBeta), nullptr, "β of α + β·size in seconds per byte"),
      sc::optional("segments", sc::array_of(segment, 1), nullptr, "α-β pieces over size ranges, in order"),
      sc::optional("fit", sc::any(), nullptr, "the fitter's report: source, sizes, splits, dropped outliers"),
      sc::optional("note", sc::string(), nullptr, "how the value was obtained"),
  });
  static const sc::NodePtr gemm_point = sc::object({
      sc::required("m", sc::number(0, std::nullopt, true), "rows of A and C"),
      sc::required("n", sc::number(0, std::nullopt, true), "columns of B and C"),
      sc::required("k", sc::number(0, std::nullopt, true), "the reduced dimension"),
      sc::required("tflops", sc::number(0, std::nullopt, true), "achieved 10^12 FLOP/s, 2·M·N·K FLOPs"),
  });
  static const sc::NodePtr gemm = sc::object({
      sc::required("dtype", sc::enumeration(kDtypes), "element type of A and B"),
      sc::required("points", sc::array_of(gemm_point, 1), "measured shapes"),
      sc::optional("fit", fit_error_fields(), nullptr, "leave-one-out interpolation error"),
      sc::optional("source", sc::string(), nullptr, "the measurements file"),
  });
  static const sc::NodePtr attention_point = sc::object({
      sc::required("seq", sc::number(0, std::nullopt, true), "sequence length L"),
      sc::required("head_dim", sc::number(0, std::nullopt, true), "head size d"),
      sc::required("forward_tflops", sc::number(0, std::nullopt, true), "achieved forward 10^12 FLOP/s"),
      sc::required("backward_tflops", sc::number(0, std::nullopt, true), "achieved backward 10^12 FLOP/s"),
  });
  static const sc::NodePtr attention = sc::object({
      sc::required("dtype", sc::enumeration(kDtypes), "element type"),
      sc::required("causal", sc::boolean(), "causal masking"),
      sc::optional("implementation", sc::string(), nullptr, "how attention was computed, e.g. cublas-unfused"),
      sc::required("points", sc::array_of(attention_point, 1), "measured shapes"),
      sc::optional("forward_fit", fit_error_fields(), nullptr, "leave-one-out interpolation error"),
      sc::optional("backward_fit", fit_error_fields(), nullptr, "leave-one-out interpolation error"),
      sc::optional("source", sc::string(), nullptr, "the measurements file"),
  });
  static const sc::NodePtr memory_bound = sc::object({
      sc::required("fixed", sc::time(), "each kernel's fixed cost (launch, ramp-up, tail), e.g. \"2.3us\""),
      sc::required("bytes_per_second", sc::number(0, std::nullopt, true), "the rate the kernels move their HBM bytes at"),
      sc::optional("kernels", sc::integer(2), nullptr, "how many measured kernels the line was fitted to"),
      sc::optional("fit", fit_error_fields(), nullptr, "the line's relative time error on them"),
      sc::optional("source", sc::string(), nullptr, "the measurements file"),
  });
  static const sc::NodePtr s = sc::object({
      sc::required("name", sc::string(), "the profile's name"),
      sc::required("provenance", sc::map_of(sc::any()),
                   "where the numbers come from: source, hardware, software, date, hosts, ..."),
      sc::optional("collectives", sc::array_of(collective), sc::Json::array(), "α-β of collectives per group"),
      sc::optional("gemm", sc::array_of(gemm), sc::Json::array(), "GeMM throughput tables, one per dtype"),
      sc::optional("attention", sc::array_of(attention), sc::Json::array(),
                   "attention throughput tables, one per dtype and masking"),
      sc::optional("memory_bound", memory_bound, nullptr,
                   "memory-bound kernels (copies, gathers, norms, activations): fixed cost and HBM rate"),
  });
  return s;
}

const Segment& CollectiveFit::segment(double size) const {
  for (std::size_t i = 1; i < segments.size(); ++i)
    if (size < segments[i].from_bytes) return segments[i - 1];
  return segments.back();
}

std::string CollectiveFit::label() const {
  if (!group.empty()) return fmt::format("{} group={}", collective, group);
  return fmt::format("{} ranks={} nodes={}", collective, ranks, nodes);
}

const CollectiveFit* Profile::find(const std::string& collective, const std::string& group) const {
  for (const auto& c : collectives)
    if (c.collective == collective && c.group == group) return &c;
  return nullptr;
}

const CollectiveFit* Profile::find_shape(const std::string& collective, int ranks, int nodes) const {
  for (const auto& c : collectives)
    if (c.collective == collective && c.group.empty() && c.ranks == ranks && c.nodes == nodes) return &c;
  return nullptr;
}

const GemmTable* Profile::find_gemm(const std::string& dtype) const {
  for (const auto& g : gemm)
    if (g.dtype == dtype) return &g;
  return nullptr;
}

const AttentionTable* Profile::find_attention(const std::string& dtype, bool causal) const {
  for (const auto& a : attention)
    if (a.dtype == dtype && a.causal == causal) return &a;
  return nullptr;
}

namespace {

CollectiveFit parse_collective(const sc::Json& e, const std::string& file, const std::string& path) {
  CollectiveFit c;
  c.collective = e.at("collective").get<std::string>();
  c.group = e.value("group", std::string());
  c.ranks = e.value("ranks", 0);
  c.nodes = e.value("nodes", 0);
  c.note = e.value("note", std::string());
  if (e.contains("fit")) c.report = e.at("fit");
  if (c.group.empty() && c.ranks == 0)
    throw InputError(file, path, "the entry names neither a group nor a shape",
                     "give \"group\" (e.g. \"mp\") or \"ranks\" and \"nodes\"");
  if (!c.group.empty() && c.ranks != 0)
    throw InputError(file, path, "the entry names both a group and a shape", "keep one of \"group\" and \"ranks\"");
  if (c.ranks != 0 && c.nodes == 0)
    throw InputError(file, path + ".nodes", "\"ranks\" without \"nodes\"", "say how many nodes the ranks span");
  if (c.nodes > c.ranks && c.ranks != 0)
    throw InputError(file, path + ".nodes", fmt::format("{} nodes for {} ranks", c.nodes, c.ranks),
                     "a node holds at least one rank");
  const bool line = e.contains("alpha") || e.contains("beta_s_per_byte");
  if (line == e.contains("segments"))
    throw InputError(file, path, line ? "both a line (alpha, beta_s_per_byte) and segments" : "no cost given",
                     "give either \"alpha\" and \"beta_s_per_byte\", or \"segments\"");
  if (line) {
    if (!e.contains("alpha") || !e.contains("beta_s_per_byte"))
      throw InputError(file, path + (e.contains("alpha") ? ".beta_s_per_byte" : ".alpha"), "half a line",
                       "give both \"alpha\" and \"beta_s_per_byte\"");
    Segment s;
    s.alpha_s = time_to_seconds(sc::as_time(e.at("alpha")));
    s.beta_s_per_byte = e.at("beta_s_per_byte").get<double>();
    c.segments.push_back(s);
    return c;
  }
  const auto& list = e.at("segments");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& j = list[i];
    const std::string at = fmt::format("{}.segments[{}]", path, i);
    Segment s;
    s.from_bytes = j.at("from_bytes").get<double>();
    s.to_bytes = j.contains("to_bytes") ? j.at("to_bytes").get<double>() : -1;
    s.alpha_s = time_to_seconds(sc::as_time(j.at("alpha")));
    s.beta_s_per_byte = j.at("beta_s_per_byte").get<double>();
    s.points = j.value("points", 0);
    s.rms_relative_error = j.value("rms_relative_error", 0.0);
    s.max_relative_error = j.value("max_relative_error", 0.0);
    const double expected_from = i == 0 ? 0.0 : c.segments.back().to_bytes;
    if (s.from_bytes != expected_from)
      throw InputError(file, at + ".from_bytes",
                       fmt::format("starts at {} bytes, expected {}", s.from_bytes, expected_from),
                       i == 0 ? "the first piece starts at 0" : "each piece starts where the previous ends");
    const bool last = i + 1 == list.size();
    if (last != (s.to_bytes < 0))
      throw InputError(file, at + ".to_bytes", last ? "the last piece has an upper end" : "a piece without an upper end",
                       "only the last piece is open-ended; give to_bytes for the others");
    if (!last && s.to_bytes <= s.from_bytes)
      throw InputError(file, at + ".to_bytes", "an empty size range", "to_bytes must exceed from_bytes");
    c.segments.push_back(s);
  }
  return c;
}

std::optional<LogTable::Error> parse_error(const sc::Json& j, const char* key) {
  if (!j.contains(key)) return std::nullopt;
  return LogTable::Error{j.at(key).value("mean_relative_error", 0.0), j.at(key).value("max_relative_error", 0.0)};
}

}  // namespace

Profile parse_profile(const sc::Json& raw, const std::string& file) {
  const sc::Json doc = sc::validate(profile_schema(), raw, file);
  Profile p;
  p.name = doc.at("name").get<std::string>();
  p.file = file;
  p.provenance = doc.at("provenance");
  if (!p.provenance.contains("source") || !p.provenance.at("source").is_string())
    throw InputError(file, "$.provenance.source", "no source", "say where the numbers come from (a file, a paper, a cluster)");
  const auto& list = doc.at("collectives");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = fmt::format("$.collectives[{}]", i);
    CollectiveFit c = parse_collective(list[i], file, path);
    if (c.group.empty() ? p.find_shape(c.collective, c.ranks, c.nodes) : p.find(c.collective, c.group))
      throw InputError(file, path, fmt::format("a second entry for {}", c.label()), "keep one entry per collective and group");
    p.collectives.push_back(std::move(c));
  }
  const auto& gemms = doc.at("gemm");
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const auto& g = gemms[i];
    GemmTable t;
    t.dtype = g.at("dtype").get<std::string>();
    if (p.find_gemm(t.dtype))
      throw InputError(file, fmt::format("$.gemm[{}].dtype", i), fmt::format("a second {} table", t.dtype),
                       "keep one GeMM table per dtype");
    std::vector<LogTable::Point> pts;
    std::vector<std::vector<double>> vals;
    for (const auto& q : g.at("points")) {
      pts.push_back({q.at("m").get<double>(), q.at("n").get<double>(), q.at("k").get<double>()});
      vals.push_back({q.at("tflops").get<double>() * 1e12});
    }
    t.table = LogTable(std::move(pts), std::move(vals));
    t.error = parse_error(g, "fit").value_or(LogTable::Error{});
    t.source = g.value("source", std::string());
    p.gemm.push_back(std::move(t));
  }
  const auto& atts = doc.at("attention");
  for (std::size_t i = 0; i < atts.size(); ++i) {
    const auto& a = atts[i];
    AttentionTable t;
    t.dtype = a.at("dtype").get<std::string>();
    t.causal = a.at("causal").get<bool>();
    if (p.find_attention(t.dtype, t.causal))
      throw InputError(file, fmt::format("$.attention[{}]", i),
                       fmt::format("a second {} {} attention table", t.dtype, t.causal ? "causal" : "non-causal"),
                       "keep one attention table per dtype and masking");
    t.implementation = a.value("implementation", std::string());
    std::vector<LogTable::Point> pts;
    std::vector<std::vector<double>> vals;
    for (const auto& q : a.at("points")) {
      pts.push_back({q.at("seq").get<double>(), q.at("head_dim").get<double>(), 1.0});
      vals.push_back({q.at("forward_tflops").get<double>() * 1e12, q.at("backward_tflops").get<double>() * 1e12});
    }
    t.table = LogTable(std::move(pts), std::move(vals));
    t.forward_error = parse_error(a, "forward_fit").value_or(LogTable::Error{});
    t.backward_error = parse_error(a, "backward_fit").value_or(LogTable::Error{});
    t.source = a.value("source", std::string());
    p.attention.push_back(std::move(t));
  }
  if (doc.contains("memory_bound")) {
    const auto& m = doc.at("memory_bound");
    MemoryBoundFit f;
    f.fixed_s = time_to_seconds(sc::as_time(m.at("fixed")));
    f.bytes_per_second = m.at("bytes_per_second").get<double>();
    f.kernels = m.value("kernels", 0);
    f.error = parse_error(m, "fit").value_or(LogTable::Error{});
    f.source = m.value("source", std::string());
    p.memory_bound = f;
  }
  return p;
}

namespace {

sc::Json error_json(const LogTable::Error& e) {
  return {{"mean_relative_error", e.mean}, {"max_relative_error", e.max}};
}

std::string alpha_text(double seconds) { return fmt::format("{:.6g}us", seconds * 1e6); }

}  // namespace

sc::Json profile_to_json(const Profile& p) {
  sc::Json doc = {{"name", p.name}, {"provenance", p.provenance}, {"collectives", sc::Json::array()}};
  for (const auto& c : p.collectives) {
    sc::Json e = {{"collective", c.collective}};
    if (!c.group.empty()) e["group"] = c.group;
    else {
      e["ranks"] = c.ranks;
      e["nodes"] = c.nodes;
    }
    sc::Json segs = sc::Json::array();
    for (const auto& s : c.segments) {
      sc::Json j = {{"from_bytes", s.from_bytes}};
      if (s.to_bytes >= 0) j["to_bytes"] = s.to_bytes;
      j["alpha"] = alpha_text(s.alpha_s);
      j["beta_s_per_byte"] = s.beta_s_per_byte;
      j["points"] = s.points;
      j["rms_relative_error"] = s.rms_relative_error;
      j["max_relative_error"] = s.max_relative_error;
      segs.push_back(std::move(j));
    }
    e["segments"] = std::move(segs);
    if (!c.report.is_null()) e["fit"] = c.report;
    if (!c.note.empty()) e["note"] = c.note;
    doc["collectives"].push_back(std::move(e));
  }
  doc["gemm"] = sc::Json::array();
  for (const auto& g : p.gemm) {
    sc::Json pts = sc::Json::array();
    for (std::size_t i = 0; i < g.table.size(); ++i) {
      const auto& q = g.table.point(i);
      pts.push_back({{"m", q[0]}, {"n", q[1]}, {"k", q[2]}, {"tflops", g.table.value(i) / 1e12}});
    }
    doc["gemm"].push_back({{"dtype", g.dtype}, {"points", std::move(pts)}, {"fit", error_json(g.error)}, {"source", g.source}});
  }
  if (p.memory_bound) {
    const auto& mb = *p.memory_bound;
    doc["memory_bound"] = {{"fixed", alpha_text(mb.fixed_s)},
                           {"bytes_per_second", mb.bytes_per_second},
                           {"kernels", mb.kernels},
                           {"fit", error_json(mb.error)},
                           {"source", mb.source}};
  }
  doc["attention"] = sc::Json::array();
  for (const auto& a : p.attention) {
    sc::Json pts = sc::Json::array();
    for (std::size_t i = 0; i < a.table.size(); ++i) {
      const auto& q = a.table.point(i);
      pts.push_back({{"seq", q[0]},
                     {"head_dim", q[1]},
                     {"forward_tflops", a.table.value(i, 0) / 1e12},
                     {"backward_tflops", a.table.value(i, 1) / 1e12}});
    }
    doc["attention"].push_back({{"dtype", a.dtype},
                                {"causal", a.causal},
                                {"implementation", a.implementation},
                                {"points", std::move(pts)},
                                {"forward_fit", error_json(a.forward_error)},
                                {"backward_fit", error_json(a.backward_error)},
                                {"source", a.source}});
  }
  return doc;
}

}  // namespace moesim::calibration
