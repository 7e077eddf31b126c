// QuantizeLinear and DequantizeLinear (opsets 10 and 13: a per-tensor or per-axis scale and zero
// point) as element-wise compositions, each as ONNX defines it:
//
//   QuantizeLinear(x, s, zp)    cast(clip(round(x / s) + zp, lo, hi), type of zp)
//                               round is half to even; [lo, hi] the range of u8 or i8
//   DequantizeLinear(x, s, zp)  (cast(x, f32) - cast(zp, f32)) * s
//   DynamicQuantizeLinear(x)    ONNX's function body: s = (max(max(x), 0) - min(min(x), 0)) / 255,
//                               zp = cast(round(clip(0 - min(min(x), 0) / s, 0, 255)), u8), then
//                               QuantizeLinear(x, s, zp) to u8; outputs y, s, zp
//
//   MatMulInteger, ConvInteger  matmul_integer / conv2d_integer: the exact product of (a - a_zp)
//                               and (b - b_zp) in i32
//   QLinearMatMul, QLinearConv  QuantizeLinear(cast(acc, f32) * (a_scale * b_scale), y_scale, y_zp)
//                               with acc the integer product above (+ QLinearConv's i32 bias)
//
// Scale and zero point may be run-time values (DynamicQuantizeLinear's body computes them). A
// per-axis scale or zero point [C] is reshaped to [C, 1, ...] so that it broadcasts along `axis`.
// Scales other than f32 (opset 19's f16/bf16) and 16-bit or float8 types are refused.
#include <cstring>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// `v` (a scale or zero point) shaped to broadcast against x along the node's axis.
Expected<ValueId> along_axis(ImportContext& ctx, OnnxNode& n, ValueId v, const TensorType& x) {
  const TensorType vt = ctx.type(v);
  if (vt.rank() == 0) return v;
  if (vt.rank() != 1) return n.error("scale and zero point must be scalars or 1-D, got " + vt.to_string());
  if (ctx.opset() < 13) return n.error("a 1-D scale or zero point needs opset 13 (axis), got " + vt.to_string());
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, n.attr_int("axis", 1), x.rank(), "axis"));
  Shape s(size_t(x.rank() - axis), Dim(1));
  s[0] = vt.shape[0];
  return ctx.reshape(n, v, s);
}

// The scale (input 1), checked and shaped against x.
Expected<ValueId> scale_of(ImportContext& ctx, OnnxNode& n, const TensorType& x) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId s, ctx.value(n, 1));
  if (ctx.type(s).dtype != DType::F32) return n.error("only f32 scales are supported, got " + ctx.type(s).to_string());
  return along_axis(ctx, n, s, x);
}

ValueId as_f32(ImportContext& ctx, ValueId v) {
  return ctx.type(v).dtype == DType::F32 ? v : ctx.emit(Op::Cast, {v}, {{"to", DType::F32}});
}

// cast(clip(round(x / scale) + zp, lo, hi), out); zp (broadcastable, any type) may be kNoValue.
ValueId quantize(ImportContext& ctx, ValueId x, ValueId scale, ValueId zp, DType out) {
  ValueId q = ctx.emit(Op::Round, {ctx.emit(Op::Div, {as_f32(ctx, x), scale})});
  if (zp != kNoValue) q = ctx.emit(Op::Add, {q, as_f32(ctx, zp)});
  double lo = out == DType::U8 ? 0 : -128, hi = out == DType::U8 ? 255 : 127;
  q = ctx.emit(Op::Clip, {q}, {{"min", lo}, {"max", hi}});
  return ctx.emit(Op::Cast, {q}, {{"to", out}});
}

Status convert_quantize(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.dtype != DType::F32 && xt.dtype != DType::I32) return n.error("x must be f32 or i32, got " + xt.to_string());
  FUSEBOX_ASSIGN_OR_RETURN(ValueId scale, scale_of(ctx, n, xt));
  DType out = DType::U8;
  ValueId zp = kNoValue;
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(zp, ctx.value(n, 2));
    out = ctx.type(zp).dtype;
    FUSEBOX_ASSIGN_OR_RETURN(zp, along_axis(ctx, n, zp, xt));
  }
  if (out != DType::U8 && out != DType::I8) return n.error("the zero point must be u8 or i8, got " + std::string(dtype_name(out)));
  return ctx.set_output(n, 0, quantize(ctx, x, scale, zp, out));
}

Status convert_dynamic_quantize(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.dtype != DType::F32) return n.error("x must be f32, got " + xt.to_string());
  std::vector<int64_t> all(size_t(xt.rank()));
  for (int k = 0; k < xt.rank(); ++k) all[size_t(k)] = k;
  auto f32 = [&](float v) {
    Array a(DType::F32, {});
    a.data<float>()[0] = v;
    return ctx.builder().constant(a);
  };
  Attrs reduce{{"axes", all}, {"keepdims", false}};
  ValueId lo = ctx.emit(Op::Min, {ctx.emit(Op::ReduceMin, {x}, reduce), f32(0)});
  ValueId hi = ctx.emit(Op::Max, {ctx.emit(Op::ReduceMax, {x}, reduce), f32(0)});
  ValueId scale = ctx.emit(Op::Div, {ctx.emit(Op::Sub, {hi, lo}), f32(255)});
  ValueId zp_f = ctx.emit(Op::Sub, {f32(0), ctx.emit(Op::Div, {lo, scale})});
  zp_f = ctx.emit(Op::Round, {ctx.emit(Op::Clip, {zp_f}, {{"min", 0.0}, {"max", 255.0}})});
  ValueId zp = ctx.emit(Op::Cast, {zp_f}, {{"to", DType::U8}});
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 0, quantize(ctx, x, scale, zp, DType::U8)));
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 1, scale));
  return ctx.set_output(n, 2, zp);
}

Status convert_dequantize(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.dtype != DType::U8 && xt.dtype != DType::I8 && xt.dtype != DType::I32) {
    return n.error("x must be u8, i8 or i32, got " + xt.to_string());
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId scale, scale_of(ctx, n, xt));
  ValueId y = as_f32(ctx, x);
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId zp, ctx.value(n, 2));
    if (ctx.type(zp).dtype != xt.dtype) return n.error("the zero point's type must be x's, got " + ctx.type(zp).to_string());
    FUSEBOX_ASSIGN_OR_RETURN(zp, along_axis(ctx, n, zp, xt));
    y = ctx.emit(Op::Sub, {y, as_f32(ctx, zp)});
  }
  return ctx.set_output(n, 0, ctx.emit(Op::Mul, {y, scale}));
}

// The zero point of an 8-bit operand `v` (node input `zp_input`; absent: a constant 0 of v's
// dtype), a scalar or 1-D as the integer contractions take it (a 1-element 1-D one as a scalar).
Expected<ValueId> zero_point(ImportContext& ctx, OnnxNode& n, ValueId v, int zp_input) {
  const TensorType vt = ctx.type(v);
  if (vt.dtype != DType::U8 && vt.dtype != DType::I8) return n.error("operands must be u8 or i8, got " + vt.to_string());
  if (!n.has_input(zp_input)) {
    Array zero(vt.dtype, {});
    std::memset(zero.raw(), 0, zero.nbytes());
    return ctx.builder().constant(zero);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId zp, ctx.value(n, zp_input));
  const TensorType zt = ctx.type(zp);
  if (zt.dtype != vt.dtype) return n.error("a zero point's type must be its operand's, got " + zt.to_string() + " for " + vt.to_string());
  if (zt.rank() > 1) return n.error("a zero point must be a scalar or 1-D, got " + zt.to_string());
  if (zt.rank() == 1 && zt.shape[0] == Dim(1)) return ctx.reshape(n, zp, Shape{});
  return zp;
}

// The exact integer product of a and b (matmul_integer, i32) for MatMulInteger/QLinearMatMul;
// the zero points are node inputs `a_zp` (per tensor or per row of a) and `b_zp` (per tensor or
// per column of b).
Expected<ValueId> integer_matmul(ImportContext& ctx, OnnxNode& n, ValueId a, int a_zp, ValueId b, int b_zp) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId az, zero_point(ctx, n, a, a_zp));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId bz, zero_point(ctx, n, b, b_zp));
  return ctx.emit(Op::MatMulInteger, {a, b, az, bz});
}

// The exact integer convolution of x and w (conv2d_integer, i32) for ConvInteger/QLinearConv,
// plus QLinearConv's i32 bias per output channel.
Expected<ValueId> integer_conv(ImportContext& ctx, OnnxNode& n, ValueId x, int x_zp, ValueId w, int w_zp,
                               std::optional<ValueId> bias) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId xz, zero_point(ctx, n, x, x_zp));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId wz, zero_point(ctx, n, w, w_zp));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId acc, emit_conv(ctx, n, x, w, {xz, wz}, Op::Conv2dInteger));
  if (!bias || acc == kNoValue) return acc;
  const TensorType bt = ctx.type(*bias);
  if (bt.rank() != 1) return n.error("the bias must be 1-D, got " + bt.to_string());
  // [O] against the result [N, O, spatial...]: [O, 1, ...].
  Shape along(size_t(ctx.type(acc).rank() - 1), Dim(1));
  along[0] = bt.shape[0];
  FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.reshape(n, *bias, along));
  return ctx.emit(Op::Add, {acc, b});
}

Status convert_matmul_integer(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId a, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId acc, integer_matmul(ctx, n, a, 2, b, 3));
  return ctx.set_output(n, 0, acc);
}

Status convert_conv_integer(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId w, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId acc, integer_conv(ctx, n, x, 2, w, 3, std::nullopt));
  return ctx.set_output(n, 0, acc);
}

// A QLinear op's f32 scale input `i`, shaped [len, 1, ...] to broadcast over `rank` result axes
// from axis `axis` when it is 1-D.
Expected<ValueId> qlinear_scale(ImportContext& ctx, OnnxNode& n, int i, int rank, int axis) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId s, ctx.value(n, i));
  const TensorType st = ctx.type(s);
  if (st.dtype != DType::F32) return n.error("only f32 scales are supported, got " + st.to_string());
  if (st.rank() == 0) return s;
  if (st.rank() != 1) return n.error("a scale must be a scalar or 1-D, got " + st.to_string());
  if (axis < 0) return s;  // trailing axis: broadcasts as it is
  Shape shape(size_t(rank - axis), Dim(1));
  shape[0] = st.shape[0];
  return ctx.reshape(n, s, shape);
}

// A per-tensor scale or zero point: a scalar, or a 1-D one of one element (reshaped to a scalar).
Expected<ValueId> per_tensor(ImportContext& ctx, OnnxNode& n, ValueId v) {
  const TensorType t = ctx.type(v);
  if (t.rank() == 0) return v;
  if (t.rank() == 1 && t.shape[0].is_static() && t.shape[0].value() == 1) return ctx.reshape(n, v, Shape{});
  return n.error("only a per-tensor input and output scale and zero point are supported, got " + t.to_string());
}

// QuantizeLinear(cast(acc, f32) * (a_scale * b_scale), y_scale, y_zp) for a QLinear op whose
// scales are inputs `a_scale`, `b_scale`, `y_scale` and `y_zp`; b's scale broadcasts along
// `b_axis` of the result (-1: the last).
Status requantize(ImportContext& ctx, OnnxNode& n, ValueId acc, int a_scale, int b_scale, int y_scale, int b_axis) {
  const int rank = ctx.type(acc).rank();
  FUSEBOX_ASSIGN_OR_RETURN(ValueId as, qlinear_scale(ctx, n, a_scale, rank, -1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId bs, qlinear_scale(ctx, n, b_scale, rank, b_axis));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId ys, qlinear_scale(ctx, n, y_scale, rank, -1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId zp, ctx.value(n, y_scale + 1));
  const DType out = ctx.type(zp).dtype;
  if (out != DType::U8 && out != DType::I8) return n.error("y_zero_point must be u8 or i8, got " + ctx.type(zp).to_string());
  for (ValueId* v : {&as, &ys, &zp}) {
    FUSEBOX_ASSIGN_OR_RETURN(*v, per_tensor(ctx, n, *v));
  }
  ValueId real = ctx.emit(Op::Mul, {as_f32(ctx, acc), ctx.emit(Op::Mul, {as, bs})});
  return ctx.set_output(n, 0, quantize(ctx, real, ys, zp, out));
}

Status convert_qlinear_matmul(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId a, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 3));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId acc, integer_matmul(ctx, n, a, 2, b, 5));
  return requantize(ctx, n, acc, 1, 4, 6, -1);
}

Status convert_qlinear_conv(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId w, ctx.value(n, 3));
  std::optional<ValueId> bias;
  if (n.has_input(8)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 8));
    if (ctx.type(b).dtype != DType::I32) return n.error("the bias must be i32, got " + ctx.type(b).to_string());
    bias = b;
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId acc, integer_conv(ctx, n, x, 2, w, 5, bias));
  return requantize(ctx, n, acc, 1, 4, 6, 1);
}

}  // namespace

void add_quantize_converters(ConverterTable& table) {
  table["QuantizeLinear"] = convert_quantize;
  table["DequantizeLinear"] = convert_dequantize;
  table["DynamicQuantizeLinear"] = convert_dynamic_quantize;
  table["MatMulInteger"] = convert_matmul_integer;
  table["ConvInteger"] = convert_conv_integer;
  table["QLinearMatMul"] = convert_qlinear_matmul;
  table["QLinearConv"] = convert_qlinear_conv;
}

}  // namespace fusebox::onnx_import
