// Token routing: per layer and iteration, the popularity of each expert, and what a capacity
// factor does to it (GShard/Switch: each source keeps at most ceil(f·k·T/E) tokens per expert and
// drops the rest). Uniform routing gives every expert 1/E; skewed routing draws a Zipf(s)
// popularity whose ranking is permuted per layer and iteration from the scenario's seed, so the
// hot experts move as they do in real training; a popularity process (seed 004) walks each
// expert's share from one iteration to the next, and a trace replays a real run's
// (sim/workload/popularity_process.hpp).
#pragma once

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "sim/core/enum_names.hpp"
#include "sim/core/rng.hpp"
#include "sim/workload/popularity_process.hpp"


namespace moesim::workload {

enum class RoutingKind { Uniform, Zipf, Process, Trace };
inline constexpr auto kRoutingKindNames = enum_names<RoutingKind>(
    {{RoutingKind::Uniform, "uniform"}, {RoutingKind::Zipf, "zipf"}, {RoutingKind::Process, "process"}, {RoutingKind::Trace, "trace"}});

// How each source GPU's token copies are spread over the experts:
//  - sampled: a seeded multinomial draw per source, layer, microbatch and iteration, so sources
//    differ from each other as real gates do (a dense routing matrix);
//  - expected: every source sends exactly its expected share (popularity × copies), a rank-1
//    routing matrix that costs O(GPUs + experts) and scales to 1000 datacenters;
//  - auto: the same as sampled (it once switched to expected above 4M GPU × expert pairs; a
//    silent switch that changed the answer, kept only so older scenarios load).
// Sampled routing is the default at every scale: groups too large for a dense matrix take the
// tiered one (network/traffic_matrix.hpp) and draw each source's copies one by one while they are
// fewer than 4 per expert (AliasTable), so its cost grows with the copies routed.
enum class RoutingSampling { Auto, Sampled, Expected };
inline constexpr auto kRoutingSamplingNames = enum_names<RoutingSampling>(
    {{RoutingSampling::Sampled, "sampled"}, {RoutingSampling::Expected, "expected"}, {RoutingSampling::Auto, "auto"}});

struct RoutingConfig {
  RoutingKind kind = RoutingKind::Uniform;
  double zipf_exponent = 1.0;
  bool resample_each_iteration = true;
  // Every microbatch of an iteration routes as its first does: the writer draws each layer once per
  // iteration and reuses its matrices (schedule/iteration_program.cpp).
  bool repeat_microbatches = false;
  RoutingSampling sampling = RoutingSampling::Sampled;
  PopularityProcessParams process;                // kind Process
  std::shared_ptr<const PopularityTable> trace;   // kind Trace: read by the scenario loader
};

class RoutingModel {
 public:
  // `layers` and `iterations` bound the popularity a process generates (kind Process).
  RoutingModel(RoutingConfig config, int experts, int layers, int iterations, std::uint64_t seed);
  // Share of routed token copies that go to each expert; sums to 1.
  std::vector<double> popularity(int iteration, int layer) const;
  // Whether sources draw their routing (see RoutingSampling).
  bool sampled() const;
  // The seeded stream of the per-source draws of one layer and microbatch.
  Rng sampler(int iteration, int layer, int microbatch) const;
  const RoutingConfig& config() const { return config_; }

 private:
  RoutingConfig config_;
  int experts_;
  std::uint64_t seed_;
  std::shared_ptr<const PopularityTable> table_;  // kinds Process and Trace
};

// What one source GPU's `tokens` do in a layer, given the expert popularity.
struct DispatchPlan {
  std::vector<double> kept_per_expert;  // token copies one source sends to each expert
  double kept = 0;                      // Σ kept_per_expert
  double dropped = 0;                   // copies one source drops (over capacity)
  double capacity = 0;                  // per source and expert (the largest when they differ); 0 = unlimited
};

// Each expert's capacity for `copies` routed token copies: ceil(f·copies·share_e), with share_e
// = shares[e], or 1/E for every expert when `shares` is empty (GShard's ceil(f·k·T/E)). Seed
// 004 gives a class of r_i of the sN expert slots the share r_i/(sN): slot_capacity × r_i (§3.4).
// All zero (unlimited) when capacity_factor is 0.
std::vector<double> expert_capacities(double copies, double capacity_factor, std::size_t experts,
                                      const std::vector<double>& shares = {});

// Token copies one source sends to each expert: a multinomial draw of `copies` over `popularity`
// (conditional binomials in expert order; each binomial by inversion for small means and the
// normal approximation for large ones, all from the seeded stream).
std::vector<double> sample_copies(const std::vector<double>& popularity, double copies, Rng& rng);
// Walker's alias method (Vose's construction, "A linear algorithm for generating random numbers
// with a given distribution", IEEE TSE 1991): a categorical draw from one uniform, O(1) each.
// One 64-bit draw: its low 32 bits pick a slot (multiply-shift: bias below slots / 2^32, 2·10^-6
// at 8000 experts), its high 32 bits keep the slot's category or take its alias.
class AliasTable {
 public:
  explicit AliasTable(const std::vector<double>& weights);
  std::uint32_t sample(FastBits& rng) const {
    const std::uint64_t r = rng.bits();
    const auto i = static_cast<std::uint32_t>(((r & 0xffffffffu) * slots_.size()) >> 32);
    const Slot s = slots_[i];  // one cache line fetch per draw: the tables are MBs at scale
    // Without a branch: which of the two it is, is a coin toss the predictor cannot learn.
    const std::uint32_t keep = 0u - static_cast<std::uint32_t>((r >> 32) < s.keep);
    return (i & keep) | (s.alias & ~keep);
  }
  std::size_t size() const { return slots_.size(); }

  // The slot's own share × 2^bits (a slot that is all its own keeps always: keep 2^32 - 1 and
  // itself as alias).
  struct Slot {
    std::uint32_t keep, alias;
  };
  // Vose's construction over `weights` into out[0, size), the shares kept to `keep_bits` bits.
  static void build(std::span<const double> weights, int keep_bits, Slot* out);

 private:
  std::vector<Slot> slots_;
};

// Categories in groups of kGroup consecutive ones: an AliasTable over the groups' weights and one
// per group over its members. By the grouping property of the multinomial, a group drawn by its
// weight and then a member by its share of the group is the member drawn by its weight, so the
// draws have the distribution of one AliasTable over all categories. What it buys: a sampler's
// random reads go to the group table and per-group counts (9 KiB at 50,000 categories: L1), and
// each group's member table (512 B) is read in group order, where one table over all categories
// and a count per category are 600 KiB of random reads at 50,000 categories, past a 512 KiB L2.
// Measured on 2 cores: one layer of 100,000 GPUs (50,000 experts) 8.6 -> 7.4-7.8 s; at 8000
// experts (ep-1000dc, whose flat tables fit in L2) 4.15 s either way (BM_SparseCopyDraw: 57 -> 50
// us per source at 50,000, 29 -> 37 us at 8000, one thread alone).
class GroupedAliasTable {
 public:
  static constexpr std::uint32_t kGroup = 64;  // a member bitmap per group is one word
  explicit GroupedAliasTable(const std::vector<double>& weights);
  const AliasTable& groups() const { return groups_; }
  // The member of group g (one with weight) a 32-bit number picks: its low 6 bits a slot (each
  // group has kGroup slots, the last group's missing members without weight), its high 26 bits
  // keep the slot's member or take its alias (shares to 2^-26, against 2^-32 in an AliasTable:
  // two members per 64-bit number).
  std::uint32_t member(std::size_t g, std::uint32_t r) const {
    const std::uint32_t i = r & (kGroup - 1);
    const AliasTable::Slot s = members_[g * kGroup + i];
    const std::uint32_t keep = 0u - static_cast<std::uint32_t>((r >> 6) < s.keep);
    return (i & keep) | (s.alias & ~keep);
  }
  std::size_t size() const { return categories_; }

 private:
  static constexpr int kMemberKeepBits = 26;
  std::size_t categories_;
  AliasTable groups_;
  std::vector<AliasTable::Slot> members_;  // kGroup per group
};

// Token copies per category, sparse: (category, copies) with copies > 0.
using SparseCopies = std::vector<std::pair<std::uint32_t, double>>;
// The categories of `dense` with copies, in order.
void sparse_copies(const std::vector<double>& dense, SparseCopies& out);

// One stream of multinomial draws (sample_copies' distribution) made as sparsely as is cheap: up
// to 4 copies per category one categorical draw per copy from a GroupedAliasTable: each copy's
// group, counted per group, then group by group in order each copy's member, marked in the
// group's bitmap word and read back in order (work grows with the copies, not the categories),
// else sample_copies. Seeded: a routing splits its sources over samplers of their own seeds.
class SparseCopySampler {
 public:
  explicit SparseCopySampler(std::uint64_t seed) : rng_(seed), bits_(rng_) {}
  // `copies` over `popularity` (whose table is `table`) into `out`, in category order.
  void draw(const std::vector<double>& popularity, const GroupedAliasTable& table, double copies, SparseCopies& out);
  // The same draw, visit(category, copies) for each category with copies, in order, as it is
  // drawn: callers that route each category at once skip writing the draw out and reading it back.
  template <typename Visit>
  void each(const std::vector<double>& popularity, const GroupedAliasTable& table, double copies, Visit&& visit);

 private:
  // A categorical draw (one 64-bit number and a table look-up) costs a fraction of a binomial by
  // inversion (a pow() and a walk of the pmf): up to 4 copies per category the draws are cheaper;
  // past that, sample_copies (`dense`).
  static bool draws_densely(double copies, std::size_t categories) {
    return std::round(copies) >= 4.0 * static_cast<double>(categories);
  }
  void dense(const std::vector<double>& popularity, double copies, SparseCopies& out);
  Rng rng_;
  FastBits bits_;
  std::vector<std::uint32_t> in_group_;                            // copies per group, zero between draws
  std::array<std::uint32_t, GroupedAliasTable::kGroup> member_{};  // copies per member, zero between groups
};

template <typename Visit>
void SparseCopySampler::each(const std::vector<double>& popularity, const GroupedAliasTable& table, double copies,
                             Visit&& visit) {
  const double n = std::round(copies);
  if (draws_densely(copies, popularity.size())) {
    SparseCopies all;
    dense(popularity, copies, all);
    for (const auto& [e, c] : all) visit(e, c);
    return;
  }
  const std::size_t groups = table.groups().size();
  if (in_group_.size() < groups) in_group_.resize(groups, 0);
  const auto draws = static_cast<std::size_t>(n);
  FastBits bits = bits_;  // in registers: the counts' stores cannot alias it
  std::uint32_t* in_group = in_group_.data();
  for (std::size_t i = 0; i < draws; ++i) ++in_group[table.groups().sample(bits)];
  // Group by group, in order: each copy's member, read back in member order.
  std::uint32_t* member = member_.data();
  for (std::size_t g = 0; g < groups; ++g) {
    const std::uint32_t k = in_group[g];
    if (k == 0) continue;
    in_group[g] = 0;
    std::uint64_t drawn = 0;
    std::uint32_t i = 0;
    for (; i + 1 < k; i += 2) {  // two members per 64-bit number
      const std::uint64_t r = bits.bits();
      const std::uint32_t m1 = table.member(g, static_cast<std::uint32_t>(r)),
                          m2 = table.member(g, static_cast<std::uint32_t>(r >> 32));
      ++member[m1];
      ++member[m2];
      drawn |= (std::uint64_t{1} << m1) | (std::uint64_t{1} << m2);
    }
    if (i < k) {
      const std::uint32_t m = table.member(g, static_cast<std::uint32_t>(bits.bits()));
      ++member[m];
      drawn |= std::uint64_t{1} << m;
    }
    for (; drawn; drawn &= drawn - 1) {
      const auto m = static_cast<std::uint32_t>(std::countr_zero(drawn));
      visit(static_cast<std::uint32_t>(g * GroupedAliasTable::kGroup + m), static_cast<double>(member[m]));
      member[m] = 0;
    }
  }
  bits_ = bits;
}

// Capacity applied to one source's copies per expert (0: unlimited), one for all or per expert.
DispatchPlan apply_capacity(std::vector<double> copies_per_expert, double capacity);
DispatchPlan apply_capacity(std::vector<double> copies_per_expert, const std::vector<double>& capacity);

// One source's expected copies over `popularity`, capped at expert_capacities(.., shares).
DispatchPlan plan_dispatch(const std::vector<double>& popularity, double tokens, int top_k, double capacity_factor,
                           const std::vector<double>& capacity_shares = {});

}  // namespace moesim::workload
