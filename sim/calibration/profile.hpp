// A calibration profile: cost parameters measured on a real cluster (or read from a paper), with
// where they come from. Scenarios name one ("calibration": "calibrations/NAME.json"); the fitter
// (`moesim calibrate fit`, calibrate/fit/) writes them from measurements or nccl-tests logs.
// It holds
//  - collectives: α-β of t = α + β·size (Hockney; Parm §V-A Eq. 12), per collective and group
//    shape ("ranks"/"nodes" as nccl-tests runs them, or a named parallel group such as Parm's
//    "mp"), piecewise over ranges of the size where one line does not fit. `size` follows
//    nccl-tests' `size` column (doc/PERFORMANCE.md): all_reduce the buffer per rank, all_gather the
//    gathered output per rank, reduce_scatter the input per rank, all_to_all the bytes each rank
//    sends (to all peers), send_recv the bytes of one message;
//  - gemm: measured GeMM throughput per dtype over (M, N, K) shapes, interpolated by
//    throughput_table.hpp;
//  - attention: measured forward and backward throughput per dtype and masking over
//    (sequence length, head size);
//  - memory_bound: the line t = fixed + bytes / rate fitted to measured memory-bound kernels
//    (copies, gathers, norms, activations: what each reads and writes of HBM), the compute
//    model's rule for such kernels (sim/compute/compute_model.hpp) with its two constants measured.
// Consumers look entries up and fall back to their defaults when one is missing; results say which
// entries were used and where defaults were. File format: docs/calibration.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/calibration/throughput_table.hpp"
#include "sim/core/schema.hpp"

namespace moesim::calibration {

// One straight piece of a collective's cost: t = alpha_s + beta_s_per_byte · size for sizes in
// [from_bytes, to_bytes) (to_bytes < 0: no upper end).
struct Segment {
  double from_bytes = 0;
  double to_bytes = -1;
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  // How well the line fits the measurements it was fitted to (0 when not given).
  int points = 0;
  double rms_relative_error = 0;
  double max_relative_error = 0;
  double seconds(double size) const { return alpha_s + beta_s_per_byte * size; }
};

struct CollectiveFit {
  std::string collective;  // all_gather, all_reduce, reduce_scatter, all_to_all, send_recv, overlap (Parm's SAA)
  std::string group;       // a named parallel group ("mp", "ep_esp"); empty when given by shape
  int ranks = 0;           // group shape as measured (0: not given)
  int nodes = 0;
  std::vector<Segment> segments;  // sorted, contiguous; the first starts at 0, the last is open
  std::string note;
  schema::Json report;  // the fitter's report (source, sizes, splits, dropped outliers); may be null

  // The piece covering `size` (sizes below the first piece use the first, above the last the last).
  const Segment& segment(double size) const;
  double seconds(double size) const { return segment(size).seconds(size); }
  // "all_reduce ranks=8 nodes=1" or "all_gather group=mp".
  std::string label() const;
};

// Memory-bound kernels: each takes fixed_s and then its HBM bytes at bytes_per_second, fitted by
// relative least squares over `kernels` measured ones; `error`: the fit's own relative time errors.
struct MemoryBoundFit {
  double fixed_s = 0;
  double bytes_per_second = 0;
  int kernels = 0;
  LogTable::Error error;
  std::string source;
};

struct Profile {
  std::string name;
  std::string file;
  schema::Json provenance;
  std::vector<CollectiveFit> collectives;
  std::vector<GemmTable> gemm;            // one per dtype
  std::vector<AttentionTable> attention;  // one per (dtype, causal)
  std::optional<MemoryBoundFit> memory_bound;

  const CollectiveFit* find(const std::string& collective, const std::string& group) const;
  const CollectiveFit* find_shape(const std::string& collective, int ranks, int nodes) const;
  const GemmTable* find_gemm(const std::string& dtype) const;
  const AttentionTable* find_attention(const std::string& dtype, bool causal) const;
};

const schema::NodePtr& profile_schema();
// Validates a profile document read from `file`; throws InputError naming the file and field.
Profile parse_profile(const schema::Json& doc, const std::string& file);
// The document parse_profile reads back (the fitter writes profiles with it).
schema::Json profile_to_json(const Profile& p);

}  // namespace moesim::calibration
