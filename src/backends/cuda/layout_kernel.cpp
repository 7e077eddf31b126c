#include "backends/cuda/layout_kernel.h"

#include <utility>
#include <vector>

#include "backends/cuda/transform_step_kernel.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

// The 5-D view [N,C/b,b,H,W] of NCHW [N,C,H,W] (block b), or nullopt.
std::optional<Shape> split_channels(const Shape& plain, const Dim& block) {
  if (plain.size() != 4 || !plain[1].is_static() || !block.is_static() || block.value() < 1 ||
      plain[1].value() % block.value() != 0) {
    return std::nullopt;
  }
  return Shape{plain[0], Dim(plain[1].value() / block.value()), block, plain[2], plain[3]};
}

// The transpose that does the conversion, as a one-node graph over the 5-D views.
struct LayoutTranspose {
  Graph graph{"layout"};
  const Node* node = nullptr;
};

Expected<std::shared_ptr<LayoutTranspose>> layout_transpose(const Graph& g, const Node& n) {
  const TensorType& x = g.type(n.inputs[0]);
  const TensorType& y = g.type(n.outputs[0]);
  const bool to_blocked = n.op == Op::ToNchwc;
  const TensorType& blocked = to_blocked ? y : x;
  const TensorType& plain = to_blocked ? x : y;
  std::optional<Shape> split =
      blocked.rank() == 5 ? split_channels(plain.shape, blocked.shape[4]) : std::nullopt;
  if (!split) {
    return Status::unimplemented(std::string(n.info().keyword) + " of " + x.to_string() + " to " +
                                 y.to_string() + ": no static channel block");
  }
  auto t = std::make_shared<LayoutTranspose>();
  const TensorType split_type{x.dtype, *split};
  ValueId in = t->graph.add_input("x", to_blocked ? split_type : x);
  ValueId out = t->graph.add_value(to_blocked ? y : split_type);
  const std::vector<int64_t> perm =
      to_blocked ? std::vector<int64_t>{0, 1, 3, 4, 2} : std::vector<int64_t>{0, 1, 4, 2, 3};
  t->graph.add_node(Node{Op::Transpose, {in}, {out}, Attrs{{"perm", perm}}, nullptr, n.loc});
  t->graph.add_output(out);
  t->node = &t->graph.nodes().back();
  return t;
}

// `v`'s memory seen as `shape` (dense).
BufferView reshaped(const BufferView& v, std::vector<int64_t> shape) {
  BufferView r = v;
  r.shape = std::move(shape);
  r.strides.assign(r.shape.size(), 1);
  for (size_t i = r.shape.size(); i-- > 1;) r.strides[i - 1] = r.strides[i] * r.shape[i];
  return r;
}

class LayoutKernel final : public Kernel {
 public:
  LayoutKernel(std::shared_ptr<const Kernel> transpose, bool to_blocked)
      : transpose_(std::move(transpose)), to_blocked_(to_blocked) {}

  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(in.size() == 1 && out.size() == 1) << "layout conversion operands";
    const BufferView& blocked = to_blocked_ ? out[0] : in[0];
    const BufferView& plain = to_blocked_ ? in[0] : out[0];
    FUSEBOX_CHECK(blocked.shape.size() == 5 && plain.shape.size() == 4) << "layout conversion ranks";
    const int64_t b = blocked.shape[4];
    const std::vector<int64_t> split{plain.shape[0], plain.shape[1] / b, b, plain.shape[2], plain.shape[3]};
    const BufferView x = to_blocked_ ? reshaped(in[0], split) : in[0];
    const BufferView y = to_blocked_ ? out[0] : reshaped(out[0], split);
    return transpose_->run(stream, std::span(&x, 1), std::span(&y, 1));
  }
  std::string_view kind() const override { return "cuda_transform"; }

 private:
  std::shared_ptr<const Kernel> transpose_;
  bool to_blocked_;
};

}  // namespace

bool is_layout_op(Op op) { return op == Op::ToNchwc || op == Op::ToNchw; }

Claim claim_layout_op(const Graph& g, const Node& n) {
  Expected<std::shared_ptr<LayoutTranspose>> t = layout_transpose(g, n);
  if (!t) return Claim::refuse(t.status().message());
  return claim_transform_step((*t)->graph, *(*t)->node);
}

Expected<std::shared_ptr<const Kernel>> make_layout_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                           const Node& n) {
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<LayoutTranspose> t, layout_transpose(g, n));
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> transpose,
                           make_transform_step_kernel(std::move(context), t->graph, *t->node));
  return std::shared_ptr<const Kernel>(
      std::make_shared<LayoutKernel>(std::move(transpose), n.op == Op::ToNchwc));
}

}  // namespace fusebox::cuda
