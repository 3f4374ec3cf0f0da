#include "sim/network/traffic_matrix.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::network {

TrafficMatrix TrafficMatrix::dense(std::uint32_t n, std::vector<double> bytes) {
  if (bytes.size() != static_cast<std::size_t>(n) * n) invariant_failed("dense traffic matrix of the wrong size");
  TrafficMatrix t;
  t.n_ = n;
  t.dense_ = std::move(bytes);
  return t;
}

TrafficMatrix TrafficMatrix::factored(std::vector<double> a, std::vector<double> q) {
  if (a.size() != q.size()) invariant_failed("factored traffic matrix with |a| != |q|");
  TrafficMatrix t;
  t.n_ = static_cast<std::uint32_t>(a.size());
  t.form_ = Form::Factored;
  t.a_ = std::move(a);
  t.q_ = std::move(q);
  return t;
}

TrafficMatrix TrafficMatrix::uniform(std::uint32_t n, double bytes_per_pair) {
  // a[s]·q[d] = bytes_per_pair with q = 1/n: a[s] = n·bytes_per_pair.
  return factored(std::vector<double>(n, bytes_per_pair * n), std::vector<double>(n, 1.0 / n));
}

TrafficMatrix::TieredBuilder::TieredBuilder(std::shared_ptr<const RankTiers> tiers)
    : tiers_(std::move(tiers)), n_(tiers_->ranks()) {
  out_.assign(n_ * tiers_->tiers(), 0.0);
  in_.assign(n_ * tiers_->tiers(), 0.0);
  last_source_.assign(n_, 0);
  finished_.assign(n_, false);
  for (const auto& w : tiers_->worker) worker_.push_back(w.data());
  // add()'s walk stops at the first tier where two ranks differ: the finest tier must tell every
  // rank apart.
  if (!worker_.empty() && tiers_->workers.back() != n_)
    invariant_failed("tiered traffic: the finest tier does not hold one rank per worker");
}

void TrafficMatrix::TieredBuilder::next_source(std::uint32_t s) {
  if (finished_[s]) invariant_failed(fmt::format("tiered traffic: source {} added twice apart", s));
  if (current_ != UINT32_MAX) finished_[current_] = true;
  current_ = s;
}

void TrafficMatrix::TieredBuilder::absorb(TieredBuilder& part) {
  if (part.tiers_ != tiers_) invariant_failed("tiered traffic: a part over other tiers");
  if (part.current_ != UINT32_MAX) part.finished_[part.current_] = true;
  for (std::size_t r = 0; r < n_; ++r) {
    if (part.finished_[r]) {
      if (finished_[r] || r == current_) invariant_failed(fmt::format("tiered traffic: source {} added in two parts", r));
      finished_[r] = true;
    }
    part.finished_[r] = false;
    part.last_source_[r] = 0;
  }
  for (std::size_t i = 0; i < out_.size(); ++i) {
    out_[i] += part.out_[i];
    in_[i] += part.in_[i];
  }
  std::fill(part.out_.begin(), part.out_.end(), 0.0);
  std::fill(part.in_.begin(), part.in_.end(), 0.0);
  pairs_ += part.pairs_;
  part.pairs_ = 0;
  part.current_ = UINT32_MAX;
}

void TrafficMatrix::TieredBuilder::enter_coarsest(const std::vector<double>& received, const std::vector<double>& own) {
  if (received.size() != n_ || own.size() != n_) invariant_failed("tiered traffic: receipts of another group size");
  const std::size_t tiers = worker_.size();
  for (std::size_t d = 0; d < n_; ++d) {
    double inside = own[d];
    for (std::size_t t = 1; t < tiers; ++t) inside += in_[t * n_ + d];
    // Integer copies of integer bytes (the usual case) subtract exactly; otherwise a rounding
    // below zero is none.
    in_[d] += std::max(0.0, received[d] - inside);
  }
}

TrafficMatrix TrafficMatrix::TieredBuilder::build() && {
  return from_tiers(std::move(tiers_), std::move(out_), std::move(in_), pairs_);
}

void TrafficMatrix::index_tiers() {
  const int tiers = tiers_->tiers();
  in_by_worker_.assign(tiers, {});
  in_by_parent_.assign(tiers, {});
  out_by_worker_.assign(tiers, {});
  out_by_parent_.assign(tiers, {});
  for (int t = 0; t < tiers; ++t) {
    in_by_worker_[t].assign(tiers_->workers[t], 0.0);
    out_by_worker_[t].assign(tiers_->workers[t], 0.0);
    const std::uint32_t parents = t == 0 ? 1 : tiers_->workers[t - 1];
    in_by_parent_[t].assign(parents, 0.0);
    out_by_parent_[t].assign(parents, 0.0);
    for (std::uint32_t r = 0; r < n_; ++r) {
      const std::uint32_t w = tiers_->worker[t][r], p = t == 0 ? 0 : tiers_->worker[t - 1][r];
      in_by_worker_[t][w] += in_[t * n_ + r];
      out_by_worker_[t][w] += out_[t * n_ + r];
      in_by_parent_[t][p] += in_[t * n_ + r];
      out_by_parent_[t][p] += out_[t * n_ + r];
    }
  }
}

double TrafficMatrix::leaving(std::uint32_t r, int l) const {
  double sum = 0;
  for (int t = 0; t <= l; ++t) sum += out_[t * n_ + r];
  return sum;
}

double TrafficMatrix::entering(std::uint32_t r, int l) const {
  double sum = 0;
  for (int t = 0; t <= l; ++t) sum += in_[t * n_ + r];
  return sum;
}

int TrafficMatrix::tier_of(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers) const {
  for (int t = 0; t < tiers_->tiers(); ++t)
    if (tiers_->workers[t] == workers && tiers_->worker[t] == worker_of_rank) return t;
  return -1;
}

double TrafficMatrix::at(std::uint32_t s, std::uint32_t d) const {
  if (s == d) return 0.0;
  switch (form_) {
    case Form::Factored:
      return a_[s] * q_[d];
    case Form::Dense:
      return dense_[static_cast<std::size_t>(s) * n_ + d];
    case Form::Tiered:
      break;
  }
  // What s sends across tier t, split over the ranks it may reach there (its parent's other
  // workers) in proportion to what each receives across t.
  const int t = tiers_->crossed(s, d);
  const double reach = in_by_parent_[t][t == 0 ? 0 : tiers_->worker[t - 1][s]] - in_by_worker_[t][tiers_->worker[t][s]];
  return reach > 0 ? out_[t * n_ + s] * in_[t * n_ + d] / reach : 0.0;
}

double TrafficMatrix::sent(std::uint32_t s) const {
  // Σq is 1 for routing shares, less once a fused dispatch de-duplicates (blocks/fused_dispatch).
  if (form_ == Form::Factored) return a_[s] * (std::accumulate(q_.begin(), q_.end(), 0.0) - q_[s]);
  if (form_ == Form::Tiered) return leaving(s, tiers_->tiers() - 1);
  double sum = 0;
  for (std::uint32_t d = 0; d < n_; ++d) sum += at(s, d);
  return sum;
}

double TrafficMatrix::received(std::uint32_t d) const {
  if (form_ == Form::Factored) {
    const double atot = std::accumulate(a_.begin(), a_.end(), 0.0);
    return q_[d] * (atot - a_[d]);
  }
  if (form_ == Form::Tiered) return entering(d, tiers_->tiers() - 1);
  double sum = 0;
  for (std::uint32_t s = 0; s < n_; ++s) sum += at(s, d);
  return sum;
}

double TrafficMatrix::total() const {
  double sum = 0;
  for (std::uint32_t s = 0; s < n_; ++s) sum += sent(s);
  return sum;
}

std::uint64_t TrafficMatrix::pairs() const {
  if (form_ == Form::Tiered) return pairs_;
  if (form_ == Form::Factored) {
    std::uint64_t senders = 0, receivers = 0, both = 0;
    for (std::uint32_t i = 0; i < n_; ++i) {
      senders += a_[i] > 0;
      receivers += q_[i] > 0;
      both += a_[i] > 0 && q_[i] > 0;
    }
    return senders * receivers - both;
  }
  std::uint64_t count = 0;
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d) count += at(s, d) > 0;
  return count;
}

TrafficMatrix TrafficMatrix::transposed() const {
  if (form_ == Form::Tiered) {
    TrafficMatrix t = *this;
    std::swap(t.out_, t.in_);
    std::swap(t.out_by_worker_, t.in_by_worker_);
    std::swap(t.out_by_parent_, t.in_by_parent_);
    return t;
  }
  if (form_ == Form::Factored) {
    // T'[s][d] = T[d][s] = a[d]·q[s] = (A·q[s])·(a[d]/A) with A = Σa.
    const double atot = std::accumulate(a_.begin(), a_.end(), 0.0);
    std::vector<double> a2(n_), q2(n_);
    for (std::uint32_t i = 0; i < n_; ++i) {
      a2[i] = atot * q_[i];
      q2[i] = atot > 0 ? a_[i] / atot : 0.0;
    }
    return factored(std::move(a2), std::move(q2));
  }
  std::vector<double> t(dense_.size());
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d) t[static_cast<std::size_t>(d) * n_ + s] = dense_[static_cast<std::size_t>(s) * n_ + d];
  return dense(n_, std::move(t));
}

TrafficMatrix TrafficMatrix::from_tiers(std::shared_ptr<const RankTiers> tiers, std::vector<double> out,
                                        std::vector<double> in, std::uint64_t pairs) {
  TrafficMatrix t;
  t.n_ = tiers->ranks();
  t.form_ = Form::Tiered;
  t.tiers_ = std::move(tiers);
  t.out_ = std::move(out);
  t.in_ = std::move(in);
  t.pairs_ = pairs;
  t.index_tiers();
  return t;
}

TrafficMatrix TrafficMatrix::as_tiered(std::shared_ptr<const RankTiers> tiers) const {
  if (form_ == Form::Tiered) return *this;
  if (tiers->ranks() != n_) invariant_failed("tiered form over tiers of another group size");
  const int count = tiers->tiers();
  if (form_ == Form::Dense) {
    TieredBuilder b(tiers);
    for (std::uint32_t s = 0; s < n_; ++s)
      for (std::uint32_t d = 0; d < n_; ++d) b.add(s, d, dense_[static_cast<std::size_t>(s) * n_ + d]);
    return std::move(b).build();
  }
  // Factored: s sends a[s]·q[d] to every d ≠ s; those it reaches across tier t are its parent's
  // ranks outside its own worker: a[s]·(Q(parent) − Q(worker)), and d receives q[d]·(A(parent) −
  // A(worker)) likewise.
  std::vector<double> out(static_cast<std::size_t>(count) * n_, 0.0), in(out.size(), 0.0);
  for (int t = 0; t < count; ++t) {
    const auto& worker = tiers->worker[t];
    const std::uint32_t parents = t == 0 ? 1 : tiers->workers[t - 1];
    std::vector<double> a_w(tiers->workers[t], 0.0), q_w(a_w.size(), 0.0), a_p(parents, 0.0), q_p(parents, 0.0);
    const auto parent = [&](std::uint32_t r) { return t == 0 ? 0u : tiers->worker[t - 1][r]; };
    for (std::uint32_t r = 0; r < n_; ++r) {
      a_w[worker[r]] += a_[r];
      q_w[worker[r]] += q_[r];
      a_p[parent(r)] += a_[r];
      q_p[parent(r)] += q_[r];
    }
    for (std::uint32_t r = 0; r < n_; ++r) {
      out[t * n_ + r] = a_[r] * std::max(0.0, q_p[parent(r)] - q_w[worker[r]]);
      in[t * n_ + r] = q_[r] * std::max(0.0, a_p[parent(r)] - a_w[worker[r]]);
    }
  }
  return from_tiers(std::move(tiers), std::move(out), std::move(in), pairs());
}

std::pair<TrafficMatrix, TrafficMatrix> TrafficMatrix::relayed(const std::vector<std::uint32_t>& node,
                                                               const std::vector<std::uint32_t>& local,
                                                               const std::vector<std::vector<std::uint32_t>>& rank_at) const {
  if (form_ != Form::Tiered) invariant_failed("a relayed all-to-all of a matrix not in tiered form");
  const int count = tiers_->tiers();
  const std::size_t k = rank_at.front().size();
  const auto parent = [&](int t, std::uint32_t r) { return t == 0 ? 0u : tiers_->worker[t - 1][r]; };
  // Per tier: whether what a rank sends across it stays in its node (its parent lies inside one
  // node), or leaves it (its worker holds the whole node). Anything else splits a node.
  std::vector<char> inside(count, 1);
  for (int t = 0; t < count; ++t) {
    const std::uint32_t parents = t == 0 ? 1 : tiers_->workers[t - 1];
    std::vector<std::uint32_t> node_of_parent(parents, UINT32_MAX), worker_of_node(rank_at.size(), UINT32_MAX);
    bool holds_nodes = true;
    for (std::uint32_t r = 0; r < n_; ++r) {
      std::uint32_t& np = node_of_parent[parent(t, r)];
      if (np == UINT32_MAX) np = node[r];
      else if (np != node[r]) inside[t] = 0;
      std::uint32_t& wn = worker_of_node[node[r]];
      if (wn == UINT32_MAX) wn = tiers_->worker[t][r];
      else if (wn != tiers_->worker[t][r]) holds_nodes = false;
    }
    if (!inside[t] && !holds_nodes)
      throw InfeasibleError(fmt::format("a hierarchical all-to-all of {} GPUs over a cluster tier ({}) whose workers "
                                        "split nodes; use \"all_to_all\": \"direct\"",
                                        n_, t));
  }
  // What the ranks of local index i receive across tier t, per worker and per parent there; and
  // how many of them receive anything.
  std::vector<std::vector<double>> in_w(count), in_p(count);
  std::vector<std::vector<std::uint32_t>> receivers_w(count), receivers_p(count);
  for (int t = 0; t < count; ++t) {
    const std::uint32_t parents = t == 0 ? 1 : tiers_->workers[t - 1];
    in_w[t].assign(tiers_->workers[t] * k, 0.0);
    in_p[t].assign(parents * k, 0.0);
    receivers_w[t].assign(in_w[t].size(), 0);
    receivers_p[t].assign(in_p[t].size(), 0);
    for (std::uint32_t d = 0; d < n_; ++d) {
      const double b = in_[t * n_ + d];
      const std::size_t w = tiers_->worker[t][d] * k + local[d], p = parent(t, d) * k + local[d];
      in_w[t][w] += b;
      in_p[t][p] += b;
      receivers_w[t][w] += b > 0;
      receivers_p[t][p] += b > 0;
    }
  }
  TieredBuilder first(tiers_);
  std::vector<double> out2(out_.size(), 0.0), in2(in_.size(), 0.0), to_index(k);
  for (std::uint32_t s = 0; s < n_; ++s) {
    std::fill(to_index.begin(), to_index.end(), 0.0);
    const std::vector<std::uint32_t>& peers = rank_at[node[s]];
    for (int t = 0; t < count; ++t) {
      const double o = out_[t * n_ + s];
      const std::uint32_t w = tiers_->worker[t][s], p = parent(t, s);
      const double reach = in_by_parent_[t][p] - in_by_worker_[t][w];
      if (o <= 0 || reach <= 0) continue;
      for (std::size_t i = 0; i < k; ++i) {
        const double b = o * (in_p[t][p * k + i] - in_w[t][w * k + i]) / reach;
        if (b <= 0) continue;
        if (inside[t]) {
          to_index[i] += b;  // to its node's rank of index i itself
        } else {
          if (i != local[s]) to_index[i] += b;  // to the peer of index i, which sends it on
          out2[t * n_ + peers[i]] += b;
        }
      }
    }
    for (std::size_t i = 0; i < k; ++i) first.add(s, peers[i], to_index[i]);
  }
  // Phase 2 crosses the tiers that leave a node, each byte at the tier its source's did; a relay
  // reaches the ranks of its own index there that receive anything.
  std::uint64_t pairs2 = 0;
  for (int t = 0; t < count; ++t) {
    if (inside[t]) continue;
    for (std::uint32_t r = 0; r < n_; ++r) {
      in2[t * n_ + r] = in_[t * n_ + r];
      if (out2[t * n_ + r] > 0)
        pairs2 += receivers_p[t][parent(t, r) * k + local[r]] - receivers_w[t][tiers_->worker[t][r] * k + local[r]];
    }
  }
  return {std::move(first).build(), from_tiers(tiers_, std::move(out2), std::move(in2), pairs2)};
}

TrafficMatrix TrafficMatrix::to_dense() const {
  if (form_ == Form::Dense) return *this;
  std::vector<double> t(static_cast<std::size_t>(n_) * n_);
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d) t[static_cast<std::size_t>(s) * n_ + d] = at(s, d);
  return dense(n_, std::move(t));
}

bool TrafficMatrix::tiered_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                                 const std::vector<std::uint32_t>& slot_of_rank, std::vector<double>& out,
                                 std::vector<double>& in) const {
  if (form_ != Form::Tiered) return false;
  const int l = tier_of(worker_of_rank, workers);
  if (l < 0) return false;
  for (std::uint32_t r = 0; r < n_; ++r) {
    out[slot_of_rank[r]] += leaving(r, l);
    in[slot_of_rank[r]] += entering(r, l);
  }
  return true;
}

void TrafficMatrix::worker_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                                 std::vector<double>& out, std::vector<double>& in) const {
  out.assign(workers, 0.0);
  in.assign(workers, 0.0);
  if (tiered_loads(worker_of_rank, workers, worker_of_rank, out, in)) return;
  if (form_ == Form::Factored) {
    // out(w) = A_w·(Q − Q_w), in(w) = Q_w·(A − A_w): traffic between ranks of one worker stays inside.
    std::vector<double> aw(workers, 0.0), qw(workers, 0.0);
    double atot = 0, qtot = 0;
    for (std::uint32_t r = 0; r < n_; ++r) {
      aw[worker_of_rank[r]] += a_[r];
      qw[worker_of_rank[r]] += q_[r];
      atot += a_[r];
      qtot += q_[r];
    }
    for (std::uint32_t w = 0; w < workers; ++w) {
      out[w] = aw[w] * (qtot - qw[w]);
      in[w] = qw[w] * (atot - aw[w]);
    }
    return;
  }
  // Dense, or a tiered matrix grouped by workers of no tier (pair by pair).
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d) {
      const std::uint32_t ws = worker_of_rank[s], wd = worker_of_rank[d];
      if (ws == wd) continue;
      const double b = at(s, d);
      out[ws] += b;
      in[wd] += b;
    }
}

void TrafficMatrix::port_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                               const std::vector<std::uint32_t>& port_of_rank, std::uint32_t ports,
                               std::vector<double>& out, std::vector<double>& in) const {
  out.assign(ports, 0.0);
  in.assign(ports, 0.0);
  if (tiered_loads(worker_of_rank, workers, port_of_rank, out, in)) return;
  if (form_ == Form::Factored) {
    // A port's ranks share its worker w: out(p) = A_p·(Q − Q_w), in(p) = Q_p·(A − A_w).
    std::vector<double> aw(workers, 0.0), qw(workers, 0.0), ap(ports, 0.0), qp(ports, 0.0);
    std::vector<std::uint32_t> worker_of_port(ports, 0);
    double atot = 0, qtot = 0;
    for (std::uint32_t r = 0; r < n_; ++r) {
      aw[worker_of_rank[r]] += a_[r];
      qw[worker_of_rank[r]] += q_[r];
      ap[port_of_rank[r]] += a_[r];
      qp[port_of_rank[r]] += q_[r];
      worker_of_port[port_of_rank[r]] = worker_of_rank[r];
      atot += a_[r];
      qtot += q_[r];
    }
    for (std::uint32_t p = 0; p < ports; ++p) {
      out[p] = ap[p] * (qtot - qw[worker_of_port[p]]);
      in[p] = qp[p] * (atot - aw[worker_of_port[p]]);
    }
    return;
  }
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d) {
      if (worker_of_rank[s] == worker_of_rank[d]) continue;
      const double b = at(s, d);
      out[port_of_rank[s]] += b;
      in[port_of_rank[d]] += b;
    }
}

void TrafficMatrix::sibling_pairs(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                                  const std::vector<std::uint32_t>& parent_of_worker, std::vector<double>& pair) const {
  pair.assign(static_cast<std::size_t>(workers) * workers, 0.0);
  const auto siblings = [&](std::uint32_t a, std::uint32_t b) { return a != b && parent_of_worker[a] == parent_of_worker[b]; };
  if (form_ == Form::Factored) {
    // a_w·Q_v: every source of w routes by the same shares.
    std::vector<double> aw(workers, 0.0), qw(workers, 0.0);
    for (std::uint32_t r = 0; r < n_; ++r) {
      aw[worker_of_rank[r]] += a_[r];
      qw[worker_of_rank[r]] += q_[r];
    }
    for (std::uint32_t a = 0; a < workers; ++a)
      for (std::uint32_t b = 0; b < workers; ++b)
        if (siblings(a, b)) pair[static_cast<std::size_t>(a) * workers + b] = aw[a] * qw[b];
    return;
  }
  if (form_ == Form::Tiered) {
    if (const int l = tier_of(worker_of_rank, workers); l >= 0) {
      // What w sends across tier l, split over its siblings by what each receives across l.
      std::vector<double> parent_in(workers, 0.0);
      for (std::uint32_t v = 0; v < workers; ++v)
        for (std::uint32_t u = 0; u < workers; ++u)
          if (siblings(u, v)) parent_in[u] += in_by_worker_[l][v];
      for (std::uint32_t a = 0; a < workers; ++a)
        for (std::uint32_t b = 0; b < workers; ++b)
          if (siblings(a, b) && parent_in[a] > 0)
            pair[static_cast<std::size_t>(a) * workers + b] = out_by_worker_[l][a] * in_by_worker_[l][b] / parent_in[a];
      return;
    }
  }
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d)
      if (siblings(worker_of_rank[s], worker_of_rank[d])) pair[static_cast<std::size_t>(worker_of_rank[s]) * workers + worker_of_rank[d]] += at(s, d);
}

}  // namespace moesim::network
