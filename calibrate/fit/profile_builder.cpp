#include "calibrate/fit/profile_builder.hpp"

#include <algorithm>
#include <boost/algorithm/string/predicate.hpp>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <tuple>

#include "calibrate/fit/gemm_table_csv.hpp"
#include "calibrate/fit/nccl_tests_log.hpp"
#include "sim/calibration/line_fit.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/core/error.hpp"
#include "sim/core/input_file.hpp"
#include "sim/core/json_input.hpp"

namespace moesim::calibrate {

namespace sc = moesim::schema;
using calibration::CollectiveFit;
using calibration::Profile;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Curve {
  const Series* first = nullptr;
  std::vector<Sample> samples;
  std::vector<std::string> sources;
};

using Key = std::tuple<std::string, int, int, std::string>;  // collective, ranks, nodes, split

std::string source_of(const Series& s) { return fmt::format("{} {}", s.file, s.where); }

// Refuses curves the fitter must not fit; `c.samples` are sorted by size.
void check_curve(const Curve& c, const BuildOptions& o) {
  const Series& s = *c.first;
  std::vector<double> sizes;
  for (const Sample& x : c.samples) {
    if (!(x.seconds > 0))
      throw InputError(s.file, x.where, fmt::format("time {} s is not positive", x.seconds), "drop the sample or measure again");
    if (sizes.empty() || x.bytes != sizes.back()) sizes.push_back(x.bytes);
  }
  if (static_cast<int>(sizes.size()) < o.min_sizes)
    throw InputError(s.file, s.where,
                     fmt::format("{} on {} ranks has {} message size(s) > 0; a fit needs at least {}", s.collective, s.ranks,
                                 sizes.size(), o.min_sizes),
                     "measure more sizes (e.g. 8 B to 1 GiB, doubling)");
  // Non-monotone: the fastest time at a size (noise only adds time) against the slowest smaller size.
  double slowest = 0, slowest_bytes = 0;
  for (std::size_t i = 0; i < c.samples.size();) {
    double m = c.samples[i].seconds;
    std::size_t j = i;
    for (; j < c.samples.size() && c.samples[j].bytes == c.samples[i].bytes; ++j) m = std::min(m, c.samples[j].seconds);
    if (m < (1 - o.monotone_tolerance) * slowest)
      throw InputError(s.file, c.samples[i].where,
                       fmt::format("times fall with the size: {:.4g} us at {} bytes after {:.4g} us at {} bytes", m * 1e6,
                                   c.samples[i].bytes, slowest * 1e6, slowest_bytes),
                       "check that sizes and times are not shuffled or mislabelled; a collective does not get "
                       "faster with more bytes by more than half");
    if (m > slowest) {
      slowest = m;
      slowest_bytes = c.samples[i].bytes;
    }
    i = j;
  }
}

sc::Json sample_json(const Sample& s) { return {{"bytes", s.bytes}, {"time_us", s.seconds * 1e6}, {"at", s.where}}; }

CollectiveFit fit_curve(const Curve& c, const BuildOptions& o, sc::Json& report) {
  const PiecewiseFit f = fit_piecewise(c.samples, o.fit);
  CollectiveFit e;
  e.collective = c.first->collective;
  e.ranks = c.first->ranks;
  e.nodes = c.first->nodes;
  sc::Json splits = sc::Json::array(), dropped = sc::Json::array();
  for (const Piece& p : f.pieces) {
    calibration::Segment s;
    s.from_bytes = p.from_bytes;
    s.to_bytes = p.to_bytes;
    s.alpha_s = p.alpha;
    s.beta_s_per_byte = p.beta;
    s.points = p.points;
    s.rms_relative_error = p.rms_relative_error;
    s.max_relative_error = p.max_relative_error;
    e.segments.push_back(s);
    if (p.bridge) splits.push_back({p.first_bytes, p.last_bytes});
    for (const Sample& d : p.dropped) dropped.push_back(sample_json(d));
  }
  report = {{"sources", c.sources},
            {"sizes", f.sizes},
            {"samples", f.samples},
            {"pieces", f.pieces.size()},
            {"splits_between_bytes", splits},
            {"dropped_outliers", dropped},
            {"rms_relative_error", f.rms_relative_error},
            {"max_relative_error", f.max_relative_error}};
  return e;
}

}  // namespace

calibration::Profile build_profile(const std::vector<Measurements>& inputs, const BuildOptions& o) {
  Profile p;
  p.name = o.name;
  sc::Json sources = sc::Json::array();
  for (const auto& m : inputs) sources.push_back({{"file", m.file}, {"provenance", m.provenance}});
  p.provenance = {{"source", "moesim calibrate fit"}, {"inputs", sources}};
  // The GPU the inputs agree on (compute tables apply to that GPU kind only).
  std::string gpu;
  for (const auto& m : inputs) {
    const bool named = m.provenance.is_object() && m.provenance.contains("gpu") && m.provenance.at("gpu").is_string();
    const std::string g = named ? m.provenance.at("gpu").get<std::string>() : std::string();
    if (!g.empty()) gpu = gpu.empty() || gpu == g ? g : "mixed";
  }
  if (!gpu.empty() && gpu != "mixed") p.provenance["gpu"] = gpu;
  if (!o.dtype_as.empty()) p.provenance["dtype_as"] = o.dtype_as;

  // Collectives: merge the curves of one key across inputs.
  std::map<Key, Curve> curves;
  for (const auto& m : inputs)
    for (const Series& s : m.series) {
      if (s.nodes <= 0)
        throw InputError(s.file, s.where, fmt::format("the nodes of the {} ranks are not known", s.ranks),
                         "keep the log's `#  Rank ... on HOST` lines, or pass --gpus-per-node or --nodes");
      Curve& c = curves[Key{s.collective, s.ranks, s.nodes, s.split}];
      if (c.first && c.first->time_unit != s.time_unit)
        throw InputError(s.file, s.where,
                         fmt::format("mixed units: {} gives {} times in {}, {} in {}", source_of(*c.first), s.collective,
                                     c.first->time_unit, source_of(s), s.time_unit),
                         "convert the inputs of one collective and shape to one time unit");
      if (c.first && c.first->file == s.file && c.first->table != s.table)
        throw InputError(s.file, s.where,
                         fmt::format("tables {} and {} both measure {} on {} ranks over {} node(s): two runs, perhaps two "
                                     "clusters, would be fitted as one",
                                     c.first->table, s.table, s.collective, s.ranks, s.nodes),
                         "pass --table N to fit one of them");
      if (!c.first) c.first = &s;
      c.sources.push_back(source_of(s));
      for (const Sample& x : s.samples)
        if (x.bytes > 0) c.samples.push_back(x);
    }
  std::map<std::tuple<std::string, int, int>, sc::Json> uneven;
  for (auto& [key, c] : curves) {
    std::stable_sort(c.samples.begin(), c.samples.end(), [](const Sample& a, const Sample& b) { return a.bytes < b.bytes; });
    check_curve(c, o);
    sc::Json report;
    CollectiveFit e = fit_curve(c, o, report);
    if (std::get<3>(key) == "uneven") {
      sc::Json segs = sc::Json::array();
      for (const auto& s : e.segments)
        segs.push_back({{"from_bytes", s.from_bytes}, {"alpha_us", s.alpha_s * 1e6}, {"beta_s_per_byte", s.beta_s_per_byte}});
      report["segments"] = segs;
      uneven[{e.collective, e.ranks, e.nodes}] = report;
      continue;
    }
    e.report = std::move(report);
    p.collectives.push_back(std::move(e));
  }
  for (auto& [key, report] : uneven) {
    const auto& wanted = key;  // lambdas capture no structured binding in clang 14
    auto it = std::find_if(p.collectives.begin(), p.collectives.end(), [&wanted](const CollectiveFit& c) {
      return std::tie(c.collective, c.ranks, c.nodes) == wanted;
    });
    if (it != p.collectives.end()) it->report["uneven_split"] = report;
    else
      throw InputError(inputs.front().file, "$.collectives",
                       fmt::format("an uneven {} on {} ranks without an even one", std::get<0>(key), std::get<1>(key)),
                       "measure the even split too: the profile's entry is the even one");
  }

  // GeMM tables: FLOP/s per dtype and shape (the median of repeated shapes).
  std::map<std::string, std::map<calibration::LogTable::Point, std::vector<double>>> gemm;
  std::map<std::string, std::string> gemm_source;
  const auto filed_as = [&](const std::string& dtype) {
    const auto it = o.dtype_as.find(dtype);
    return it == o.dtype_as.end() ? dtype : it->second;
  };
  // A rule FROM=TO where the inputs measure TO as well would merge two tables into one: refused.
  std::map<std::string, std::string> measured_in;  // dtype as measured → a file measuring it
  for (const auto& m : inputs)
    for (const GemmSample& g : m.gemm) measured_in.emplace(g.dtype, m.file);
  for (const auto& [from, to] : o.dtype_as)
    if (from != to && measured_in.count(from) && measured_in.count(to))
      throw InputError("--dtype-as", from + "=" + to,
                       fmt::format("the inputs measure {} GeMMs too ({}): filing {} under {} would merge two tables", to,
                                   measured_in.at(to), from, to),
                       "drop the rule, or the input that measures " + to);
  for (const auto& m : inputs)
    for (const GemmSample& g : m.gemm) {
      gemm[filed_as(g.dtype)][{g.m, g.n, g.k}].push_back(2 * g.m * g.n * g.k / g.seconds);
      gemm_source[filed_as(g.dtype)] = m.file;
    }
  for (auto& [dtype, shapes] : gemm) {
    if (shapes.size() < 2)
      throw InputError(gemm_source[dtype], "$.gemm", fmt::format("one {} GeMM shape; a table needs at least 2", dtype),
                       "measure a grid of shapes (moesim-calibrate-gemm does)");
    std::vector<calibration::LogTable::Point> pts;
    std::vector<std::vector<double>> vals;
    for (auto& [shape, rates] : shapes) {
      pts.push_back(shape);
      vals.push_back({median(rates)});
    }
    calibration::GemmTable t;
    t.dtype = dtype;
    t.table = calibration::LogTable(std::move(pts), std::move(vals));
    t.error = t.table.leave_one_out();
    t.source = gemm_source[dtype];
    p.gemm.push_back(std::move(t));
  }

  // Attention tables per dtype and masking, over (L, d).
  using AKey = std::pair<std::string, bool>;
  std::map<AKey, std::map<calibration::LogTable::Point, std::pair<std::vector<double>, std::vector<double>>>> att;
  std::map<AKey, std::pair<std::string, std::string>> att_info;
  std::map<std::string, std::pair<std::string, std::string>> implementations;  // implementation → file and place first seen
  for (const auto& m : inputs)
    for (const AttentionSample& a : m.attention) implementations.emplace(a.implementation, std::pair{m.file, a.where});
  if (!o.attention_implementation.empty() && !implementations.contains(o.attention_implementation)) {
    std::vector<std::string> names;
    for (const auto& entry : implementations) names.push_back(entry.first);
    throw InputError("--attention", o.attention_implementation, "no input times this attention implementation",
                     fmt::format("name one of: {}", fmt::join(names, ", ")));
  }
  if (o.attention_implementation.empty() && implementations.size() > 1) {
    std::vector<std::string> seen;
    for (const auto& [impl, where] : implementations)
      seen.push_back(fmt::format("\"{}\" ({} {})", impl, where.first, where.second));
    throw InputError(implementations.begin()->second.first, implementations.begin()->second.second + ".implementation",
                     fmt::format("attention timings of {} implementations: {}; a table is one kernel's", seen.size(),
                                 fmt::join(seen, ", ")),
                     "pick one with --attention IMPLEMENTATION (e.g. --attention cudnn-fused-sdpa)");
  }
  for (const auto& m : inputs)
    for (const AttentionSample& a : m.attention) {
      if (!o.attention_implementation.empty() && a.implementation != o.attention_implementation) continue;
      const double f = compute::attention_forward_flops(a.batch, a.heads, a.seq, a.head_dim, a.causal);
      auto& cell = att[{filed_as(a.dtype), a.causal}][{a.seq, a.head_dim, 1.0}];
      cell.first.push_back(f / a.forward_s);
      cell.second.push_back(compute::kAttentionBackwardFlopRatio * f / a.backward_s);
      att_info[{filed_as(a.dtype), a.causal}] = {m.file, a.implementation};
    }
  for (auto& [key, shapes] : att) {
    if (shapes.size() < 2)
      throw InputError(att_info[key].first, "$.attention",
                       fmt::format("one {} attention shape; a table needs at least 2", key.first),
                       "measure several sequence lengths (moesim-calibrate-attention does)");
    std::vector<calibration::LogTable::Point> pts;
    std::vector<std::vector<double>> vals;
    for (auto& [shape, rates] : shapes) {
      pts.push_back(shape);
      vals.push_back({median(rates.first), median(rates.second)});
    }
    calibration::AttentionTable t;
    t.dtype = key.first;
    t.causal = key.second;
    t.implementation = att_info[key].second;
    t.table = calibration::LogTable(std::move(pts), std::move(vals));
    t.forward_error = t.table.leave_one_out(0);
    t.backward_error = t.table.leave_one_out(1);
    t.source = att_info[key].first;
    p.attention.push_back(std::move(t));
  }
  // Memory-bound kernels of every input: the compute model's line, fixed + bytes / rate, by
  // relative least squares; its error leave-one-out (each kernel predicted by the line of the others).
  std::vector<double> count, bytes, seconds;
  std::vector<std::string> kernel_files;
  for (const auto& m : inputs) {
    for (const MemoryKernelSample& k : m.memory_kernels) {
      count.push_back(k.kernels);
      bytes.push_back(k.bytes);
      seconds.push_back(k.seconds);
    }
    if (!m.memory_kernels.empty()) kernel_files.push_back(m.file);
  }
  if (!count.empty()) {
    if (count.size() < 3)
      throw InputError(kernel_files.front(), "$.kernels", fmt::format("{} memory-bound kernel(s); a line needs at least 3", count.size()),
                       "measure several kernels and sizes (calibrate/torch --what kernels does)");
    const calibration::LineFit line = calibration::fit_line_relative(count, bytes, seconds);
    if (!(line.beta > 0))
      throw InputError(kernel_files.front(), "$.kernels", "the kernels' times do not grow with their bytes",
                       "check the bytes each kernel moves (reads and writes of HBM)");
    calibration::MemoryBoundFit f;
    f.fixed_s = line.alpha;
    f.bytes_per_second = 1 / line.beta;
    f.kernels = static_cast<int>(count.size());
    f.source = fmt::format("{}", fmt::join(kernel_files, ", "));
    double sum = 0;
    for (std::size_t i = 0; i < count.size(); ++i) {
      auto drop = [&](std::vector<double> v) { return v.erase(v.begin() + static_cast<std::ptrdiff_t>(i)), v; };
      const calibration::LineFit rest = calibration::fit_line_relative(drop(count), drop(bytes), drop(seconds));
      const double e = std::abs(rest.alpha * count[i] + rest.beta * bytes[i] - seconds[i]) / seconds[i];
      sum += e;
      f.error.max = std::max(f.error.max, e);
    }
    f.error.mean = sum / static_cast<double>(count.size());
    p.memory_bound = f;
  }
  sc::Json not_fitted = sc::Json::array();
  for (const auto& m : inputs)
    for (const auto& n : m.not_fitted) not_fitted.push_back(fmt::format("{}: {}", m.file, n));
  if (!not_fitted.empty()) p.provenance["not_fitted"] = not_fitted;
  if (p.collectives.empty() && p.gemm.empty() && p.attention.empty() && !p.memory_bound)
    throw InputError(inputs.empty() ? "(no input)" : inputs.front().file, "$", "nothing to fit",
                     "give measurements with collectives, gemm, attention or kernels entries, or nccl-tests logs");
  return p;
}

Measurements read_input(const std::string& path, const NcclTestsOptions& log_options) {
  const std::string text = read_input_file(path);
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return read_measurements(parse_json(text, path), path);
  if (boost::iends_with(path, ".csv")) return read_gemm_table_csv(text, path);
  Measurements m;
  m.file = path;
  m.series = read_nccl_tests_log(text, path, log_options);
  m.provenance = {{"format", "nccl-tests log"}};
  if (!m.series.empty()) m.provenance = m.series.front().provenance;
  return m;
}

}  // namespace moesim::calibrate
