// Windowed ops over other than two spatial axes, written with the 2-D ones: a 1-D window runs
// over a size-1 height ([N,C,L] -> [N,C,1,L]); a 3-D pool runs as a 2-D pool over (H, W) and then
// one over D, which gives the 3-D result because max and average pools are separable (an
// average's count of taps inside the input is the product of the per-axis counts, and so is the
// full window's).
//
// A 3-D ConvTranspose is not separable, but it is linear per depth slice: with x [N,Ci,D,H,W]
// and w [Ci,Cg,kD,kH,kW] (Cg output channels per group),
//   1. the (H, W) product of every input depth slice with every kernel depth slice at once:
//      x as [N*D, Ci, H, W], w as [Ci, kD*Cg, kH, kW] (kernel depth-major inside each group), one
//      conv_transpose2d with the (H, W) strides, dilations, pads and output_padding gives
//      z [N*D, groups*kD*Cg, OH, OW];
//   2. the placement over D: z[n, id, (g, kd, c), oh, ow] belongs at output depth
//      id*sD + kd*dD - pad: every (n, g, c, oh, ow) column as a kD-channel image [kD, D, 1] and
//      a conv_transpose2d with the identity weight [kD, 1, kD, 1] and the depth stride,
//      dilation, pads and output_padding sums exactly those terms, giving [.., 1, OD, 1].
// Negative pads (an output_shape beyond what the product reaches) run the product unpadded and
// pad zeros on after it; the bias is added to the whole result.
#include <algorithm>
#include <utility>

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

// The product of two dims, unknown unless both are static (a reshape infers one unknown dim).
Dim dim_product(const Dim& a, const Dim& b) {
  return a.is_static() && b.is_static() ? Dim(a.value() * b.value()) : Dim::dynamic();
}

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

Status convert_conv_transpose_3d(ImportContext& ctx, OnnxNode& n, ValueId x, ValueId w, const Window& win,
                                 const std::vector<int64_t>& out_pad) {
  const TensorType xt = ctx.type(x), wt = ctx.type(w);
  const Shape& s = xt.shape;  // [N, Ci, D, H, W]
  const int64_t groups = n.attr_int("group", 1);
  if (groups < 1) return n.error("attribute 'group' must be >= 1, got " + std::to_string(groups));
  for (size_t i = 0; i < 3; ++i) {
    if (win.stride[i] < 1 || win.dilation[i] < 1) return n.error("strides and dilations must be >= 1");
  }
  if (!s[2].is_static() || !wt.shape[1].is_static()) {
    return n.error("a 3-D ConvTranspose needs a static input depth and weight dim 1, the input is " +
                   xt.to_string() + ", the weight " + wt.to_string());
  }
  const int64_t depth = s[2].value(), per_group = wt.shape[1].value(), kd = win.kernel[0];
  // Negative pads extend the output after the products.
  std::vector<int64_t> pads = win.pads, extend(6, 0);
  for (size_t i = 0; i < 6; ++i) {
    if (pads[i] < 0) extend[i] = -std::exchange(pads[i], 0);
  }
  auto pad_on = [&](ValueId v, std::vector<int64_t> all) {
    if (v == kNoValue || std::all_of(all.begin(), all.end(), [](int64_t p) { return p == 0; })) return v;
    return ctx.emit(Op::Pad, {v}, {{"pads", std::move(all)}});
  };
  // 1. (H, W) for every input depth and kernel depth.
  ValueId xd = ctx.emit(Op::Transpose, {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}});
  if (xd == kNoValue) return ctx.set_output(n, 0, xd);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId planes,
                           ctx.reshape(n, xd, Shape{dim_product(s[0], s[2]), s[1], s[3], s[4]}));
  ValueId wd = ctx.emit(Op::Transpose, {w}, {{"perm", std::vector<int64_t>{0, 2, 1, 3, 4}}});
  if (wd == kNoValue) return ctx.set_output(n, 0, wd);
  FUSEBOX_ASSIGN_OR_RETURN(
      ValueId w2, ctx.reshape(n, wd, Shape{wt.shape[0], Dim(kd * per_group), wt.shape[3], wt.shape[4]}));
  Attrs hw_attrs{{"stride", std::vector<int64_t>{win.stride[1], win.stride[2]}},
                 {"pad", std::vector<int64_t>{pads[1], pads[2], pads[4], pads[5]}},
                 {"dilation", std::vector<int64_t>{win.dilation[1], win.dilation[2]}},
                 {"groups", groups},
                 {"output_padding", std::vector<int64_t>{out_pad[1], out_pad[2]}}};
  ValueId hw = pad_on(ctx.emit(Op::ConvTranspose2d, {planes, w2}, std::move(hw_attrs)),
                      {0, 0, extend[1], extend[2], 0, 0, extend[4], extend[5]});
  if (hw == kNoValue) return ctx.set_output(n, 0, hw);
  const Dim oh = ctx.type(hw).shape[2], ow = ctx.type(hw).shape[3];
  // 2. Placement over D: columns [N*C*OH*OW, kD, D, 1] against the identity.
  FUSEBOX_ASSIGN_OR_RETURN(
      ValueId split,
      ctx.reshape(n, hw, Shape{s[0], Dim(depth), Dim(groups), Dim(kd), Dim(per_group), oh, ow}));
  ValueId cols = ctx.emit(Op::Transpose, {split}, {{"perm", std::vector<int64_t>{0, 2, 4, 5, 6, 3, 1}}});
  if (cols == kNoValue) return ctx.set_output(n, 0, cols);
  const Dim channels(groups * per_group);
  const Dim column_count = dim_product(s[0], dim_product(channels, dim_product(oh, ow)));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId images,
                           ctx.reshape(n, cols, Shape{column_count, Dim(kd), Dim(depth), Dim(1)}));
  Array eye(xt.dtype, {kd, 1, kd, 1});
  eye.fill_bytes(0);
  for (int64_t i = 0; i < kd; ++i) eye.set_f64(i * kd + i, 1.0);
  Attrs d_attrs{{"stride", std::vector<int64_t>{win.stride[0], 1}},
                {"pad", std::vector<int64_t>{pads[0], 0, pads[3], 0}},
                {"dilation", std::vector<int64_t>{win.dilation[0], 1}},
                {"output_padding", std::vector<int64_t>{out_pad[0], 0}}};
  ValueId placed =
      pad_on(ctx.emit(Op::ConvTranspose2d, {images, ctx.builder().constant(eye)}, std::move(d_attrs)),
             {0, 0, extend[0], 0, 0, 0, extend[3], 0});
  if (placed == kNoValue) return ctx.set_output(n, 0, placed);
  const Dim od = ctx.type(placed).shape[2];
  FUSEBOX_ASSIGN_OR_RETURN(ValueId back, ctx.reshape(n, placed, Shape{s[0], channels, oh, ow, od}));
  ValueId y = ctx.emit(Op::Transpose, {back}, {{"perm", std::vector<int64_t>{0, 1, 4, 2, 3}}});
  if (n.has_input(2) && y != kNoValue) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 2));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b4, ctx.reshape(n, b, Shape{ctx.type(b).shape[0], 1, 1, 1}));
    y = ctx.emit(Op::Add, {y, b4});
  }
  return ctx.set_output(n, 0, y);
}

}  // namespace fusebox::onnx_import
