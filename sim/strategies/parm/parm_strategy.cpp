#include "sim/strategies/parm/parm_strategy.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <numeric>

#include "sim/calibration/line_fit.hpp"
#include "sim/core/error.hpp"
#include "sim/strategies/ep/ep_costs.hpp"

namespace moesim::strategies::parm {

using engine::Phase;
using engine::TaskId;
using engine::WorkKind;
using network::CollectiveKind;
namespace sc = moesim::schema;

StrategyInfo info() {
  StrategyInfo s;
  s.name = "parm";
  s.description = "Parm: MP+EP+ESP with MP paused in MoE layers (S1/S2, fused EP&ESP all-to-all, SAA) or DeepSpeed's baseline";
  s.paper = "Parm (seed 003): baseline Fig. 3a, S1 Fig. 3b, S2 Fig. 3c, SAA §III-D, Algorithm 1 §V";
  s.options = sc::object({
      sc::required("name", sc::enumeration({"parm"}), "the strategy name"),
      sc::optional("mp_size", sc::integer(1), 1, "N_MP: GPUs per model-parallel (tensor-parallel) group"),
      sc::optional("esp_size", sc::integer(1), 1,
                   "N_ESP: GPUs each expert is sharded over; N_EP = GPUs / N_ESP must divide the experts"),
      sc::optional("placement", sc::enumeration({"esp_in_node", "ep_in_node"}), "esp_in_node",
                   "§IV-A: consecutive GPUs (one node when they fit) form the ESP groups, or the EP groups"),
      sc::optional("schedule", sc::enumeration({"auto", "baseline", "s1", "s2"}), "auto",
                   "baseline (DeepSpeed-MoE, Fig. 3a), s1 (Fig. 3b), s2 (Fig. 3c), or auto (Algorithm 1 picks S1 "
                   "or S2; both are also simulated and reported)"),
      sc::optional("saa", sc::boolean(), true,
                   "S2 runs its all-to-all and MP all-gather simultaneously by phases (SAA, §III-D); false: one "
                   "after the other (AAS)"),
      sc::optional("gradient_sync", sc::enumeration({"overlap", "after_backward", "none"}), "overlap",
                   "all-reduce dense gradients as each layer's backward ends, all after backward, or not at all "
                   "(Parm §VI-A times layers without it)"),
  });
  s.make = [](const sc::Json& o) {
    ParmOptions opt;
    opt.mp = o.at("mp_size").get<int>();
    opt.esp = o.at("esp_size").get<int>();
    opt.placement = o.at("placement") == "ep_in_node" ? Placement::EpInNode : Placement::EspInNode;
    const std::string sched = o.at("schedule").get<std::string>();
    if (sched == "baseline") opt.schedule = Schedule::Baseline;
    if (sched == "s1") opt.schedule = Schedule::S1;
    if (sched == "s2") opt.schedule = Schedule::S2;
    opt.saa = o.at("saa").get<bool>();
    const std::string gs = o.at("gradient_sync").get<std::string>();
    opt.gradient_sync = gs == "none" ? GradientSync::None : gs == "after_backward" ? GradientSync::AfterBackward
                                                                                  : GradientSync::Overlap;
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
  in.bytes_per_element = cluster::dtype_bytes(ctx.training.dtype);
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
  // as one exchange (each MP rank's ETM/N_MP piece to its N_MP − 1 peers beside the all-to-all's
  // y/(N_MP·P) to every GPU), so the two add up where they share links (one PCIe switch) and
  // overlap where they do not (all-to-all across nodes, all-gather inside).
  const auto overlap = [&](double y) {
    std::vector<double> dense(static_cast<std::size_t>(p) * p, y / options_.mp / p);
    for (const auto& group : g.mp)
      for (std::uint32_t s : group)
        for (std::uint32_t d : group)
          if (s != d) dense[static_cast<std::size_t>(s) * p + d] += y / options_.esp / options_.mp;
    return alone(ctx, CollectiveKind::AllToAll, grid, 0,
                 std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(p, std::move(dense))));
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

std::size_t ParmStrategy::tasks_per_iteration(const StrategyContext& ctx) const {
  const std::size_t g = ctx.topology.gpu_count();
  // Per GPU, layer and microbatch: ≤ 12 computes and 12 collectives, and 2 SAA rounds of P phases
  // with their all-gathers.
  return g * (static_cast<std::size_t>(ctx.training.microbatches) * ctx.model.layers * (24 + 4 * g) +
              ctx.model.layers * 2 + 8);
}

std::vector<Alternative> ParmStrategy::alternatives(const StrategyContext&) const {
  if (options_.schedule) return {};
  return {{"S1", {{"schedule", "s1"}}}, {"S2", {{"schedule", "s2"}}}};
}

void ParmStrategy::build_iteration(const StrategyContext& ctx, ProgramBuilder& pb, int it) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const auto& topo = ctx.topology;
  const std::uint32_t gpus = topo.gpu_count();
  const double b = cluster::dtype_bytes(t.dtype);
  const ParmInputs in = inputs(ctx);
  const Schedule s = schedule(ctx);
  const ParmGroups groups = ParmGroups::build(gpus, options_.mp, options_.esp, options_.placement);
  const int mp = options_.mp;
  const double tokens = t.tokens_per_microbatch();

  // Group families, interned once per iteration.
  const auto intern = [&](const std::vector<std::vector<std::uint32_t>>& family) {
    std::vector<network::GroupId> ids;
    for (const auto& g : family)
      if (g.size() > 1) ids.push_back(pb.group(g));
    return ids;
  };
  std::vector<std::uint32_t> all(gpus);
  std::iota(all.begin(), all.end(), 0u);
  const auto mp_groups = intern(groups.mp), ep_groups = intern(groups.ep), esp_groups = intern(groups.esp),
             dp_groups = intern(groups.dp), grid = intern({all});

  // The task chain of every GPU: each step waits for the GPU's previous one.
  // `join[g]`: a second task the next compute waits for (SAA's last all-gather).
  std::vector<TaskId> cur(gpus, engine::kNone), join(gpus, engine::kNone);
  std::vector<TaskId> members;
  const auto step_compute = [&](const std::function<Time(std::uint32_t)>& duration, const engine::Label& label) {
    for (std::uint32_t g = 0; g < gpus; ++g) {
      const TaskId task = pb.compute(g, duration(g), label);
      if (cur[g] != engine::kNone) pb.depend(cur[g], task);
      if (join[g] != engine::kNone) pb.depend(join[g], task);
      cur[g] = task;
      join[g] = engine::kNone;
    }
  };
  // One collective per group of `family`; `after[g]` (default: the chain) gates member g.
  const auto step_collective = [&](const std::vector<network::GroupId>& family, network::CollectiveOp op,
                                   std::uint8_t stream, const engine::Label& label, std::vector<TaskId>& out,
                                   const std::vector<TaskId>& after) {
    for (network::GroupId id : family) {
      op.group = id;
      pb.collective(op, stream, label, members);
      const auto& gs = pb.group_members(id);
      for (std::size_t r = 0; r < gs.size(); ++r) {
        if (after[gs[r]] != engine::kNone) pb.depend(after[gs[r]], members[r]);
        out[gs[r]] = members[r];
      }
    }
  };
  const auto chain_collective = [&](const std::vector<network::GroupId>& family, const network::CollectiveOp& op,
                                    std::uint8_t stream, const engine::Label& label) {
    step_collective(family, op, stream, label, cur, cur);
  };
  const auto cm_of = [&](std::uint32_t g) -> const compute::ComputeModel& { return ctx.compute[topo.kind_index(g)]; };

  // The paper's communications of this schedule (parm_model.hpp), as collective operations: AG
  // brings x/n per rank, AR reduces x, A2A sends x/n to each rank (DeepSpeed pads to capacity).
  const auto comms = communications(in, s);
  const auto op_of = [&](const Communication& c, std::size_t group_size) {
    const double n = static_cast<double>(group_size);
    switch (c.collective) {
      case Collective::AllGather: return network::CollectiveOp{CollectiveKind::AllGather, network::Algorithm::Ring, 0, c.bytes / n, nullptr};
      case Collective::AllReduce: return network::CollectiveOp{CollectiveKind::AllReduce, ctx.all_reduce_algorithm, 0, c.bytes, nullptr};
      case Collective::AllToAll: break;
    }
    return network::CollectiveOp{CollectiveKind::AllToAll, network::Algorithm::Direct, 0, 0,
                                 std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::uniform(
                                     static_cast<std::uint32_t>(group_size), c.bytes / n))};
  };
  const auto family_of = [&](Group g) -> const std::vector<network::GroupId>& {
    switch (g) {
      case Group::MP: return mp_groups;
      case Group::EP: return ep_groups;
      case Group::ESP: return esp_groups;
      case Group::EP_ESP: break;
    }
    return grid;
  };
  const auto size_of = [&](Group g) -> std::size_t {
    switch (g) {
      case Group::MP: return static_cast<std::size_t>(groups.n_mp);
      case Group::EP: return static_cast<std::size_t>(groups.n_ep);
      case Group::ESP: return static_cast<std::size_t>(groups.n_esp);
      case Group::EP_ESP: break;
    }
    return gpus;
  };
  const auto find = [&](std::string_view name) -> const Communication* {
    for (const auto& c : comms)
      if (c.name == name) return &c;
    return nullptr;
  };
  const auto kind_of = [](Collective c) {
    return c == Collective::AllGather ? WorkKind::AllGather : c == Collective::AllReduce ? WorkKind::AllReduce : WorkKind::AllToAll;
  };
  // Runs the named communication (if the schedule has it and its group has more than one GPU).
  const auto comm = [&](std::string_view name, Phase phase, std::uint8_t stream, int layer, int mb, std::string_view label) {
    const Communication* c = find(name);
    if (!c || size_of(c->group) <= 1) return;
    chain_collective(family_of(c->group), op_of(*c, size_of(c->group)), stream,
                     pb.label(phase, kind_of(c->collective), label, it, layer, mb));
  };

  // SAA (§III-D, Fig. 5): the grid all-to-all in P phases, phase i sending to rank r+i; the slice
  // a GPU holds after phase i (its own at i = 0) is all-gathered in its MP group during phase i+1,
  // on the side stream. Each phase's all-gather moves 1/P of AG_MP(ETM).
  std::vector<network::TrafficPtr> phase_traffic;
  const Communication* a2a_comm = find("EP&ESP-AlltoAll combine");
  const Communication* ag_comm = find("MP-AllGather");
  if (s == Schedule::S2 && options_.saa && mp > 1) {
    const double per_pair = a2a_comm->bytes / gpus;
    phase_traffic.resize(gpus);
    for (std::uint32_t i = 1; i < gpus; ++i) {
      std::vector<double> dense(static_cast<std::size_t>(gpus) * gpus, 0.0);
      for (std::uint32_t r = 0; r < gpus; ++r) dense[static_cast<std::size_t>(r) * gpus + (r + i) % gpus] = per_pair;
      phase_traffic[i] = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(gpus, std::move(dense)));
    }
  }
  std::vector<TaskId> a2a_done(gpus), ag_done(gpus);
  const auto simultaneous_a2a_ag = [&](Phase phase, int layer, int mb, std::string_view a2a_name) {
    const auto la = pb.label(phase, WorkKind::AllToAll, a2a_name, it, layer, mb);
    const auto lg = pb.label(phase, WorkKind::AllGather, "MP-AllGather (SAA)", it, layer, mb);
    const network::CollectiveOp ag{CollectiveKind::AllGather, network::Algorithm::Ring, 0, ag_comm->bytes / mp / gpus, nullptr};
    a2a_done = cur;
    step_collective(mp_groups, ag, kMigrationStream, lg, ag_done, cur);  // the GPU's own slice
    for (std::uint32_t i = 1; i < gpus; ++i) {
      step_collective(grid, {CollectiveKind::AllToAll, network::Algorithm::Direct, 0, 0, phase_traffic[i]}, kCombineStream, la,
                      a2a_done, a2a_done);
      step_collective(mp_groups, ag, kMigrationStream, lg, ag_done, a2a_done);
    }
    cur = a2a_done;
    join = ag_done;  // the compute after SAA waits for both streams
  };

  // Compute durations.
  const double gate_tok = gate_tokens(in, s);
  const double exp_tok = expert_tokens(in, s);
  const double local_experts = m.experts / static_cast<double>(groups.n_ep);
  const double combine_tok = s == Schedule::Baseline ? tokens * groups.n_esp : s == Schedule::S1 ? tokens / mp : tokens;
  const auto attention = [&](std::uint32_t g) { return ep::attention_time(cm_of(g), m, t, mp); };
  const auto attention_backward = [&](std::uint32_t g) { return ep::attention_backward_time(cm_of(g), m, t, mp); };
  const auto gate = [&](std::uint32_t g) { return ep::gate_time(cm_of(g), m, gate_tok, b); };
  const auto experts = [&](std::uint32_t g) {
    return static_cast<Time>(std::llround(local_experts * static_cast<double>(ep::ffn_time(
                                                              cm_of(g), m, exp_tok / local_experts, m.ffn_hidden / options_.esp))));
  };
  const auto combine = [&](std::uint32_t g) { return ep::combine_time(cm_of(g), m, combine_tok, b); };
  const auto dense_ffn = [&](std::uint32_t g) {
    return ep::ffn_time(cm_of(g), m, tokens, m.dense_ffn_hidden / mp) + cm_of(g).memory_bound(2 * tokens * m.hidden * b);
  };
  const auto embed = [&](std::uint32_t g) { return cm_of(g).memory_bound(2 * tokens * m.hidden * b); };
  const auto lm_head = [&](std::uint32_t g) {
    return cm_of(g).gemm(tokens, m.vocab / mp, m.hidden) + cm_of(g).memory_bound(2 * tokens * m.vocab / mp * 4);
  };
  const auto bwd = [&](const std::function<Time(std::uint32_t)>& f) {
    return [&, f](std::uint32_t g) { return cm_of(g).backward(f(g)); };
  };
  // Megatron-LM's tensor-parallel all-reduce of the block output (forward) or input gradient
  // (backward): one per attention or dense FFN block and direction.
  const network::CollectiveOp mp_all_reduce{CollectiveKind::AllReduce, ctx.all_reduce_algorithm, 0, tokens * m.hidden * b,
                                            nullptr};
  const auto tensor_parallel_block = [&](const std::function<Time(std::uint32_t)>& f, Phase phase, WorkKind kind,
                                         std::string_view name, int layer, int mb) {
    step_compute(f, pb.label(phase, kind, name, it, layer, mb));
    if (mp > 1) chain_collective(mp_groups, mp_all_reduce, kDispatchStream, pb.label(phase, WorkKind::AllReduce, "MP-AllReduce", it, layer, mb));
  };

  // Dense gradients: all-reduced over the data-parallel groups (same MP rank); the optimizer
  // waits for each GPU's last one.
  std::vector<TaskId> last_sync(gpus, engine::kNone);
  std::vector<TaskId> grad_tasks(gpus);
  const auto sync_dense = [&](int layer, double params, const std::vector<TaskId>& after) {
    if (options_.gradient_sync == GradientSync::None || params <= 0 || dp_groups.empty()) return;
    step_collective(dp_groups, {CollectiveKind::AllReduce, ctx.all_reduce_algorithm, 0, params * b, nullptr}, kGradientStream,
                    pb.label(Phase::GradSync, WorkKind::AllReduce, "dense_grads", it, layer), grad_tasks, after);
    last_sync = grad_tasks;
  };
  const auto layer_dense_params = [&](int layer) {
    return m.attention_params() / mp + m.norm_params() + (m.is_moe(layer) ? m.gate_params() : m.dense_ffn_params() / mp);
  };

  double routed = 0, dropped = 0;
  for (int mb = 0; mb < t.microbatches; ++mb) {
    const bool last_mb = mb + 1 == t.microbatches;
    // Forward.
    if (m.vocab > 0) step_compute(embed, pb.label(Phase::Forward, WorkKind::OtherCompute, "embedding", it, 0, mb));
    for (int layer = 0; layer < m.layers; ++layer) {
      if (m.attention) tensor_parallel_block(attention, Phase::Forward, WorkKind::Attention, "attention", layer, mb);
      if (!m.is_moe(layer)) {
        tensor_parallel_block(dense_ffn, Phase::Forward, WorkKind::DenseFfn, "dense_ffn", layer, mb);
        continue;
      }
      // Capacity drops of this layer's routing (the padded all-to-alls do not change with them):
      // the share a gate over gate_tok tokens drops above T per expert.
      const auto plan = workload::plan_dispatch(ctx.routing.popularity(it, layer), gate_tok, m.top_k, t.capacity_factor);
      const double copies = gpus * tokens / mp * m.top_k;  // distinct tokens: MP ranks share theirs
      routed += copies;
      if (plan.kept + plan.dropped > 0) dropped += copies * plan.dropped / (plan.kept + plan.dropped);

      const auto fwd = [&](std::string_view name, std::uint8_t stream, std::string_view label) {
        comm(name, Phase::Forward, stream, layer, mb, label);
      };
      fwd("ESP-AllGather", kDispatchStream, "ESP-AllGather");
      step_compute(gate, pb.label(Phase::Forward, WorkKind::Gate, "gate", it, layer, mb));
      fwd("EP-AlltoAll dispatch", kDispatchStream, "dispatch");
      fwd("EP&ESP-AlltoAll dispatch", kDispatchStream, "dispatch");
      step_compute(experts, pb.label(Phase::Forward, WorkKind::Expert, "experts", it, layer, mb));
      fwd("ESP-AllReduce", kCombineStream, "ESP-AllReduce");
      fwd("EP-AlltoAll combine", kCombineStream, "combine");
      if (s == Schedule::S2 && !phase_traffic.empty()) {
        simultaneous_a2a_ag(Phase::Forward, layer, mb, "combine");
      } else {
        fwd("EP&ESP-AlltoAll combine", kCombineStream, "combine");
        if (s == Schedule::S2) fwd("MP-AllGather", kCombineStream, "MP-AllGather");
      }
      step_compute(combine, pb.label(Phase::Forward, WorkKind::OtherCompute, "combine_output", it, layer, mb));
      if (s == Schedule::S1) fwd("MP-AllGather", kCombineStream, "MP-AllGather");
    }
    if (m.vocab > 0) {
      step_compute(lm_head, pb.label(Phase::Forward, WorkKind::OtherCompute, "lm_head", it, m.layers, mb));
      step_compute(bwd(lm_head), pb.label(Phase::Backward, WorkKind::OtherCompute, "lm_head", it, m.layers, mb));
    }
    // Backward: each forward communication's conjugate, in reverse order.
    for (int layer = m.layers - 1; layer >= 0; --layer) {
      if (!m.is_moe(layer)) {
        tensor_parallel_block(bwd(dense_ffn), Phase::Backward, WorkKind::DenseFfn, "dense_ffn", layer, mb);
      } else {
        const auto back = [&](std::string_view name, std::uint8_t stream, std::string_view label) {
          comm(name, Phase::Backward, stream, layer, mb, label);
        };
        back("ESP-AllGather", kCombineStream, "ESP-Split AllGather");  // the baseline's ESP-Split backward
        step_compute(bwd(combine), pb.label(Phase::Backward, WorkKind::OtherCompute, "combine_output", it, layer, mb));
        back("EP-AlltoAll combine", kCombineStream, "combine");
        back("EP&ESP-AlltoAll combine", kCombineStream, "combine");
        step_compute(bwd(experts), pb.label(Phase::Backward, WorkKind::Expert, "experts", it, layer, mb));
        back("ESP-AllReduce", kDispatchStream, "ESP-AllReduce");
        back("EP-AlltoAll dispatch", kDispatchStream, "dispatch");
        if (s == Schedule::S2 && !phase_traffic.empty()) {
          simultaneous_a2a_ag(Phase::Backward, layer, mb, "dispatch");
        } else {
          back("EP&ESP-AlltoAll dispatch", kDispatchStream, "dispatch");
          if (s == Schedule::S2) back("MP-AllGather", kDispatchStream, "MP-AllGather");
        }
        step_compute(bwd(gate), pb.label(Phase::Backward, WorkKind::Gate, "gate", it, layer, mb));
        if (s == Schedule::S1) back("MP-AllGather", kDispatchStream, "MP-AllGather");
      }
      if (m.attention) tensor_parallel_block(attention_backward, Phase::Backward, WorkKind::Attention, "attention", layer, mb);
      if (last_mb && options_.gradient_sync == GradientSync::Overlap) sync_dense(layer, layer_dense_params(layer), cur);
    }
    if (m.vocab > 0) step_compute(bwd(embed), pb.label(Phase::Backward, WorkKind::OtherCompute, "embedding", it, 0, mb));
  }
  if (options_.gradient_sync == GradientSync::AfterBackward)
    for (int layer = m.layers - 1; layer >= 0; --layer) sync_dense(layer, layer_dense_params(layer), cur);
  sync_dense(0, m.embedding_params() / mp, cur);
  totals_.routed_token_copies += routed;
  totals_.dropped_token_copies += dropped;
  totals_.dropped_per_iteration.push_back(dropped);

  const double params = params_on_gpu(ctx);
  auto lo = pb.label(Phase::Optimizer, WorkKind::Optimizer, "optimizer", it, 0);
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const TaskId o = pb.compute(g, cm_of(g).optimizer_step(params), lo);
    pb.depend(cur[g], o);
    if (last_sync[g] != engine::kNone) pb.depend(last_sync[g], o);
  }
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
