// What nccl-tests measures, simulated (`moesim collective`): one collective of each nccl-tests
// `size` on the first `ranks` GPUs of a scenario's cluster, alone, with the scenario's network
// model, all-reduce algorithm and calibration (sim/calibration/nccl_tests.hpp for the size and
// bandwidth conventions). The collectives map onto moesim's as NCCL runs them: all_reduce with the
// scenario's algorithm on `size` bytes; all_gather and reduce_scatter as rings (each rank brings
// size/n, or reduces size); alltoall as a direct exchange of size/n to every peer; sendrecv as
// every rank sending `size` to the next (rank r to r + 1, the last to the first).
#pragma once

#include <string>
#include <vector>

#include "sim/calibration/nccl_tests.hpp"
#include "sim/simulation/simulation.hpp"

namespace moesim::simulation {

// Rows in the order of `sizes` (each rounded as nccl-tests does; sizes that round to 0 skipped).
std::vector<calibration::nccl_tests::Row> bench_collective(const Simulation& sim, const std::string& collective, int ranks,
                                                           const std::vector<double>& sizes);

}  // namespace moesim::simulation
