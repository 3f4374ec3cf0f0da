// Bytes each rank of a group sends to each other rank in an all-to-all(v). Three forms:
//  - dense: an n×n matrix (uneven routing sampled per source, trace files); cost O(n²);
//  - factored: T[s][d] = a[s]·q[d] for s ≠ d, with Σq = 1 (less once a fused dispatch
//    de-duplicates) — every source routes by the same destination shares (expert popularity of
//    this layer). Exact for uniform routing and for skewed routing by a shared popularity; cost
//    O(n), which is what makes 8000-GPU groups cheap.
//  - tiered: per rank and tier t of the cluster, the bytes it sends to (and receives from) the
//    ranks whose coarsest crossed tier is t (RankTiers): sampled routing of groups too large for a
//    dense matrix, cost O(n × tiers) whatever the routing. Every worker's and port's load at every
//    tier is exact (what leaves a tier-l worker is what its ranks send across tiers 0..l), so is
//    what each rank sends and receives; a single pair (at, sibling_pairs) is split in proportion
//    to what the destinations receive at that tier, the one approximation of this form.
// The diagonal (a rank's tokens for its own experts) never leaves the GPU and is not traffic.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace moesim::network {

// Groups larger than this get no dense n×n structure (sampled routing takes the tiered form).
inline constexpr std::uint32_t kMaxDenseRanks = 2048;

// Where the ranks of a group sit: for each tier of the cluster (0 = the coarsest), each rank's
// worker there, renumbered 0..k−1 in order of first appearance (compress_workers' ids).
struct RankTiers {
  std::vector<std::vector<std::uint32_t>> worker;  // [tier][rank]
  std::vector<std::uint32_t> workers;              // per tier
  std::uint32_t ranks() const { return worker.empty() ? 0 : static_cast<std::uint32_t>(worker.front().size()); }
  int tiers() const { return static_cast<int>(worker.size()); }
  // The coarsest tier where ranks s and d sit in different workers; -1 for s == d.
  int crossed(std::uint32_t s, std::uint32_t d) const {
    for (int t = 0; t < tiers(); ++t)
      if (worker[t][s] != worker[t][d]) return t;
    return -1;
  }
};

class TrafficMatrix {
 public:
  static TrafficMatrix dense(std::uint32_t n, std::vector<double> bytes);  // row-major n×n
  // a[s]: bytes source s routes to all ranks including itself; q[d]: share each destination gets.
  static TrafficMatrix factored(std::vector<double> a, std::vector<double> q);
  // Every rank sends `bytes_per_pair` to every other rank.
  static TrafficMatrix uniform(std::uint32_t n, double bytes_per_pair);

  // Builds the tiered form: each source's bytes added together (any order of its destinations,
  // the same destination any number of times), sources in any order; the pairs with traffic are
  // counted exactly.
  class TieredBuilder {
   public:
    explicit TieredBuilder(std::shared_ptr<const RankTiers> tiers);
    void add(std::uint32_t s, std::uint32_t d, double bytes) {  // inline: called per (source, expert) drawn
      if (s == d || bytes <= 0) return;
      if (s != current_) next_source(s);
      std::size_t t = 0;  // RankTiers::crossed on the cached tier arrays (s != d differ at the finest tier)
      while (worker_[t][s] == worker_[t][d]) ++t;
      out_[t * n_ + s] += bytes;
      in_[t * n_ + d] += bytes;
      if (last_source_[d] != s + 1) {
        last_source_[d] = s + 1;
        ++pairs_;
      }
    }
    // For callers that add up what a source sends across the coarsest tier (tier 0) themselves,
    // where listing each pair costs more than the sums: s sends `bytes` across it to `pairs`
    // distinct ranks (none of those bytes passed to add()). Their receiving side comes from each
    // rank's total once every source is in (enter_coarsest).
    void leave_coarsest(std::uint32_t s, double bytes, std::uint64_t pairs) {
      if (s != current_) next_source(s);
      out_[s] += bytes;
      pairs_ += pairs;
    }
    // The receiving side of leave_coarsest: `received[d]` is all that rank d receives, the bytes
    // it keeps for itself (`own[d]`) included; what came across the coarsest tier is that less its
    // own and what add() brought it from inside its tier-0 worker. Call it once, with every source in.
    void enter_coarsest(const std::vector<double>& received, const std::vector<double>& own);
    // Adds what `part` holds (a builder over the same tiers, of other sources: a range of them
    // built on another thread) and empties it for reuse.
    void absorb(TieredBuilder& part);
    TrafficMatrix build() &&;
    const std::shared_ptr<const RankTiers>& tiers() const { return tiers_; }

   private:
    void next_source(std::uint32_t s);
    std::shared_ptr<const RankTiers> tiers_;
    std::size_t n_ = 0;
    std::vector<double> out_, in_;
    std::vector<const std::uint32_t*> worker_;   // tiers_->worker[t].data()
    std::vector<std::uint32_t> last_source_;  // per destination: 1 + the last source that sent to it
    std::vector<bool> finished_;
    std::uint32_t current_ = UINT32_MAX;
    std::uint64_t pairs_ = 0;
  };

  std::uint32_t size() const { return n_; }
  bool is_factored() const { return form_ == Form::Factored; }
  bool is_tiered() const { return form_ == Form::Tiered; }
  // Bytes of its dense or factored values (a tiered matrix's sums are not counted).
  double value_bytes() const { return static_cast<double>(dense_.size() + a_.size() + q_.size()) * sizeof(double); }
  double at(std::uint32_t s, std::uint32_t d) const;
  double sent(std::uint32_t s) const;      // excluding the diagonal
  double received(std::uint32_t d) const;  // excluding the diagonal
  double total() const;                    // excluding the diagonal
  std::uint64_t pairs() const;             // ordered pairs s ≠ d with traffic
  TrafficMatrix transposed() const;        // the combine of a dispatch
  TrafficMatrix to_dense() const;
  // The tiered form over `tiers` (the group's RankTiers): a tiered matrix as it is; a factored or
  // dense one with every rank's bytes across every tier, and the pairs, exact.
  TrafficMatrix as_tiered(std::shared_ptr<const RankTiers> tiers) const;

  // The 2-D all-to-all of a tiered matrix: each rank hands what is bound for local index i of
  // other nodes to its node peer of index i (phase 1, inside the node), which sends it on across
  // nodes (phase 2); what is bound for its own node goes straight in phase 1. node[r], local[r]:
  // rank r's node and index in it; rank_at[node][i] the inverse. Both phases in tiered form,
  // built from the tiers' sums (no pair is listed): a source's bytes across a tier are split
  // over the local indices in proportion to what each receives there (the form's one
  // approximation, as in at()), so what leaves and enters every worker above the node, and every
  // rank's phase-2 receipts, are exact. Throws InfeasibleError where a tier splits a node without
  // lying inside one.
  std::pair<TrafficMatrix, TrafficMatrix> relayed(const std::vector<std::uint32_t>& node,
                                                  const std::vector<std::uint32_t>& local,
                                                  const std::vector<std::vector<std::uint32_t>>& rank_at) const;

  // Per worker (ranks grouped by `worker_of_rank`, ids 0..workers-1): bytes leaving and entering it.
  void worker_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers, std::vector<double>& out,
                    std::vector<double>& in) const;
  // The same bytes, counted on the port each rank uses (`port_of_rank`, ids 0..ports-1, every port
  // inside one worker): what leaves and enters its worker through each port.
  void port_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                  const std::vector<std::uint32_t>& port_of_rank, std::uint32_t ports, std::vector<double>& out,
                  std::vector<double>& in) const;

  // Bytes between sibling workers (the same `parent_of_worker`) of one tier, row-major
  // workers × workers (zero between workers of different parents): what a fabric of direct links
  // between siblings carries.
  void sibling_pairs(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                     const std::vector<std::uint32_t>& parent_of_worker, std::vector<double>& out) const;

  const std::vector<double>& a() const { return a_; }
  const std::vector<double>& q() const { return q_; }

 private:
  enum class Form : std::uint8_t { Dense, Factored, Tiered };
  // The tier whose workers `worker_of_rank` numbers (RankTiers' ids), or -1.
  int tier_of(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers) const;
  // Tiered, grouped by a tier's workers: each rank's bytes out of and into its worker, added to
  // its slot (its worker, or its port); false where the form or the grouping is not that.
  bool tiered_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                    const std::vector<std::uint32_t>& slot_of_rank, std::vector<double>& out,
                    std::vector<double>& in) const;
  // Tiered: what rank r sends (receives) across tiers 0..l, i.e. out of (into) its tier-l worker.
  double leaving(std::uint32_t r, int l) const;
  double entering(std::uint32_t r, int l) const;

  std::uint32_t n_ = 0;
  Form form_ = Form::Dense;
  std::vector<double> dense_;
  std::vector<double> a_, q_;
  // Tiered: [tier·n + rank]; per tier, the bytes each of its workers receives (sends) across it,
  // and each parent (the tier above's worker; one root for tier 0).
  std::shared_ptr<const RankTiers> tiers_;
  std::vector<double> out_, in_;
  std::vector<std::vector<double>> in_by_worker_, in_by_parent_, out_by_worker_, out_by_parent_;
  std::uint64_t pairs_ = 0;
  void index_tiers();
  static TrafficMatrix from_tiers(std::shared_ptr<const RankTiers> tiers, std::vector<double> out, std::vector<double> in,
                                  std::uint64_t pairs);
};

using TrafficPtr = std::shared_ptr<const TrafficMatrix>;

}  // namespace moesim::network
