// cuBLASLt matmul plans in row-major terms (see lt_matmul.hpp).
#include "lt_matmul.hpp"

#include <fmt/format.h>

#include "cuda_util.hpp"

namespace moesim::calibrate {

namespace {

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::bf16: return CUDA_R_16BF;
    case DType::fp16: return CUDA_R_16F;
    case DType::fp32:
    case DType::tf32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

cublasLtMatrixLayout_t make_layout(DType t, std::int64_t rows, std::int64_t cols, std::int64_t ld, int batch,
                                   std::int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  check_cublas(cublasLtMatrixLayoutCreate(&layout, data_type(t), static_cast<std::uint64_t>(rows),
                                          static_cast<std::uint64_t>(cols), ld),
               "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const std::int32_t count = batch;
    check_cublas(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                 "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    check_cublas(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                  sizeof stride),
                 "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
  }
  return layout;
}

}  // namespace

void check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw GpuError(fmt::format("{} failed: {} ({})", call, cublasLtGetStatusName(status), cublasLtGetStatusString(status)));
}

LtHandle::LtHandle() { check_cublas(cublasLtCreate(&handle_), "cublasLtCreate"); }

LtHandle::~LtHandle() {
  if (handle_) cublasLtDestroy(handle_);
}

LtMatmul::LtMatmul(const LtHandle& handle, DType dtype, const MatmulShape& s, float alpha, std::size_t workspace_bytes)
    : handle_(handle.get()), alpha_(alpha), workspace_bytes_(workspace_bytes) {
  const cublasComputeType_t compute = dtype == DType::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  check_cublas(cublasLtMatmulDescCreate(&op_, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's "A" is our B.
  const cublasOperation_t op_lt_a = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_lt_b = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &op_lt_a, sizeof op_lt_a),
               "cublasLtMatmulDescSetAttribute(TRANSA)");
  check_cublas(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &op_lt_b, sizeof op_lt_b),
               "cublasLtMatmulDescSetAttribute(TRANSB)");
  // Our B, row-major k×n (or n×k when transposed), is column-major n×k (or k×n).
  a_ = s.transpose_b ? make_layout(dtype, s.k, s.n, s.k, s.batch, s.stride_b)
                     : make_layout(dtype, s.n, s.k, s.n, s.batch, s.stride_b);
  // Our A, row-major m×k (or k×m when transposed), is column-major k×m (or m×k).
  b_ = s.transpose_a ? make_layout(dtype, s.m, s.k, s.m, s.batch, s.stride_a)
                     : make_layout(dtype, s.k, s.m, s.k, s.batch, s.stride_a);
  c_ = make_layout(dtype, s.n, s.m, s.n, s.batch, s.stride_c);

  cublasLtMatmulPreference_t preference = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const std::uint64_t limit = workspace_bytes;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                               &limit, sizeof limit);
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, c_, c_, preference, 1, &result, &returned);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && returned == 0)) {
    why_not_ = "cublasLtMatmulAlgoGetHeuristic found no algorithm";
    return;
  }
  check_cublas(status, "cublasLtMatmulAlgoGetHeuristic");
  algo_ = result.algo;
  ok_ = true;
}

LtMatmul::~LtMatmul() {
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (op_) cublasLtMatmulDescDestroy(op_);
}

void LtMatmul::run(const void* a, const void* b, void* c, void* workspace, cudaStream_t stream) const {
  check_cublas(cublasLtMatmul(handle_, op_, &alpha_, b, a_, a, b_, &beta_, c, c_, c, c_, &algo_, workspace,
                              workspace_bytes_, stream),
               "cublasLtMatmul");
}

}  // namespace moesim::calibrate
