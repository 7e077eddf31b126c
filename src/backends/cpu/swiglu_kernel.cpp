#include "backends/cpu/swiglu_kernel.h"

#include <cstring>
#include <optional>

#include "backends/cpu/onednn/onednn_kernels.h"
#include "backends/cpu/reference/reference.h"
#include "backends/host_backend.h"
#include "ir/outline.h"

namespace fusebox::cpu {

namespace {

struct Halves {
  Array gate, up;
};

// The two halves of the last axis of `a` as contiguous arrays (gate first when gate_first). An
// operand whose last dim is 1 (a bias broadcast along it) is the same for both halves.
Halves split_last_axis(const Array& a, bool gate_first) {
  const int64_t last = a.shape().back();
  if (last == 1) return {a, a};
  const int64_t n = last / 2, rows = a.numel() / last;
  std::vector<int64_t> shape = a.shape();
  shape.back() = n;
  Halves h{Array(a.dtype(), shape), Array(a.dtype(), shape)};
  const size_t size = static_cast<size_t>(dtype_size(a.dtype()));
  const auto* src = static_cast<const uint8_t*>(a.raw());
  auto* first = static_cast<uint8_t*>((gate_first ? h.gate : h.up).raw());
  auto* second = static_cast<uint8_t*>((gate_first ? h.up : h.gate).raw());
  const size_t row_bytes = static_cast<size_t>(n) * size;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(first + r * row_bytes, src + 2 * r * row_bytes, row_bytes);
    std::memcpy(second + r * row_bytes, src + (2 * r + 1) * row_bytes, row_bytes);
  }
  return h;
}

const Array* constant_of(const Graph& g, ValueId v) {
  for (const Node& p : g.nodes()) {
    if (p.op == Op::Constant && p.outputs[0] == v) return &p.attr_array("value");
  }
  return nullptr;
}

// silu(gate) · up as an elementwise_region over two operands of type `t`.
Expected<std::shared_ptr<const RegionProgram>> compile_gate(const TensorType& t, Codegen codegen) {
  Graph g("swiglu_gate");
  const ValueId gate = g.add_input("gate", t), up = g.add_input("up", t);
  const ValueId s = g.add_node(Op::Silu, {gate}, {t})[0];
  g.add_output(g.add_node(Op::Mul, {s, up}, {t})[0]);
  FUSEBOX_RETURN_IF_ERROR(outline_elementwise_regions(g, {RegionGroup{{0, 1}, "silu_mul"}}));
  const TensorType operands[] = {t, t};
  return RegionProgram::compile(g.nodes()[0], operands, codegen);
}

class SwigluKernel final : public Kernel {
 public:
  SwigluKernel(std::unique_ptr<onednn::MatmulKernel> matmul, std::shared_ptr<const RegionProgram> gate,
               Node node, std::optional<Halves> weights, std::optional<Halves> bias)
      : matmul_(std::move(matmul)),
        gate_(std::move(gate)),
        node_(std::move(node)),
        weights_(std::move(weights)),
        bias_(std::move(bias)) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    const bool gate_first = node_.attr_bool("gate_first");
    const Halves w = weights_ ? *weights_ : split_last_axis(ins[1], gate_first);
    std::optional<Halves> b = bias_;
    if (!b && ins.size() == 3) b = split_last_axis(ins[2], gate_first);
    Array& y = outs[0];
    Array up(y.dtype(), y.shape());
    Status s = matmul_->run(ins[0], w.gate, b ? &b->gate : nullptr, nullptr, y);
    if (s.is_ok()) s = matmul_->run(ins[0], w.up, b ? &b->up : nullptr, nullptr, up);
    if (s.code() == StatusCode::kUnimplemented) return run_reference(node_, ins, outs);
    FUSEBOX_RETURN_IF_ERROR(s);
    // In place: each element of y is read, then written, by the same lane.
    const Array operands[] = {y, up};
    return gate_->run(operands, outs);
  }
  std::string_view kind() const override { return "onednn"; }

 private:
  std::unique_ptr<onednn::MatmulKernel> matmul_;
  std::shared_ptr<const RegionProgram> gate_;
  Node node_;                             // a copy: kernels outlive the graph they were compiled from
  std::optional<Halves> weights_, bias_;  // split once when they are constants of the graph
};

}  // namespace

Expected<std::shared_ptr<const Kernel>> make_swiglu_kernel(const Graph& g, const Node& n, Codegen codegen) {
  const TensorType& t = g.type(n.outputs[0]);
  if (!onednn::available() || t.dtype != DType::F32) return std::shared_ptr<const Kernel>();
  const bool bias = n.inputs.size() == 3;
  onednn::MatmulSpec spec{t.dtype, onednn::Epilogue{}};
  spec.ep.bias = bias;
  Expected<std::unique_ptr<onednn::MatmulKernel>> matmul = onednn::MatmulKernel::create(spec);
  if (!matmul) {
    if (matmul.status().code() == StatusCode::kUnimplemented) return std::shared_ptr<const Kernel>();
    return matmul.status();
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const RegionProgram> gate, compile_gate(t, codegen));
  const bool gate_first = n.attr_bool("gate_first");
  std::optional<Halves> weights, bias_halves;
  if (const Array* w = constant_of(g, n.inputs[1])) weights = split_last_axis(*w, gate_first);
  if (bias) {
    if (const Array* b = constant_of(g, n.inputs[2])) bias_halves = split_last_axis(*b, gate_first);
  }
  return std::shared_ptr<const Kernel>(std::make_shared<SwigluKernel>(
      std::move(*matmul), std::move(gate), n, std::move(weights), std::move(bias_halves)));
}

}  // namespace fusebox::cpu
