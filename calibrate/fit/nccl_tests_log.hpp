// Importer for the logs of NVIDIA's nccl-tests (all_reduce_perf, all_gather_perf, alltoall_perf,
// reduce_scatter_perf, sendrecv_perf), in the format of nccl-tests src/common.cu: a preamble
// (`# nThread .. nGpus ..`, one `#  Rank N Group G Pid P on HOST device D [PCI] GPU` line per rank,
// `NCCL version`), a header (`# size count type redop root time algbw busbw #wrong time ...`,
// units `(B) (elements) (us) (GB/s) ...`), one row per size with the out-of-place and the in-place
// half, and a footer (`# Avg bus bandwidth`). Logs pasted from launchers carry line prefixes
// ("0: " from srun, "[1,0]<stdout>:" from Open MPI): they are stripped. Old builds without the root
// column or with an `error` column parse too: rows are split on whitespace.
//
// Per table it finds
//  - the collective: "Collective test starting: NAME", or the last name of a test (all_reduce_perf,
//    alltoall, "-t all_gather", ...) in the text since the previous table; else the caller's; else
//    the previous table's (a log usually holds one test);
//  - the rank count: the caller's (--ranks), else the largest index of the Rank lines + 1 (also
//    of lines elided to `#  Rank 71 ...`), else nThread × nGpus when it is above 1 (one process
//    drives every GPU), else solved from busbw/algbw, which nccl-tests sets to the factors of
//    doc/PERFORMANCE.md (all_reduce 2(n−1)/n, all_gather, reduce_scatter and alltoall (n−1)/n,
//    sendrecv 1). The ratio is known only to the printed digits of the two bandwidths: a count
//    it contradicts is refused, and so is a ratio that fits more than one count (above ~100
//    ranks (n−1)/n no longer tells n from n ± 1) when nothing else says n;
//  - the nodes: the caller's (--nodes), else distinct hosts when every rank's line is there,
//    else ceil(ranks / gpus_per_node) if given.
// Both halves of a row become samples (in-place times are the same collective); rows of size 0
// are skipped. Times are in microseconds (the units row must say `(us)`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/fit/measurements.hpp"

namespace moesim::calibrate {

struct NcclTestsOptions {
  std::string collective;            // used where the log does not name it
  std::optional<int> gpus_per_node;  // to count nodes where the log lists no hosts
  std::optional<int> table;          // keep only this result table (1-based)
  std::optional<int> ranks;          // the rank count of every table kept (else from the log)
  std::optional<int> nodes;          // the node count of every table kept
};

// Throws InputError (file, "table T, line L", problem, fix) on a log it cannot read.
std::vector<Series> read_nccl_tests_log(std::string_view text, const std::string& file,
                                        const NcclTestsOptions& options = {});

}  // namespace moesim::calibrate
