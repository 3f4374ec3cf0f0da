#include "sim/blocks/token_routing.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "sim/blocks/fused_dispatch.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/core/error.hpp"
#include "sim/core/parallel.hpp"
#include "sim/network/collective_plan.hpp"
#include "sim/workload/ep_buffers.hpp"
#include "sim/workload/memory.hpp"

namespace moesim::blocks {

namespace {

// What GPU g's experts recompute over `rows` token copies per local expert (FFN size `ffn`) before
// their backward: their whole forward (routed_experts), else the activation (moe_act), else
// nothing; and the part of it issued after a sync with the GPU.
struct Recomputed {
  compute::Work work, after_sync;
};
Recomputed recomputed_activation(const Context& ctx, std::uint32_t g, std::span<const double> rows, double ffn) {
  if (ctx.training.recomputes(workload::RecomputeModule::RoutedExperts)) {
    const ExpertsWork w = experts_work(ctx.compute_of(g), ctx.model, rows, ffn);
    return {w.forward, w.forward_after_sync};
  }
  if (!ctx.training.recomputes(workload::RecomputeModule::MoeAct)) return {};
  double copies = 0;
  for (const double r : rows)
    if (r > 0) copies += r;
  const compute::ComputeModel& cm = ctx.compute_of(g);
  return {expert_activation_time(cm, ctx.model, copies, ffn), expert_activation_after_sync(cm, ctx.model, copies, ffn)};
}

// GPU g's expert work over `rows` token copies per local expert (FFN size `ffn`), with `regroup`
// around it, the activation it recomputes and the bytes it offloads.
ExpertChunk expert_chunk(const Context& ctx, std::uint32_t g, std::span<const double> rows, double ffn,
                         compute::Work regroup) {
  double copies = 0;
  for (const double r : rows) copies += std::max(0.0, r);
  const double offloaded = copies * workload::offloaded_bytes(ctx.model, ctx.training, 1, false, ffn).per_expert_copy;
  const Recomputed again = recomputed_activation(ctx, g, rows, ffn);
  return {experts_work(ctx.compute_of(g), ctx.model, rows, ffn), regroup, again.work, again.after_sync, offloaded};
}

// Each rank's replicas as (expert, share), in expert order.
using RankReplicas = std::vector<std::vector<std::pair<int, double>>>;
RankReplicas by_rank(const parallel::ReplicaTable& table, std::size_t ranks) {
  RankReplicas out(ranks);
  for (std::size_t e = 0; e < table.of_expert.size(); ++e)
    for (const parallel::Replica& r : table.of_expert[e]) out.at(r.rank).emplace_back(static_cast<int>(e), r.share);
  return out;
}

// A tiered group's sources in a fixed number of contiguous ranges, each drawn from a seed of its
// own (taken in order from the layer's stream) on core::for_chunks_in_order's threads, and each
// range's sums merged in range order: the same draws and bytes whatever the thread count.
class SourceChunks {
 public:
  static constexpr std::size_t kChunks = 64;
  // What one range of sources adds up to (per expert or bin), before it is merged.
  struct Part {
    std::optional<network::TrafficMatrix::TieredBuilder> builder;
    std::vector<double> routed, received;
    double kept = 0, dropped = 0;
    workload::SparseCopies draw;
    std::vector<std::uint64_t> counts;  // WholeCopies' routed and kept copies per expert, packed
  };
  SourceChunks(std::uint32_t sources, Rng& rng) : sources_(sources), seeds_(std::min<std::size_t>(kChunks, sources)) {
    for (auto& s : seeds_) s = rng.bits();
  }
  // per_source(src, sampler, part) for every source, then merge(part) per range in order; parts
  // hold `accumulators` zeros per vector and (with `like`) a builder over its tiers. Calling it
  // again replays the same draws.
  // The most sources one range holds.
  std::size_t most_per_range() const { return (sources_ + seeds_.size() - 1) / std::max<std::size_t>(seeds_.size(), 1); }
  template <typename PerSource, typename Merge>
  void run(const std::vector<bool>& source, std::size_t accumulators, const PerSource& per_source, const Merge& merge,
           const network::TrafficMatrix::TieredBuilder* like = nullptr) const {
    std::vector<Part> parts(core::chunk_slots(seeds_.size()));
    for (Part& p : parts) {
      p.routed.assign(accumulators, 0.0);
      p.received.assign(accumulators, 0.0);
      if (like) p.builder.emplace(like->tiers());
    }
    core::for_chunks_in_order(
        seeds_.size(),
        [&](std::size_t c, unsigned slot) {
          workload::SparseCopySampler sampler(seeds_[c]);
          const auto first = static_cast<std::uint32_t>(c * sources_ / seeds_.size()),
                     last = static_cast<std::uint32_t>((c + 1) * sources_ / seeds_.size());
          for (std::uint32_t src = first; src < last; ++src)
            if (source[src]) per_source(src, sampler, parts[slot]);
        },
        [&](std::size_t, unsigned slot) {
          Part& p = parts[slot];
          merge(p);
          std::fill(p.routed.begin(), p.routed.end(), 0.0);
          std::fill(p.received.begin(), p.received.end(), 0.0);
          p.kept = p.dropped = 0;
        });
  }

 private:
  std::size_t sources_;
  std::vector<std::uint64_t> seeds_;
};

// A replica table flattened (expert e's replicas at [first[e], first[e + 1])): the sampled
// routing of large groups walks it once per (source, expert) drawn. `ordered`: the ranks never
// decrease along it (EP's placement of consecutive experts per rank), so a source's copies, drawn
// in expert order, meet each destination in one run. `single`: one replica per expert (expert e's
// at index e).
struct FlatReplicas {
  std::vector<std::uint32_t> first, rank;
  std::vector<double> share;
  bool ordered = true, single = true;
  FlatReplicas() = default;
  explicit FlatReplicas(const parallel::ReplicaTable& table) {
    first.push_back(0);
    for (const auto& reps : table.of_expert) {
      for (const parallel::Replica& r : reps) {
        ordered = ordered && (rank.empty() || rank.back() <= r.rank);
        rank.push_back(r.rank);
        share.push_back(r.share);
      }
      first.push_back(static_cast<std::uint32_t>(rank.size()));
      single = single && first.back() == first.size() - 1;
    }
  }
};

// A replica's rank and its DC (the group's tier-0 worker), read together per copy.
struct ReplicaPlace {
  std::uint32_t rank, dc;
};

// How a tiered group's source sends what it keeps, per replica i (of FlatReplicas) and bytes:
// pair by pair into the builder; or, where the replicas are ordered (`place` given), what
// leaves the source's DC (its tier-0 worker) added up, its destinations counted as runs, and given
// to the builder once (TieredBuilder::leave_coarsest), only what stays in the DC pair by pair
// (bytes for the source itself into `own`). The bytes are the same sums; what it saves is a
// scattered add per copy, the per-copy path at 100,000 GPUs. One object per source.
class TieredSend {
 public:
  TieredSend(const FlatReplicas& flat, const ReplicaPlace* place, std::uint32_t src,
             network::TrafficMatrix::TieredBuilder& builder, double* own)
      : rank_(flat.rank.data()), place_(place), src_(src), builder_(builder), own_(own) {
    if (place_) home_ = builder.tiers()->worker.front()[src];
  }
  void operator()(std::uint32_t i, double x) {
    if (!place_) return builder_.add(src_, rank_[i], x);
    const ReplicaPlace p = place_[i];
    if (p.dc != home_) {
      if (x <= 0) return;
      leaving_ += x;
      pairs_ += p.rank != last_;
      last_ = p.rank;
    } else if (p.rank == src_) {
      own_[src_] += x;
    } else {
      builder_.add(src_, p.rank, x);
    }
  }
  // Once the source's copies are all sent.
  void finish() {
    if (place_) builder_.leave_coarsest(src_, leaving_, pairs_);
  }

 private:
  const std::uint32_t* rank_;
  const ReplicaPlace* place_;
  std::uint32_t src_, home_ = 0, last_ = UINT32_MAX;
  network::TrafficMatrix::TieredBuilder& builder_;
  double* own_;
  double leaving_ = 0;
  std::uint64_t pairs_ = 0;
};

// The per-copy path at 100,000 GPUs, where every sum a source adds to is a whole number of
// copies: a tiered group whose replicas are ordered and one per expert (share 1), each DC's ranks
// consecutive, one capacity for all experts, and whole bytes per copy. Then a source's routed and
// kept copies of an expert are one 64-bit add (routed in the high half, kept in the low; a range
// of sources' in SourceChunks::Part::counts), whether a copy leaves the source's DC is its rank's
// distance from the DC's first, and what leaves is counted in copies and made bytes once. Each sum
// is of whole numbers below 2^53, so it equals what keep_copies and TieredSend add up in doubles
// (ep-1000dc's golden is unchanged); what it saves is half the memory per expert a source's copies
// walk (a count for two doubles; a rank for a rank, a DC and a share) and the floating-point adds
// in sequence: 92 -> 72 us of CPU per source at 100,000 GPUs.
class WholeCopies {
 public:
  // nullopt where the group's routing is not of whole copies. `capacity`: one source's cap of
  // each expert (0: unlimited); `sources_per_range`: the most sources a Part adds up.
  static std::optional<WholeCopies> of(const FlatReplicas& flat, const network::RankTiers& tiers,
                                       const std::vector<double>& capacity, double copies, double bytes_per_copy,
                                       std::size_t sources_per_range) {
    const double cap = capacity.empty() ? 0.0 : capacity.front();
    const bool whole = flat.ordered && flat.single && bytes_per_copy > 0 && bytes_per_copy == std::floor(bytes_per_copy) &&
                       std::all_of(flat.share.begin(), flat.share.end(), [](double x) { return x == 1.0; }) &&
                       std::all_of(capacity.begin(), capacity.end(), [cap](double c) { return c == cap; }) &&
                       cap == std::floor(cap) && cap < double{UINT32_MAX} &&
                       // a range's counts of an expert within 32 bits, its bytes within 2^53
                       std::round(copies) * static_cast<double>(sources_per_range) < 0x1p32 &&
                       std::round(copies) * bytes_per_copy < 0x1p53;
    if (!whole) return std::nullopt;
    // Each DC's ranks consecutive: its first rank, and the DC of each rank.
    const std::vector<std::uint32_t>& dc = tiers.worker.front();
    std::vector<std::uint32_t> first(tiers.workers.front() + 1, UINT32_MAX);
    for (std::uint32_t r = 0; r < dc.size(); ++r) {
      if (r > 0 && dc[r] != dc[r - 1] && first[dc[r]] != UINT32_MAX) return std::nullopt;  // a DC met twice
      if (first[dc[r]] == UINT32_MAX) first[dc[r]] = r;
    }
    WholeCopies out;
    out.rank_ = flat.rank.data();
    out.cap_ = cap > 0 ? static_cast<std::uint32_t>(cap) : UINT32_MAX;
    out.bytes_per_copy_ = bytes_per_copy;
    out.first_in_dc_.resize(dc.size());
    out.dc_size_.resize(dc.size());
    for (std::uint32_t r = 0; r < dc.size(); ++r) out.first_in_dc_[r] = first[dc[r]];
    for (std::uint32_t r = dc.size(); r-- > 0;)
      out.dc_size_[r] = r + 1 < dc.size() && dc[r + 1] == dc[r] ? out.dc_size_[r + 1] : r + 1 - out.first_in_dc_[r];
    return out;
  }

  // One source's copies, visited per expert in expert order (SparseCopySampler::each).
  class Send {
   public:
    Send(const WholeCopies& w, std::uint32_t src, network::TrafficMatrix::TieredBuilder& builder, double* own,
         std::uint64_t* counts)
        : rank_(w.rank_), counts_(counts), own_(own), builder_(builder), bytes_per_copy_(w.bytes_per_copy_), src_(src),
          cap_(w.cap_), first_(w.first_in_dc_[src]), size_(w.dc_size_[src]) {}
    void operator()(std::uint32_t e, double drawn) {
      const auto c = static_cast<std::uint32_t>(drawn), kept = std::min(c, cap_);
      counts_[e] += std::uint64_t{c} << 32 | kept;
      routed_ += c;
      kept_ += kept;
      const std::uint32_t r = rank_[e];
      if (r - first_ >= size_) {  // another DC
        leaving_ += kept;
        pairs_ += r != last_;
        last_ = r;
      } else if (r == src_) {
        own_[src_] += kept * bytes_per_copy_;
      } else {
        builder_.add(src_, r, kept * bytes_per_copy_);
      }
    }
    // Once the source's copies are all sent.
    void finish(SourceChunks::Part& part) {
      builder_.leave_coarsest(src_, static_cast<double>(leaving_) * bytes_per_copy_, pairs_);
      part.kept += static_cast<double>(kept_);
      part.dropped += static_cast<double>(routed_ - kept_);
    }

   private:
    const std::uint32_t* rank_;
    std::uint64_t* counts_;
    double* own_;
    network::TrafficMatrix::TieredBuilder& builder_;
    double bytes_per_copy_;
    std::uint32_t src_, cap_, first_, size_, last_ = UINT32_MAX;
    std::uint64_t routed_ = 0, kept_ = 0, leaving_ = 0, pairs_ = 0;
  };

  // A range's counts into its per-expert routed and kept copies, the counts emptied.
  static void unpack(SourceChunks::Part& part) {
    for (std::size_t e = 0; e < part.counts.size(); ++e) {
      part.routed[e] += static_cast<double>(part.counts[e] >> 32);
      part.received[e] += static_cast<double>(part.counts[e] & 0xffffffffu);
      part.counts[e] = 0;
    }
  }

 private:
  WholeCopies() = default;
  const std::uint32_t* rank_ = nullptr;
  std::uint32_t cap_ = 0;
  double bytes_per_copy_ = 0;
  std::vector<std::uint32_t> first_in_dc_, dc_size_;  // per rank: its DC's first rank and rank count
};

// The experts of a group grouped by where they are placed: experts with the same replicas (ranks
// and shares) in one bin, bins in order of their first expert.
struct ExpertBins {
  std::vector<std::vector<int>> experts;
  std::vector<std::vector<parallel::Replica>> replicas;
  ExpertBins() = default;
  explicit ExpertBins(const parallel::ReplicaTable& table) {
    std::map<std::vector<std::pair<std::uint32_t, double>>, std::size_t> index;
    for (std::size_t e = 0; e < table.of_expert.size(); ++e) {
      std::vector<std::pair<std::uint32_t, double>> key;
      for (const parallel::Replica& r : table.of_expert[e]) key.emplace_back(r.rank, r.share);
      auto [it, fresh] = index.try_emplace(std::move(key), experts.size());
      if (fresh) {
        experts.emplace_back();
        replicas.push_back(table.of_expert[e]);
      }
      experts[it->second].push_back(static_cast<int>(e));
    }
  }
};

LayerRouting route_padded(const Context& ctx, const parallel::MoeLayerPlan& lp, int it, int layer) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  LayerRouting out;
  out.expert.assign(ctx.topology.gpu_count(), {});
  std::map<std::size_t, network::TrafficPtr> even;  // by group size
  for (const auto& g : lp.dispatch) {
    auto& traffic = even[g.gpus.size()];
    if (!traffic)
      traffic = std::make_shared<network::TrafficMatrix>(
          network::TrafficMatrix::uniform(static_cast<std::uint32_t>(g.gpus.size()), lp.padded_bytes_per_pair));
    out.dispatch.push_back(traffic);
    out.combine.push_back(traffic);
  }
  // Each GPU's local experts on an even share of the padded tokens: one grouped FFN per GPU kind.
  const std::vector<double> rows(static_cast<std::size_t>(lp.local_experts), lp.padded_tokens / lp.local_experts);
  std::vector<std::optional<ExpertChunk>> by_kind(ctx.compute.size());
  for (std::uint32_t g = 0; g < ctx.topology.gpu_count(); ++g) {
    std::optional<ExpertChunk>& t = by_kind[ctx.topology.kind_index(g)];
    if (!t) t = expert_chunk(ctx, g, rows, lp.expert_ffn_hidden, {});
    out.expert[g] = *t;
  }
  // Capacity drops of this layer's routing (the padded exchanges do not change with them): the
  // share a gate over gate_tokens tokens drops above capacity.
  const auto plan = workload::plan_dispatch(ctx.routing.popularity(it, layer), lp.gate_tokens, m.top_k, t.capacity_factor);
  out.routed_copies = lp.padded_token_copies;
  const double offered = plan.kept + plan.dropped;
  if (offered > 0) out.dropped_copies = lp.padded_token_copies * plan.dropped / offered;
  out.expert_tokens.assign(m.experts, 0.0);
  out.expert_routed.assign(m.experts, 0.0);
  const auto& popularity = ctx.routing.popularity(it, layer);
  for (int e = 0; e < m.experts; ++e) {
    if (offered > 0) out.expert_tokens[e] = lp.padded_token_copies * plan.kept_per_expert[e] / offered;
    out.expert_routed[e] = lp.padded_token_copies * popularity[e];
  }
  return out;
}

}  // namespace

void LayerRouting::add(FusedTraffic traffic) {
  dispatch.push_back(std::move(traffic.dispatch));
  combine.push_back(std::move(traffic.combine));
  if (!traffic.dispatch_stages.empty() || !dispatch_stages.empty()) {
    dispatch_stages.resize(dispatch.size() - 1);
    combine_stages.resize(dispatch.size() - 1);
    dispatch_stages.push_back(std::move(traffic.dispatch_stages));
    combine_stages.push_back(std::move(traffic.combine_stages));
  }
}

void LayerRouting::share_first() {
  dispatch.resize(1);
  combine.resize(1);
  if (!dispatch_stages.empty()) {
    dispatch_stages.resize(1);
    combine_stages.resize(1);
  }
}

LayerRouting route_layer(const Context& ctx, const parallel::IterationPlan& ip, const parallel::MoeLayerPlan& lp, int it,
                         int layer, int mb) {
  if (lp.padded) return route_padded(ctx, lp, it, layer);
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const auto& topo = ctx.topology;
  const std::uint32_t gpus = topo.gpu_count();
  const int chunks = lp.chunks;
  const double b = ctx.dtype_bytes();
  const double copies = lp.gate_tokens * m.top_k;
  const bool capacity = t.capacity_factor > 0;
  // Per source, each expert's capacity (pooled: scaled by the group's sources below).
  const std::vector<double> source_capacity =
      lp.pooled_capacity ? std::vector<double>() : workload::expert_capacities(copies, t.capacity_factor, m.experts, lp.capacity_shares);
  const bool sampled = ctx.routing.sampled();

  LayerRouting out;
  out.expert.assign(gpus, {});
  out.expert_tokens.assign(m.experts, 0.0);
  out.expert_routed.assign(m.experts, 0.0);
  const std::vector<double> popularity = ctx.routing.popularity(it, layer);
  std::map<const parallel::ReplicaTable*, RankReplicas> rank_replicas;
  const auto replicas_of = [&](const parallel::DispatchGroup& g) -> const RankReplicas& {
    auto [it2, fresh] = rank_replicas.try_emplace(g.replicas.get());
    if (fresh) it2->second = by_rank(*g.replicas, g.gpus.size());
    return it2->second;
  };
  // Expert compute of GPU g (rank `rank` of its group): its local experts' FFNs as grouped GeMMs
  // over the token copies each received (experts_time: one rule for every GPU).
  std::vector<double> rows;  // one GPU's local experts' copies of this chunk, reused
  // Rank `rank`'s local experts' copies of this chunk into `rows`, in expert order. A non-blocking
  // fused dispatch keeps what fits its permuted buffer (ep_buffers.hpp), the tail beyond the budget
  // dropped: returns the copies dropped (a fused dispatch sends the microbatch in one chunk).
  const bool budget = lp.permuted_rows > 0;
  const auto local_copies = [&](const RankReplicas& rr, std::size_t rank, const std::vector<double>& received) {
    rows.clear();
    for (const auto& [e, share] : rr[rank]) rows.push_back(received[e] * share);
    double dropped = 0;
    if (budget) {
      auto fit = workload::fit_permuted(rows, lp.permuted_rows, lp.permute_alignment);
      rows = std::move(fit.kept);
      dropped = fit.dropped;
    }
    for (double& x : rows) x /= chunks;
    return dropped;
  };
  // The regroup of `rows` by expert and back on a GPU of a group of `ranks` (none for one local
  // expert, in a group of one, or where a fused dispatch writes expert-major rows itself).
  const auto regroup = [&](std::uint32_t g, std::size_t ranks) {
    if (lp.backend.fused() || ranks <= 1 || rows.size() <= 1) return compute::Work{};
    double copies = 0;
    for (const double x : rows) copies += x;
    return regroup_time(ctx.compute_of(g), m, copies);
  };
  // Its expert compute (`dropped`: the copies its permuted buffer dropped) and its regroup.
  const auto gpu_experts = [&](std::uint32_t g, const RankReplicas& rr, std::size_t rank, const std::vector<double>& received,
                               double& dropped) {
    dropped = 0;
    if (!(ip.role(g) & parallel::kRunsExperts)) return ExpertChunk{};
    dropped = local_copies(rr, rank, received);
    return expert_chunk(ctx, g, rows, lp.expert_ffn_hidden, regroup(g, rr.size()));
  };
  // A fused backend de-duplicates per rank: each rank's share of a source's copies (`per_expert`
  // over `total`, spread over the replicas) gives its distinct tokens per copy.
  const bool dedup = lp.backend.fused();
  const auto rank_shares = [&](const parallel::DispatchGroup& g, const std::vector<double>& per_expert, double total) {
    std::vector<double> q(g.gpus.size(), 0.0);
    for (int e = 0; e < m.experts; ++e) {
      const double frac = total > 0 ? per_expert[e] / total : 0.0;
      for (const parallel::Replica& rep : g.replicas->of_expert[e]) q[rep.rank] += frac * rep.share;
    }
    return q;
  };
  const auto sources_of = [&](const parallel::DispatchGroup& g) {
    std::vector<bool> source(g.gpus.size());
    for (std::size_t r = 0; r < g.gpus.size(); ++r) source[r] = ip.role(g.gpus[r]) & parallel::kRunsAttention;
    return source;
  };

  // Expert tensor parallelism needs each group's received copies once all groups are routed.
  const bool etp = lp.expert_tensor_parallel != nullptr;
  std::vector<std::vector<double>> received_by_group;
  // Each ETP group's members (rank r of ETP dispatch groups) compute their slice of the copies all
  // of them received, and exchange those copies (identical exchanges shared).
  const auto expert_tensor_parallel = [&](const std::vector<std::vector<double>>& received) {
    std::vector<std::uint32_t> group_of(gpus, UINT32_MAX), rank_of(gpus, 0);
    for (std::size_t gi = 0; gi < lp.dispatch.size(); ++gi)
      for (std::size_t r = 0; r < lp.dispatch[gi].gpus.size(); ++r) {
        group_of[lp.dispatch[gi].gpus[r]] = static_cast<std::uint32_t>(gi);
        rank_of[lp.dispatch[gi].gpus[r]] = static_cast<std::uint32_t>(r);
      }
    std::map<std::vector<double>, std::size_t> exchanges;
    std::vector<network::TrafficPtr> gather, scatter;
    for (const auto& members : lp.expert_tensor_parallel->groups) {
      const std::uint32_t first = members.front(), rank = rank_of[first];
      const std::size_t k = members.size();
      const RankReplicas& rr = replicas_of(lp.dispatch.at(group_of[first]));
      std::vector<double> tokens(rr[rank].size(), 0.0), brought(k, 0.0);
      for (std::size_t i = 0; i < k; ++i) {
        const std::uint32_t gi = group_of[members[i]];
        if (gi == UINT32_MAX || rank_of[members[i]] != rank)
          invariant_failed("an expert-tensor-parallel group outside its layer's EP ranks");
        for (std::size_t j = 0; j < rr[rank].size(); ++j) {
          const auto [e, share] = rr[rank][j];
          tokens[j] += received[gi][e] * share;
          brought[i] += received[gi][e] * share * m.hidden * b / chunks;
        }
      }
      rows.clear();
      for (const double x : tokens) rows.push_back(x / chunks);
      for (const std::uint32_t g : members)
        if (ip.role(g) & parallel::kRunsExperts)
          out.expert[g] = expert_chunk(ctx, g, rows, lp.expert_ffn_hidden, regroup(g, rr.size()));
      auto [found, fresh] = exchanges.try_emplace(brought, gather.size());
      if (fresh) {
        std::vector<double> bytes(k * k, 0.0);
        for (std::size_t i = 0; i < k; ++i)
          for (std::size_t j = 0; j < k; ++j)
            if (i != j) bytes[i * k + j] = brought[i];
        auto g = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(static_cast<std::uint32_t>(k), std::move(bytes)));
        scatter.push_back(std::make_shared<network::TrafficMatrix>(g->transposed()));
        gather.push_back(std::move(g));
      }
      out.etp_gather.push_back(gather[found->second]);
      out.etp_scatter.push_back(scatter[found->second]);
    }
    if (gather.size() == 1) {
      out.etp_gather.resize(1);
      out.etp_scatter.resize(1);
    }
  };

  if (!sampled) {
    // Every source sends exactly its expected copies: the same plan for all of them (pooled or
    // not: identical sources fill an expert's pooled capacity in equal parts).
    const auto plan = workload::plan_dispatch(popularity, lp.gate_tokens, m.top_k, t.capacity_factor, lp.capacity_shares);
    // Groups with the same replica table and sources share one factored matrix and one expert
    // compute per (GPU kind, rank).
    // (A fused exchange's stages also depend on how the group's ranks fall into domains.)
    struct Shared {
      FusedTraffic traffic;
      std::vector<ExpertChunk> by_kind_rank;
      std::vector<double> dropped_by_kind_rank;
      std::vector<bool> costed;
    };
    std::map<std::tuple<const parallel::ReplicaTable*, std::vector<bool>, std::vector<std::uint32_t>>, Shared> shared;
    double all_sources = 0;
    for (const auto& group : lp.dispatch) {
      const std::uint32_t n = static_cast<std::uint32_t>(group.gpus.size());
      const std::vector<bool> source = sources_of(group);
      double sources = 0;
      for (bool s : source) sources += s ? 1 : 0;
      all_sources += sources;
      const RankReplicas& rr = replicas_of(group);
      std::vector<double> received(m.experts);
      for (int e = 0; e < m.experts; ++e) {
        received[e] = plan.kept_per_expert[e] * sources;
        out.expert_tokens[e] += received[e];
        out.expert_routed[e] += copies * popularity[e] * sources;
      }
      if (etp) received_by_group.push_back(received);
      DomainLayout layout = dedup ? domain_layout(topo, group.gpus) : DomainLayout{};
      Shared& sh = shared[{group.replicas.get(), source, layout.domain}];
      if (!sh.traffic.dispatch) {
        std::vector<double> a(n, 0.0), q = rank_shares(group, plan.kept_per_expert, plan.kept);
        for (std::uint32_t r = 0; r < n; ++r)
          if (source[r]) a[r] = plan.kept * m.hidden * b / chunks;
        if (dedup) {
          sh.traffic = fused_traffic(network::TrafficMatrix::factored(std::move(a), q), q, m.experts, m.top_k, layout);
        } else {
          sh.traffic.dispatch =
              std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::factored(std::move(a), std::move(q)));
          sh.traffic.combine = std::make_shared<network::TrafficMatrix>(sh.traffic.dispatch->transposed());
        }
        sh.by_kind_rank.assign(ctx.compute.size() * n, {});
        sh.dropped_by_kind_rank.assign(ctx.compute.size() * n, 0.0);
        sh.costed.assign(ctx.compute.size() * n, false);
      }
      for (std::uint32_t r = 0; r < n && !etp; ++r) {  // under ETP costed over the ETP group below
        const std::uint32_t g = group.gpus[r];
        const std::size_t i = topo.kind_index(g) * n + r;
        if (!sh.costed[i]) {
          sh.by_kind_rank[i] = gpu_experts(g, rr, r, received, sh.dropped_by_kind_rank[i]);
          sh.costed[i] = true;
        }
        out.expert[g] = sh.by_kind_rank[i];
        out.dropped_copies += sh.dropped_by_kind_rank[i];
      }
      out.add(sh.traffic);
    }
    out.dropped_copies += plan.dropped * all_sources;
    out.routed_copies = (plan.kept + plan.dropped) * all_sources;
    // One shared matrix (and its transpose) when every group has the same layout.
    if (shared.size() == 1) out.share_first();
  } else {
    Rng rng = ctx.routing.sampler(it, layer, mb);
    std::map<const parallel::ReplicaTable*, ExpertBins> bins_of_table;
    std::map<const parallel::ReplicaTable*, FlatReplicas> flat_of_table;
    workload::SparseCopies draw;
    for (const auto& group : lp.dispatch) {
      const std::uint32_t n = static_cast<std::uint32_t>(group.gpus.size());
      const std::vector<bool> source = sources_of(group);
      // Its bytes: a dense matrix, or tiered above network::kMaxDenseRanks (a fused dispatch's
      // de-duplication needs every pair, and refuses such groups across domains). A tiered group's
      // sources are drawn in chunks on worker threads (SourceChunks).
      const bool tiered = !dedup && n > network::kMaxDenseRanks;
      std::vector<double> bytes(tiered ? 0 : static_cast<std::size_t>(n) * n, 0.0), received(m.experts, 0.0);
      std::optional<network::TrafficMatrix::TieredBuilder> builder;
      std::optional<SourceChunks> source_chunks;
      if (tiered) {
        builder.emplace(std::make_shared<network::RankTiers>(network::rank_tiers(topo, group.gpus)));
        source_chunks.emplace(n, rng);
      }
      const auto dense_send = [&](std::uint32_t src, std::uint32_t dst, double b) {
        bytes[static_cast<std::size_t>(src) * n + dst] += b;
      };
      const double bytes_per_copy = m.hidden * b / chunks;
      if (capacity) {
        // Capacity applies per expert: each source draws over the experts, then keeps at most its
        // capacity of each, or (pooled) the fraction of the group's copies the capacity admits.
        // Pooled capacity needs every source's draw first: a dense group keeps them, a tiered one
        // draws its chunks twice from the same seeds (the same copies, without holding them).
        std::vector<workload::SparseCopies> drawn(lp.pooled_capacity && !tiered ? n : 0);
        std::vector<double> admitted(m.experts, 1.0);
        std::unique_ptr<workload::GroupedAliasTable> alias;
        if (tiered) alias = std::make_unique<workload::GroupedAliasTable>(popularity);
        if (lp.pooled_capacity) {
          std::vector<double> total(m.experts, 0.0);
          double group_sources = 0;
          for (std::uint32_t src = 0; src < n; ++src) group_sources += source[src] ? 1 : 0;
          if (tiered) {
            source_chunks->run(
                source, m.experts,
                [&](std::uint32_t, workload::SparseCopySampler& sampler, SourceChunks::Part& part) {
                  sampler.draw(popularity, *alias, copies, part.draw);
                  for (const auto& [e, c] : part.draw) part.routed[e] += c;
                },
                [&](SourceChunks::Part& part) {
                  for (int e = 0; e < m.experts; ++e) total[e] += part.routed[e];
                });
          } else {
            for (std::uint32_t src = 0; src < n; ++src) {
              if (!source[src]) continue;
              workload::sparse_copies(workload::sample_copies(popularity, copies, rng), draw);
              for (const auto& [e, c] : draw) total[e] += c;
              drawn[src] = draw;
            }
          }
          const auto cap = workload::expert_capacities(copies * group_sources, t.capacity_factor, m.experts, lp.capacity_shares);
          for (int e = 0; e < m.experts; ++e)
            if (total[e] > cap[e]) admitted[e] = cap[e] / total[e];
        }
        auto [flat_it, flat_fresh] = flat_of_table.try_emplace(group.replicas.get());
        if (flat_fresh) flat_it->second = FlatReplicas(*group.replicas);
        const FlatReplicas& flat = flat_it->second;
        // workload::apply_capacity over the experts one source drew, expert by expert: a cap of 0
        // is none; pooled, the source's cap on an expert is its admitted fraction of what it drew.
        // send(i, bytes) for each replica i (of FlatReplicas) of what it keeps, added to `kept`
        // and `dropped`.
        // (The per-copy path at scale: one capacity for all experts (no capacity shares) and one
        // replica per expert read no per-expert table for them.)
        const std::uint32_t* first = flat.first.data();
        const double* share = flat.share.data();
        const bool one_capacity = !lp.pooled_capacity && std::adjacent_find(source_capacity.begin(), source_capacity.end(),
                                                                             std::not_equal_to<>()) == source_capacity.end();
        const double* capacity_of = one_capacity ? nullptr : source_capacity.data();
        const double capacity_all = one_capacity && !source_capacity.empty() ? source_capacity.front() : 0.0;
        const bool single = flat.single;
        struct Tally {
          double kept = 0, dropped = 0;
        };
        const auto keep_copies = [&, first, share, capacity_of, capacity_all, single, bytes_per_copy](
                                     std::uint32_t e, double c, auto& send, double* routed, double* kept_by_expert, Tally& tally) {
          routed[e] += c;
          const double cap = lp.pooled_capacity ? c * admitted[e] : capacity_of ? capacity_of[e] : capacity_all;
          const double kept = cap > 0 ? std::min(c, cap) : c;
          tally.dropped += c - kept;
          tally.kept += kept;
          if (single) send(e, kept * share[e] * bytes_per_copy);
          else
            for (std::uint32_t i = first[e]; i < first[e + 1]; ++i) send(i, kept * share[i] * bytes_per_copy);
          kept_by_expert[e] += kept;
        };
        if (tiered) {
          // Where the replicas are ordered, what a source sends out of its DC (its tier-0 worker)
          // is added up per source, its distinct destinations counted as runs, and each rank's
          // receipts from other DCs come from its experts' totals (TieredBuilder::leave_coarsest):
          // only copies inside the DC, a few per source at scale, go pair by pair. The bytes are
          // the same sums (exactly so for whole copies); what it saves is a scattered add per copy.
          // Where every sum is of whole copies, WholeCopies adds them up in integers.
          const std::optional<WholeCopies> whole =
              lp.pooled_capacity ? std::nullopt
                                 : WholeCopies::of(flat, *builder->tiers(), source_capacity, copies, bytes_per_copy,
                                                   source_chunks->most_per_range());
          std::vector<ReplicaPlace> place;
          place.reserve(flat.ordered && !whole ? flat.rank.size() : 0);
          std::vector<double> own(flat.ordered ? n : 0, 0.0);  // each source's bytes for itself
          if (flat.ordered && !whole)
            for (const std::uint32_t r : flat.rank) place.push_back({r, builder->tiers()->worker.front()[r]});
          source_chunks->run(
              source, m.experts,
              [&](std::uint32_t src, workload::SparseCopySampler& sampler, SourceChunks::Part& part) {
                if (whole) {
                  if (part.counts.empty()) part.counts.assign(m.experts, 0);
                  WholeCopies::Send send(*whole, src, *part.builder, own.data(), part.counts.data());
                  sampler.each(popularity, *alias, copies, send);
                  send.finish(part);
                  return;
                }
                TieredSend send(flat, flat.ordered ? place.data() : nullptr, src, *part.builder, own.data());
                Tally tally;
                double* routed = part.routed.data();
                double* kept_by_expert = part.received.data();
                sampler.each(popularity, *alias, copies,
                             [&](std::uint32_t e, double c) { keep_copies(e, c, send, routed, kept_by_expert, tally); });
                send.finish();
                part.kept += tally.kept;
                part.dropped += tally.dropped;
              },
              [&](SourceChunks::Part& part) {
                if (whole) WholeCopies::unpack(part);
                builder->absorb(*part.builder);
                for (int e = 0; e < m.experts; ++e) {
                  out.expert_routed[e] += part.routed[e];
                  received[e] += part.received[e];
                }
                out.dropped_copies += part.dropped;
                out.routed_copies += part.kept + part.dropped;
              },
              &*builder);
          if (flat.ordered) {
            std::vector<double> by_rank(n, 0.0);
            for (int e = 0; e < m.experts; ++e)
              for (std::uint32_t i = flat.first[e]; i < flat.first[e + 1]; ++i)
                by_rank[flat.rank[i]] += received[e] * flat.share[i] * bytes_per_copy;
            builder->enter_coarsest(by_rank, own);
          }
        } else {
          for (std::uint32_t src = 0; src < n; ++src) {
            if (!source[src]) continue;
            if (lp.pooled_capacity) draw = std::move(drawn[src]);
            else workload::sparse_copies(workload::sample_copies(popularity, copies, rng), draw);
            auto send = [&](std::uint32_t i, double x) { dense_send(src, flat.rank[i], x); };
            Tally tally;
            for (const auto& [e, c] : draw) keep_copies(e, c, send, out.expert_routed.data(), received.data(), tally);
            out.dropped_copies += tally.dropped;
            out.routed_copies += tally.kept + tally.dropped;
          }
        }
      } else {
        // Dropless: each source draws over the bins of experts placed alike (a rank's experts under
        // EP), and each bin's copies from all sources are split over its experts in one draw. A
        // multinomial's counts, grouped, are multinomial over the groups, and the sources' draws
        // within a bin add up to one multinomial of their total, so this is the same distribution
        // as a draw per source and expert, at (sources × bins + experts) draws instead of
        // sources × experts.
        auto [found, fresh] = bins_of_table.try_emplace(group.replicas.get());
        if (fresh) found->second = ExpertBins(*group.replicas);
        const ExpertBins& bins = found->second;
        const std::size_t nb = bins.experts.size();
        std::vector<double> bin_popularity(nb, 0.0), total(nb, 0.0);
        for (std::size_t k = 0; k < nb; ++k)
          for (int e : bins.experts[k]) bin_popularity[k] += popularity[e];
        // One source's copies per bin, sent to the bin's replicas; returns how many.
        const auto send_bins = [&](std::uint32_t src, const workload::SparseCopies& drew, const auto& send,
                                   double* by_bin) {
          double routed = 0;
          for (const auto& [k, c] : drew) {
            routed += c;
            by_bin[k] += c;
            for (const parallel::Replica& rep : bins.replicas[k]) send(src, rep.rank, c * rep.share * bytes_per_copy);
          }
          return routed;
        };
        if (tiered) {
          const workload::GroupedAliasTable bin_alias(bin_popularity);
          source_chunks->run(
              source, nb,
              [&](std::uint32_t src, workload::SparseCopySampler& sampler, SourceChunks::Part& part) {
                sampler.draw(bin_popularity, bin_alias, copies, part.draw);
                const auto send = [&](std::uint32_t s, std::uint32_t d, double x) { part.builder->add(s, d, x); };
                part.kept += send_bins(src, part.draw, send, part.received.data());
              },
              [&](SourceChunks::Part& part) {
                builder->absorb(*part.builder);
                for (std::size_t k = 0; k < nb; ++k) total[k] += part.received[k];
                out.routed_copies += part.kept;
              },
              &*builder);
        } else {
          for (std::uint32_t src = 0; src < n; ++src) {
            if (!source[src]) continue;
            workload::sparse_copies(workload::sample_copies(bin_popularity, copies, rng), draw);
            out.routed_copies += send_bins(src, draw, dense_send, total.data());
          }
        }
        for (std::size_t k = 0; k < nb; ++k) {
          if (total[k] <= 0 || bin_popularity[k] <= 0) continue;
          std::vector<double> within(bins.experts[k].size());
          for (std::size_t i = 0; i < within.size(); ++i) within[i] = popularity[bins.experts[k][i]] / bin_popularity[k];
          const std::vector<double> split = workload::sample_copies(within, total[k], rng);
          for (std::size_t i = 0; i < within.size(); ++i) {
            received[bins.experts[k][i]] += split[i];
            out.expert_routed[bins.experts[k][i]] += split[i];
          }
        }
      }
      const RankReplicas& rr = replicas_of(group);
      if (!etp)  // else costed over the ETP group below
        for (std::uint32_t r = 0; r < n; ++r) {
          double dropped = 0;
          out.expert[group.gpus[r]] = gpu_experts(group.gpus[r], rr, r, received, dropped);
          out.dropped_copies += dropped;
        }
      for (int e = 0; e < m.experts; ++e) out.expert_tokens[e] += received[e];
      if (etp) received_by_group.push_back(received);
      auto copies_sent = tiered ? std::move(*builder).build() : network::TrafficMatrix::dense(n, std::move(bytes));
      if (dedup) {
        // The copies' expected shares give each rank's (and domain's) distinct tokens per copy.
        double total = 0;
        for (const double p : popularity) total += p;
        out.add(fused_traffic(copies_sent, rank_shares(group, popularity, total), m.experts, m.top_k,
                              domain_layout(topo, group.gpus)));
      } else {
        auto dispatch = std::make_shared<network::TrafficMatrix>(std::move(copies_sent));
        out.add({dispatch, std::make_shared<network::TrafficMatrix>(dispatch->transposed()), {}, {}});
      }
    }
  }
  if (etp) expert_tensor_parallel(received_by_group);
  return out;
}

}  // namespace moesim::blocks
