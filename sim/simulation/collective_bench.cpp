#include "sim/simulation/collective_bench.hpp"

#include <numeric>

#include "sim/core/error.hpp"

namespace moesim::simulation {

std::vector<calibration::nccl_tests::Row> bench_collective(const Simulation& sim, const std::string& collective, int ranks,
                                                           const std::vector<double>& sizes) {
  namespace nt = calibration::nccl_tests;
  std::vector<std::uint32_t> gpus(static_cast<std::size_t>(ranks));
  std::iota(gpus.begin(), gpus.end(), 0u);
  const auto n = static_cast<std::uint32_t>(ranks);
  std::vector<nt::Row> rows;
  for (const double requested : sizes) {
    const nt::Shape s = nt::shape(collective, requested, ranks);
    if (s.size <= 0) continue;
    network::CollectiveOp op;
    op.bytes = s.size;
    if (collective == "all_reduce") {
      op.kind = network::CollectiveKind::AllReduce;
      op.algorithm = sim.scenario().all_reduce;
    } else if (collective == "all_gather") {
      op.kind = network::CollectiveKind::AllGather;
      op.algorithm = network::Algorithm::Ring;
      op.bytes = s.size / n;
    } else if (collective == "reduce_scatter") {
      op.kind = network::CollectiveKind::ReduceScatter;
      op.algorithm = network::Algorithm::Ring;
    } else if (collective == "all_to_all" || collective == "send_recv") {
      op.kind = network::CollectiveKind::AllToAll;
      op.algorithm = network::Algorithm::Direct;
      if (collective == "all_to_all") {
        op.traffic = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::uniform(n, s.size / n));
      } else {
        std::vector<double> ring(static_cast<std::size_t>(n) * n, 0.0);
        for (std::uint32_t r = 0; r < n; ++r) ring[static_cast<std::size_t>(r) * n + (r + 1) % n] = s.size;
        op.traffic = std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::dense(n, std::move(ring)));
      }
    } else {
      invariant_failed("bench_collective: unknown collective " + collective);
    }
    const Time t = sim.time_collective(op, gpus);
    rows.push_back({s.size, s.count, static_cast<double>(t) * 1e-6, requested, sim.describe_collective(op, gpus)});
  }
  return rows;
}

}  // namespace moesim::simulation
