// The row ops' claims and their Kernel: operand roles from the node (ir/fused_norm_ops.h for
// the fused norms), sizes and strides from the buffers at each run, one compiled source per
// (op, dtype, residual, vector width), kept after its first use.
#include "backends/cuda/row_kernel.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>

#include "ir/check.h"

namespace fusebox::cuda {

namespace {

std::optional<RowOp> row_op_of(Op op) {
  switch (op) {
    case Op::Softmax: return RowOp::Softmax;
    case Op::LogSoftmax: return RowOp::LogSoftmax;
    case Op::LayerNorm: case Op::FusedResidualLayerNorm: return RowOp::LayerNorm;
    case Op::RmsNorm: case Op::FusedResidualRmsNorm: return RowOp::RmsNorm;
    default: return std::nullopt;
  }
}

// Where each operand of a row op sits in its node's inputs (-1: absent).
NormRoles roles_of(const Node& n) {
  if (is_fused_norm(n.op)) return fused_norm_roles(n);
  NormRoles r;
  r.residual = -1;
  if (n.op == Op::LayerNorm || n.op == Op::RmsNorm) {
    if (n.inputs.size() > 1) r.scale = 1;
    if (n.inputs.size() > 2) r.shift = 2;
  }
  return r;
}

// A bias the kernels read: one value, one row of n (all other dims 1), or x's own shape.
bool bias_is_row_shaped(const TensorType& bias, const TensorType& x) {
  if (bias.shape == x.shape) return true;
  if (bias.rank() > x.rank()) return false;
  for (int i = 0; i + 1 < bias.rank(); ++i) {
    const Dim& d = bias.shape[size_t(i)];
    if (!d.is_static() || d.value() != 1) return false;
  }
  return true;
}

// Element stride (0 or 1) of a scale, shift or row bias of `numel` elements over rows of n.
std::optional<int64_t> param_stride(const BufferView& p, int64_t n) {
  if (p.numel() == n && (p.shape.empty() || p.shape.back() == n)) return 1;
  if (p.numel() == 1) return 0;
  return std::nullopt;
}

class RowKernel final : public Kernel {
 public:
  RowKernel(std::shared_ptr<Context> context, RowSpec spec) : context_(std::move(context)), spec_(std::move(spec)) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_ASSIGN_OR_RETURN(RowLaunch l, plan_row_launch(spec_, in, out));
    if (!l.blocks) return Status::ok();
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, function(l.variant));
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    void* args[14];
    for (int i = 0; i < 7; ++i) args[i] = &l.pointers[i];
    for (int i = 0; i < 6; ++i) args[7 + i] = &l.sizes[i];
    args[13] = &l.eps;
    const Driver& d = context_->driver();
    return d.check(d.cuLaunchKernel(f, l.blocks, 1, 1, l.threads, 1, 1, 0, context_->stream(), args, nullptr),
                   "launching the CUDA " + spec_.keyword + " kernel");
  }
  std::string_view kind() const override { return "cuda_row"; }

 private:
  Expected<CUfunction> function(const RowVariant& v) const {
    const std::string key = v.key();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    }
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context_->function(row_source(v), kRowEntry));
    std::lock_guard<std::mutex> lock(mu_);
    functions_.emplace(key, f);
    return f;
  }

  std::shared_ptr<Context> context_;
  RowSpec spec_;
  mutable std::mutex mu_;
  mutable std::map<std::string, CUfunction> functions_;  // by RowVariant::key()
};

}  // namespace

int row_threads(RowOp op) {
  static const int forced = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_ROW_THREADS");
    if (!e || !*e) return 0;
    return std::clamp(std::atoi(e), 32, 1024) / 32 * 32;
  }();
  if (forced) return forced;
  return op == RowOp::RmsNorm ? 2 * kRowThreads : kRowThreads;
}

RowSpec row_spec(const Node& n) {
  std::optional<RowOp> op = row_op_of(n.op);
  FUSEBOX_CHECK(op) << n.info().keyword << " is not a row op";
  RowSpec s;
  s.op = *op;
  s.residual = is_fused_norm(n.op);
  s.roles = roles_of(n);
  s.eps = *op == RowOp::LayerNorm || *op == RowOp::RmsNorm ? n.attr_f64("eps") : 0.0;
  s.keyword = std::string(n.info().keyword);
  return s;
}

Expected<RowLaunch> plan_row_launch(const RowSpec& spec, std::span<const BufferView> in, std::span<const BufferView> out) {
  FUSEBOX_CHECK(!in.empty() && !out.empty() && out.size() <= 2) << spec.keyword << " operands";
  RowLaunch l;
  const BufferView& x = in[0];
  const int64_t total = x.numel();
  if (total == 0) return l;
  const int64_t n = x.shape.empty() ? 1 : x.shape.back();
  if (n >= (int64_t(1) << 30)) {
    return Status::unimplemented(spec.keyword + " over rows of " + std::to_string(n) +
                                 " elements: the CUDA row kernels take rows below 2^30");
  }
  auto operand = [&](int role) -> const BufferView* { return role >= 0 ? &in[size_t(role)] : nullptr; };
  const BufferView* r = operand(spec.roles.residual);
  const BufferView* bias = operand(spec.roles.bias);
  const BufferView* scale = operand(spec.roles.scale);
  const BufferView* shift = operand(spec.roles.shift);
  const BufferView* sum = out.size() == 2 ? &out[1] : nullptr;
  int64_t bias_row_stride = 0, bias_stride = 0, scale_stride = 0, shift_stride = 0;
  if (bias) {
    if (bias->shape == x.shape) {
      bias_row_stride = n;
      bias_stride = 1;
    } else if (std::optional<int64_t> s = param_stride(*bias, n)) {
      bias_stride = *s;
    } else {
      return Status::unimplemented(spec.keyword + ": the CUDA row kernels take a bias of one value, one row or x's shape");
    }
  }
  for (auto [p, stride] : {std::pair{scale, &scale_stride}, std::pair{shift, &shift_stride}}) {
    if (!p) continue;
    std::optional<int64_t> s = param_stride(*p, n);
    if (!s) return Status::unimplemented(spec.keyword + ": a scale or shift that is not one value or one row");
    *stride = *s;
  }

  // 16-byte accesses when the row length and every full-size operand allow them.
  l.variant = RowVariant{spec.op, x.dtype, spec.residual, 16 / dtype_size(x.dtype)};
  auto aligned = [&](const BufferView* p, int64_t stride) {
    return !p || stride == 0 || reinterpret_cast<uintptr_t>(p->data) % 16 == 0;
  };
  if (n % l.variant.vector != 0 || !aligned(&x, 1) || !aligned(r, 1) || !aligned(&out[0], 1) || !aligned(sum, 1) ||
      !aligned(bias, bias_stride) || !aligned(scale, scale_stride) || !aligned(shift, shift_stride)) {
    l.variant.vector = 1;
  }
  const BufferView* pointers[7] = {&x, r, bias, scale, shift, &out[0], sum};
  for (int i = 0; i < 7; ++i) l.pointers[i] = pointers[i] ? pointers[i]->data : nullptr;
  const int64_t rows = total / n;
  const int64_t sizes[6] = {rows, n, bias_row_stride, bias_stride, scale_stride, shift_stride};
  std::copy(sizes, sizes + 6, l.sizes);
  l.eps = spec.eps;
  // Threads: a warp for a short row, up to row_threads(op); blocks: one per row.
  const int64_t chunks = n / l.variant.vector;
  l.threads = unsigned(std::clamp<int64_t>((chunks + 31) / 32 * 32, 32, row_threads(spec.op)));
  // The smallest register budget that holds the row (one chunk at least); longer rows stream.
  for (int items : kRowItemChoices) {
    l.variant.items = items;
    if (items >= l.variant.vector && chunks * l.variant.vector <= int64_t(l.threads) * items) break;
  }
  l.blocks = unsigned(std::min<int64_t>(rows, INT_MAX));
  return l;
}

std::optional<Claim> claim_row_op(const Graph& g, const Node& n) {
  if (!row_op_of(n.op)) return std::nullopt;
  const std::string kw(n.info().keyword);
  const TensorType& x = g.type(n.inputs[0]);
  if (x.dtype != DType::F32 && x.dtype != DType::F16 && x.dtype != DType::BF16) {
    return Claim::refuse(kw + " on " + std::string(dtype_name(x.dtype)) + ": the CUDA row kernels run f32, f16 and bf16");
  }
  const int64_t axis = n.attr_i64("axis");
  std::optional<int> a = normalize_axis(axis, x.rank());
  if (!a || *a != x.rank() - 1) {
    return Claim::refuse(kw + " over axis " + std::to_string(axis) + " of " + x.to_string() +
                         ": the CUDA row kernels normalise the last axis only");
  }
  const NormRoles roles = roles_of(n);
  if (roles.bias >= 0 && !bias_is_row_shaped(g.type(n.inputs[size_t(roles.bias)]), x)) {
    return Claim::refuse(kw + " with bias " + g.type(n.inputs[size_t(roles.bias)]).to_string() + " over " + x.to_string() +
                         ": the CUDA row kernels take a bias of one value, one row or x's shape");
  }
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_row_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n) {
  std::optional<Claim> claim = claim_row_op(g, n);
  if (!claim) return Status::unimplemented(std::string(n.info().keyword) + " is not a row op");
  if (!*claim) return Status::unimplemented(claim->reason);
  return std::shared_ptr<const Kernel>(std::make_shared<RowKernel>(std::move(context), row_spec(n)));
}

}  // namespace fusebox::cuda
