#include "sim/cluster/gpu_spec.hpp"

namespace moesim::cluster {

std::optional<Dtype> parse_dtype(std::string_view text) { return value_of(kDtypeNames, text); }

std::string_view to_string(Dtype d) { return name_of(kDtypeNames, d); }

double dtype_bytes(Dtype d) {
  switch (d) {
    case Dtype::fp32:
    case Dtype::tf32: return 4;
    case Dtype::fp16:
    case Dtype::bf16: return 2;
    case Dtype::fp8: return 1;
    case Dtype::mxfp8: return 1 + 1.0 / 32;  // OCP MX v1.0: an 8-bit E8M0 scale per block of 32
  }
  return 4;
}

Dtype storage_dtype(Dtype d) { return is_fp8(d) ? Dtype::bf16 : d; }

double storage_bytes(Dtype d) { return dtype_bytes(storage_dtype(d)); }

}  // namespace moesim::cluster
