#include "backends/cuda/matmul_kernel.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

#include "backends/cuda/cublaslt.h"
#include "backends/cuda/matmul_fallback.h"
#include "ir/check.h"
#include "ir/epilogue.h"
#include "ir/fused_ops.h"

namespace fusebox::cuda {

namespace {

// One handle and one workspace per GPU, shared by every matmul kernel on it. The kernels all run
// on the context's one stream, so no two products use the workspace at once; a workspace per
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
  FUSEBOX_RETURN_IF_ERROR(lt.check(lt.cublasLtCreate(&d.handle), "cublasLtCreate on " + context.device().to_string()));
  return &made->emplace(index, std::move(d)).first->second;
}

// How the products of a x b map onto one cuBLASLt call.
enum class Batching {
  Folded,   // b is one matrix (2-D, 1-D, or batch dims of 1): a's rows, every batch, at once
  Strided,  // equal batch dims: one product per batch, matrices at fixed strides
};

// "[2,3]": the first `end` dims of `s`.
std::string dims_text(const Shape& s, size_t end) {
  std::string text = "[";
  text += shape_to_string(Shape(s.begin(), s.begin() + std::ptrdiff_t(end)));
  text += "]";
  return text;
}

// The batching of a x b (shapes as the graph types them, or concrete ones at run time), or why
// cuBLASLt cannot run the product as one call.
Expected<Batching> batching(const Shape& a, const Shape& b) {
  const size_t batch_a = a.size() >= 2 ? a.size() - 2 : 0;
  const size_t batch_b = b.size() >= 2 ? b.size() - 2 : 0;
  if (std::all_of(b.begin(), b.begin() + std::ptrdiff_t(batch_b), [](const Dim& d) { return d == Dim(1); })) {
    return Batching::Folded;
  }
  bool equal = batch_a == batch_b;
  for (size_t i = 0; equal && i < batch_a; ++i) equal = a[i] == b[i] && !a[i].is_dynamic();
  if (equal) return Batching::Strided;
  return Status::unimplemented("cuBLASLt runs equal batch dims or one right-hand matrix, not batch dims " +
                               dims_text(a, batch_a) + " against " + dims_text(b, batch_b) +
                               " (a broadcast left operand or a partial broadcast)");
}

struct Sizes {
  int64_t batch = 1, m = 0, n = 0, k = 0;  // m counts every row of a when folded
};

Sizes sizes_of(const std::vector<int64_t>& a, const std::vector<int64_t>& b, Batching mode) {
  Sizes s;
  s.k = a.back();
  s.n = b.size() >= 2 ? b.back() : 1;
  if (mode == Batching::Folded) {
    s.m = product(std::span<const int64_t>(a).first(a.size() - 1));
  } else {
    s.batch = product(std::span<const int64_t>(a).first(a.size() - 2));
    s.m = a[a.size() - 2];
  }
  return s;
}

Expected<cudaDataType_t> data_type(DType d) {
  switch (d) {
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default:
      return Status::unimplemented("on cuBLASLt runs f32, f16 and bf16 (accumulating in f32), not " +
                                   std::string(dtype_name(d)));
  }
}

// The cuBLASLt epilogue computing the fused op's act(t + bias (+ residual, cuBLASLt's C)), or
// why there is none.
Expected<cublasLtEpilogue_t> epilogue_of(const Node& n, bool bias) {
  if (n.op == Op::MatMul) return CUBLASLT_EPILOGUE_DEFAULT;
  const Epilogue e = epilogue_of_fused(n);
  if (e.alpha || e.beta) return Status::unimplemented("cuBLASLt's epilogues take no act_alpha/act_beta");
  switch (e.act) {
    case EpilogueAct::None: return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case EpilogueAct::Relu: return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case EpilogueAct::GeluTanh: return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    case EpilogueAct::Gelu:
      return Status::unimplemented("cuBLASLt's GELU epilogue is the tanh approximation; gelu (erf) differs from it");
    default:
      return Status::unimplemented("cuBLASLt has no " + std::string(epilogue_act_name(e.act)) + " epilogue");
  }
}

// Everything claim_matmul checks, as a Status (a refusal's reason).
Status check_claim(const Graph& g, const Node& n) {
  FUSEBOX_RETURN_IF_ERROR(cublaslt().status());
  const std::string what = std::string(n.info().keyword) + " ";
  for (const auto& [name, value] : n.attrs.entries()) {
    if (n.op != Op::MatMul && (name == "act" || name == "act_alpha" || name == "act_beta")) continue;
    return Status::unimplemented(what + "attribute " + name + " is not handled by the cuBLASLt kernel");
  }
  const TensorType& a = g.type(n.inputs[0]);
  const TensorType& b = g.type(n.inputs[1]);
  const TensorType& y = g.type(n.outputs[0]);
  if (Expected<cudaDataType_t> type = data_type(a.dtype); !type) return Status::unimplemented(what + type.status().message());
  if (b.dtype != a.dtype || y.dtype != a.dtype) return Status::unimplemented(what + "operands of several dtypes");
  if (Expected<Batching> mode = batching(a.shape, b.shape); !mode) {
    return Status::unimplemented(what + a.to_string() + " x " + b.to_string() + ": " + mode.status().message());
  }
  const OperandRoles roles = contraction_roles(n);
  const bool bias = roles.bias >= 0;
  if (Expected<cublasLtEpilogue_t> e = epilogue_of(n, bias); !e) return Status::unimplemented(what + e.status().message());
  if (n.op != Op::MatMul && b.rank() < 2) {
    return Status::unimplemented(what + "with a 1-D right operand: its epilogue would run along the rows, and "
                                        "cuBLASLt's runs along the columns");
  }
  if (roles.residual >= 0) {
    const TensorType& r = g.type(n.inputs[size_t(roles.residual)]);
    bool same = r.dtype == y.dtype && r.shape == y.shape;
    for (const Dim& d : r.shape) same = same && !d.is_dynamic();
    if (!same) {
      return Status::unimplemented(what + "residual " + r.to_string() + " is not known to have the type of " + y.to_string() +
                                   ": cuBLASLt reads it as C, laid out as the result");
    }
  }
  if (bias) {
    const TensorType& t = g.type(n.inputs[size_t(roles.bias)]);
    if (t.dtype != y.dtype) return Status::unimplemented(what + "bias " + t.to_string() + " of another dtype than " + y.to_string());
    if (t.rank() == 0 || y.rank() == 0 || !(t.shape.back() == y.shape.back()) || t.shape.back().is_dynamic()) {
      return Status::unimplemented(what + "bias " + t.to_string() + " is broadcast over " + y.to_string() +
                                   ": cuBLASLt's bias epilogue reads one value per column");
    }
  }
  return Status::ok();
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
Status make_layout(const CublasLt& lt, cublasLtMatrixLayout_t* layout, cudaDataType_t type, int64_t rows, int64_t cols,
                   int64_t ld, int64_t batch, int64_t stride) {
  FUSEBOX_RETURN_IF_ERROR(lt.check(lt.cublasLtMatrixLayoutCreate(layout, type, uint64_t(rows), uint64_t(cols), ld),
                                   "cublasLtMatrixLayoutCreate"));
  if (batch == 1) return Status::ok();
  const int32_t count = int32_t(batch);
  FUSEBOX_RETURN_IF_ERROR(lt.check(
      lt.cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)), "batch count"));
  return lt.check(lt.cublasLtMatrixLayoutSetAttribute(*layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
                  "batch stride");
}

std::atomic<uint64_t> cublaslt_runs{0}, fallback_runs{0};

class MatmulKernel final : public Kernel {
 public:
  MatmulKernel(std::shared_ptr<Context> context, const CublasLt& lt, DType dtype, cudaDataType_t type, EpilogueAct act,
               cublasLtEpilogue_t epilogue, OperandRoles roles, size_t operands, bool plain_only, bool allow_tf32)
      : context_(std::move(context)), lt_(lt), dtype_(dtype), type_(type),
        compute_(dtype == DType::F32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F), epilogue_(epilogue), roles_(roles),
        operands_(operands), plain_only_(plain_only),
        fallback_source_(matmul_fallback_source(dtype, act, roles.bias >= 0, roles.residual >= 0)) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "cuda_matmul"; }

 private:
  // batch, m, n, k and the alignments of a, b, y, the bias and the residual.
  using AlgoKey = std::array<int64_t, 9>;
  // cuBLASLt's algorithm for `key`, or nullopt when its heuristic has none (the plain kernel
  // runs those sizes).
  std::optional<cublasLtMatmulAlgo_t> algorithm(const AlgoKey& key, const LtDevice& dev, const Descriptors& ds) const;
  // Enqueues the product through cuBLASLt; false when cuBLASLt has no algorithm for it.
  Expected<bool> run_cublaslt(const Sizes& s, const void* a, const void* b, const void* bias, const void* residual, void* y) const;

  std::shared_ptr<Context> context_;
  const CublasLt& lt_;
  DType dtype_;
  cudaDataType_t type_;
  cublasComputeType_t compute_;  // f32 sums; TF32 products only when the caller allowed them
  cublasLtEpilogue_t epilogue_;
  OperandRoles roles_;  // where the bias and the residual sit among the operands (-1: absent)
  size_t operands_;
  bool plain_only_;
  std::string fallback_source_;
  mutable std::mutex mu_;
  mutable std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>> algorithms_;
};

std::optional<cublasLtMatmulAlgo_t> MatmulKernel::algorithm(const AlgoKey& key, const LtDevice& dev, const Descriptors& ds) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = algorithms_.find(key); it != algorithms_.end()) return it->second;
  }
  // cuBLASLt versions have answered some degenerate shapes (a dimension of 1) with
  // CUBLAS_STATUS_INVALID_VALUE or no result; either way cuBLASLt will not run them.
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      lt_.cublasLtMatmulAlgoGetHeuristic(dev.handle, ds.op, ds.a, ds.b, ds.d, ds.d, ds.preference, 1, &result, &found);
  std::optional<cublasLtMatmulAlgo_t> algo;
  if (status == CUBLAS_STATUS_SUCCESS && found > 0) algo = result.algo;
  std::lock_guard<std::mutex> lock(mu_);
  algorithms_.emplace(key, algo);
  return algo;
}

Expected<bool> MatmulKernel::run_cublaslt(const Sizes& s, const void* a, const void* b, const void* bias, const void* residual,
                                          void* y) const {
  if (s.batch > INT32_MAX) return false;  // cuBLASLt counts products in an int32
  FUSEBOX_ASSIGN_OR_RETURN(const LtDevice* dev, lt_device(*context_, lt_));
  Descriptors ds(lt_);
  FUSEBOX_RETURN_IF_ERROR(lt_.check(lt_.cublasLtMatmulDescCreate(&ds.op, compute_, CUDA_R_32F), "cublasLtMatmulDescCreate"));
  const uint32_t epilogue = epilogue_;
  FUSEBOX_RETURN_IF_ERROR(lt_.check(
      lt_.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)), "epilogue"));
  if (bias) {
    FUSEBOX_RETURN_IF_ERROR(
        lt_.check(lt_.cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), "bias"));
  }
  // C^T = B^T A^T in column-major terms (matmul_kernel.h draws it).
  FUSEBOX_RETURN_IF_ERROR(make_layout(lt_, &ds.a, type_, s.n, s.k, s.n, s.batch, s.k * s.n));
  FUSEBOX_RETURN_IF_ERROR(make_layout(lt_, &ds.b, type_, s.k, s.m, s.k, s.batch, s.m * s.k));
  FUSEBOX_RETURN_IF_ERROR(make_layout(lt_, &ds.d, type_, s.n, s.m, s.n, s.batch, s.m * s.n));

  // D = act(A B + beta C + bias): the residual is C (beta 1), else C is D itself (beta 0).
  const void* c = residual ? residual : y;
  const AlgoKey key = {s.batch, s.m, s.n, s.k, alignment(a), alignment(b), alignment(y), alignment(bias), alignment(c)};
  FUSEBOX_RETURN_IF_ERROR(lt_.check(lt_.cublasLtMatmulPreferenceCreate(&ds.preference), "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = kWorkspaceBytes;
  FUSEBOX_RETURN_IF_ERROR(lt_.check(lt_.cublasLtMatmulPreferenceSetAttribute(ds.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                            &workspace, sizeof(workspace)),
                                    "workspace size"));
  // cuBLASLt's A is fusebox's b, its B fusebox's a.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligned[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, uint32_t(key[5])},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, uint32_t(key[4])},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, uint32_t(key[8])},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, uint32_t(key[6])}};
  for (const auto& [attribute, bytes] : aligned) {
    FUSEBOX_RETURN_IF_ERROR(
        lt_.check(lt_.cublasLtMatmulPreferenceSetAttribute(ds.preference, attribute, &bytes, sizeof(bytes)), "alignment"));
  }
  const std::optional<cublasLtMatmulAlgo_t> algo = algorithm(key, *dev, ds);
  if (!algo) return false;

  const float alpha = 1.0f, beta = residual ? 1.0f : 0.0f;
  FUSEBOX_RETURN_IF_ERROR(lt_.check(lt_.cublasLtMatmul(dev->handle, ds.op, &alpha, b, ds.a, a, ds.b, &beta, c, ds.d, y, ds.d,
                                                       &*algo, dev->workspace.get(), kWorkspaceBytes, context_->stream()),
                                    "cublasLtMatmul (" + std::string(dtype_name(dtype_)) + ", " + std::to_string(s.batch) +
                                        " x " + std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n) + ")"));
  return true;
}

Status MatmulKernel::run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const {
  FUSEBOX_CHECK(in.size() == operands_ && out.size() == 1) << "cuda matmul operands";
  const BufferView& a = in[0];
  const BufferView& b = in[1];
  const BufferView& y = out[0];
  if (y.numel() == 0) return Status::ok();
  FUSEBOX_ASSIGN_OR_RETURN(Batching mode, batching(make_shape(a.shape), make_shape(b.shape)));
  const Sizes s = sizes_of(a.shape, b.shape, mode);
  FUSEBOX_CHECK(y.numel() == s.batch * s.m * s.n) << "cuda matmul result size";
  const BufferView* bias = roles_.bias >= 0 ? &in[size_t(roles_.bias)] : nullptr;
  const BufferView* residual = roles_.residual >= 0 ? &in[size_t(roles_.residual)] : nullptr;
  if (bias && bias->numel() != s.n) {
    return Status::unimplemented("a bias of " + std::to_string(bias->numel()) + " values over " + std::to_string(s.n) +
                                 " columns: the CUDA matmul's bias epilogue reads one value per column");
  }
  FUSEBOX_CHECK(!residual || residual->shape == y.shape) << "cuda matmul residual shape";
  FUSEBOX_RETURN_IF_ERROR(context_->make_current());
  const void* bias_data = bias ? bias->data : nullptr;
  const void* residual_data = residual ? residual->data : nullptr;
  if (s.k > 0 && !plain_only_) {  // cuBLASLt wants K >= 1; an empty sum is the plain kernel's
    FUSEBOX_ASSIGN_OR_RETURN(bool ran, run_cublaslt(s, a.data, b.data, bias_data, residual_data, y.data));
    if (ran) {
      ++cublaslt_runs;
      return Status::ok();
    }
  }
  ++fallback_runs;
  MatmulFallbackShape f{s.batch, s.m, s.n, s.k, mode == Batching::Strided ? s.m * s.k : 0, mode == Batching::Strided ? s.k * s.n : 0};
  return run_matmul_fallback(*context_, fallback_source_, f, a.data, b.data, bias_data, residual_data, y.data);
}

}  // namespace

MatmulRuns matmul_runs() { return {cublaslt_runs.load(), fallback_runs.load()}; }

bool is_cublaslt_op(Op op) { return op == Op::MatMul || op == Op::FusedMatmulBiasAct || op == Op::FusedMatmulResidual; }

Claim claim_matmul(const Graph& g, const Node& n) {
  FUSEBOX_CHECK(is_cublaslt_op(n.op)) << "claim_matmul on " << n.info().keyword;
  Status s = check_claim(g, n);
  if (!s.is_ok()) return Claim::refuse(s.message());
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_matmul_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n,
                                                           bool allow_tf32) {
  FUSEBOX_RETURN_IF_ERROR(check_claim(g, n));
  FUSEBOX_ASSIGN_OR_RETURN(const CublasLt* lt, cublaslt());
  const DType dtype = g.type(n.outputs[0]).dtype;
  FUSEBOX_ASSIGN_OR_RETURN(cudaDataType_t type, data_type(dtype));
  const OperandRoles roles = contraction_roles(n);
  const EpilogueAct act = n.op == Op::MatMul ? EpilogueAct::None : epilogue_of_fused(n).act;
  FUSEBOX_ASSIGN_OR_RETURN(cublasLtEpilogue_t epilogue, epilogue_of(n, roles.bias >= 0));
  // The handle and workspace are made now, so that a failure shows when the graph compiles.
  FUSEBOX_RETURN_IF_ERROR(lt_device(*context, *lt).status());
  const char* plain = std::getenv("FUSEBOX_CUDA_MATMUL_PLAIN");
  const bool plain_only = plain && *plain && std::string_view(plain) != "0";
  return std::shared_ptr<const Kernel>(
      std::make_shared<MatmulKernel>(std::move(context), *lt, dtype, type, act, epilogue, roles, n.inputs.size(), plain_only,
                                     allow_tf32));
}

}  // namespace fusebox::cuda
