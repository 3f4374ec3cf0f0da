// Bytes each rank of a group sends to each other rank in an all-to-all(v). Two forms:
//  - dense: an n×n matrix (uneven routing sampled per source, trace files); cost O(n²);
//  - factored: T[s][d] = a[s]·q[d] for s ≠ d, with Σq = 1 (less once a fused dispatch
//    de-duplicates) — every source routes by the same destination shares (expert popularity of
//    this layer). Exact for uniform routing and for skewed routing by a shared popularity; cost
//    O(n), which is what makes 8000-GPU groups cheap.
// The diagonal (a rank's tokens for its own experts) never leaves the GPU and is not traffic.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace moesim::network {

class TrafficMatrix {
 public:
  static TrafficMatrix dense(std::uint32_t n, std::vector<double> bytes);  // row-major n×n
  // a[s]: bytes source s routes to all ranks including itself; q[d]: share each destination gets.
  static TrafficMatrix factored(std::vector<double> a, std::vector<double> q);
  // Every rank sends `bytes_per_pair` to every other rank.
  static TrafficMatrix uniform(std::uint32_t n, double bytes_per_pair);

  std::uint32_t size() const { return n_; }
  bool is_factored() const { return factored_; }
  double at(std::uint32_t s, std::uint32_t d) const;
  double sent(std::uint32_t s) const;      // excluding the diagonal
  double received(std::uint32_t d) const;  // excluding the diagonal
  double total() const;                    // excluding the diagonal
  std::uint64_t pairs() const;             // ordered pairs s ≠ d with traffic
  TrafficMatrix transposed() const;        // the combine of a dispatch
  TrafficMatrix to_dense() const;

  // Per worker (ranks grouped by `worker_of_rank`, ids 0..workers-1): bytes leaving and entering it.
  void worker_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers, std::vector<double>& out,
                    std::vector<double>& in) const;
  // The same bytes, counted on the port each rank uses (`port_of_rank`, ids 0..ports-1, every port
  // inside one worker): what leaves and enters its worker through each port.
  void port_loads(const std::vector<std::uint32_t>& worker_of_rank, std::uint32_t workers,
                  const std::vector<std::uint32_t>& port_of_rank, std::uint32_t ports, std::vector<double>& out,
                  std::vector<double>& in) const;

  const std::vector<double>& a() const { return a_; }
  const std::vector<double>& q() const { return q_; }

 private:
  std::uint32_t n_ = 0;
  bool factored_ = false;
  std::vector<double> dense_;
  std::vector<double> a_, q_;
};

using TrafficPtr = std::shared_ptr<const TrafficMatrix>;

}  // namespace moesim::network
