// Element types of the calibration GeMMs and attention: names as written in the measurements JSON
// ("bf16", "fp16", "fp32", "tf32"). tf32 is fp32 storage multiplied on tensor cores
// (CUBLAS_COMPUTE_32F_FAST_TF32); every type accumulates in fp32.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace moesim::calibrate {

enum class DType { bf16, fp16, fp32, tf32 };

const char* name(DType t);
std::size_t element_size(DType t);  // bytes of one stored element (tf32: 4)

// Parses a comma list such as "bf16,fp16"; a name outside `allowed` is a usage error naming `option`.
std::vector<DType> parse_dtypes(const std::string& list, const std::vector<DType>& allowed, const char* option);

}  // namespace moesim::calibrate
