// CUDA kernels of the calibration binaries (see kernels.hpp): a counter-hash fill, and the
// row-wise softmax of unfused ("math") scaled-dot-product attention, forward and backward, as
// PyTorch's reference SDPA computes it between its cuBLAS GeMMs. One block per row, fp32 sums and
// max, block reductions by warp shuffles (CUDA C++ Programming Guide, "Warp Shuffle Functions").
#include "kernels.hpp"

#include <algorithm>
#include <climits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdexcept>

#include "cuda_util.hpp"

namespace moesim::calibrate {

namespace {

constexpr int kThreads = 256;

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ inline T from_float(float x);
template <>
__device__ inline float from_float<float>(float x) { return x; }
template <>
__device__ inline __half from_float<__half>(float x) { return __float2half(x); }
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

// splitmix64 finaliser.
__device__ inline unsigned long long mix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_kernel(T* data, std::size_t count, unsigned long long seed, float scale) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const float u = static_cast<float>(mix(seed ^ (i * 0xD1B54A32D192ED03ull)) >> 40) * (1.0f / 16777216.0f);
    data[i] = from_float<T>((2.0f * u - 1.0f) * scale);
  }
}

__global__ void hold_kernel(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduces v over the block; every thread gets the result.
template <typename Op>
__device__ float block_reduce(float v, Op op) {
  __shared__ float partial[kThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // the previous call's readers are done with `partial`
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < kThreads / 32; ++w) v = op(v, partial[w]);
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) softmax_forward_kernel(T* scores, int len, bool causal) {
  const long long row = blockIdx.x;
  T* s = scores + row * len;
  const int valid = causal ? static_cast<int>(row % len) + 1 : len;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < valid; j += kThreads) m = fmaxf(m, to_float(s[j]));
  m = block_reduce(m, Max{});
  float sum = 0.0f;
  for (int j = threadIdx.x; j < valid; j += kThreads) sum += __expf(to_float(s[j]) - m);
  const float inv = 1.0f / block_reduce(sum, Sum{});
  for (int j = threadIdx.x; j < len; j += kThreads) s[j] = from_float<T>(j < valid ? __expf(to_float(s[j]) - m) * inv : 0.0f);
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_backward_kernel(const T* p, T* dp, const T* o, const T* d_o, int len, int head_dim, float scale) {
  const long long row = blockIdx.x;
  float dot = 0.0f;
  for (int t = threadIdx.x; t < head_dim; t += kThreads) dot += to_float(d_o[row * head_dim + t]) * to_float(o[row * head_dim + t]);
  dot = block_reduce(dot, Sum{});
  const T* pr = p + row * len;
  T* dr = dp + row * len;
  for (int j = threadIdx.x; j < len; j += kThreads) dr[j] = from_float<T>(scale * to_float(pr[j]) * (to_float(dr[j]) - dot));
}

unsigned row_blocks(std::int64_t rows) {
  if (rows <= 0 || rows > INT_MAX) throw std::invalid_argument("softmax: rows out of the grid's range");
  return static_cast<unsigned>(rows);
}

}  // namespace

void fill_uniform(void* data, DType dtype, std::size_t count, std::uint64_t seed, float scale, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>((count + kThreads - 1) / kThreads, 8192));
  if (blocks == 0) return;
  switch (dtype) {
    case DType::bf16: fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed, scale); break;
    case DType::fp16: fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(data), count, seed, scale); break;
    case DType::fp32:
    case DType::tf32: fill_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(data), count, seed, scale); break;
  }
  check_cuda(cudaGetLastError(), "fill_kernel launch");
}

void hold_stream(double microseconds, cudaStream_t stream) {
  if (!(microseconds > 0)) return;
  hold_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(microseconds * 1000.0));
  check_cuda(cudaGetLastError(), "hold_kernel launch");
}

void softmax_forward(void* scores, DType dtype, std::int64_t rows, int len, bool causal, cudaStream_t stream) {
  const unsigned blocks = row_blocks(rows);
  if (dtype == DType::bf16)
    softmax_forward_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(scores), len, causal);
  else if (dtype == DType::fp16)
    softmax_forward_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(scores), len, causal);
  else
    throw std::invalid_argument("softmax_forward: bf16 or fp16 only");
  check_cuda(cudaGetLastError(), "softmax_forward_kernel launch");
}

void softmax_backward(const void* p, void* dp, const void* o, const void* d_o, DType dtype, std::int64_t rows,
                      int len, int head_dim, float scale, cudaStream_t stream) {
  const unsigned blocks = row_blocks(rows);
  if (dtype == DType::bf16) {
    using T = __nv_bfloat16;
    softmax_backward_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(p), static_cast<T*>(dp),
                                                             static_cast<const T*>(o), static_cast<const T*>(d_o),
                                                             len, head_dim, scale);
  } else if (dtype == DType::fp16) {
    using T = __half;
    softmax_backward_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(p), static_cast<T*>(dp),
                                                             static_cast<const T*>(o), static_cast<const T*>(d_o),
                                                             len, head_dim, scale);
  } else {
    throw std::invalid_argument("softmax_backward: bf16 or fp16 only");
  }
  check_cuda(cudaGetLastError(), "softmax_backward_kernel launch");
}

}  // namespace moesim::calibrate
