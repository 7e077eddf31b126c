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
// Scale and zero point may be run-time values (DynamicQuantizeLinear's body computes them). A
// per-axis scale or zero point [C] is reshaped to [C, 1, ...] so that it broadcasts along `axis`.
// Scales other than f32 (opset 19's f16/bf16) and 16-bit or float8 types are refused.
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

}  // namespace

void add_quantize_converters(ConverterTable& table) {
  table["QuantizeLinear"] = convert_quantize;
  table["DequantizeLinear"] = convert_dequantize;
  table["DynamicQuantizeLinear"] = convert_dynamic_quantize;
}

}  // namespace fusebox::onnx_import
