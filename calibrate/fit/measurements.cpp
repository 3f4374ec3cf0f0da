#include "calibrate/fit/measurements.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <set>
#include <utility>

#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/error.hpp"

namespace moesim::calibrate {

namespace sc = moesim::schema;

double seconds_per(const std::string& unit) {
  if (unit == "ns") return 1e-9;
  if (unit == "us") return 1e-6;
  if (unit == "ms") return 1e-3;
  if (unit == "s") return 1.0;
  return 0;
}

namespace {

const std::vector<std::string> kTimeUnits = {"ns", "us", "ms", "s"};
const std::vector<std::string> kDtypes = names_of(cluster::kDtypeNames);

sc::NodePtr units_schema() {
  return sc::object({
      sc::required("time", sc::enumeration(kTimeUnits), "unit of every time in this document (or series)"),
      sc::optional("size", sc::enumeration({"bytes"}), "bytes", "unit of sizes: bytes (nccl-tests `size` column)"),
  });
}

const sc::NodePtr& measurements_schema() {
  static const sc::NodePtr positive = sc::number(0, std::nullopt, true);
  static const sc::NodePtr sample = sc::object({
      sc::required("bytes", sc::number(0), "message size, nccl-tests `size` convention"),
      sc::required("time", sc::number(), "time of one collective"),
  });
  static const sc::NodePtr series = sc::object({
      sc::required("collective", sc::enumeration({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}),
                   "the collective timed"),
      sc::required("ranks", sc::integer(2), "GPUs in the group"),
      sc::required("nodes", sc::integer(1), "nodes the group spans"),
      sc::optional("dtype", sc::string(), nullptr, "element type"),
      sc::optional("split", sc::enumeration({"even", "uneven"}), nullptr, "all_to_all: how bytes split over peers"),
      sc::optional("split_weights", sc::any(), nullptr, "all_to_all uneven: the split used"),
      sc::optional("units", units_schema(), nullptr, "overrides the document's units for this series"),
      sc::required("samples", sc::array_of(sample, 1), "one time per message size"),
  });
  static const sc::NodePtr gemm = sc::object({
      sc::required("dtype", sc::enumeration(kDtypes), "element type of A and B"),
      sc::required("m", positive, "rows of A and C"),
      sc::required("n", positive, "columns of B and C"),
      sc::required("k", positive, "the reduced dimension"),
      sc::required("time", sc::number(), "median time of one GeMM"),
      sc::optional("min", sc::number(), nullptr, "fastest repetition"),
      sc::optional("max", sc::number(), nullptr, "slowest repetition"),
      sc::optional("tflops", sc::number(), nullptr, "achieved 10^12 FLOP/s (recomputed by the fitter)"),
      sc::optional("tag", sc::string(), nullptr, "which model shape this is, e.g. expert_ffn_up"),
  });
  static const sc::NodePtr attention = sc::object({
      sc::required("dtype", sc::enumeration(kDtypes), "element type"),
      sc::required("batch", positive, "sequences"),
      sc::required("heads", positive, "attention heads"),
      sc::required("seq", positive, "sequence length"),
      sc::required("head_dim", positive, "head size"),
      sc::required("causal", sc::boolean(), "causal masking"),
      sc::required("forward", sc::number(), "forward time"),
      sc::required("backward", sc::number(), "backward time"),
      sc::optional("implementation", sc::string(), nullptr, "e.g. cublas-unfused"),
  });
  static const sc::NodePtr memory_kernel = sc::object({
      sc::required("kernel", sc::string(), "what ran, e.g. copy, rmsnorm, swiglu"),
      sc::optional("shape", sc::any(), nullptr, "its tensor's shape"),
      sc::required("bytes", sc::number(0, std::nullopt, true), "HBM bytes it reads and writes"),
      sc::required("time", sc::number(), "median time of one op"),
      sc::optional("kernels", sc::integer(1), 1, "kernels the op launches"),
      sc::optional("bytes_per_second", sc::number(), nullptr, "achieved rate (recomputed by the fitter)"),
      sc::optional("launches", sc::integer(1), nullptr, "a launch-rate probe: launches timed together (not an HBM kernel)"),
  });
  static const sc::NodePtr s = sc::object({
      sc::required("format", sc::enumeration({"moesim-measurements/1"}), "the format and its version"),
      sc::optional("tool", sc::string(), nullptr, "the binary that measured"),
      sc::required("provenance", sc::map_of(sc::any()), "GPU, driver, CUDA, cuBLAS and NCCL versions, hosts, date"),
      sc::optional("settings", sc::any(), nullptr, "warm-up, repetitions, statistic"),
      sc::required("units", units_schema(), "units of times and sizes"),
      sc::optional("collectives", sc::array_of(series), sc::Json::array(), "collective timings"),
      sc::optional("gemm", sc::array_of(gemm), sc::Json::array(), "GeMM timings"),
      sc::optional("attention", sc::array_of(attention), sc::Json::array(), "attention timings"),
      sc::optional("kernels", sc::array_of(memory_kernel), sc::Json::array(), "memory-bound kernel timings"),
      // calibrate/torch's other sections: read and named in the fitter's summary, not fitted.
      sc::optional("grouped_gemm", sc::any(), nullptr, "grouped expert GeMM timings (not fitted into profiles yet)"),
      sc::optional("optimizer", sc::any(), nullptr, "optimizer step timings (not fitted into profiles yet)"),
      sc::optional("launch", sc::any(), nullptr, "host launch costs (not fitted into profiles yet)"),
      sc::optional("host_sync", sc::any(), nullptr, "host-sync bubbles (not fitted into profiles yet)"),
      sc::optional("layer_step", sc::any(), nullptr, "whole layer steps (not fitted into profiles yet)"),
  });
  return s;
}

// Times must be positive: a negative or zero time is a broken measurement, not a fast one.
double positive_time(const sc::Json& v, double scale, const std::string& file, const std::string& path) {
  const double t = v.get<double>();
  if (!(t > 0))
    throw InputError(file, path, fmt::format("time {} is not positive", t),
                     "drop the entry or measure again; times must be > 0");
  return t * scale;
}

}  // namespace

Measurements read_measurements(const sc::Json& raw, const std::string& file) {
  const sc::Json doc = sc::validate(measurements_schema(), raw, file);
  Measurements m;
  m.file = file;
  m.provenance = doc.at("provenance");
  const std::string unit = doc.at("units").at("time").get<std::string>();
  const auto& list = doc.at("collectives");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    const std::string path = fmt::format("$.collectives[{}]", i);
    Series s;
    s.collective = e.at("collective").get<std::string>();
    s.ranks = e.at("ranks").get<int>();
    s.nodes = e.at("nodes").get<int>();
    s.split = e.value("split", s.collective == "all_to_all" ? "even" : "");
    s.time_unit = e.contains("units") ? e.at("units").at("time").get<std::string>() : unit;
    s.file = file;
    s.where = path;
    s.provenance = m.provenance;
    if (s.nodes > s.ranks)
      throw InputError(file, path + ".nodes", fmt::format("{} nodes for {} ranks", s.nodes, s.ranks),
                       "a node holds at least one rank");
    const double scale = seconds_per(s.time_unit);
    const auto& samples = e.at("samples");
    for (std::size_t j = 0; j < samples.size(); ++j) {
      const std::string at = fmt::format("{}.samples[{}]", path, j);
      s.samples.push_back({samples[j].at("bytes").get<double>(), positive_time(samples[j].at("time"), scale, file, at + ".time"), at});
    }
    m.series.push_back(std::move(s));
  }
  const double scale = seconds_per(unit);
  const auto& gemms = doc.at("gemm");
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const auto& g = gemms[i];
    const std::string at = fmt::format("$.gemm[{}]", i);
    m.gemm.push_back({g.at("dtype").get<std::string>(), g.at("m").get<double>(), g.at("n").get<double>(),
                      g.at("k").get<double>(), positive_time(g.at("time"), scale, file, at + ".time"),
                      g.value("tag", std::string()), at});
  }
  const auto& atts = doc.at("attention");
  for (std::size_t i = 0; i < atts.size(); ++i) {
    const auto& a = atts[i];
    const std::string at = fmt::format("$.attention[{}]", i);
    AttentionSample s;
    s.dtype = a.at("dtype").get<std::string>();
    s.batch = a.at("batch").get<double>();
    s.heads = a.at("heads").get<double>();
    s.seq = a.at("seq").get<double>();
    s.head_dim = a.at("head_dim").get<double>();
    s.causal = a.at("causal").get<bool>();
    s.forward_s = positive_time(a.at("forward"), scale, file, at + ".forward");
    s.backward_s = positive_time(a.at("backward"), scale, file, at + ".backward");
    s.implementation = a.value("implementation", std::string());
    s.where = at;
    m.attention.push_back(std::move(s));
  }
  // The kernels whose rule is the memory-bound line (ComputeModel::memory_bound): calibrate/torch's
  // copies, row gathers, RMSNorms, eager SwiGLUs and softmaxes. Its scatters (atomic adds) and
  // top-k have rules of their own, its launch probes time the host.
  static const std::set<std::string> line_kernels{"copy", "gather_rows", "rms_norm", "swiglu_eager", "softmax"};
  const auto& kernels = doc.at("kernels");
  std::set<std::string> others;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const auto& k = kernels[i];
    const std::string at = fmt::format("$.kernels[{}]", i);
    const std::string name = k.at("kernel").get<std::string>();
    const double seconds = positive_time(k.at("time"), scale, file, at + ".time");
    if (!line_kernels.contains(name) || k.contains("launches")) {
      others.insert(name);
      continue;
    }
    m.memory_kernels.push_back({name, k.at("bytes").get<double>(), seconds, k.at("kernels").get<int>(), at});
  }
  if (!others.empty())
    m.not_fitted.push_back(fmt::format("$.kernels: {} not fitted: the memory-bound line is fitted to {}; the others have rules "
                                       "of their own (atomic scatters, top-k) or time the host (launch probes)",
                                       fmt::join(others, ", "), fmt::join(line_kernels, ", ")));
  // What moesim takes from the other sections today, and where.
  const std::pair<const char*, const char*> elsewhere[] = {
      {"grouped_gemm", "the grouped GeMM model is checked against them (tests/unit/compute_test.cpp), not calibrated"},
      {"optimizer", "the optimizer kernels' model is checked against them, not calibrated"},
      {"launch", "host launch costs come from the software presets (software/README.md derives them from such files)"},
      {"host_sync", "the host-sync cost comes from the software presets (software/README.md)"},
      {"layer_step", "whole layer steps are compared with the simulation (calibrate/torch/compare_layer_step.py)"},
  };
  for (const auto& [key, why] : elsewhere)
    if (doc.contains(key)) m.not_fitted.push_back(fmt::format("$.{}: not fitted into the profile: {}", key, why));
  return m;
}

}  // namespace moesim::calibrate
