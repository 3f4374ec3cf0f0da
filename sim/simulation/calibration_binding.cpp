#include "sim/simulation/calibration_binding.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <tuple>

#include "sim/core/error.hpp"
#include "sim/network/analytic_model.hpp"

namespace moesim::simulation {

using network::CollectiveKind;
namespace sc = moesim::schema;

namespace {

std::optional<CollectiveKind> kind_of(const std::string& collective) {
  if (collective == "all_to_all") return CollectiveKind::AllToAll;
  if (collective == "all_gather") return CollectiveKind::AllGather;
  if (collective == "reduce_scatter") return CollectiveKind::ReduceScatter;
  if (collective == "all_reduce") return CollectiveKind::AllReduce;
  if (collective == "send_recv") return CollectiveKind::P2P;
  return std::nullopt;
}

// The entry's collective of nccl-tests size `size` as moesim describes it (profile.hpp conventions).
network::CollectiveOp op_for(CollectiveKind kind, network::Algorithm all_reduce, double size, std::uint32_t ranks) {
  network::CollectiveOp op;
  op.kind = kind;
  switch (kind) {
    case CollectiveKind::AllToAll:
      op.algorithm = network::Algorithm::Direct;
      op.traffic = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::uniform(ranks, size / ranks));
      break;
    case CollectiveKind::AllGather:
      op.algorithm = network::Algorithm::Ring;
      op.bytes = size / ranks;
      break;
    case CollectiveKind::ReduceScatter:
      op.algorithm = network::Algorithm::Ring;
      op.bytes = size;
      break;
    case CollectiveKind::AllReduce:
      op.algorithm = all_reduce;
      op.bytes = size;
      break;
    case CollectiveKind::P2P:
      op.algorithm = network::Algorithm::Direct;
      op.bytes = size;
      break;
    case CollectiveKind::HostCopy:  // profiles hold no host copies (kind_of never returns them)
    case CollectiveKind::Count: invariant_failed("no calibration entry of this kind");
  }
  return op;
}

struct Placed {
  const calibration::CollectiveFit* entry = nullptr;
  CollectiveKind kind{};
  int level = 0;
  std::vector<std::uint32_t> members;
};

}  // namespace

sc::Json bind_collectives(const calibration::Profile& profile, const cluster::Topology& topo, network::Algorithm all_reduce,
                          const std::map<std::string, std::vector<std::uint32_t>>& groups, network::AlphaBetaTable& params,
                          std::vector<std::pair<CollectiveKind, int>>* bound_levels) {
  sc::Json used = sc::Json::array(), not_used = sc::Json::array(), fallback = sc::Json::array();
  // A node: a worker of the level just above the innermost one (levels run outermost first).
  const int levels = topo.level_count();
  const std::uint32_t per_node = levels > 1 ? topo.gpus_per_worker(levels - 2) : topo.gpu_count();
  std::map<std::pair<CollectiveKind, int>, Placed> chosen;
  for (const auto& e : profile.collectives) {
    const auto kind = kind_of(e.collective);
    const auto skip = [&](const std::string& why) { not_used.push_back({{"entry", e.label()}, {"reason", why}}); };
    if (!kind) {
      skip(fmt::format("{} is no network collective: read by the strategy that names it (Parm's Algorithm 1)", e.collective));
      not_used.back()["read_by_strategy"] = true;
      continue;
    }
    Placed p;
    p.entry = &e;
    p.kind = *kind;
    if (!e.group.empty()) {
      // A named group: where the strategy puts it.
      const auto g = groups.find(e.group);
      if (g == groups.end()) {
        skip(fmt::format("this run's strategy forms no group named \"{}\"", e.group));
        continue;
      }
      p.members = g->second;
    } else {
      const int ranks = e.ranks, nodes = e.nodes;
      const std::uint32_t each = static_cast<std::uint32_t>(ranks / nodes);
      if (ranks % nodes != 0 || each > per_node || static_cast<std::uint64_t>(nodes) * per_node > topo.gpu_count()) {
        skip(fmt::format("its shape ({} ranks on {} nodes) does not fit this cluster ({} nodes of {} GPUs)", ranks, nodes,
                         topo.gpu_count() / per_node, per_node));
        continue;
      }
      for (int n = 0; n < nodes; ++n)
        for (std::uint32_t g = 0; g < each; ++g) p.members.push_back(static_cast<std::uint32_t>(n) * per_node + g);
    }
    if (p.members.size() < 2) {
      skip("a group of one GPU");
      continue;
    }
    if (*kind == CollectiveKind::P2P) p.members = {p.members.front(), p.members.back()};
    // The coarsest level the group crosses.
    p.level = -1;
    for (const std::uint32_t m : p.members) {
      const int l = topo.first_differing_tier(p.members.front(), m);
      if (l >= 0 && (p.level < 0 || l < p.level)) p.level = l;
    }
    if (p.level < 0) {
      skip("its GPUs cross no level (one GPU listed twice)");
      continue;
    }
    // One entry per kind and level: the one with most ranks; the other is reported.
    auto [it, fresh] = chosen.try_emplace({*kind, p.level}, p);
    if (!fresh) {
      const bool replaces = p.members.size() > it->second.members.size();
      const auto& kept = replaces ? e : *it->second.entry;
      not_used.push_back({{"entry", (replaces ? *it->second.entry : e).label()},
                          {"reason", fmt::format("{} sets {} at level {} with more ranks", kept.label(), e.collective,
                                                 topo.tiers()[p.level].name)}});
      if (replaces) it->second = p;
    }
  }
  std::vector<std::pair<std::size_t, const Placed*>> bound;  // used entry → where it sits
  for (const auto& entry : chosen) {
    // Named copies, not structured bindings: lambdas may not capture those before C++20 P1091
    // (clang 14, which builds the sanitize preset).
    const Placed& p = entry.second;
    const auto kind = entry.first.first;
    const auto level = entry.first.second;
    // Probe the algorithm: steps a (α = 1 us) and bytes per step on the level (β = 1 ps/B).
    const auto probe = [&](network::AlphaBeta ab, double size) {
      std::vector<network::AlphaBeta> levels(topo.tier_count());
      levels[level] = ab;
      const network::AnalyticModel model(topo, network::AlphaBetaTable(levels));
      return static_cast<double>(model.cost(op_for(kind, all_reduce, size, static_cast<std::uint32_t>(p.members.size())), p.members).duration);
    };
    const double probe_size = 64.0 * 1024 * 1024;
    const double steps = probe({seconds_to_time(1e-6), 0}, probe_size) / static_cast<double>(seconds_to_time(1e-6));
    const double per_step_per_size = probe({0, 1.0}, probe_size) / (steps * probe_size);  // bytes per step per size byte
    if (!(steps > 0) || !(per_step_per_size > 0)) {
      not_used.push_back({{"entry", p.entry->label()}, {"reason", "the model puts no bytes of it on the level it crosses"}});
      continue;
    }
    std::vector<network::AlphaBetaPiece> pieces;
    sc::Json segs = sc::Json::array();
    for (const auto& s : p.entry->segments) {
      network::AlphaBetaPiece piece;
      piece.from_bytes = s.from_bytes * per_step_per_size;
      piece.value.alpha = seconds_to_time(s.alpha_s / steps);
      piece.value.beta = s.beta_s_per_byte * 1e12 / per_step_per_size / steps;
      pieces.push_back(piece);
      segs.push_back({{"from_size_bytes", s.from_bytes},
                      {"alpha_per_step_us", time_to_seconds(piece.value.alpha) * 1e6},
                      {"bandwidth_per_step_GBps", std::isfinite(1e3 / piece.value.beta) ? 1e3 / piece.value.beta : 0.0}});
    }
    params.override_for(kind, level, std::move(pieces));
    if (bound_levels) bound_levels->emplace_back(kind, level);
    bound.emplace_back(used.size(), &p);
    used.push_back({{"entry", p.entry->label()},
                    {"sets", fmt::format("{} at level {}", network::to_string(kind), topo.tiers()[level].name)},
                    {"steps", steps},
                    {"per_level", segs}});
    if (!p.entry->group.empty()) used.back()["group"] = p.entry->group;
  }
  // Each used entry simulated on its own shape with everything bound: the calibrated level alone
  // costs each phase whose coarsest level it is (analytic_model.hpp), so the fitted time comes back
  // unless the algorithm adds phases on finer levels (hierarchical all-reduce or all-to-all); the
  // report gives the worst relative error over the middles of the pieces.
  const network::AnalyticModel bound_model(topo, params);
  for (const auto& [index, p] : bound) {
    double worst = 0, at = 0;  // signed relative error of the largest magnitude, and its size
    for (const auto& s : p->entry->segments) {
      const double size = s.to_bytes < 0 ? std::max(s.from_bytes, 1.0) * 16
                          : s.from_bytes <= 0 ? s.to_bytes / 16
                                              : std::sqrt(s.from_bytes * s.to_bytes);
      const double simulated = time_to_seconds(
          bound_model.cost(op_for(p->kind, all_reduce, size, static_cast<std::uint32_t>(p->members.size())), p->members).duration);
      const double e = simulated / p->entry->seconds(size) - 1;
      if (std::abs(e) > std::abs(worst)) std::tie(worst, at) = std::pair{e, size};
    }
    used[index]["own_shape_error"] = worst;
    if (std::abs(worst) > 0.02) {
      std::string inner;  // the finer levels the group also crosses
      for (int l = p->level + 1; l < topo.tier_count(); ++l) inner += (inner.empty() ? "" : ", ") + topo.tiers()[l].name;
      used[index]["warning"] = fmt::format(
          "simulated on its own shape it takes {:.0f}% {} than measured at {:.0f} bytes: the algorithm run for it here has "
          "phases inside level {} besides the calibrated one, which the measurement already includes; a single-phase "
          "algorithm (ring, direct) reproduces it",
          100 * std::abs(worst), worst > 0 ? "more" : "less", at, inner.empty() ? "?" : inner);
    }
  }
  for (const CollectiveKind kind : {CollectiveKind::AllToAll, CollectiveKind::AllGather, CollectiveKind::ReduceScatter,
                                    CollectiveKind::AllReduce, CollectiveKind::P2P})
    for (int l = 0; l < topo.tier_count(); ++l)
      if (!params.overridden(kind, l))
        fallback.push_back(fmt::format("{} at level {}: topology default α-β", network::to_string(kind), topo.tiers()[l].name));
  return {{"used", used}, {"not_used", not_used}, {"fallback", fallback}};
}

std::vector<std::string> report_collectives_applied(sc::Json& report, const std::vector<std::pair<CollectiveKind, int>>& bound,
                                                    const network::AlphaBetaTable& params, const cluster::Topology& topo) {
  std::vector<std::string> idle;
  for (const auto& n : report.at("not_used"))
    if (!n.value("read_by_strategy", false))
      idle.push_back(fmt::format("entry \"{}\" not used: {}", n.at("entry").get<std::string>(), n.at("reason").get<std::string>()));
  auto& used = report.at("used");
  for (std::size_t i = 0; i < bound.size() && i < used.size(); ++i) {
    const auto [kind, tier] = bound[i];
    const std::uint64_t steps = params.applied(kind, tier);
    used[i]["applied_to_steps"] = steps;
    if (steps > 0) continue;
    // A coarser level's entry of the same kind, measured across it, stands for the finer levels
    // its collectives also cross (AlphaBetaTable::steps_cost).
    std::string coarser;
    for (int t = 0; t < tier && coarser.empty(); ++t)
      if (params.applied(kind, t) > 0) coarser = topo.tiers()[t].name;
    const std::string why =
        coarser.empty()
            ? fmt::format("no {} of this run crosses level {}", network::to_string(kind), topo.tiers()[tier].name)
            : fmt::format("the {}s of this run that cross level {} also cross level {}, whose entry (measured across it) "
                          "stands for the finer levels; none stays within level {}",
                          network::to_string(kind), topo.tiers()[tier].name, coarser, topo.tiers()[tier].name);
    used[i]["replaced_nothing"] = why;
    // An entry of a named group is also read by the strategy that forms the group (Parm's
    // Algorithm 1 prices its schedules with it, parm_strategy.cpp): not idle.
    if (used[i].contains("group")) {
      used[i]["read_by_strategy"] = true;
      continue;
    }
    idle.push_back(fmt::format("entry \"{}\" replaced nothing: {}", used[i].at("entry").get<std::string>(), why));
  }
  return idle;
}

namespace {
// `t`'s attention hooks over a causal and a full table of forward (channel 0) and backward
// (channel 1) FLOP/s, coordinates (sequence length, head size, third); a masking without its own
// table uses the other's. `keys`: the third coordinate is the keys each query sees (the
// catalogue's kernels); else 1 (a profile's tables).
void set_attention_hooks(compute::KernelTables& t, std::shared_ptr<const calibration::LogTable> causal,
                         std::shared_ptr<const calibration::LogTable> full, bool keys) {
  const auto hook = [causal, full, keys](int channel) {
    return [causal, full, keys, channel](double seq, double head_dim, bool is_causal, double window) {
      const auto& table = is_causal ? (causal ? *causal : *full) : (full ? *full : *causal);
      const double third = !keys ? 1.0 : is_causal && window > 0 && window < seq ? window : seq;
      return table.at({seq, head_dim, third}, channel);
    };
  };
  t.attention_flops = hook(0);
  t.attention_backward_flops = hook(1);
}
}  // namespace

compute::KernelTables bind_kernels(const calibration::Profile& profile, const cluster::GpuSpec& gpu, cluster::Dtype dtype,
                                   sc::Json& report) {
  compute::KernelTables t;
  std::string measured_on = profile.provenance.value("gpu", std::string());
  const auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == ' ' || c == '-' || c == '_'; }), s.end());
    return s;
  };
  const bool same_gpu = measured_on.empty() || lower(measured_on).find(lower(gpu.name)) != std::string::npos ||
                        lower(gpu.name).find(lower(measured_on)) != std::string::npos;
  const std::string dt(cluster::to_string(dtype));
  if (!same_gpu) {
    report = {{"gemm", fmt::format("roofline default: the profile was measured on {}", measured_on)},
              {"attention", fmt::format("roofline default: the profile was measured on {}", measured_on)}};
    return t;
  }
  // A table faster than the GPU's data-sheet peak in its dtype was measured in another math mode
  // (XLA's and PyTorch's f32 matmuls run on TF32 tensor cores by default) or on another GPU.
  const auto check_peak = [&](const calibration::LogTable& table, int channels, const std::string& what) {
    const double peak = gpu.peak(dtype);
    double fastest = 0;
    for (std::size_t i = 0; i < table.size(); ++i)
      for (int c = 0; c < channels; ++c) fastest = std::max(fastest, table.value(i, c));
    if (fastest > 1.05 * peak)
      throw InputError(profile.file, what,
                       fmt::format("up to {:.0f} TFLOP/s measured, above the {} peak of {} ({:.0f} TFLOP/s)", fastest / 1e12, dt,
                                   gpu.name, peak / 1e12),
                       "check the dtype the kernels ran in (refit with `moesim calibrate fit --dtype-as fp32=tf32` "
                       "for TF32 math) and the GPU in provenance.gpu");
  };
  if (const auto* g = profile.find_gemm(dt)) {
    check_peak(g->table, 1, fmt::format("$.gemm (dtype {})", dt));
    t.gemm_flops = [g](double m, double n, double k) { return g->flops_per_second(m, n, k); };
    report["gemm"] = fmt::format("{} table of {} shapes (leave-one-out error mean {:.1f}%, max {:.1f}%)", dt, g->table.size(),
                                 100 * g->error.mean, 100 * g->error.max);
    t.gemm_source = fmt::format("profile {}: {}", profile.name, report["gemm"].get<std::string>());
  } else {
    report["gemm"] = fmt::format("roofline default: the profile has no {} GeMM table", dt);
  }
  if (const auto& mb = profile.memory_bound) {
    t.memory_bound = compute::KernelTables::MemoryBoundLine{seconds_to_time(mb->fixed_s), mb->bytes_per_second};
    report["memory_bound"] = fmt::format("{:.2f} us + bytes at {:.0f} GB/s, fitted to {} kernels (leave-one-out error mean {:.1f}%, max {:.1f}%)",
                                         mb->fixed_s * 1e6, mb->bytes_per_second / 1e9, mb->kernels, 100 * mb->error.mean,
                                         100 * mb->error.max);
    t.memory_bound_source = fmt::format("profile {}: {}", profile.name, report["memory_bound"].get<std::string>());
  } else {
    report["memory_bound"] = "roofline default: the profile has no memory-bound kernels";
  }
  const auto* causal = profile.find_attention(dt, true);
  const auto* full = profile.find_attention(dt, false);
  if (causal || full) {
    for (const auto* a : {causal, full})
      if (a) check_peak(a->table, 2, fmt::format("$.attention (dtype {}, {})", dt, a->causal ? "causal" : "full"));
    // The profile outlives the simulation's compute models: the hooks hold its tables unowned.
    const auto unowned = [](const calibration::AttentionTable* a) {
      return a ? std::shared_ptr<const calibration::LogTable>(std::shared_ptr<void>(), &a->table) : nullptr;
    };
    set_attention_hooks(t, unowned(causal), unowned(full), false);
    report["attention"] = fmt::format("{} forward and backward table{}{}", dt, causal ? " (causal)" : "", full ? " (full)" : "");
    t.attention_source = fmt::format("profile {}: {}", profile.name, report["attention"].get<std::string>());
  } else {
    report["attention"] = fmt::format("roofline default: the profile has no {} attention table", dt);
  }
  return t;
}

std::string bind_catalogue_attention(const cluster::GpuSpec& gpu, cluster::Dtype dtype, compute::KernelTables& tables) {
  if (tables.attention_flops || gpu.attention_kernels.empty() || cluster::storage_dtype(dtype) != cluster::Dtype::bf16)
    return {};
  std::vector<calibration::LogTable::Point> points[2];  // [causal]
  std::vector<std::vector<double>> values[2];
  for (const auto& k : gpu.attention_kernels) {
    const double head_dim = (k.head_dim + k.head_dim_v) / 2;  // as workload::ModelShape::core_head_dim
    const double flops = compute::attention_forward_flops(k.batch, k.heads, k.seq, head_dim, k.causal, k.window);
    points[k.causal].push_back({k.seq, head_dim, k.window > 0 ? k.window : k.seq});
    values[k.causal].push_back({flops / time_to_seconds(k.forward),
                                compute::kAttentionBackwardFlopRatio * flops / time_to_seconds(k.backward)});
  }
  std::shared_ptr<const calibration::LogTable> table[2];
  for (int c = 0; c < 2; ++c)
    if (!points[c].empty()) table[c] = std::make_shared<calibration::LogTable>(std::move(points[c]), std::move(values[c]));
  set_attention_hooks(tables, table[1], table[0], true);
  tables.attention_source = fmt::format("{} measured BF16 attention kernels of the GPU catalogue ({})", gpu.attention_kernels.size(),
                                        gpu.attention_kernels_source);
  return tables.attention_source;
}

compute::ComputeModel bound_compute_model(const cluster::GpuSpec& gpu, const compute::ComputeOptions& options,
                                          compute::KernelTables tables, std::string* used) {
  if (!options.attention_efficiency) {
    std::string what = bind_catalogue_attention(gpu, options.dtype, tables);
    if (used) *used = std::move(what);
  }
  return compute::ComputeModel(gpu, options, std::move(tables));
}

}  // namespace moesim::simulation
