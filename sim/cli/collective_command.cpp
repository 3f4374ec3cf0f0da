#include "sim/cli/collective_command.hpp"

#include <boost/program_options.hpp>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <map>

#include "calibrate/fit/nccl_tests_log.hpp"
#include "sim/core/error.hpp"
#include "sim/core/input_file.hpp"
#include "sim/network/collective.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/simulation/collective_bench.hpp"

namespace moesim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;
namespace nt = calibration::nccl_tests;

namespace {

// nccl-tests' size flags: a number with an optional K, M or G (powers of 1024).
double size_flag(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  const std::string unit = used <= text.size() ? text.substr(used) : "";
  const double scale = unit.empty() ? 1 : unit == "K" || unit == "k" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : -1;
  if (v < 0 || scale < 0 || !std::isfinite(v) || v * scale > 1e15)
    throw InputError(flag, text, "is not a size", fmt::format("give bytes with an optional K, M or G, e.g. {} 128M", flag));
  return v * scale;
}

// The scenario to simulate on: a scenario file, or a cluster preset with a placeholder model (a
// collective does not read it).
scenario::Scenario load(const std::string& cluster, const std::string& network, const std::string& algorithm,
                        const std::string& profile, const fs::path& data) {
  const scenario::Loader loader(data);
  schema::Json doc;
  std::string file = cluster;
  if (cluster.ends_with(".json")) {
    doc = loader.read_json(cluster);
  } else {
    doc = {{"name", cluster},
           {"cluster", {{"preset", cluster}}},
           {"model", {{"layers", 1}, {"hidden", 1024}, {"ffn_hidden", 1024}, {"experts", 1}, {"top_k", 1}, {"heads", 8}}},
           {"training", {{"sequence_length", 1024}}},
           {"strategy", {{"name", "ep"}}}};
    file = "--cluster " + cluster;
  }
  if (!network.empty()) doc["network"]["model"] = network;
  if (!algorithm.empty()) doc["network"]["all_reduce"] = algorithm;
  if (!profile.empty()) doc["calibration"] = fs::absolute(profile).string();
  return loader.build(loader.resolve(doc, file), file);
}

std::string percent(double x) { return fmt::format("{:+.1f}%", 100 * x); }

}  // namespace

int cmd_collective(const std::vector<std::string>& args) {
  std::string name, cluster, network, algorithm, profile, compare, data, min_text = "8", max_text = "128M";
  int gpus = 0, table = 0, gpus_per_node = 0;
  double factor = 2;
  po::options_description opts;
  opts.add_options()("collective", po::value(&name))("cluster", po::value(&cluster))("gpus,n", po::value(&gpus))(
      "minbytes,b", po::value(&min_text))("maxbytes,e", po::value(&max_text))("stepfactor,f", po::value(&factor))(
      "network", po::value(&network))("algorithm", po::value(&algorithm))("profile", po::value(&profile))("compare", po::value(&compare))(
      "table", po::value(&table))("gpus-per-node", po::value(&gpus_per_node))("data", po::value(&data));
  po::positional_options_description pos;
  pos.add("collective", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  const std::string collective = nt::canonical(name);
  if (collective.empty())
    throw po::error(fmt::format("collective: \"{}\" is not all_reduce, all_gather, reduce_scatter, alltoall or sendrecv", name));
  if (cluster.empty()) throw po::error("collective: give --cluster PRESET or --cluster SCENARIO.json");
  if (!network.empty() && network != "flow" && network != "analytic") throw po::error("--network is flow or analytic");
  if (!algorithm.empty() && !value_of(network::kAlgorithmNames, algorithm))
    throw po::error(fmt::format("--algorithm is one of {} (NCCL_ALGO's all-reduce choices)",
                                fmt::join(names_of(network::kAlgorithmNames), ", ")));
  if (!(factor > 1 && factor <= 1024)) throw po::error("--stepfactor must be above 1 (nccl-tests' -f)");
  // What reads a log only means something with one to read.
  for (const char* flag : {"table", "gpus-per-node"})
    if (vm.count(flag) && compare.empty()) throw po::error(fmt::format("--{} reads the log of --compare; give --compare LOG", flag));
  if (vm.count("table") && table < 1) throw po::error("--table counts from 1");
  if (vm.count("gpus-per-node") && gpus_per_node < 1) throw po::error("--gpus-per-node must be at least 1");
  const scenario::Scenario sc = load(cluster, network, algorithm, profile, data.empty() ? scenario::Loader::default_data_dir() : fs::path(data));
  const simulation::Simulation sim(sc);
  const auto all = static_cast<int>(sim.topology().gpu_count());

  // The sizes and rank count: the log's with --compare, else the flags' sweep.
  std::vector<double> sizes;
  std::map<double, double> measured;  // size → mean measured time, µs
  std::string compared;
  if (!compare.empty()) {
    calibrate::NcclTestsOptions o;
    o.collective = collective;
    if (gpus_per_node > 0) o.gpus_per_node = gpus_per_node;
    if (table > 0) o.table = table;
    if (gpus > 0) o.ranks = gpus;
    const auto series = calibrate::read_nccl_tests_log(read_input_file(compare), compare, o);
    const calibrate::Series* s = nullptr;
    for (const auto& x : series)
      if (x.collective == collective && !s) s = &x;
    if (!s)
      throw InputError(compare, "", fmt::format("no {} table in the log", collective),
                       "compare with a log of the same collective, or pass --table N");
    gpus = s->ranks;
    std::map<double, std::pair<double, int>> sum;
    for (const auto& x : s->samples) {
      sum[x.bytes].first += x.seconds * 1e6;
      ++sum[x.bytes].second;
    }
    for (const auto& [b, v] : sum) {
      measured[b] = v.first / v.second;
      sizes.push_back(b);
    }
    compared = fmt::format("{} {}", compare, s->where);
  } else {
    const double lo = size_flag("--minbytes", min_text), hi = size_flag("--maxbytes", max_text);
    if (lo > hi) throw po::error("--minbytes exceeds --maxbytes");
    for (double b = lo; b <= hi && sizes.size() < 100000; b = std::max(b * factor, b + 1)) sizes.push_back(std::floor(b));
  }
  if (gpus == 0) gpus = all;
  if (gpus < 2 || gpus > all)
    throw InputError(cluster, "--gpus", fmt::format("{} GPUs on a cluster of {}", gpus, all),
                     fmt::format("give between 2 and {} GPUs", all));

  const auto rows = simulation::bench_collective(sim, collective, gpus, sizes);
  const auto& topo = sim.topology();
  const int node_level = topo.level_count() >= 2 ? topo.level_count() - 2 : -1;
  std::cout << fmt::format("# moesim collective: {} on {} GPUs of {} ({} network model{})\n", collective, gpus, sc.name,
                           sc.network_model, sc.calibration ? ", profile " + sc.calibration->name : "");
  std::cout << fmt::format("# nThread 1 nGpus 1 minBytes {:.0f} maxBytes {:.0f} step: {}(factor) warmup iters: 0 iters: 1 "
                           "agg iters: 1 validation: 0 graph: 0\n#\n",
                           sizes.empty() ? 0 : sizes.front(), sizes.empty() ? 0 : sizes.back(), factor);
  for (int r = 0; r < gpus; ++r) {
    const auto g = static_cast<std::uint32_t>(r);
    std::cout << fmt::format("#  Rank {:2d} Group  0 Pid      0 on {:>10} device {:2d} [0x00] {}\n", r,
                             fmt::format("node{}", node_level >= 0 ? topo.worker(g, node_level) : 0u),
                             node_level >= 0 ? static_cast<int>(g % topo.gpus_per_worker(node_level)) : r, topo.gpu(g).name);
  }
  std::cout << fmt::format("# Collective test starting: {}_perf\n", collective == "all_to_all" ? "alltoall"
                                                                  : collective == "send_recv" ? "sendrecv"
                                                                                              : collective);
  std::cout << nt::table(collective, gpus, rows);
  if (measured.empty()) return 0;

  // Side by side: measured and simulated time and busbw per size, and the error of the busbw.
  std::cout << fmt::format("# compared with {}\n", compared);
  std::cout << "#       size   measured(us)  simulated(us)  measured busbw  simulated busbw   error  moesim ran\n";
  double sum_all = 0, sum_large = 0;
  int n_all = 0, n_large = 0;
  for (const auto& r : rows) {
    // Each row of the log beside the simulated row asked for its size (which the simulation rounds
    // to whole elements per rank; each busbw from its own size).
    const auto it = measured.find(r.requested);
    if (it == measured.end()) continue;
    const double f = nt::busbw_factor(collective, gpus);
    const double m_bus = it->first / (it->second * 1e-6) / 1e9 * f, s_bus = r.size / (r.time_us * 1e-6) / 1e9 * f;
    const double err = s_bus / m_bus - 1;
    std::cout << fmt::format("{:>12.0f}  {:>13}  {:>13}  {:>14}  {:>15}  {:>7}  {}\n", r.size, nt::format_number(it->second, 13),
                             nt::format_number(r.time_us, 13), nt::format_number(m_bus, 14), nt::format_number(s_bus, 15),
                             percent(err), r.algorithm);
    sum_all += std::abs(err);
    ++n_all;
    if (r.size >= 64.0 * 1048576) {
      sum_large += std::abs(err);
      ++n_large;
    }
  }
  // A comparison of nothing is not a result (exit 2, its output above for the reader).
  if (n_all == 0)
    throw InputError(compare, "", fmt::format("no size of the log's table could be simulated on {} ranks", gpus),
                     "check the log's sizes and its rank count (--gpus, --gpus-per-node)");
  std::cout << fmt::format("# mean |busbw error|: {:.1f}% over {} sizes", 100 * sum_all / n_all, n_all);
  if (n_large) std::cout << fmt::format(", {:.1f}% over the {} sizes of 64 MiB and more", 100 * sum_large / n_large, n_large);
  std::cout << "\n";
  return 0;
}

}  // namespace moesim::cli
