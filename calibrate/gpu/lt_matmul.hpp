// One cuBLASLt matrix multiplication, planned once and launched many times, in row-major terms:
// C[m×n] = alpha · op(A)·op(B) with op(A) m×k and op(B) k×n, optionally strided-batched. Follows the
// cuBLASLt API reference (docs.nvidia.com/cuda/cublas, "Using the cuBLASLt API"): matmul and layout
// descriptors, one algorithm from cublasLtMatmulAlgoGetHeuristic under a workspace limit, and
// cublasLtMatmul. cuBLASLt is column-major, so the row-major product runs as Cᵀ = op(B)ᵀ·op(A)ᵀ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cublasLt.h>
#include <string>

#include "dtype.hpp"

namespace moesim::calibrate {

// Throws GpuError "CALL failed: CUBLAS_STATUS_X (text)" unless `status` is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const char* call);

// A cuBLASLt handle (cublasLtCreate/cublasLtDestroy).
class LtHandle {
 public:
  LtHandle();
  ~LtHandle();
  LtHandle(const LtHandle&) = delete;
  LtHandle& operator=(const LtHandle&) = delete;
  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

struct MatmulShape {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false;  // A stored k×m (row-major) and used as Aᵀ
  bool transpose_b = false;  // B stored n×k (row-major) and used as Bᵀ
  int batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries
};

class LtMatmul {
 public:
  // Inputs and output of type `dtype`, fp32 accumulation and scaling (tf32: fp32 data on tensor
  // cores). Picks the heuristic's first algorithm that needs at most `workspace_bytes`.
  LtMatmul(const LtHandle& handle, DType dtype, const MatmulShape& shape, float alpha, std::size_t workspace_bytes);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // False when cuBLASLt has no algorithm for this problem (the reason is in why_not()).
  bool ok() const { return ok_; }
  const std::string& why_not() const { return why_not_; }

  void run(const void* a, const void* b, void* c, void* workspace, cudaStream_t stream) const;

 private:
  cublasLtHandle_t handle_;
  float alpha_;
  float beta_ = 0.0f;
  std::size_t workspace_bytes_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;  // cuBLASLt's A, B, C (column-major)
  cublasLtMatmulAlgo_t algo_{};
  bool ok_ = false;
  std::string why_not_;
};

}  // namespace moesim::calibrate
