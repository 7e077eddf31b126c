// One cuBLASLt product as fusebox sees it, shared by the matmul kernels (matmul_kernel.h) and the
// 1x1 convolutions (conv_kernel.h):
//
//   y[i] = act(a[i] b[i] + bias + residual[i]),  i < batch
//
// with row-major a[i] [m,k] at a + i * stride_a elements, b[i] [k,n] at b + i * stride_b (a
// stride of 0 gives every product the same matrix), y and the residual dense [batch,m,n], and the
// bias one value per column. Row-major matrices are cuBLASLt's column-major ones transposed, so
// the call computes y^T = b^T a^T: every operand is read as it lies in memory.
//
// One handle and one 32 MiB workspace per GPU serve every product (they all run on the
// context's one stream). Descriptors are built at every run, so a new size never recompiles;
// the heuristic's first algorithm is kept per (sizes, strides, pointer alignments).
#pragma once

#include <cublasLt.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "backends/cuda/context.h"
#include "backends/cuda/cublaslt.h"
#include "fusebox/status.h"

namespace fusebox::cuda {

struct GemmCall {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t stride_a = 0, stride_b = 0;  // elements between the batch's matrices (0: the same one)
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;      // [n], or null
  const void* residual = nullptr;  // [batch,m,n], or null
  void* y = nullptr;
};

// cuBLASLt's data type for f32, f16 and bf16; any other dtype is refused with the reason.
Expected<cudaDataType_t> lt_data_type(DType d);

class LtGemm {
 public:
  // Products of `dtype` (f32, f16, bf16: summed in f32; TF32 products for f32 only when
  // `allow_tf32`) with cuBLASLt's `epilogue` (CUBLASLT_EPILOGUE_DEFAULT: none). The handle and
  // workspace are made now, so a failure shows when the graph compiles.
  static Expected<std::shared_ptr<const LtGemm>> make(
      std::shared_ptr<Context> context, DType dtype, bool allow_tf32,
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT);

  // Enqueues the product on the context's stream (the context current). False, with nothing
  // enqueued, when cuBLASLt will not run it: no algorithm for these sizes, k = 0, or more
  // products than an int32 counts.
  Expected<bool> run(const GemmCall& c) const;

  LtGemm(std::shared_ptr<Context> context, const CublasLt& lt, DType dtype, cudaDataType_t type,
         bool allow_tf32, cublasLtEpilogue_t epilogue);

 private:
  // batch, m, n, k, stride_a, stride_b and the alignments of a, b, y, the bias and the residual.
  using AlgoKey = std::array<int64_t, 11>;

  std::shared_ptr<Context> context_;
  const CublasLt& lt_;
  DType dtype_;
  cudaDataType_t type_;
  cublasComputeType_t compute_;
  cublasLtEpilogue_t epilogue_;
  mutable std::mutex mu_;
  mutable std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> algorithms_;
};

}  // namespace fusebox::cuda
