// `moesim search SCENARIO.json [-o DIR] [--jobs N] [--top K] [--tp LIST] [--pp LIST] [--vp LIST]
// [--ep LIST] [--mbs LIST] [--recompute LIST] [--dry-run]`: the parallel layouts of the scenario's
// model on its cluster and global batch (sim/search/search.hpp), ranked by simulated throughput.
#pragma once

#include <string>
#include <vector>

namespace moesim::cli {

// Exit codes as the other commands: 0 done, 2 bad input (nothing written), 1 an output failure.
int cmd_search(const std::vector<std::string>& args);

}  // namespace moesim::cli
