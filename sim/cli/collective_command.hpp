// `moesim collective`: what nccl-tests would measure on a cluster, simulated and printed as
// nccl-tests prints it (sim/simulation/collective_bench.hpp), so that a user lays a log beside a
// prediction; with --compare LOG, the log's sizes and rank count simulated and both printed with
// the error per size.
#pragma once

#include <string>
#include <vector>

namespace moesim::cli {

// Exit codes as the other commands: 0 done, 2 bad input.
int cmd_collective(const std::vector<std::string>& args);

}  // namespace moesim::cli
