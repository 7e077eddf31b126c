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
#include "backends/cuda/lt_gemm.h"
#include "backends/cuda/matmul_fallback.h"
#include "ir/check.h"
#include "ir/epilogue.h"
#include "ir/fused_ops.h"

namespace fusebox::cuda {

namespace {

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
  if (Expected<cudaDataType_t> type = lt_data_type(a.dtype); !type)
    return Status::unimplemented(what + type.status().message());
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

std::atomic<uint64_t> cublaslt_runs{0}, fallback_runs{0};

class MatmulKernel final : public Kernel {
 public:
  MatmulKernel(std::shared_ptr<const LtGemm> lt, std::shared_ptr<Context> context, DType dtype,
               EpilogueAct act, OperandRoles roles, size_t operands, bool plain_only)
      : lt_(std::move(lt)),
        context_(std::move(context)),
        roles_(roles),
        operands_(operands),
        plain_only_(plain_only),
        fallback_source_(matmul_fallback_source(dtype, act, roles.bias >= 0, roles.residual >= 0)) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "cuda_matmul"; }

 private:
  std::shared_ptr<const LtGemm> lt_;  // the product and its epilogue on cuBLASLt
  std::shared_ptr<Context> context_;
  OperandRoles roles_;  // where the bias and the residual sit among the operands (-1: absent)
  size_t operands_;
  bool plain_only_;
  std::string fallback_source_;
};

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
  if (!plain_only_) {  // cuBLASLt wants K >= 1; an empty sum is the plain kernel's
    const bool strided = mode == Batching::Strided;
    const GemmCall call{
        s.batch, s.m,       s.n,           s.k,   strided ? s.m * s.k : 0, strided ? s.k * s.n : 0, a.data,
        b.data,  bias_data, residual_data, y.data};
    FUSEBOX_ASSIGN_OR_RETURN(bool ran, lt_->run(call));
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
  const DType dtype = g.type(n.outputs[0]).dtype;
  const OperandRoles roles = contraction_roles(n);
  const EpilogueAct act = n.op == Op::MatMul ? EpilogueAct::None : epilogue_of_fused(n).act;
  FUSEBOX_ASSIGN_OR_RETURN(cublasLtEpilogue_t epilogue, epilogue_of(n, roles.bias >= 0));
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const LtGemm> lt,
                           LtGemm::make(context, dtype, allow_tf32, epilogue));
  const char* plain = std::getenv("FUSEBOX_CUDA_MATMUL_PLAIN");
  const bool plain_only = plain && *plain && std::string_view(plain) != "0";
  return std::shared_ptr<const Kernel>(std::make_shared<MatmulKernel>(
      std::move(lt), std::move(context), dtype, act, roles, n.inputs.size(), plain_only));
}

}  // namespace fusebox::cuda
