#include "sim/strategies/parm/parm_strategy.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "sim/calibration/line_fit.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/ep/expert_parallel_plan.hpp"

namespace moesim::strategies::parm {

using network::CollectiveKind;
namespace sc = moesim::schema;

const sc::Options<ParmOptions>& parm_options() {
  using T = ParmOptions;
  std::vector<std::string> schedules = names_of(kScheduleNames);
  schedules.insert(schedules.begin(), "auto");
  static const sc::Options<T> o({
      sc::declared<T>(sc::required("name", sc::enumeration({"parm"}), "the strategy name")),
      sc::option<T>("mp_size", &T::mp, sc::integer(1), "N_MP: GPUs per model-parallel (tensor-parallel) group"),
      sc::option<T>("esp_size", &T::esp, sc::integer(1),
                    "N_ESP: GPUs each expert is sharded over; N_EP = GPUs / N_ESP must divide the experts"),
      sc::enum_option<T>("placement", &T::placement, kPlacementNames,
                         "§IV-A: consecutive GPUs (one node when they fit) form the ESP groups, or the EP groups"),
      // Absent from ParmOptions (std::nullopt) is "auto".
      sc::declared<T>(sc::optional("schedule", sc::enumeration(schedules), "auto",
                                   "baseline (DeepSpeed-MoE, Fig. 3a), s1 (Fig. 3b), s2 (Fig. 3c), or auto (Algorithm 1 "
                                   "picks S1 or S2; both are also simulated and reported)")),
      sc::option<T>("saa", &T::saa, sc::boolean(),
                    "S2 runs its all-to-all and MP all-gather simultaneously by phases (SAA, §III-D); false: one after "
                    "the other (AAS)"),
      sc::enum_option<T>("gradient_sync", &T::gradient_sync, kGradientSyncNames,
                         "all-reduce dense gradients as each layer's backward ends, all after backward, or not at all "
                         "(Parm §VI-A times layers without it)"),
  });
  return o;
}

StrategyInfo info() {
  StrategyInfo s;
  s.name = "parm";
  s.description = "Parm: MP+EP+ESP with MP paused in MoE layers (S1/S2, fused EP&ESP all-to-all, SAA) or DeepSpeed's baseline";
  s.paper = "Parm: Efficient Training of Large Sparsely-Activated Models with Dedicated Schedules: baseline Fig. 3a, S1 Fig. 3b, S2 Fig. 3c, SAA §III-D, Algorithm 1 §V";
  s.options = parm_options().node();
  s.make = [](const sc::Json& o) {
    ParmOptions opt;
    parm_options().read(o, opt);
    if (const std::string sched = o.at("schedule").get<std::string>(); sched != "auto")
      opt.schedule = read_name(kScheduleNames, sched);
    return std::make_unique<ParmStrategy>(opt);
  };
  return s;
}

ParmGroups ParmGroups::build(std::uint32_t gpus, int n_mp, int n_esp, Placement placement) {
  ParmGroups g;
  g.n_mp = n_mp;
  g.n_esp = n_esp;
  g.n_ep = static_cast<int>(gpus) / n_esp;
  g.ep.resize(g.n_esp);
  g.esp.resize(g.n_ep);
  g.mp.resize(gpus / n_mp);
  g.dp.resize(n_mp);
  g.ep_rank.resize(gpus);
  // Members are added in GPU order, so each group lists its ranks in order.
  for (std::uint32_t gpu = 0; gpu < gpus; ++gpu) {
    const int ep_rank = placement == Placement::EspInNode ? static_cast<int>(gpu) / n_esp : static_cast<int>(gpu) % g.n_ep;
    const int esp_rank = placement == Placement::EspInNode ? static_cast<int>(gpu) % n_esp : static_cast<int>(gpu) / g.n_ep;
    g.ep_rank[gpu] = ep_rank;
    g.ep[esp_rank].push_back(gpu);
    g.esp[ep_rank].push_back(gpu);
    g.mp[gpu / n_mp].push_back(gpu);
    g.dp[gpu % n_mp].push_back(gpu);
  }
  return g;
}

Strategy::NamedGroups ParmStrategy::named_groups(const cluster::Topology& topology) const {
  const std::uint32_t gpus = topology.gpu_count();
  // Groups that do not tile the GPUs are check()'s to refuse; nothing is bound for them.
  if (gpus % static_cast<std::uint32_t>(options_.mp) != 0 || gpus % static_cast<std::uint32_t>(options_.esp) != 0) return {};
  const ParmGroups g = ParmGroups::build(gpus, options_.mp, options_.esp, options_.placement);
  std::vector<std::uint32_t> grid(gpus);
  std::iota(grid.begin(), grid.end(), 0u);
  return {{"mp", g.mp.front()}, {"ep", g.ep.front()}, {"esp", g.esp.front()}, {"ep_esp", grid}};
}

void ParmStrategy::check(const StrategyContext& ctx) const {
  const int gpus = static_cast<int>(ctx.topology.gpu_count());
  const auto& m = ctx.model;
  const auto divisors = [](int n) {
    std::vector<int> d;
    for (int i = 1; i <= n; ++i)
      if (n % i == 0) d.push_back(i);
    return fmt::format("{}", fmt::join(d, ", "));
  };
  if (gpus % options_.mp != 0)
    throw InputError("", "$.strategy.mp_size", fmt::format("{} GPUs do not split into MP groups of {}", gpus, options_.mp),
                     fmt::format("choose an mp_size dividing {} ({})", gpus, divisors(gpus)));
  if (gpus % options_.esp != 0)
    throw InputError("", "$.strategy.esp_size", fmt::format("{} GPUs do not split into ESP groups of {}", gpus, options_.esp),
                     fmt::format("choose an esp_size dividing {} ({})", gpus, divisors(gpus)));
  const int n_ep = gpus / options_.esp;
  if (m.experts % n_ep != 0) {
    std::vector<int> good;
    for (int esp = 1; esp <= gpus; ++esp)
      if (gpus % esp == 0 && m.experts % (gpus / esp) == 0) good.push_back(esp);
    throw InputError("", "$.strategy.esp_size",
                     fmt::format("N_EP = {} GPUs / esp_size {} = {} does not divide the model's {} experts", gpus,
                                 options_.esp, n_ep, m.experts),
                     good.empty() ? fmt::format("set model.experts to a multiple of {}", n_ep)
                                  : fmt::format("use esp_size {} or set model.experts to a multiple of {}",
                                                fmt::join(good, " or "), n_ep));
  }
  if (static_cast<int>(m.ffn_hidden) % options_.esp != 0)
    throw InputError("", "$.strategy.esp_size",
                     fmt::format("the expert FFN size {} does not split into {} shards", m.ffn_hidden, options_.esp),
                     "choose an esp_size dividing model.ffn_hidden");
  if (m.attention && m.heads % options_.mp != 0)
    throw InputError("", "$.strategy.mp_size",
                     fmt::format("{} attention heads do not split over {} model-parallel GPUs", m.heads, options_.mp),
                     "choose an mp_size dividing model.heads");
  if (static_cast<long long>(ctx.training.tokens_per_microbatch()) % options_.mp != 0)
    throw InputError("", "$.strategy.mp_size",
                     fmt::format("MP-Split cannot divide {} tokens per microbatch into {} parts",
                                 ctx.training.tokens_per_microbatch(), options_.mp),
                     "choose an mp_size dividing sequence_length × micro_batch_size");
  if (m.shared_experts > 0)
    throw InputError("", "$.model.shared_experts",
                     fmt::format("the model has {} shared experts, which Parm's MP+EP+ESP schedules do not place",
                                 m.shared_experts),
                     "use a model without shared experts (\"shared_experts\": 0), or the ep strategy");
  if (ctx.training.capacity_factor <= 0)
    throw InputError("", "$.training.capacity_factor",
                     "Parm's schedules pad every expert to its capacity T = k·f·B·L/E, which needs a capacity factor f",
                     "set training.capacity_factor, e.g. 1.2 (Parm Table III uses 1.2 and 2.4)");
}

ParmInputs ParmStrategy::inputs(const StrategyContext& ctx) const {
  ParmInputs in;
  in.batch = static_cast<std::uint64_t>(ctx.training.micro_batch_size);
  in.seq_len = static_cast<std::uint64_t>(ctx.training.sequence_length);
  in.embed = static_cast<std::uint64_t>(ctx.model.hidden);
  in.experts = static_cast<std::uint32_t>(ctx.model.experts);
  in.top_k = static_cast<std::uint32_t>(ctx.model.top_k);
  in.capacity_factor = ctx.training.capacity_factor;
  in.bytes_per_element = cluster::storage_bytes(ctx.training.dtype);
  in.n_mp = static_cast<std::uint32_t>(options_.mp);
  in.n_esp = static_cast<std::uint32_t>(options_.esp);
  in.n_ep = ctx.topology.gpu_count() / in.n_esp;
  return in;
}

namespace {

// Time of one collective alone on `members` under the network model, in seconds.
double alone(const StrategyContext& ctx, CollectiveKind kind, const std::vector<std::uint32_t>& members, double bytes,
             network::TrafficPtr traffic = nullptr) {
  const network::CollectiveOp op{kind, kind == CollectiveKind::AllToAll ? network::Algorithm::Direct : network::Algorithm::Ring,
                                 0, bytes, std::move(traffic)};
  return time_to_seconds(ctx.network->cost(op, members).duration);
}

// Fits α + β·x to `time_of(x)` over x = 64 KiB … 1 GiB, as §VI-B fits measurements (Fig. 6).
SourcedAlphaBeta fit(const std::function<double(double)>& time_of) {
  std::vector<double> xs, ts;
  for (double x = 65536; x <= 1073741824.0; x *= 4) {
    xs.push_back(x);
    ts.push_back(time_of(x));
  }
  const auto f = calibration::fit_line(xs, ts);
  return {{f.alpha, f.beta}, "network model fit", f.max_relative_error};
}

}  // namespace

AlgorithmOneInputs ParmStrategy::algorithm_one_inputs(const StrategyContext& ctx) const {
  if (!algorithm_one_) algorithm_one_ = fit_algorithm_one_inputs(ctx);
  return *algorithm_one_;
}

AlgorithmOneInputs ParmStrategy::fit_algorithm_one_inputs(const StrategyContext& ctx) const {
  const ParmGroups g = ParmGroups::build(ctx.topology.gpu_count(), options_.mp, options_.esp, options_.placement);
  const std::uint32_t p = ctx.topology.gpu_count();
  std::vector<std::uint32_t> grid(p);
  std::iota(grid.begin(), grid.end(), 0u);
  if (!ctx.network && !ctx.calibration) invariant_failed("parm: Algorithm 1 needs the network model or a profile");
  // x of AG is the gathered tensor (each of N_MP ranks brings x/N_MP); x of A2A is what one GPU
  // hands to the all-to-all, x/P to each rank of the grid.
  const auto ag_mp = [&](double x) {
    return options_.mp > 1 ? alone(ctx, CollectiveKind::AllGather, g.mp[0], x / options_.mp) : 0.0;
  };
  const auto a2a = [&](double x) {
    return alone(ctx, CollectiveKind::AllToAll, grid, 0, std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::uniform(p, x / p)));
  };
  // Overlap(y) of Algorithm 1 line 5: the combine all-to-all of y/N_MP run with AG_MP(ETM = y/N_ESP)
  // as SAA runs them (plan() below, §III-D): P − 1 all-to-all phases, phase i sending y/(N_MP·P) from
  // rank r to r + i, the MP all-gather of the slice held before phase i (ETM/(N_MP·P), sent to the
  // N_MP − 1 peers) beside it, and the last slice's gather after the last phase. Each phase and its
  // gather are costed as one exchange, so the two add up where they share links (one PCIe switch)
  // and overlap where they do not (all-to-all across nodes, all-gather inside); every phase pays
  // its own latency.
  const auto overlap = [&](double y) {
    const double pair = y / options_.mp / p, slice = y / options_.esp / options_.mp / p;
    double t = 0;
    for (std::uint32_t i = 1; i <= p; ++i) {
      std::vector<double> dense(static_cast<std::size_t>(p) * p, 0.0);
      if (i < p)
        for (std::uint32_t r = 0; r < p; ++r) dense[static_cast<std::size_t>(r) * p + (r + i) % p] += pair;
      for (const auto& group : g.mp)
        for (std::uint32_t s : group)
          for (std::uint32_t d : group)
            if (s != d) dense[static_cast<std::size_t>(s) * p + d] += slice;
      t += alone(ctx, CollectiveKind::AllToAll, grid, 0,
                 std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(p, std::move(dense))));
    }
    return t;
  };
  const auto pick = [&](const char* collective, const char* group, const std::function<double(double)>& model) {
    if (ctx.calibration)
      if (const auto* e = ctx.calibration->find(collective, group))
        return SourcedAlphaBeta{{e->segments.front().alpha_s, e->segments.front().beta_s_per_byte}, "profile " + ctx.calibration->name, 0};
    return fit(model);
  };
  return {pick("all_gather", "mp", ag_mp), pick("all_to_all", "ep_esp", a2a), pick("overlap", "ep_esp", overlap)};
}

Schedule ParmStrategy::schedule(const StrategyContext& ctx) const {
  if (options_.schedule) return *options_.schedule;
  return choose_schedule(inputs(ctx), algorithm_one_inputs(ctx).params()).schedule;
}

namespace {

// Expert tokens one GPU computes per MoE layer and microbatch (forward), over E/N_EP local experts
// of hidden size M/N_ESP: each gets T·N_ESP from every EP rank (baseline: the ESP-gathered input,
// repeated in every MP rank), or T/N_MP from every GPU of the grid (S1, S2).
double expert_tokens(const ParmInputs& in, Schedule s) {
  const double t = in.tokens_per_expert();
  return s == Schedule::Baseline ? in.experts * t * in.n_esp : in.experts * t * in.n_esp / in.n_mp;
}

// Tokens the gate sees: the ESP-gathered input (baseline), the MP-Split share (S1), all (S2).
double gate_tokens(const ParmInputs& in, Schedule s) {
  const double bl = static_cast<double>(in.batch * in.seq_len);
  return s == Schedule::Baseline ? bl * in.n_esp : s == Schedule::S1 ? bl / in.n_mp : bl;
}

}  // namespace

double ParmStrategy::params_on_gpu(const StrategyContext& ctx) const {
  // Attention, dense FFNs and embeddings split over the MP group; norms and gates replicated; E/N_EP
  // experts, each a 1/N_ESP shard.
  const auto& m = ctx.model;
  const double mp = options_.mp;
  const double n_ep = static_cast<double>(ctx.topology.gpu_count() / static_cast<std::uint32_t>(options_.esp));
  return m.layers * (m.attention_params() / mp + m.norm_params()) + m.moe_layers() * m.gate_params() +
         m.dense_layers * m.dense_ffn_params() / mp + m.embedding_params() / mp +
         m.moe_layers() * (m.experts / n_ep) * m.expert_params() / options_.esp;
}

std::vector<workload::MemoryFootprint> ParmStrategy::memory(const StrategyContext& ctx) const {
  const auto& m = ctx.model;
  const ParmInputs in = inputs(ctx);
  const Schedule s = schedule(ctx);
  const double mp = options_.mp;
  const double params = params_on_gpu(ctx);
  // Buffers of Fig. 3 kept for backward: dispatched tokens, expert outputs and combined outputs
  // (each ETM·N_ESP, /N_MP with MP paused) and the gathered tensors (BLM·N_ESP; BLM or ETM).
  const double blm = in.token_bytes(), etm = in.dispatch_bytes();
  const double buffers = s == Schedule::Baseline ? blm * in.n_esp + 3 * etm * in.n_esp
                         : s == Schedule::S1     ? 3 * etm * in.n_esp / mp + blm
                                                 : 3 * etm * in.n_esp / mp + etm;
  std::vector<workload::MemoryFootprint> out(ctx.topology.gpu_count());
  for (std::uint32_t g = 0; g < ctx.topology.gpu_count(); ++g) {
    workload::MemoryInputs mi;
    mi.params = params;
    mi.tokens = ctx.training.tokens_per_microbatch();
    mi.expert_tokens_per_layer = expert_tokens(in, s);
    mi.flash_attention = ctx.topology.gpu(g).flash_attention;
    mi.tensor_parallel = options_.mp;
    mi.expert_ffn_hidden = m.ffn_hidden / options_.esp;
    mi.moe_buffer_bytes = buffers;
    out[g] = workload::memory_footprint(m, ctx.training, mi);
  }
  return out;
}

ProgramSize ParmStrategy::program_per_iteration(const StrategyContext& ctx) const {
  using P = ProgramSize;
  const double g = ctx.topology.gpu_count(), mp = options_.mp;
  const ParmGroups groups = ParmGroups::build(ctx.topology.gpu_count(), options_.mp, options_.esp, options_.placement);
  // Per GPU, layer and microbatch: ≤ 12 computes, the attention's MP all-reduce each way, and the
  // schedule's collectives (the header's list): the baseline's EP all-to-alls and ESP all-gathers
  // and all-reduces, S1's grid all-to-alls and MP all-gathers, S2's by SAA in each direction P
  // grid phases (the first a whole all-to-all) each with its MP gather, or without SAA as S1's.
  P per_layer = P::kernels(12) + P::collective(2, mp);
  switch (schedule(ctx)) {
    case Schedule::Baseline: per_layer += P::collective(4, groups.n_ep) + P::collective(4, groups.n_esp); break;
    case Schedule::S1: per_layer += P::collective(4, g) + P::collective(2, mp); break;
    case Schedule::S2:
      per_layer += options_.saa ? P::collective(2 * g, g) + P::collective(2 * g, mp) : P::collective(4, g) + P::collective(2, mp);
      break;
  }
  // Per GPU and iteration: each layer's dense gradients and the vocabulary's over the
  // data-parallel groups (same MP rank), and 8 computes (the vocabulary ends' gradients, the
  // optimizer and its waits).
  const double layers = ctx.model.layers;
  const P per_iteration = (layers + 1) * P::collective(1, g / mp) + P::kernels(layers + 7);
  return g * (ctx.training.microbatches * layers * per_layer + per_iteration);
}

std::vector<Alternative> ParmStrategy::alternatives(const StrategyContext&) const {
  if (options_.schedule) return {};
  return {{"S1", {{"schedule", "s1"}}}, {"S2", {{"schedule", "s2"}}}};
}

namespace {

// The communication of `comms` with this collective over this group; the n-th such one.
const Communication* find(const std::vector<Communication>& comms, Collective collective, Group group, int nth = 0) {
  for (const auto& c : comms)
    if (c.collective == collective && c.group == group && nth-- == 0) return &c;
  return nullptr;
}

}  // namespace

parallel::PlanPtr ParmStrategy::plan(const StrategyContext& ctx, int, const parallel::RunState&) {
  if (plan_) return plan_;
  using parallel::MoePoint;
  using parallel::StreamRole;
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const std::uint32_t gpus = ctx.topology.gpu_count();
  const ParmInputs in = inputs(ctx);
  const Schedule s = schedule(ctx);
  const ParmGroups groups = ParmGroups::build(gpus, options_.mp, options_.esp, options_.placement);
  const int mp = options_.mp;
  const double tokens = t.tokens_per_microbatch();
  std::vector<std::uint32_t> all(gpus);
  std::iota(all.begin(), all.end(), 0u);
  const auto mp_family = parallel::family(groups.mp), ep_family = parallel::family(groups.ep),
             esp_family = parallel::family(groups.esp);

  auto plan = std::make_shared<parallel::IterationPlan>();
  plan->optimizer = ep::optimizer_placement(ctx);
  plan->streams = parallel::streams_for(
      {StreamRole::Compute, StreamRole::Dispatch, StreamRole::Combine, StreamRole::Gradient, StreamRole::Side}, plan->optimizer,
      t.offload_modules != 0);
  plan->vocabulary = m.vocab > 0;
  plan->pipeline = parallel::single_stage(gpus, m.layers);
  // Attention and dense FFNs are tensor-parallel over the MP group (Megatron-LM).
  plan->tensor_parallel = {mp, mp > 1 ? mp_family : nullptr, ctx.all_reduce_algorithm, StreamRole::Dispatch, "MP-AllReduce"};

  // The paper's communications of this schedule (parm_model.hpp) at their places in the MoE block:
  // AG brings x/n per rank, AR reduces x, A2A sends x/n to each rank (DeepSpeed pads to capacity).
  const auto comms = communications(in, s);
  auto moe = std::make_shared<parallel::MoeLayerPlan>();
  const auto step = [&](const Communication& c, const parallel::FamilyPtr& family, double n, std::string name, StreamRole stream) {
    parallel::CollectiveStep st{std::move(name), network::CollectiveKind::AllGather, network::Algorithm::Ring, c.bytes / n,
                                family, stream, nullptr};
    if (c.collective == Collective::AllReduce) {
      st.kind = network::CollectiveKind::AllReduce;
      st.algorithm = ctx.all_reduce_algorithm;
      st.bytes = c.bytes;
    }
    return st;
  };
  const auto at = [&](MoePoint p) -> std::vector<parallel::CollectiveStep>& { return moe->at[static_cast<int>(p)]; };
  const Communication* a2a = nullptr;
  if (s == Schedule::Baseline) {
    a2a = find(comms, Collective::AllToAll, Group::EP);
    for (const auto& g : groups.ep) moe->dispatch.push_back({g, nullptr});
    if (const Communication* ag = find(comms, Collective::AllGather, Group::ESP)) {
      at(MoePoint::BeforeGate).push_back(step(*ag, esp_family, groups.n_esp, "ESP-AllGather", StreamRole::Dispatch));
      // The ESP-Split after the combine is local; its backward gathers the gradients.
      at(MoePoint::BeforeOutputGrad).push_back(step(*ag, esp_family, groups.n_esp, "ESP-Split AllGather", StreamRole::Combine));
    }
    if (const Communication* ar = find(comms, Collective::AllReduce, Group::ESP)) {
      at(MoePoint::AfterExperts).push_back(step(*ar, esp_family, groups.n_esp, "ESP-AllReduce", StreamRole::Combine));
      // Backward: the all-reduce of the input gradients' partial sums (Megatron's conjugate of the copy).
      at(MoePoint::AfterExpertGrads).push_back(step(*ar, esp_family, groups.n_esp, "ESP-AllReduce", StreamRole::Dispatch));
    }
  } else {
    a2a = find(comms, Collective::AllToAll, Group::EP_ESP);
    moe->dispatch.push_back({all, nullptr});
    if (const Communication* ag = find(comms, Collective::AllGather, Group::MP)) {
      if (s == Schedule::S1) {
        // MP-AllGather(BLM) after the combine; its backward moves to the MP-Split's, after the gate.
        at(MoePoint::AfterOutput).push_back(step(*ag, mp_family, mp, "MP-AllGather", StreamRole::Combine));
        at(MoePoint::AfterGateGrad).push_back(step(*ag, mp_family, mp, "MP-AllGather", StreamRole::Dispatch));
      } else if (options_.saa) {
        // SAA (§III-D, Fig. 5): the grid all-to-all in P phases, phase i sending to rank r + i; each
        // phase's slice all-gathered in the MP group during the next, 1/P of AG_MP(ETM) each.
        auto pg = std::make_shared<parallel::PhasedGather>();
        pg->groups = mp_family;
        pg->bytes_per_phase = ag->bytes / mp / gpus;
        pg->stream = StreamRole::Side;
        pg->name = "MP-AllGather (SAA)";
        const double per_pair = a2a->bytes / gpus;
        for (std::uint32_t i = 1; i < gpus; ++i) {
          std::vector<double> dense(static_cast<std::size_t>(gpus) * gpus, 0.0);
          for (std::uint32_t r = 0; r < gpus; ++r) dense[static_cast<std::size_t>(r) * gpus + (r + i) % gpus] = per_pair;
          pg->phases.push_back(std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(gpus, std::move(dense))));
        }
        moe->phased_gather = std::move(pg);
      } else {
        // AAS: the all-gather after the all-to-all.
        at(MoePoint::AfterCombine).push_back(step(*ag, mp_family, mp, "MP-AllGather", StreamRole::Combine));
        at(MoePoint::AfterDispatchGrad).push_back(step(*ag, mp_family, mp, "MP-AllGather", StreamRole::Dispatch));
      }
    }
  }
  moe->all_to_all = network::Algorithm::Direct;
  moe->padded = true;
  moe->padded_bytes_per_pair = a2a->bytes / static_cast<double>(moe->dispatch.front().gpus.size());
  moe->local_experts = m.experts / static_cast<double>(groups.n_ep);
  moe->padded_tokens = expert_tokens(in, s);
  moe->padded_token_copies = gpus * tokens / mp * m.top_k;  // distinct tokens: MP ranks share theirs
  moe->gate_tokens = gate_tokens(in, s);
  moe->combine_tokens = s == Schedule::Baseline ? tokens * groups.n_esp : s == Schedule::S1 ? tokens / mp : tokens;
  moe->expert_ffn_hidden = m.ffn_hidden / options_.esp;
  plan->moe.resize(m.layers);
  for (int l = 0; l < m.layers; ++l)
    if (m.is_moe(l)) plan->moe[l] = moe;

  // Dense gradients: all-reduced over the data-parallel groups (same MP rank).
  auto& gp = plan->gradients;
  gp.timing = options_.gradient_sync == GradientSync::None          ? parallel::GradientTiming::None
              : options_.gradient_sync == GradientSync::AfterBackward ? parallel::GradientTiming::AfterBackward
                                                                      : parallel::GradientTiming::Overlap;
  gp.dense_groups = parallel::family(groups.dp);
  gp.algorithm = ctx.all_reduce_algorithm;
  for (int l = 0; l < m.layers; ++l)
    gp.dense_params.push_back(m.attention_params() / mp + m.norm_params() +
                              (m.is_moe(l) ? m.gate_params() : m.dense_ffn_params() / mp));
  gp.embedding_params = gp.head_params = m.embedding_params() / 2 / mp;  // one stage: synchronised as one bucket
  plan->optimizer_params.assign(gpus, params_on_gpu(ctx));
  plan->tokens = static_cast<double>(gpus / static_cast<std::uint32_t>(mp)) * tokens * t.microbatches;
  plan_ = plan;
  return plan_;
}

schema::Json ParmStrategy::describe(const StrategyContext& ctx) const {
  const ParmInputs in = inputs(ctx);
  const AlgorithmOneInputs a = algorithm_one_inputs(ctx);
  const Choice c = choose_schedule(in, a.params());
  const Schedule s = options_.schedule ? *options_.schedule : c.schedule;
  const auto ab = [](const SourcedAlphaBeta& v) {
    schema::Json j = {{"alpha_us", v.value.alpha * 1e6}, {"beta_s_per_byte", v.value.beta}, {"source", v.source}};
    if (v.source == "network model fit") j["fit_max_relative_error"] = v.fit_error;
    return j;
  };
  schema::Json j;
  j["mp_size"] = options_.mp;
  j["ep_size"] = in.n_ep;
  j["esp_size"] = options_.esp;
  j["placement"] = options_.placement == Placement::EspInNode ? "esp_in_node" : "ep_in_node";
  j["schedule"] = options_.schedule ? to_string(*options_.schedule) : "auto";
  j["choice"] = to_string(s);
  j["saa"] = options_.saa;
  j["tokens_per_expert"] = in.tokens_per_expert();
  j["algorithm1"] = {{"t_d1_ms", c.t_d1 * 1e3},
                     {"t_d2_ms", c.t_d2 * 1e3},
                     {"choice", to_string(c.schedule)},
                     {"ag_mp", ab(a.ag_mp)},
                     {"a2a_ep_esp", ab(a.a2a_ep_esp)},
                     {"overlap", ab(a.overlap)}};
  schema::Json list = schema::Json::array();
  for (const auto& comm : communications(in, s))
    list.push_back({{"name", comm.name}, {"bytes_per_gpu", comm.bytes}, {"simultaneous", comm.overlapped}});
  j["forward_communications"] = list;
  if (ctx.calibration) j["calibration"] = ctx.calibration->name;
  return j;
}

}  // namespace moesim::strategies::parm
