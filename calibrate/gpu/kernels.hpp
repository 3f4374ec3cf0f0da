// The few CUDA kernels of the calibration binaries, callable from plain C++ (kernels.cu):
// filling buffers with pseudo-random values (GeMM timings depend on the data through power draw,
// so buffers are never left at zero), and the row-wise softmax of unfused attention, forward and
// backward, for bf16/fp16 scores with fp32 arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "dtype.hpp"

namespace moesim::calibrate {

// Uniform values in [-scale, scale) from a counter hash of (seed, index).
void fill_uniform(void* data, DType dtype, std::size_t count, std::uint64_t seed, float scale, cudaStream_t stream);

// Keeps `stream` busy for about `microseconds` (one thread spinning on the GPU's global timer).
// Launched just before the timed repetitions, it lets the host enqueue them all while the GPU
// waits: each event pair then times the GPU work alone, not the host's launch gap in front of it
// (a small GeMM runs for less time than cublasLtMatmul takes to launch it).
void hold_stream(double microseconds, cudaStream_t stream);

// In place over `rows` rows of `len` scores: P = softmax(S) row-wise. Rows are (batch·head, query
// i) with i = row mod len; `causal` masks the keys j > i (P = 0 there). The 1/sqrt(d) scale is
// already in S (the QKᵀ GeMM's alpha).
void softmax_forward(void* scores, DType dtype, std::int64_t rows, int len, bool causal, cudaStream_t stream);

// In place over dP: dS = scale · P ∘ (dP − rowsum(dO ∘ O)), rows as in softmax_forward; O and dO
// hold `head_dim` values per row.
void softmax_backward(const void* p, void* dp, const void* o, const void* d_o, DType dtype, std::int64_t rows,
                      int len, int head_dim, float scale, cudaStream_t stream);

}  // namespace moesim::calibrate
