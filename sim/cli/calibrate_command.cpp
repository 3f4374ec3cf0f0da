#include "sim/cli/calibrate_command.hpp"

#include <algorithm>
#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <iostream>

#include "calibrate/fit/nccl_tests_log.hpp"
#include "calibrate/fit/profile_builder.hpp"
#include "sim/core/error.hpp"
#include "sim/core/output_file.hpp"
#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/units.hpp"

namespace moesim::cli {

namespace po = boost::program_options;

namespace {

std::string splits_text(const schema::Json& report) {
  std::string s;
  for (const auto& b : report.value("splits_between_bytes", schema::Json::array()))
    s += (s.empty() ? "" : ", ") + format_bytes(b[0].get<double>()) + "–" + format_bytes(b[1].get<double>());
  return s.empty() ? "-" : s;
}

void print_summary(const calibration::Profile& p, const std::string& out) {
  std::cout << fmt::format("profile {} → {}\n", p.name, out);
  if (!p.collectives.empty())
    std::cout << fmt::format("  {:<15} {:>5} {:>5} {:>6} {:>8} {:>8} {:>7}  {}\n", "collective", "ranks", "nodes", "pieces",
                             "rms err", "max err", "dropped", "split between");
  for (const auto& c : p.collectives)
    std::cout << fmt::format("  {:<15} {:>5} {:>5} {:>6} {:>7.2f}% {:>7.2f}% {:>7}  {}\n", c.collective, c.ranks, c.nodes,
                             c.segments.size(), 100 * c.report.value("rms_relative_error", 0.0),
                             100 * c.report.value("max_relative_error", 0.0),
                             c.report.value("dropped_outliers", schema::Json::array()).size(), splits_text(c.report));
  for (const auto& g : p.gemm) {
    double lo = g.table.value(0), hi = lo;
    for (std::size_t i = 1; i < g.table.size(); ++i) {
      lo = std::min(lo, g.table.value(i));
      hi = std::max(hi, g.table.value(i));
    }
    std::cout << fmt::format("  gemm {:<5} {:>4} shapes, {:.0f}–{:.0f} TFLOP/s, leave-one-out error mean {:.1f}% max {:.1f}%\n",
                             g.dtype, g.table.size(), lo / 1e12, hi / 1e12, 100 * g.error.mean, 100 * g.error.max);
  }
  for (const auto& a : p.attention)
    std::cout << fmt::format("  attention {} {} {:>3} shapes, leave-one-out error forward {:.1f}%, backward {:.1f}% (mean)\n",
                             a.dtype, a.causal ? "causal" : "full", a.table.size(), 100 * a.forward_error.mean,
                             100 * a.backward_error.mean);
  if (const auto& m = p.memory_bound)
    std::cout << fmt::format("  memory-bound kernels: {:.2f} us + bytes at {:.0f} GB/s ({} kernels), leave-one-out error mean "
                             "{:.1f}% max {:.1f}%\n",
                             m->fixed_s * 1e6, m->bytes_per_second / 1e9, m->kernels, 100 * m->error.mean, 100 * m->error.max);
  for (const auto& n : p.provenance.value("not_fitted", schema::Json::array())) std::cout << "  " << n.get<std::string>() << "\n";
}

}  // namespace

int cmd_calibrate(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "fit") throw po::error("calibrate: expected `calibrate fit INPUT... --out PROFILE.json`");
  std::vector<std::string> inputs, dtype_as;
  std::string out, name, collective, gpu, attention;
  int gpus_per_node = 0, table = 0, ranks = 0, nodes = 0;
  bool quiet = false;
  po::options_description opts;
  opts.add_options()("out,o", po::value(&out))("name", po::value(&name))("gpu", po::value(&gpu))("attention", po::value(&attention))("collective", po::value(&collective))(
      "gpus-per-node", po::value(&gpus_per_node))("ranks", po::value(&ranks))("nodes", po::value(&nodes))("quiet", po::bool_switch(&quiet))("table", po::value(&table))(
      "dtype-as", po::value(&dtype_as)->composing())(
      "input", po::value(&inputs)->composing());
  po::positional_options_description pos;
  pos.add("input", -1);
  po::variables_map vm;
  po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end())).options(opts).positional(pos).run(),
            vm);
  po::notify(vm);
  if (inputs.empty()) throw po::error("calibrate fit: give at least one measurements JSON or nccl-tests log");
  if (out.empty()) throw po::error("calibrate fit: give --out PROFILE.json");
  std::error_code ec;
  if (std::filesystem::is_directory(out, ec))
    throw InputError("--out", out, "is a folder", "give the profile's file name, e.g. --out calibrations/mine.json");
  if (vm.count("gpus-per-node") && gpus_per_node < 1) throw po::error("--gpus-per-node must be at least 1");
  if (vm.count("ranks") && (ranks < 2 || ranks > (1 << 20))) throw po::error("--ranks must be between 2 and 1048576");
  if (vm.count("nodes") && (nodes < 1 || nodes > (1 << 20))) throw po::error("--nodes must be between 1 and 1048576");
  if (vm.count("nodes") && vm.count("ranks") && nodes > ranks) throw po::error("--nodes cannot exceed --ranks");

  calibrate::NcclTestsOptions log_options;
  log_options.collective = collective;
  if (gpus_per_node > 0) log_options.gpus_per_node = gpus_per_node;
  if (ranks > 0) log_options.ranks = ranks;
  if (nodes > 0) log_options.nodes = nodes;
  if (vm.count("table")) {
    if (table < 1) throw po::error("--table counts from 1");
    log_options.table = table;
  }
  calibrate::BuildOptions build;
  build.attention_implementation = attention;
  for (const auto& rule : dtype_as) {
    // FROM=TO, both moesim dtype names (XLA's f32 and f16 are read as fp32 and fp16).
    const auto eq = rule.find('=');
    const std::string from = rule.substr(0, eq), to = eq == std::string::npos ? "" : rule.substr(eq + 1);
    if (!cluster::parse_dtype(from) || !cluster::parse_dtype(to))
      throw po::error(fmt::format("--dtype-as {}: expected FROM=TO with dtypes fp32, tf32, fp16, bf16, fp8 or mxfp8, e.g. fp32=tf32", rule));
    if (build.dtype_as.count(from))
      throw po::error(fmt::format("--dtype-as {}: {} is already filed as {}; give one rule per dtype", rule, from,
                                  build.dtype_as.at(from)));
    build.dtype_as[from] = to;
  }
  std::vector<calibrate::Measurements> measured;
  for (const auto& in : inputs) measured.push_back(calibrate::read_input(in, log_options));
  build.name = name.empty() ? std::filesystem::path(out).stem().string() : name;
  calibration::Profile profile = calibrate::build_profile(measured, build);
  if (!gpu.empty()) profile.provenance["gpu"] = gpu;
  const auto folder = std::filesystem::path(out).parent_path();
  prepare_output_folder(folder.empty() ? std::filesystem::path(".") : folder, "--out");
  write_file(out, calibration::profile_to_json(profile).dump(2) + "\n");
  if (!quiet) print_summary(profile, out);
  return 0;
}

}  // namespace moesim::cli
