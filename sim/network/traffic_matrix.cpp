#include "sim/network/traffic_matrix.hpp"

#include <numeric>

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
  t.factored_ = true;
  t.a_ = std::move(a);
  t.q_ = std::move(q);
  return t;
}

TrafficMatrix TrafficMatrix::uniform(std::uint32_t n, double bytes_per_pair) {
  // a[s]·q[d] = bytes_per_pair with q = 1/n: a[s] = n·bytes_per_pair.
  return factored(std::vector<double>(n, bytes_per_pair * n), std::vector<double>(n, 1.0 / n));
}

double TrafficMatrix::at(std::uint32_t s, std::uint32_t d) const {
  if (s == d) return 0.0;
  return factored_ ? a_[s] * q_[d] : dense_[static_cast<std::size_t>(s) * n_ + d];
}

double TrafficMatrix::sent(std::uint32_t s) const {
  // Σq is 1 for routing shares, less once a fused dispatch de-duplicates (blocks/fused_dispatch).
  if (factored_) return a_[s] * (std::accumulate(q_.begin(), q_.end(), 0.0) - q_[s]);
  double sum = 0;
  for (std::uint32_t d = 0; d < n_; ++d) sum += at(s, d);
  return sum;
}

double TrafficMatrix::received(std::uint32_t d) const {
  if (factored_) {
    const double atot = std::accumulate(a_.begin(), a_.end(), 0.0);
    return q_[d] * (atot - a_[d]);
  }
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
  if (factored_) {
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
  if (factored_) {
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

TrafficMatrix TrafficMatrix::to_dense() const {
  if (!factored_) return *this;
  std::vector<double> t(static_cast<std::size_t>(n_) * n_);
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d) t[static_cast<std::size_t>(s) * n_ + d] = at(s, d);
  return dense(n_, std::move(t));
}

void TrafficMatrix::worker_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                                 std::vector<double>& out, std::vector<double>& in) const {
  out.assign(workers, 0.0);
  in.assign(workers, 0.0);
  if (factored_) {
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
  for (std::uint32_t s = 0; s < n_; ++s)
    for (std::uint32_t d = 0; d < n_; ++d) {
      const std::uint32_t ws = worker_of_rank[s], wd = worker_of_rank[d];
      if (ws == wd) continue;
      const double b = dense_[static_cast<std::size_t>(s) * n_ + d];
      out[ws] += b;
      in[wd] += b;
    }
}

void TrafficMatrix::port_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                               const std::vector<std::uint32_t>& port_of_rank, std::uint32_t ports,
                               std::vector<double>& out, std::vector<double>& in) const {
  out.assign(ports, 0.0);
  in.assign(ports, 0.0);
  if (factored_) {
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
      const double b = dense_[static_cast<std::size_t>(s) * n_ + d];
      out[port_of_rank[s]] += b;
      in[port_of_rank[d]] += b;
    }
}

}  // namespace moesim::network
