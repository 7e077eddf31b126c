// Windowed ops over other than two spatial axes, written with the 2-D ones: a 1-D window runs
// over a size-1 height ([N,C,L] -> [N,C,1,L]); a 3-D pool runs as a 2-D pool over (H, W) and then
// one over D, which gives the 3-D result because max and average pools are separable (an
// average's count of taps inside the input is the product of the per-axis counts, and so is the
// full window's).
#include "onnx/converters.h"

namespace fusebox::onnx_import {

Expected<ValueId> lift_1d(ImportContext& ctx, OnnxNode& n, ValueId x) {
  Shape s = ctx.type(x).shape;
  if (s.size() != 3) return n.error("a 1-D window operand must be [N,C,L], got " + ctx.type(x).to_string());
  s.insert(s.begin() + 2, Dim(1));
  return ctx.reshape(n, x, s);
}

Expected<ValueId> drop_lifted_axis(ImportContext& ctx, OnnxNode& n, ValueId y) {
  Shape s = ctx.type(y).shape;
  if (s.size() != 4) return n.error("a lifted 1-D result must be [N,C,1,L], got " + ctx.type(y).to_string());
  s.erase(s.begin() + 2);
  return ctx.reshape(n, y, s);
}

namespace {

// The product of two static dims, or an error naming what needs them.
Expected<Dim> static_product(OnnxNode& n, const Dim& a, const Dim& b, const TensorType& t) {
  if (!a.is_static() || !b.is_static()) {
    return n.error("a 3-D pool needs static channel, depth and pooled height/width sizes, the operand is " + t.to_string());
  }
  return Dim(a.value() * b.value());
}

}  // namespace

Status convert_pool_3d(ImportContext& ctx, OnnxNode& n) {
  const bool is_max = n.op_type() == "MaxPool";
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  std::optional<std::vector<int64_t>> k = n.attr_ints("kernel_shape");
  if (!k) return n.error("attribute 'kernel_shape' is missing");
  FUSEBOX_ASSIGN_OR_RETURN(Window w, read_window(ctx, n, xt, *k, is_max));
  Attrs common{{"ceil_mode", n.attr_int("ceil_mode", 0) != 0}};
  if (is_max) {
    n.accept_attr("storage_order");  // only affects the Indices output, which is refused
  } else {
    if (std::optional<std::vector<int64_t>> d = n.attr_ints("dilations")) {
      for (int64_t v : *d)
        if (v != 1) return n.error("attribute 'dilations' other than 1 is not supported for AveragePool");
    }
    common.set("count_include_pad", n.attr_int("count_include_pad", 0) != 0);
  }
  const Op op = is_max ? Op::MaxPool2d : Op::AvgPool2d;
  auto pool = [&](ValueId v, std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> dil,
                  std::vector<int64_t> pads) {
    Attrs a = common;
    a.set("kernel", std::move(kernel));
    a.set("stride", std::move(stride));
    a.set("pad", std::move(pads));
    if (is_max) a.set("dilation", std::move(dil));
    return ctx.emit(op, {v}, std::move(a));
  };
  const Shape& s = xt.shape;  // [N, C, D, H, W]
  // (H, W) over [N, C*D, H, W].
  FUSEBOX_ASSIGN_OR_RETURN(Dim cd, static_product(n, s[1], s[2], xt));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId planes, ctx.reshape(n, x, Shape{s[0], cd, s[3], s[4]}));
  ValueId hw = pool(planes, {w.kernel[1], w.kernel[2]}, {w.stride[1], w.stride[2]}, {w.dilation[1], w.dilation[2]},
                    {w.pads[1], w.pads[2], w.pads[4], w.pads[5]});
  if (hw == kNoValue) return ctx.set_output(n, 0, hw);
  const Shape hw_shape = ctx.type(hw).shape;
  FUSEBOX_ASSIGN_OR_RETURN(Dim hw_size, static_product(n, hw_shape[2], hw_shape[3], ctx.type(hw)));
  // D over [N, C, D, H'*W'].
  FUSEBOX_ASSIGN_OR_RETURN(ValueId columns, ctx.reshape(n, hw, Shape{s[0], s[1], s[2], hw_size}));
  ValueId d = pool(columns, {w.kernel[0], 1}, {w.stride[0], 1}, {w.dilation[0], 1}, {w.pads[0], 0, w.pads[3], 0});
  if (d == kNoValue) return ctx.set_output(n, 0, d);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, d, Shape{s[0], s[1], ctx.type(d).shape[2], hw_shape[2], hw_shape[3]}));
  return ctx.set_output(n, 0, y);
}

}  // namespace fusebox::onnx_import
