#include "backends/cuda/lt_gemm.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>

namespace fusebox::cuda {

namespace {

// One handle and one workspace per GPU, shared by every product on it. The kernels all run on
// the context's one stream, so no two products use the workspace at once; a workspace per
// kernel would hold 32 MiB for every matmul of every compiled graph.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct LtDevice {
  cublasLtHandle_t handle = nullptr;
  std::shared_ptr<void> workspace;
};

Expected<const LtDevice*> lt_device(Context& context, const CublasLt& lt) {
  static std::mutex mu;
  // Never destroyed, as contexts are not: the handle and workspace live as long as the process.
  static auto* made = new std::map<int, LtDevice>();
  std::lock_guard<std::mutex> lock(mu);
  const int index = context.device().index;
  if (auto it = made->find(index); it != made->end()) return &it->second;
  FUSEBOX_RETURN_IF_ERROR(context.make_current());
  LtDevice d;
  FUSEBOX_ASSIGN_OR_RETURN(d.workspace, context.allocate(kWorkspaceBytes));
  FUSEBOX_RETURN_IF_ERROR(
      lt.check(lt.cublasLtCreate(&d.handle), "cublasLtCreate on " + context.device().to_string()));
  return &made->emplace(index, std::move(d)).first->second;
}

// The alignment of a device pointer in bytes, at most the 256 cuBLASLt assumes by default.
uint32_t alignment(const void* p) {
  const uintptr_t x = reinterpret_cast<uintptr_t>(p);
  if (!x) return 256;
  return uint32_t(std::min<uintptr_t>(256, x & (~x + 1)));
}

// The descriptors of one call, destroyed with it (cuBLASLt reads them when the call is enqueued).
struct Descriptors {
  const CublasLt& lt;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;  // cuBLASLt's A, B and D (= C)
  cublasLtMatmulPreference_t preference = nullptr;
  explicit Descriptors(const CublasLt& l) : lt(l) {}
  ~Descriptors() {
    if (preference) lt.cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t l : {a, b, d}) {
      if (l) lt.cublasLtMatrixLayoutDestroy(l);
    }
    if (op) lt.cublasLtMatmulDescDestroy(op);
  }
};

// A column-major rows x cols matrix with leading dimension `ld`, `batch` of them `stride` apart.
Status make_layout(const CublasLt& lt, cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows,
                   int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  FUSEBOX_RETURN_IF_ERROR(
      lt.check(lt.cublasLtMatrixLayoutCreate(layout, type, uint64_t(rows), uint64_t(cols), ld),
               "cublasLtMatrixLayoutCreate"));
  if (batch == 1) return Status::ok();
  const int32_t count = int32_t(batch);
  FUSEBOX_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
      "batch count"));
  return lt.check(lt.cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &stride, sizeof(stride)),
                  "batch stride");
}

}  // namespace

Expected<cudaDataType_t> lt_data_type(DType d) {
  switch (d) {
    case DType::F32:
      return CUDA_R_32F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      return Status::unimplemented("on cuBLASLt runs f32, f16 and bf16 (accumulating in f32), not " +
                                   std::string(dtype_name(d)));
  }
}

LtGemm::LtGemm(std::shared_ptr<Context> context, const CublasLt& lt, DType dtype, cudaDataType_t type,
               bool allow_tf32, cublasLtEpilogue_t epilogue)
    : context_(std::move(context)),
      lt_(lt),
      dtype_(dtype),
      type_(type),
      compute_(dtype == DType::F32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F),
      epilogue_(epilogue) {}

Expected<std::shared_ptr<const LtGemm>> LtGemm::make(std::shared_ptr<Context> context, DType dtype,
                                                     bool allow_tf32, cublasLtEpilogue_t epilogue) {
  FUSEBOX_ASSIGN_OR_RETURN(const CublasLt* lt, cublaslt());
  FUSEBOX_ASSIGN_OR_RETURN(cudaDataType_t type, lt_data_type(dtype));
  FUSEBOX_RETURN_IF_ERROR(lt_device(*context, *lt).status());
  return std::make_shared<const LtGemm>(std::move(context), *lt, dtype, type, allow_tf32, epilogue);
}

Expected<bool> LtGemm::run(const GemmCall& c) const {
  if (c.k <= 0 || c.batch > INT32_MAX) return false;  // cuBLASLt wants K >= 1 and counts products in an int32
  FUSEBOX_ASSIGN_OR_RETURN(const LtDevice* dev, lt_device(*context_, lt_));
  Descriptors ds(lt_);
  FUSEBOX_RETURN_IF_ERROR(
      lt_.check(lt_.cublasLtMatmulDescCreate(&ds.op, compute_, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  const uint32_t epilogue = epilogue_;
  FUSEBOX_RETURN_IF_ERROR(lt_.check(
      lt_.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)),
      "epilogue"));
  if (c.bias) {
    FUSEBOX_RETURN_IF_ERROR(lt_.check(
        lt_.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &c.bias, sizeof(c.bias)),
        "bias"));
  }
  // y^T = b^T a^T in column-major terms: cuBLASLt's A is b (n x k), its B is a (k x m).
  FUSEBOX_RETURN_IF_ERROR(make_layout(lt_, &ds.a, type_, c.n, c.k, c.n, c.batch, c.stride_b));
  FUSEBOX_RETURN_IF_ERROR(make_layout(lt_, &ds.b, type_, c.k, c.m, c.k, c.batch, c.stride_a));
  FUSEBOX_RETURN_IF_ERROR(make_layout(lt_, &ds.d, type_, c.n, c.m, c.n, c.batch, c.m * c.n));

  // D = act(A B + beta C + bias): the residual is C (beta 1), else C is D itself (beta 0).
  const void* cc = c.residual ? c.residual : c.y;
  const AlgoKey key = {c.batch,
                       c.m,
                       c.n,
                       c.k,
                       c.stride_a,
                       c.stride_b,
                       alignment(c.a),
                       alignment(c.b),
                       alignment(c.y),
                       alignment(c.bias),
                       alignment(cc)};
  std::optional<cublasLtMatmulAlgo_t> algo;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = algorithms_.find(key); it != algorithms_.end()) algo = it->second, known = true;
  }
  if (!known) {
    FUSEBOX_RETURN_IF_ERROR(
        lt_.check(lt_.cublasLtMatmulPreferenceCreate(&ds.preference), "cublasLtMatmulPreferenceCreate"));
    const uint64_t workspace = kWorkspaceBytes;
    FUSEBOX_RETURN_IF_ERROR(
        lt_.check(lt_.cublasLtMatmulPreferenceSetAttribute(
                      ds.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)),
                  "workspace size"));
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligned[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(key[7])},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(key[6])},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(key[10])},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(key[8])}};
    for (const auto& [attribute, bytes] : aligned) {
      FUSEBOX_RETURN_IF_ERROR(
          lt_.check(lt_.cublasLtMatmulPreferenceSetAttribute(ds.preference, attribute, &bytes, sizeof(bytes)),
                    "alignment"));
    }
    // cuBLASLt versions have answered some degenerate shapes (a dimension of 1) with
    // CUBLAS_STATUS_INVALID_VALUE or no result; either way cuBLASLt will not run them.
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (lt_.cublasLtMatmulAlgoGetHeuristic(dev->handle, ds.op, ds.a, ds.b, ds.d, ds.d, ds.preference, 1,
                                           &result, &found) == CUBLAS_STATUS_SUCCESS &&
        found > 0) {
      algo = result.algo;
    }
    std::lock_guard<std::mutex> lock(mu_);
    algorithms_.emplace(key, algo);
  }
  if (!algo) return false;

  const float alpha = 1.0f, beta = c.residual ? 1.0f : 0.0f;
  if (const cublasStatus_t s =
          lt_.cublasLtMatmul(dev->handle, ds.op, &alpha, c.b, ds.a, c.a, ds.b, &beta, cc, ds.d, c.y, ds.d,
                             &*algo, dev->workspace.get(), kWorkspaceBytes, context_->stream());
      s != CUBLAS_STATUS_SUCCESS) {
    return lt_.check(s, "cublasLtMatmul (" + std::string(dtype_name(dtype_)) + ", " +
                            std::to_string(c.batch) + " x " + std::to_string(c.m) + "x" +
                            std::to_string(c.k) + "x" + std::to_string(c.n) + ")");
  }
  return true;
}

}  // namespace fusebox::cuda
