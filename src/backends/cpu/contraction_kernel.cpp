#include "backends/cpu/contraction_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "backends/cpu/onednn/onednn_kernels.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/region_program.h"
#include "backends/cpu/swiglu_kernel.h"
#include "backends/host_backend.h"
#include "ir/epilogue.h"
#include "ir/fused_ops.h"
#include "ir/layout.h"

namespace fusebox::cpu {

namespace {

// oneDNN 2.6's post-ops built on exp (tanh, gelu_tanh, silu, sigmoid) run at a fraction of the
// speed of the generated region code: matmul 256x256x1024 + bias + gelu_tanh 2.8 ms fused against
// 2.3 ms as matmul, add, gelu (AVX2); a depthwise 3x3 conv over 1x144x56x56 NHWC 0.073 ms bare,
// +0.083 ms with the swish post-op, +0.070 ms with logistic, where silu alone as a region takes
// 0.046 ms and sigmoid 0.036 ms (AVX-512). So those run after the contraction as a one-op region,
// in place. gelu_erf stays a post-op (the region's erf costs more: 0.137 ms), as do the cheap
// piecewise ones. FUSEBOX_ONEDNN_ACT=postop overrides the rule (for measuring it on other hosts).
bool act_runs_after(EpilogueAct a) {
  if (a != EpilogueAct::Tanh && a != EpilogueAct::GeluTanh && a != EpilogueAct::Silu &&
      a != EpilogueAct::Sigmoid) {
    return false;
  }
  const char* env = std::getenv("FUSEBOX_ONEDNN_ACT");
  return !(env && std::string_view(env) == "postop");
}

onednn::Epilogue epilogue(const Node& n, bool bias, bool residual) {
  onednn::Epilogue e;
  e.bias = bias;
  e.residual = residual;
  if (!is_fused_contraction(n.op)) return e;
  const Epilogue ep = epilogue_of_fused(n);
  e.act = act_runs_after(ep.act) ? EpilogueAct::None : ep.act;
  if (ep.act == EpilogueAct::None) return e;
  // Parameters as the activation op reads them, so an absent one takes ops.def's default.
  Attrs attrs;
  const Node act{activation_op(ep, &attrs), {}, {}, attrs, nullptr, {}};
  constexpr double inf = std::numeric_limits<double>::infinity();
  switch (ep.act) {
    case EpilogueAct::LeakyRelu: e.alpha = act.attr_f64("alpha"); break;
    case EpilogueAct::Clip:
      e.alpha = ep.alpha.value_or(-inf);
      e.beta = ep.beta.value_or(inf);
      break;
    case EpilogueAct::HardSigmoid:
      e.alpha = act.attr_f64("alpha");
      e.beta = act.attr_f64("beta");
      break;
    default: break;
  }
  return e;
}

const Array* constant_of(const Graph& g, ValueId v) {
  for (const Node& p : g.nodes()) {
    if (p.op == Op::Constant && p.outputs[0] == v) return &p.attr_array("value");
  }
  return nullptr;
}

// oneDNN refuses a few degenerate shapes at run time (K = 0, an empty input, an average pool
// whose last window overhangs the end pad): those runs go to the reference kernel.
Status or_reference(Status s, const Node& node, std::span<const Array> in, std::span<Array> out) {
  if (s.code() != StatusCode::kUnimplemented) return s;
  return run_reference(node, in, out);
}

template <typename Impl>
class ContractionKernel final : public Kernel {
 public:
  ContractionKernel(std::unique_ptr<Impl> impl, OperandRoles roles, Node node,
                    std::shared_ptr<const RegionProgram> tail)
      : impl_(std::move(impl)), roles_(roles), node_(std::move(node)), tail_(std::move(tail)) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    auto opt = [&](int i) { return i < 0 ? nullptr : &ins[size_t(i)]; };
    Status s = impl_->run(ins[size_t(roles_.input)], ins[size_t(roles_.weight)], opt(roles_.bias),
                          opt(roles_.residual), outs[0]);
    if (s.code() == StatusCode::kUnimplemented) return run_reference(node_, ins, outs);
    FUSEBOX_RETURN_IF_ERROR(s);
    if (!tail_) return Status::ok();
    // The activation in place: each element is read, then written, by the same lane.
    std::vector<Array> result{outs[0]};
    return tail_->run(result, outs);
  }
  std::string_view kind() const override { return "onednn"; }

 private:
  std::unique_ptr<Impl> impl_;
  OperandRoles roles_;
  Node node_;  // a copy: kernels outlive the graph they were compiled from
  std::shared_ptr<const RegionProgram> tail_;  // the activation, when not a post-op
};

// matmul_integer / conv2d_integer on oneDNN's int8 primitives; shapes the kernel leaves (a
// per-row zero point, an empty input) run the reference.
class IntegerContractionKernel final : public Kernel {
 public:
  IntegerContractionKernel(std::unique_ptr<onednn::IntegerKernel> impl, Node node)
      : impl_(std::move(impl)), node_(std::move(node)) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return or_reference(impl_->run(ins[0], ins[2], outs[0]), node_, ins, outs);
  }
  std::string_view kind() const override { return "onednn"; }

 private:
  std::unique_ptr<onednn::IntegerKernel> impl_;
  Node node_;
};

// Whether a float array holds a NaN (other dtypes hold none). Blocks of 4096 elements are scanned
// without a branch per element, so the loop vectorises; large arrays are split across threads.
template <typename Bits, typename IsNan>
bool any_in_blocks(const Bits* p, int64_t n, IsNan is_nan) {
  constexpr int64_t kBlock = 4096;
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  int found = 0;
#pragma omp parallel for schedule(static) reduction(| : found) if (blocks >= 64)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    bool any = false;
    for (int64_t i = b * kBlock; i < end; ++i) any |= is_nan(p[i]);
    found |= int(any);
  }
  return found != 0;
}

bool has_nan(const Array& a) {
  switch (a.dtype()) {
    case DType::F32:
      return any_in_blocks(a.data<float>(), a.numel(), [](float v) { return v != v; });
    case DType::F64:
      return any_in_blocks(a.data<double>(), a.numel(), [](double v) { return v != v; });
    case DType::F16:
      return any_in_blocks(a.data<uint16_t>(), a.numel(), [](uint16_t b) { return (b & 0x7fff) > 0x7c00; });
    case DType::BF16:
      return any_in_blocks(a.data<uint16_t>(), a.numel(), [](uint16_t b) { return (b & 0x7fff) > 0x7f80; });
    default:
      return false;
  }
}

// oneDNN's max pool drops a NaN in the window (its max keeps the other operand) where the
// reference, the CUDA kernel and PyTorch let it win; an input holding a NaN runs the reference
// (a read of the input per run: about 1 % of resnet50's time, docs/reliability.md).
class PoolingKernel final : public Kernel {
 public:
  explicit PoolingKernel(std::unique_ptr<onednn::PoolKernel> impl, Node node) : impl_(std::move(impl)), node_(std::move(node)) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    if (node_.op == Op::MaxPool2d && has_nan(ins[0])) return run_reference(node_, ins, outs);
    return or_reference(impl_->run(ins[0], outs[0]), node_, ins, outs);
  }
  std::string_view kind() const override { return "onednn"; }

 private:
  std::unique_ptr<onednn::PoolKernel> impl_;
  Node node_;
};

// to_nchwc / to_nchw through oneDNN's reorder.
class ReorderKernel final : public Kernel {
 public:
  explicit ReorderKernel(Node node) : node_(std::move(node)) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return or_reference(onednn::reorder_layout(ins[0], outs[0]), node_, ins, outs);
  }
  std::string_view kind() const override { return "onednn"; }

 private:
  Node node_;
};

// The block of a node's blocked activations (dim 4 of x), 0 for a plain node.
int64_t block_of(const Graph& g, const Node& n) {
  return has_nchwc_layout(n) ? g.type(n.inputs[0]).shape[4].value() : 0;
}

template <typename Impl>
Expected<std::shared_ptr<const Kernel>> wrap(Expected<std::unique_ptr<Impl>> made, OperandRoles roles, const Node& n,
                                             std::shared_ptr<const RegionProgram> tail) {
  if (!made) {
    if (made.status().code() == StatusCode::kUnimplemented) return std::shared_ptr<const Kernel>();
    return made.status();
  }
  return std::shared_ptr<const Kernel>(std::make_shared<ContractionKernel<Impl>>(std::move(*made), roles, n, std::move(tail)));
}

void read_window(const Node& n, int64_t stride[2], int64_t pad[4], int64_t dilation[2]) {
  const auto& s = n.attr_i64s("stride");
  const auto& p = n.attr_i64s("pad");
  for (int i = 0; i < 2; ++i) stride[i] = s[size_t(i)];
  for (int i = 0; i < 4; ++i) pad[i] = p[size_t(i)];
  if (dilation && n.has_attr("dilation")) {
    const auto& d = n.attr_i64s("dilation");
    for (int i = 0; i < 2; ++i) dilation[i] = d[size_t(i)];
  }
}

}  // namespace

Expected<std::shared_ptr<const Kernel>> make_onednn_kernel(const Graph& g, const Node& n, Codegen codegen,
                                                           bool winograd) {
  if (!onednn::available() || n.outputs.size() != 1) return std::shared_ptr<const Kernel>();
  const DType dt = g.type(n.outputs[0]).dtype;
  const OperandRoles roles = contraction_roles(n);
  std::shared_ptr<const RegionProgram> tail;
  if (is_fused_contraction(n.op)) {
    const Epilogue ep = epilogue_of_fused(n);
    if (act_runs_after(ep.act)) {
      Attrs attrs;
      const Op op = activation_op(ep, &attrs);
      const Node act{op, {0}, {1}, attrs, nullptr, n.loc};
      const TensorType type = g.type(n.outputs[0]);
      FUSEBOX_ASSIGN_OR_RETURN(tail, RegionProgram::compile(act, std::span<const TensorType>(&type, 1), codegen));
    }
  }
  switch (n.op) {
    case Op::MatMul:
    case Op::FusedMatmulBiasAct:
    case Op::FusedMatmulResidual: {
      onednn::MatmulSpec spec{dt, epilogue(n, roles.bias >= 0, roles.residual >= 0)};
      return wrap(onednn::MatmulKernel::create(spec), roles, n, tail);
    }
    case Op::Conv2d:
    case Op::ConvTranspose2d:
    case Op::FusedConvBiasAct: {
      onednn::ConvSpec spec;
      spec.dtype = dt;
      spec.transposed = n.op == Op::ConvTranspose2d;
      read_window(n, spec.stride, spec.pad, spec.dilation);
      spec.groups = n.attr_i64("groups");
      if (spec.transposed) {
        const auto& op = n.attr_i64s("output_padding");
        spec.output_padding[0] = op[0];
        spec.output_padding[1] = op[1];
      }
      spec.ep = epilogue(n, roles.bias >= 0, roles.residual >= 0);
      spec.block = block_of(g, n);
      spec.nhwc = has_nhwc_layout(n);
      spec.winograd = winograd;
      return wrap(onednn::ConvKernel::create(spec, constant_of(g, n.inputs[1])), roles, n, tail);
    }
    case Op::MatMulInteger:
    case Op::Conv2dInteger: {
      // The weights and their zero point must be constants: they are centred and packed once.
      const Array* w = constant_of(g, n.inputs[1]);
      const Array* w_zp = constant_of(g, n.inputs[3]);
      if (!w || !w_zp || (has_nchwc_layout(n) && !has_nhwc_layout(n))) return std::shared_ptr<const Kernel>();
      onednn::IntegerSpec spec;
      spec.conv = n.op == Op::Conv2dInteger;
      spec.nhwc = has_nhwc_layout(n);
      spec.x_dtype = g.type(n.inputs[0]).dtype;
      if (spec.conv) {
        read_window(n, spec.stride, spec.pad, spec.dilation);
        spec.groups = n.attr_i64("groups");
      }
      Expected<std::unique_ptr<onednn::IntegerKernel>> made = onednn::IntegerKernel::create(spec, *w, *w_zp);
      if (!made) {
        if (made.status().code() == StatusCode::kUnimplemented) return std::shared_ptr<const Kernel>();
        return made.status();
      }
      return std::shared_ptr<const Kernel>(std::make_shared<IntegerContractionKernel>(std::move(*made), n));
    }
    case Op::MaxPool2d:
    case Op::AvgPool2d: {
      onednn::PoolSpec spec;
      spec.dtype = dt;
      spec.max = n.op == Op::MaxPool2d;
      const auto& k = n.attr_i64s("kernel");
      spec.kernel[0] = k[0];
      spec.kernel[1] = k[1];
      read_window(n, spec.stride, spec.pad, spec.max ? spec.dilation : nullptr);
      if (!spec.max) spec.count_include_pad = n.attr_bool("count_include_pad");
      spec.block = block_of(g, n);
      spec.nhwc = has_nhwc_layout(n);
      Expected<std::unique_ptr<onednn::PoolKernel>> made = onednn::PoolKernel::create(spec);
      if (!made) {
        if (made.status().code() == StatusCode::kUnimplemented) return std::shared_ptr<const Kernel>();
        return made.status();
      }
      return std::shared_ptr<const Kernel>(std::make_shared<PoolingKernel>(std::move(*made), n));
    }
    case Op::FusedSwiglu: return make_swiglu_kernel(g, n, codegen);
    case Op::ToNchwc:
    case Op::ToNchw:
      if (dt != DType::F32 && dt != DType::U8 && dt != DType::I8 && dt != DType::I32)
        return std::shared_ptr<const Kernel>();
      return std::shared_ptr<const Kernel>(std::make_shared<ReorderKernel>(n));
    default: return std::shared_ptr<const Kernel>();
  }
}

}  // namespace fusebox::cpu
