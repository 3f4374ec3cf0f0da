// GeMM throughput tables from CSV: the form published GeMM sweeps take, such as OpenXLA's default
// matmul performance table (xla/service/gpu/model/matmul_interpolator_data.h; its sm_90 / H100
// table is tests/data/realdata/20_*, reformatted to CSV). Layout:
//   # comment lines (kept as the input's provenance notes)
//   b,m,n,k,bf16_flops_per_s,f32_flops_per_s       <- header: m, n, k, optional b (batch), and
//   1,1024,2048,256,139519467775467,82342164417177     one value column or more per dtype
// Value columns are `<dtype>_flops_per_s` (achieved FLOP/s of C[M×N] = A[M×K]·B[K×N], 2·M·N·K
// FLOPs) or `<dtype>_time_<unit>` (unit ns, us, ms or s); dtype is moesim's name (fp32, tf32, fp16,
// bf16, fp8) or XLA's f32 / f16 (read as fp32 / fp16). Rows with a batch b ≠ 1 are batched GeMMs,
// which the (M, N, K) tables do not hold: they are skipped and counted in the provenance.
// Malformed input throws InputError naming the file, line and column, and the fix.
#pragma once

#include <string>

#include "calibrate/fit/measurements.hpp"

namespace moesim::calibrate {

Measurements read_gemm_table_csv(const std::string& text, const std::string& file);

}  // namespace moesim::calibrate
