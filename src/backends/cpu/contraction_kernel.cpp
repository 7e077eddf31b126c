#include "backends/cpu/contraction_kernel.h"

#include <limits>

#include "backends/cpu/onednn/onednn_kernels.h"
#include "backends/host_backend.h"
#include "ir/epilogue.h"
#include "ir/fused_ops.h"

namespace fusebox::cpu {

namespace {

onednn::Act act_of(EpilogueAct a) {
  switch (a) {
    case EpilogueAct::None: return onednn::Act::None;
    case EpilogueAct::Relu: return onednn::Act::Relu;
    case EpilogueAct::LeakyRelu: return onednn::Act::LeakyRelu;
    case EpilogueAct::Clip: return onednn::Act::Clip;
    case EpilogueAct::Sigmoid: return onednn::Act::Sigmoid;
    case EpilogueAct::Tanh: return onednn::Act::Tanh;
    case EpilogueAct::HardSigmoid: return onednn::Act::HardSigmoid;
    case EpilogueAct::HardSwish: return onednn::Act::HardSwish;
    case EpilogueAct::Silu: return onednn::Act::Silu;
    case EpilogueAct::Gelu: return onednn::Act::Gelu;
    case EpilogueAct::GeluTanh: return onednn::Act::GeluTanh;
  }
  return onednn::Act::None;
}

onednn::Epilogue epilogue(const Node& n, bool bias, bool residual) {
  onednn::Epilogue e;
  e.bias = bias;
  e.residual = residual;
  if (!is_fused_contraction(n.op)) return e;
  const Epilogue ep = epilogue_of_fused(n);
  e.act = act_of(ep.act);
  constexpr double inf = std::numeric_limits<double>::infinity();
  switch (ep.act) {
    case EpilogueAct::LeakyRelu: e.alpha = ep.alpha.value_or(0.01); break;
    case EpilogueAct::Clip:
      e.alpha = ep.alpha.value_or(-inf);
      e.beta = ep.beta.value_or(inf);
      break;
    case EpilogueAct::HardSigmoid:
      e.alpha = ep.alpha.value_or(0.2);
      e.beta = ep.beta.value_or(0.5);
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

template <typename Impl>
class ContractionKernel final : public Kernel {
 public:
  ContractionKernel(std::unique_ptr<Impl> impl, OperandRoles roles) : impl_(std::move(impl)), roles_(roles) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    auto opt = [&](int i) { return i < 0 ? nullptr : &ins[size_t(i)]; };
    return impl_->run(ins[size_t(roles_.input)], ins[size_t(roles_.weight)], opt(roles_.bias), opt(roles_.residual), outs[0]);
  }
  std::string_view kind() const override { return "onednn"; }

 private:
  std::unique_ptr<Impl> impl_;
  OperandRoles roles_;
};

template <typename Impl>
Expected<std::shared_ptr<const Kernel>> wrap(Expected<std::unique_ptr<Impl>> made, OperandRoles roles) {
  if (!made) {
    if (made.status().code() == StatusCode::kUnimplemented) return std::shared_ptr<const Kernel>();
    return made.status();
  }
  return std::shared_ptr<const Kernel>(std::make_shared<ContractionKernel<Impl>>(std::move(*made), roles));
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

Expected<std::shared_ptr<const Kernel>> make_onednn_kernel(const Graph& g, const Node& n) {
  if (!onednn::available() || n.outputs.size() != 1) return std::shared_ptr<const Kernel>();
  const DType dt = g.type(n.outputs[0]).dtype;
  const OperandRoles roles = contraction_roles(n);
  switch (n.op) {
    case Op::MatMul:
    case Op::FusedMatmulBiasAct:
    case Op::FusedMatmulResidual: {
      onednn::MatmulSpec spec{dt, epilogue(n, roles.bias >= 0, roles.residual >= 0)};
      return wrap(onednn::MatmulKernel::create(spec), roles);
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
      return wrap(onednn::ConvKernel::create(spec, constant_of(g, n.inputs[1])), roles);
    }
    default: return std::shared_ptr<const Kernel>();
  }
}

}  // namespace fusebox::cpu
