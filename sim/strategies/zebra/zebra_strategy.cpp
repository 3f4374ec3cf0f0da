#include "sim/strategies/zebra/zebra_strategy.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/blocks/layer_costs.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/ep/ep_strategy.hpp"
#include "sim/strategies/ep/expert_parallel_plan.hpp"

namespace moesim::strategies::zebra {

namespace sc = moesim::schema;

const sc::Options<ZebraOptions>& zebra_options() {
  using T = ZebraOptions;
  static const sc::Options<T> o({
      sc::declared<T>(sc::required("name", sc::enumeration({"zebra"}), "the strategy name")),
      sc::option<T>("attention_gpu", &T::attention_gpu, sc::string(),
                    "GPU kind (catalogue key) that runs attention; empty: the kind faster at the scenario's attention"),
      sc::option<T>("zp_groups", &T::zp_groups, sc::integer(1), "ZP groups training data-parallel; each kind's GPUs must divide by it"),
      sc::switch_option<T>("overlap", &T::overlap, {"zebra", "none"}, "zebra",
                           "zebra: Theorem 1's schedule, attention and experts of different microbatches overlapped; "
                           "none: DistEP, the disaggregated baseline without overlap (HeterMoE §6.1)"),
      sc::declared<T>(sc::optional("asym_ea", sc::any(), "auto",
                                   "\"auto\" (Algorithm 1 where M and N divide one another), \"on\", \"off\", or the "
                                   "experts each expert GPU offloads per MoE layer, e.g. [0, 1, 0, 1]")),
      sc::enum_option<T>("t_squeeze", &T::formula, kSqueezeFormulaNames,
                         "Algorithm 1's T_squeeze as printed, or with n1 and n2 swapped as its own definitions give (spec "
                         "002 ambiguity 1)"),
      ep::pipelining_degree_option<T>(&T::iteration),
      ep::gradient_sync_option<T>(&T::iteration),
  });
  return o;
}

StrategyInfo info() {
  StrategyInfo s;
  s.name = "zebra";
  s.description = "zebra parallelism: attention on the newer GPUs, experts on the older, overlapped across microbatches, "
                  "with asymmetric expert assignment (Asym-EA)";
  s.paper = "HeterMoE: Efficient Training of Mixture-of-Experts Models on Heterogeneous GPUs (Wu, Liu et al.), §4";
  s.options = zebra_options().node();
  s.refuses_global_batch =
      "zebra trains the tokens of its attention GPUs only (microbatches is HeterMoE's R per attention GPU), while "
      "global_batch_size divides the batch over every GPU";
  s.make = [](const sc::Json& o) {
    ZebraOptions opt;
    zebra_options().read(o, opt);
    const auto& a = o.at("asym_ea");
    if (a.is_array()) {
      opt.asym_ea = AsymEaMode::Given;
      for (const auto& x : a) {
        if (!x.is_number_integer() || x.get<int>() < 0)
          throw InputError("", "$.strategy.asym_ea", "asym_ea lists a count that is not a non-negative integer",
                           "give the experts each expert GPU offloads per MoE layer, e.g. [0, 1, 0, 1]");
        opt.offloaded.push_back(x.get<int>());
      }
    } else if (a == "auto") {
      opt.asym_ea = AsymEaMode::Auto;
    } else if (a == "on") {
      opt.asym_ea = AsymEaMode::On;
    } else if (a == "off") {
      opt.asym_ea = AsymEaMode::Off;
    } else {
      throw InputError("", "$.strategy.asym_ea", fmt::format("asym_ea {} is not an option", a.dump()),
                       "use \"auto\", \"on\", \"off\" or a list of counts per MoE layer");
    }
    return std::make_unique<ZebraStrategy>(opt);
  };
  return s;
}

namespace {

double seconds(Time t) { return time_to_seconds(t); }

// The attention-side forward of one microbatch and MoE layer on a GPU kind: HeterMoE's A task
// (spec 002 A.3) as the blocks write it, the un-permute of the layer before, the attention block
// and the router.
Time attention_side(const compute::ComputeModel& cm, const StrategyContext& ctx) {
  const double tokens = ctx.training.tokens_per_microbatch();
  return (blocks::combine_time(cm, ctx.model, tokens) + blocks::mean_attention_time(cm, ctx.model, ctx.training) +
          blocks::gate_time(cm, ctx.model, tokens))
      .time;
}

// The experts of one layer for one microbatch: `experts` of them sharing `copies` token copies
// evenly, as one grouped FFN (blocks::experts_time, what the simulation runs).
Time experts_of(const compute::ComputeModel& cm, const StrategyContext& ctx, int experts, double copies) {
  const std::vector<double> rows(static_cast<std::size_t>(experts), copies / experts);
  return blocks::experts_time(cm, ctx.model, rows, ctx.model.ffn_hidden).time;
}

// What a GPU of each role keeps (workload::memory_footprint's inputs): an attention GPU the
// replicated model, its tokens' activations and `offloaded` experts acquired over all layers; an
// expert GPU `kept` experts over all layers and the activations of the copies they receive
// (`copies` per expert and microbatch, spread evenly over the layers); `in_flight` microbatches.
workload::MemoryInputs attention_gpu(const StrategyContext& ctx, bool flash, double offloaded, double copies, double in_flight) {
  const auto& m = ctx.model;
  workload::MemoryInputs a;
  a.params = m.replicated_params() + offloaded * m.expert_params();
  a.tokens = ctx.training.tokens_per_microbatch();
  a.flash_attention = flash;
  a.expert_tokens_per_layer = offloaded / std::max(1, m.moe_layers()) * copies;
  a.in_flight = in_flight;
  a.lm_head_in_flight = 1;  // Theorem 1 runs each microbatch's head backward right after its forward
  return a;
}

workload::MemoryInputs expert_gpu(const StrategyContext& ctx, double kept, double copies, double in_flight) {
  const auto& m = ctx.model;
  workload::MemoryInputs e;
  e.params = kept * m.expert_params();
  e.expert_tokens_per_layer = kept / std::max(1, m.moe_layers()) * copies;
  e.kept_expert_inputs = e.expert_tokens_per_layer;
  e.in_flight = in_flight;
  e.embedding = e.lm_head = false;  // the vocabulary's ends run on the attention GPUs
  return e;
}

// How many experts fit beside what a GPU needs without any: its footprint is linear in the
// experts it holds (each adds its weights, gradients, optimizer state and its copies'
// activations), so the capacity is (memory − footprint(0)) / (the footprint of one more).
template <typename Inputs>
double experts_that_fit(const StrategyContext& ctx, double memory, double reference, Inputs inputs) {
  const auto total = [&](double x) { return workload::memory_footprint(ctx.model, ctx.training, inputs(x)).total(); };
  const double base = total(0), per_expert = (total(reference) - base) / reference;
  return std::max(0.0, std::floor((memory - base) / per_expert));
}

}  // namespace

ZpGroups ZebraStrategy::groups(const StrategyContext& ctx) const {
  const auto& topo = ctx.topology;
  ZpGroups z;
  const auto& kinds = topo.kinds();
  if (kinds.size() != 2) return z;  // check() says why
  if (!options_.attention_gpu.empty()) {
    z.attention_kind = kinds[0].key == options_.attention_gpu ? 0 : 1;
  } else {
    // The kind faster at the scenario's attention (HeterMoE §3: the newer GPUs).
    z.attention_kind = attention_side(ctx.compute[1], ctx) < attention_side(ctx.compute[0], ctx) ? 1 : 0;
  }
  z.expert_kind = z.attention_kind == 0 ? 1 : 0;
  std::vector<std::uint32_t> a, e;
  for (std::uint32_t g = 0; g < topo.gpu_count(); ++g) (topo.kind_index(g) == z.attention_kind ? a : e).push_back(g);
  const int groups = options_.zp_groups;
  z.m = static_cast<int>(a.size()) / groups;
  z.n = static_cast<int>(e.size()) / groups;
  for (int i = 0; i < groups; ++i) {
    z.attention.emplace_back(a.begin() + i * z.m, a.begin() + (i + 1) * z.m);
    z.experts.emplace_back(e.begin() + i * z.n, e.begin() + (i + 1) * z.n);
  }
  return z;
}

OffloadCosts ZebraStrategy::offload_costs(const StrategyContext& ctx, const ZpGroups& z) const {
  const auto& m = ctx.model;
  const auto& attention = ctx.compute[z.attention_kind];
  const auto& expert = ctx.compute[z.expert_kind];
  const int local = m.experts / z.n;
  OffloadCosts c;
  // B (§5, the profiler): the token copies an expert GPU computes per microbatch, the M attention
  // GPUs' k copies of each token spread evenly over the N expert GPUs.
  c.tokens_per_expert_gpu = z.m * ctx.training.tokens_per_microbatch() * m.top_k / z.n;
  OffloadInputs& in = c.inputs;
  in.experts = m.experts;
  in.layers = m.moe_layers();
  in.attention_gpus = z.m;
  in.expert_gpus = z.n;
  in.t_attn_a = seconds(attention_side(attention, ctx));
  in.t_exp_e = seconds(experts_of(expert, ctx, local, c.tokens_per_expert_gpu));
  in.t_attn_e = seconds(experts_of(attention, ctx, local, c.tokens_per_expert_gpu));
  in.formula = options_.formula;
  // n_min and n_max (§5): from the memory model, as the paper's profiler measures them: the
  // experts the expert GPUs cannot hold must leave; an attention GPU holds what fits beside its
  // own model and activations. The R microbatches of the layer-major schedule are all in flight.
  const double in_flight = options_.overlap ? ctx.training.microbatches : 1;
  const double copies = c.tokens_per_expert_gpu / local;  // per expert and microbatch
  const double all = static_cast<double>(local) * in.layers;  // the experts an expert GPU holds over all layers
  const auto& kinds = ctx.topology.kinds();
  c.expert_capacity = experts_that_fit(ctx, kinds[z.expert_kind].memory_bytes, all,
                                       [&](double x) { return expert_gpu(ctx, x, copies, in_flight); });
  in.n_min = static_cast<int>(std::max(0.0, m.experts * in.layers - z.n * c.expert_capacity));
  const bool flash = kinds[z.attention_kind].flash_attention;
  in.n_max = static_cast<int>(experts_that_fit(ctx, kinds[z.attention_kind].memory_bytes, all,
                                               [&](double x) { return attention_gpu(ctx, flash, x, copies, in_flight); }));
  return c;
}

ZebraStrategy::Placement ZebraStrategy::placement(const StrategyContext& ctx) const {
  Placement p;
  p.groups = groups(ctx);
  const ZpGroups& z = p.groups;
  p.costs = offload_costs(ctx, z);
  const bool applies = options_.overlap && asym_ea_divisible(z.m, z.n);
  if (applies) p.algorithm = gather_and_squeeze(p.costs.inputs);
  p.offloaded.assign(static_cast<std::size_t>(ctx.model.moe_layers()), 0);
  switch (options_.asym_ea) {
    case AsymEaMode::Given:
      p.mode = "given";
      p.offloaded = options_.offloaded;
      break;
    case AsymEaMode::Off: p.mode = "off"; break;
    case AsymEaMode::Auto:
    case AsymEaMode::On:
      if (applies) {
        p.mode = "algorithm 1";
        p.offloaded = p.algorithm->offloaded;
      } else if (!options_.overlap) {
        p.mode = "off: DistEP has no Asym-EA";
      } else {
        p.mode = fmt::format("off: {} attention and {} expert GPUs per ZP group do not divide one another (§4.2)", z.m, z.n);
      }
      break;
  }
  return p;
}

void ZebraStrategy::check(const StrategyContext& ctx) const {
  const auto& topo = ctx.topology;
  const auto& m = ctx.model;
  const auto& kinds = topo.kinds();
  if (kinds.size() != 2)
    throw InputError("", "$.cluster.groups",
                     fmt::format("zebra needs exactly two GPU kinds (attention and expert GPUs), the cluster has {}", kinds.size()),
                     "describe the cluster with two groups of different GPUs (e.g. topologies/hetermoe-o1.json)");
  if (!options_.attention_gpu.empty() && kinds[0].key != options_.attention_gpu && kinds[1].key != options_.attention_gpu)
    throw InputError("", "$.strategy.attention_gpu",
                     fmt::format("attention_gpu \"{}\" is not in the cluster", options_.attention_gpu),
                     fmt::format("use \"{}\" or \"{}\"", kinds[0].key, kinds[1].key));
  std::uint32_t count[2] = {0, 0};
  for (std::uint32_t g = 0; g < topo.gpu_count(); ++g) ++count[topo.kind_index(g)];
  const int zp = options_.zp_groups;
  for (int k = 0; k < 2; ++k)
    if (count[k] % static_cast<std::uint32_t>(zp) != 0)
      throw InputError("", "$.strategy.zp_groups",
                       fmt::format("the cluster's {} {} GPUs do not split into {} ZP groups", count[k], kinds[k].key, zp),
                       "choose zp_groups dividing both GPU counts");
  const ZpGroups z = groups(ctx);
  if (m.experts % z.n != 0)
    throw InputError("", "$.model.experts",
                     fmt::format("the model's {} experts do not divide over the {} expert GPUs of a ZP group", m.experts, z.n),
                     "use a number of experts divisible by the expert GPUs per ZP group (HeterMoE §4.2, as in EP)");
  if (options_.asym_ea == AsymEaMode::On && !asym_ea_divisible(z.m, z.n))
    throw InputError("", "$.strategy.asym_ea",
                     fmt::format("Asym-EA needs M a multiple of N or N a multiple of M; a ZP group has M = {}, N = {}", z.m, z.n),
                     "use \"auto\" (Asym-EA only where it applies) or change the GPU counts (HeterMoE §4.2)");
  if (options_.asym_ea == AsymEaMode::Given) {
    const int local = m.experts / z.n;
    if (static_cast<int>(options_.offloaded.size()) != m.moe_layers())
      throw InputError("", "$.strategy.asym_ea",
                       fmt::format("asym_ea lists {} counts, the model has {} MoE layers", options_.offloaded.size(), m.moe_layers()),
                       "give one count per MoE layer");
    for (std::size_t i = 0; i < options_.offloaded.size(); ++i) {
      const int o = options_.offloaded[i];
      const std::string at = fmt::format("$.strategy.asym_ea[{}]", i);
      if (o > local)
        throw InputError("", at, fmt::format("an expert GPU holds {} experts per layer and cannot offload {}", local, o),
                         fmt::format("use a count from 0 to {}", local));
      if ((o * z.n) % z.m != 0)
        throw InputError("", at,
                         fmt::format("the {} experts the {} expert GPUs offload do not split evenly over {} attention GPUs",
                                     o * z.n, z.n, z.m),
                         fmt::format("use a count whose product with {} divides by {}", z.n, z.m));
    }
  }
}

parallel::PlanPtr ZebraStrategy::plan(const StrategyContext& ctx, int, const parallel::RunState&) {
  if (plan_) return plan_;
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const Placement place = placement(ctx);
  const ZpGroups& z = place.groups;
  const std::vector<int>& o = place.offloaded;
  const int local = m.experts / z.n;
  const std::uint32_t gpus = ctx.topology.gpu_count();
  const int zp = options_.zp_groups;
  const bool asym = std::any_of(o.begin(), o.end(), [](int x) { return x > 0; });

  ep::ExpertParallelPlan in;
  in.streams = {parallel::StreamRole::Compute, parallel::StreamRole::Dispatch, parallel::StreamRole::Combine,
                parallel::StreamRole::Gradient};
  // Each ZP group's all-to-all group: its attention GPUs (ranks 0..M−1), then its expert GPUs.
  for (int i = 0; i < zp; ++i) {
    parallel::DispatchGroup g;
    g.gpus = z.attention[i];
    g.gpus.insert(g.gpus.end(), z.experts[i].begin(), z.experts[i].end());
    in.groups.push_back(std::move(g));
  }
  in.chunks = options_.iteration.pipelining_degree;
  in.timing = ep::timing(options_.iteration);
  in.params_per_gpu = 1;  // replaced below, per role
  auto plan = std::make_shared<parallel::IterationPlan>(*ep::make_plan(ctx, in));
  plan->schedule = options_.overlap ? parallel::ScheduleKind::LayerMajor : parallel::ScheduleKind::Pipeline;
  plan->roles.assign(gpus, parallel::kRunsExperts);
  for (const auto& a : z.attention)
    for (const std::uint32_t g : a) plan->roles[g] = asym ? parallel::kRunsBoth : parallel::kRunsAttention;

  // The replica table of a layer whose expert GPUs each offload `off` experts: expert GPU j
  // (rank M + j) holds experts [j·k, (j+1)·k) but its last `off`, which go, in expert order,
  // N·off/M to each attention GPU.
  std::map<int, std::shared_ptr<const parallel::ReplicaTable>> tables;
  const auto table_of = [&](int off) {
    auto& tb = tables[off];
    if (tb) return tb;
    auto table = std::make_shared<parallel::ReplicaTable>();
    table->of_expert.resize(static_cast<std::size_t>(m.experts));
    const int acquired = off * z.n / z.m;
    int handed = 0;
    for (int e = 0; e < m.experts; ++e) {
      const int j = e / local;
      const bool offloaded = e % local >= local - off;
      const auto rank = static_cast<std::uint32_t>(offloaded ? handed++ / acquired : z.m + j);
      table->of_expert[static_cast<std::size_t>(e)] = {{rank, 1.0}};
    }
    tb = table;
    return tb;
  };
  // Expert gradients: the GPUs at the same place of every ZP group hold the same experts.
  const auto expert_step = [&](const std::vector<std::vector<std::uint32_t>>& by_group, int place, double experts) {
    parallel::CollectiveStep s;
    s.name = "expert_grads";
    s.kind = network::CollectiveKind::AllReduce;
    s.algorithm = ctx.all_reduce_algorithm;
    s.bytes = experts * m.expert_params() * ctx.dtype_bytes();
    std::vector<std::vector<std::uint32_t>> fam;
    for (int p = 0; p < place; ++p) {
      std::vector<std::uint32_t> same;
      for (const auto& members : by_group) same.push_back(members[static_cast<std::size_t>(p)]);
      fam.push_back(std::move(same));
    }
    s.groups = parallel::family(std::move(fam));
    s.stream = parallel::StreamRole::Gradient;
    return s;
  };
  std::vector<double> held(gpus, 0.0);  // experts each GPU holds over all layers
  const auto* base = [&]() -> const parallel::MoeLayerPlan* {
    for (const auto& p : plan->moe)
      if (p) return p.get();
    return nullptr;
  }();
  std::map<int, std::shared_ptr<const parallel::MoeLayerPlan>> by_offload;
  int moe_index = 0;
  for (int l = 0; l < m.layers; ++l) {
    if (!m.is_moe(l)) continue;
    const int off = o[static_cast<std::size_t>(moe_index++)];
    for (const auto& e : z.experts)
      for (const std::uint32_t g : e) held[g] += local - off;
    for (const auto& a : z.attention)
      for (const std::uint32_t g : a) held[g] += static_cast<double>(off) * z.n / z.m;
    auto& lp = by_offload[off];
    if (!lp) {
      auto p = std::make_shared<parallel::MoeLayerPlan>(*base);
      for (auto& g : p->dispatch) g.replicas = table_of(off);
      p->streams_by_direction = options_.overlap;
      p->experts_after_attention = options_.overlap && off > 0;
      p->expert_gradients.clear();
      p->expert_param_gather.clear();
      if (zp > 1) {
        p->expert_gradients.push_back(expert_step(z.experts, z.n, local - off));
        if (off > 0) p->expert_gradients.push_back(expert_step(z.attention, z.m, static_cast<double>(off) * z.n / z.m));
      }
      lp = std::move(p);
    }
    plan->moe[static_cast<std::size_t>(l)] = lp;
  }
  // Dense parameters live on the attention GPUs only, data-parallel over all of them.
  std::vector<std::uint32_t> all_attention;
  for (const auto& a : z.attention) all_attention.insert(all_attention.end(), a.begin(), a.end());
  plan->gradients.dense_groups = parallel::family({all_attention});
  for (std::uint32_t g = 0; g < gpus; ++g)
    plan->optimizer_params[g] = held[g] * m.expert_params() + (plan->roles[g] & parallel::kRunsAttention ? m.replicated_params() : 0.0);
  plan->tokens = static_cast<double>(all_attention.size()) * t.tokens_per_microbatch() * t.microbatches;
  plan_ = plan;
  return plan_;
}

std::vector<workload::MemoryFootprint> ZebraStrategy::memory(const StrategyContext& ctx) const {
  const auto& m = ctx.model;
  const Placement place = placement(ctx);
  const ZpGroups& z = place.groups;
  const int local = m.experts / z.n;
  const double per_expert = place.costs.tokens_per_expert_gpu / local;  // token copies of one expert per microbatch
  // Theorem 1's order keeps every microbatch's activations until the backward; DistEP one.
  const double in_flight = options_.overlap ? ctx.training.microbatches : 1;
  double offloaded_total = 0, kept_total = 0;
  for (const int x : place.offloaded) {
    offloaded_total += static_cast<double>(x) * z.n / z.m;
    kept_total += local - x;
  }
  std::vector<workload::MemoryFootprint> out(ctx.topology.gpu_count());
  const bool flash = ctx.topology.kinds()[z.attention_kind].flash_attention;
  const auto fa = workload::memory_footprint(m, ctx.training, attention_gpu(ctx, flash, offloaded_total, per_expert, in_flight));
  const auto fe = workload::memory_footprint(m, ctx.training, expert_gpu(ctx, kept_total, per_expert, in_flight));
  for (const auto& g : z.attention)
    for (const std::uint32_t x : g) out[x] = fa;
  for (const auto& g : z.experts)
    for (const std::uint32_t x : g) out[x] = fe;
  return out;
}

ProgramSize ZebraStrategy::program_per_iteration(const StrategyContext& ctx) const {
  using P = ProgramSize;
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const Placement place = placement(ctx);
  const ZpGroups& z = place.groups;
  const double zp = options_.zp_groups, chunks = options_.iteration.pipelining_degree;
  // Each block forward and backward, and recomputed before the backward; in Theorem 1's
  // layer-major order (overlap) each side recomputes its own kernels, not the exchanges or the
  // combine's output kernel (blocks/moe_block.hpp).
  const bool recompute = t.recompute == workload::Recompute::Full;
  const double passes = 2 + (recompute ? 1 : 0), exchange_passes = 2 + (recompute && !options_.overlap ? 1 : 0);
  // Per chunk each pass's dispatch and combine over the ZP group's M + N GPUs.
  const P exchanges = P::collective(2 * exchange_passes, z.m + z.n);
  // Per microbatch: an attention GPU's attention, router and output kernels (the dense FFN in a
  // dense layer), its exchanges and the experts it took over (Asym-EA); an expert GPU's
  // exchanges and expert kernels; the vocabulary ends (a kernel each way) on the attention GPUs.
  P attention_gpu = P::kernels(4), expert_gpu;
  std::size_t moe_index = 0;
  for (int l = 0; l < m.layers; ++l) {
    attention_gpu += P::kernels(m.attention ? passes : 0);
    if (!m.is_moe(l)) {
      attention_gpu += P::kernels(passes);
      continue;
    }
    const bool offloaded = moe_index < place.offloaded.size() && place.offloaded[moe_index++] > 0;
    attention_gpu += P::kernels(passes + exchange_passes) + chunks * (exchanges + P::kernels(offloaded ? passes : 0));
    expert_gpu += chunks * (exchanges + P::kernels(passes));
  }
  // Per iteration: the optimizer step and its waits (two of them the host copies with the
  // optimizer on the host); the dense gradients all-reduced over every attention GPU, per layer
  // and for the vocabulary; the experts' over the GPUs at the same place of every ZP group.
  const P optimizer = t.optimizer_on_host ? P::kernels(2) + P::host_copies(2) : P::kernels(4);
  const P attention_iteration = optimizer + (m.layers + 1) * P::collective(1, zp * z.m) +
                                m.moe_layers() * P::collective(1, zp);
  const P expert_iteration = optimizer + m.moe_layers() * P::collective(1, zp);
  return zp * (z.m * (t.microbatches * attention_gpu + attention_iteration) +
               z.n * (t.microbatches * expert_gpu + expert_iteration));
}

schema::Json ZebraStrategy::describe(const StrategyContext& ctx) const {
  const Placement place = placement(ctx);
  const ZpGroups& z = place.groups;
  schema::Json j;
  const auto& kinds = ctx.topology.kinds();
  j["attention_gpu"] = kinds[z.attention_kind].key;
  j["expert_gpu"] = kinds[z.expert_kind].key;
  j["zp_groups"] = options_.zp_groups;
  j["attention_gpus_per_group"] = z.m;
  j["expert_gpus_per_group"] = z.n;
  j["microbatches"] = ctx.training.microbatches;
  j["overlap"] = options_.overlap ? "zebra" : "none";
  schema::Json asym;
  asym["mode"] = place.mode;
  asym["offloaded"] = place.offloaded;
  if (place.algorithm) {
    const OffloadCosts& c = place.costs;
    const OffloadPlan& p = *place.algorithm;
    asym["t_squeeze_formula"] = name_string(kSqueezeFormulaNames, options_.formula);
    asym["n1"] = p.n1;
    asym["n2"] = p.n2;
    asym["t_attn_a_ms"] = c.inputs.t_attn_a * 1e3;
    asym["t_exp_e_ms"] = c.inputs.t_exp_e * 1e3;
    asym["t_attn_e_ms"] = c.inputs.t_attn_e * 1e3;
    asym["t_gather_ms"] = p.t_gather * 1e3;
    asym["t_squeeze_ms"] = p.t_squeeze * 1e3;
    asym["alpha"] = p.alpha;
    asym["beta"] = p.beta;
    asym["n_min"] = c.inputs.n_min;
    asym["n_max"] = c.inputs.n_max;
  }
  j["asym_ea"] = asym;
  j["pipelining_degree"] = options_.iteration.pipelining_degree;
  j["gradient_sync"] = options_.iteration.overlap_gradient_sync ? "overlap" : "after_backward";
  return j;
}

}  // namespace moesim::strategies::zebra
