// ONNX ops that are compositions of existing fusebox ops, each written as ONNX defines it:
//
//   Xor(a, b)            ne(a, b)                              (bool)
//   IsNaN(x)             ne(x, x)
//   IsInf(x)             eq(x, +inf) or eq(x, -inf)            (detect_positive / detect_negative)
//   Sign(x)              where(x > 0, 1, where(x < 0, -1, x * 0))   (NaN stays NaN)
//   ThresholdedRelu(x)   where(x > alpha, x, 0)
//   Shrink(x)            where(x < -lambd, x + bias, where(x > lambd, x - bias, 0))
//   Elu(x)               where(x < 0, alpha * (exp(x) - 1), x)
//   Celu(x)              where(x < 0, alpha * (exp(x / alpha) - 1), x)
//   Selu(x)              gamma * where(x > 0, x, alpha * (exp(x) - 1))
//   Softplus(x)          where(x > 0, x + log(1 + exp(-x)), log(1 + exp(x)))   (no overflow)
//   Softsign(x)          x / (1 + abs(x))
//   InstanceNormalization(x, s, b)   (x - m) * rsqrt(v + eps) * s + b, m and v the mean and
//                        variance over the spatial axes (2..), s and b per channel
//   CastLike(x, like)    cast(x, to = like's type)
//   ReduceL1             reduce_sum(abs(x))
//   ReduceL2             sqrt(reduce_sum(x * x))
//   ReduceSumSquare      reduce_sum(x * x)
//   ReduceLogSum         log(reduce_sum(x))
//   ReduceLogSumExp      m + log(reduce_sum(exp(x - m))), m = reduce_max(x) where finite, else 0
#include <cmath>
#include <limits>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

ValueId scalar_constant(ImportContext& ctx, DType dtype, double v) {
  Array s(dtype, {});
  if (is_float(dtype)) s.set_f64(0, v);
  else s.set_i64(0, static_cast<int64_t>(v));
  return ctx.builder().constant(s);
}

ValueId emit_thresholded_relu(ImportContext& ctx, ValueId x, double alpha) {
  DType t = ctx.type(x).dtype;
  ValueId above = ctx.emit(Op::Greater, {x, scalar_constant(ctx, t, alpha)});
  return ctx.emit(Op::Where, {above, x, scalar_constant(ctx, t, 0)});
}

ValueId emit_elu(ImportContext& ctx, ValueId x, double alpha) {
  DType t = ctx.type(x).dtype;
  ValueId neg = ctx.emit(Op::Mul, {scalar_constant(ctx, t, alpha), ctx.emit(Op::Sub, {ctx.emit(Op::Exp, {x}), scalar_constant(ctx, t, 1)})});
  return ctx.emit(Op::Where, {ctx.emit(Op::Less, {x, scalar_constant(ctx, t, 0)}), neg, x});
}

ValueId emit_softsign(ImportContext& ctx, ValueId x) {
  ValueId one = scalar_constant(ctx, ctx.type(x).dtype, 1);
  return ctx.emit(Op::Div, {x, ctx.emit(Op::Add, {one, ctx.emit(Op::Abs, {x})})});
}

ValueId emit_softplus(ImportContext& ctx, ValueId x) {
  DType t = ctx.type(x).dtype;
  ValueId one = scalar_constant(ctx, t, 1);
  // log(1 + exp(x)) = x + log(1 + exp(-x)): the second form for x > 0 keeps exp from overflowing.
  ValueId pos = ctx.emit(Op::Add, {x, ctx.emit(Op::Log, {ctx.emit(Op::Add, {one, ctx.emit(Op::Exp, {ctx.emit(Op::Neg, {x})})})})});
  ValueId neg = ctx.emit(Op::Log, {ctx.emit(Op::Add, {one, ctx.emit(Op::Exp, {x})})});
  return ctx.emit(Op::Where, {ctx.emit(Op::Greater, {x, scalar_constant(ctx, t, 0)}), pos, neg});
}

namespace {

Status convert_xor(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId a, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 1));
  return ctx.set_output(n, 0, ctx.emit(Op::NotEqual, {a, b}));
}

Status convert_is_nan_inf(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  DType t = ctx.type(x).dtype;
  if (!is_float(t)) return n.error("input must be a float tensor, got " + ctx.type(x).to_string());
  if (n.op_type() == "IsNaN") return ctx.set_output(n, 0, ctx.emit(Op::NotEqual, {x, x}));
  bool pos = n.attr_int("detect_positive", 1) != 0, neg = n.attr_int("detect_negative", 1) != 0;
  const double inf = std::numeric_limits<double>::infinity();
  ValueId p = ctx.emit(Op::Equal, {x, scalar_constant(ctx, t, inf)});
  ValueId m = ctx.emit(Op::Equal, {x, scalar_constant(ctx, t, -inf)});
  // Neither: no element is +inf and -inf at once, so `and` gives all false.
  ValueId y = pos && neg ? ctx.emit(Op::Or, {p, m}) : pos ? p : neg ? m : ctx.emit(Op::And, {p, m});
  return ctx.set_output(n, 0, y);
}

Status convert_sign(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  DType t = ctx.type(x).dtype;
  if (t == DType::Bool) return n.error("input must be numeric, got " + ctx.type(x).to_string());
  ValueId zero = scalar_constant(ctx, t, 0);
  ValueId rest = ctx.emit(Op::Mul, {x, zero});  // 0 for 0, NaN for NaN
  if (t != DType::U8) rest = ctx.emit(Op::Where, {ctx.emit(Op::Less, {x, zero}), scalar_constant(ctx, t, -1), rest});
  return ctx.set_output(n, 0, ctx.emit(Op::Where, {ctx.emit(Op::Greater, {x, zero}), scalar_constant(ctx, t, 1), rest}));
}

Status convert_thresholded_relu(ImportContext& ctx, OnnxNode& n) {
  double alpha = n.attr_float("alpha", 1.0f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, emit_thresholded_relu(ctx, x, alpha));
}

Status convert_shrink(ImportContext& ctx, OnnxNode& n) {
  double lambd = n.attr_float("lambd", 0.5f), bias = n.attr_float("bias", 0.0f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  DType t = ctx.type(x).dtype;
  ValueId b = scalar_constant(ctx, t, bias);
  ValueId upper = ctx.emit(Op::Where, {ctx.emit(Op::Greater, {x, scalar_constant(ctx, t, lambd)}), ctx.emit(Op::Sub, {x, b}),
                                       scalar_constant(ctx, t, 0)});
  ValueId lower = ctx.emit(Op::Less, {x, scalar_constant(ctx, t, -lambd)});
  return ctx.set_output(n, 0, ctx.emit(Op::Where, {lower, ctx.emit(Op::Add, {x, b}), upper}));
}

Status convert_elu(ImportContext& ctx, OnnxNode& n) {
  bool celu = n.op_type() == "Celu";
  double alpha = n.attr_float("alpha", 1.0f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  DType t = ctx.type(x).dtype;
  if (!is_float(t)) return n.error("input must be a float tensor, got " + ctx.type(x).to_string());
  if (!celu) return ctx.set_output(n, 0, emit_elu(ctx, x, alpha));
  if (alpha == 0) return n.error("attribute 'alpha' must not be 0");
  ValueId a = scalar_constant(ctx, t, alpha);
  ValueId neg = ctx.emit(Op::Mul, {a, ctx.emit(Op::Sub, {ctx.emit(Op::Exp, {ctx.emit(Op::Div, {x, a})}), scalar_constant(ctx, t, 1)})});
  return ctx.set_output(n, 0, ctx.emit(Op::Where, {ctx.emit(Op::Less, {x, scalar_constant(ctx, t, 0)}), neg, x}));
}

Status convert_selu(ImportContext& ctx, OnnxNode& n) {
  double alpha = n.attr_float("alpha", 1.67326319217681884765625f);
  double gamma = n.attr_float("gamma", 1.05070102214813232421875f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  DType t = ctx.type(x).dtype;
  if (!is_float(t)) return n.error("input must be a float tensor, got " + ctx.type(x).to_string());
  ValueId neg = ctx.emit(Op::Mul, {scalar_constant(ctx, t, alpha), ctx.emit(Op::Sub, {ctx.emit(Op::Exp, {x}), scalar_constant(ctx, t, 1)})});
  ValueId y = ctx.emit(Op::Where, {ctx.emit(Op::Greater, {x, scalar_constant(ctx, t, 0)}), x, neg});
  return ctx.set_output(n, 0, ctx.emit(Op::Mul, {scalar_constant(ctx, t, gamma), y}));
}

Status convert_softplus_softsign(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (!is_float(ctx.type(x).dtype)) return n.error("input must be a float tensor, got " + ctx.type(x).to_string());
  return ctx.set_output(n, 0, n.op_type() == "Softsign" ? emit_softsign(ctx, x) : emit_softplus(ctx, x));
}

Status convert_instance_norm(ImportContext& ctx, OnnxNode& n) {
  double eps = n.attr_float("epsilon", 1e-5f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId s, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 2));
  const TensorType xt = ctx.type(x);
  if (!is_float(xt.dtype)) return n.error("input must be a float tensor, got " + xt.to_string());
  if (xt.rank() < 3) return n.error("input must have rank >= 3 ([N, C, spatial...]), got " + xt.to_string());
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < xt.rank(); ++i) axes.push_back(i);
  Attrs reduce{{"axes", axes}, {"keepdims", true}};
  // The per-channel vectors as [C, 1, ...] so they broadcast over the spatial axes.
  if (ctx.type(s).rank() != 1 || ctx.type(b).rank() != 1) {
    return n.error("scale and B must be vectors of C values, got " + ctx.type(s).to_string() + " and " + ctx.type(b).to_string());
  }
  Shape per_channel{ctx.type(s).shape[0]};
  for (int64_t i = 2; i < xt.rank(); ++i) per_channel.push_back(Dim(1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId sc, ctx.reshape(n, s, per_channel));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId bc, ctx.reshape(n, b, per_channel));
  ValueId d = ctx.emit(Op::Sub, {x, ctx.emit(Op::ReduceMean, {x}, reduce)});
  ValueId var = ctx.emit(Op::ReduceMean, {ctx.emit(Op::Mul, {d, d})}, reduce);
  ValueId inv = ctx.emit(Op::Rsqrt, {ctx.emit(Op::Add, {var, scalar_constant(ctx, xt.dtype, eps)})});
  return ctx.set_output(n, 0, ctx.emit(Op::Add, {ctx.emit(Op::Mul, {ctx.emit(Op::Mul, {d, inv}), sc}), bc}));
}

Status convert_cast_like(ImportContext& ctx, OnnxNode& n) {
  n.accept_attr("saturate");  // only affects float8 targets, which fusebox lacks
  FUSEBOX_ASSIGN_OR_RETURN(TensorType like, ctx.type_of(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (ctx.type(x).dtype == like.dtype) return ctx.set_output(n, 0, x);
  return ctx.set_output(n, 0, ctx.emit(Op::Cast, {x}, {{"to", like.dtype}}));
}

Status convert_reduce_composite(ImportContext& ctx, OnnxNode& n) {
  const std::string& t = n.op_type();
  bool keepdims = n.attr_int("keepdims", 1) != 0;
  bool noop_empty = n.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (ctx.opset() >= 18) {  // axes moved from an attribute to an input in opset 18
    if (n.has_input(1)) {
      FUSEBOX_ASSIGN_OR_RETURN(axes, ctx.require_static_ints(n, 1, "axes"));
    }
  } else {
    axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
  }
  if (axes.empty() && noop_empty) return n.error("attribute 'noop_with_empty_axes' = 1 with no axes is not supported");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  DType dt = ctx.type(x).dtype;
  if ((t == "ReduceLogSum" || t == "ReduceLogSumExp" || t == "ReduceL2") && !is_float(dt)) {
    return n.error("input must be a float tensor, got " + ctx.type(x).to_string());
  }
  Attrs attrs{{"axes", axes}, {"keepdims", keepdims}};
  if (t == "ReduceL1") return ctx.set_output(n, 0, ctx.emit(Op::ReduceSum, {ctx.emit(Op::Abs, {x})}, attrs));
  if (t == "ReduceLogSum") return ctx.set_output(n, 0, ctx.emit(Op::Log, {ctx.emit(Op::ReduceSum, {x}, attrs)}));
  if (t == "ReduceSumSquare" || t == "ReduceL2") {
    ValueId s = ctx.emit(Op::ReduceSum, {ctx.emit(Op::Mul, {x, x})}, attrs);
    return ctx.set_output(n, 0, t == "ReduceL2" ? ctx.emit(Op::Sqrt, {s}) : s);
  }
  // ReduceLogSumExp, shifted by the maximum so that exp cannot overflow; an infinite or NaN
  // maximum is replaced by 0 (m - m != 0 there), which leaves the sum as ONNX defines it.
  ValueId m = ctx.emit(Op::ReduceMax, {x}, {{"axes", axes}, {"keepdims", true}});
  ValueId zero = scalar_constant(ctx, dt, 0);
  ValueId finite = ctx.emit(Op::Equal, {ctx.emit(Op::Sub, {m, m}), zero});
  m = ctx.emit(Op::Where, {finite, m, zero});
  ValueId s = ctx.emit(Op::ReduceSum, {ctx.emit(Op::Exp, {ctx.emit(Op::Sub, {x, m})})}, attrs);
  // m has the reduced axes as size-1 dims; reducing them again gives the result's shape.
  ValueId shift = keepdims ? m : ctx.emit(Op::ReduceMax, {m}, attrs);
  return ctx.set_output(n, 0, ctx.emit(Op::Add, {ctx.emit(Op::Log, {s}), shift}));
}

}  // namespace

void add_decomposed_converters(ConverterTable& table) {
  table["Xor"] = convert_xor;
  table["IsNaN"] = convert_is_nan_inf;
  table["IsInf"] = convert_is_nan_inf;
  table["Sign"] = convert_sign;
  table["ThresholdedRelu"] = convert_thresholded_relu;
  table["Shrink"] = convert_shrink;
  table["Elu"] = convert_elu;
  table["Celu"] = convert_elu;
  table["CastLike"] = convert_cast_like;
  table["Selu"] = convert_selu;
  table["Softplus"] = convert_softplus_softsign;
  table["Softsign"] = convert_softplus_softsign;
  table["InstanceNormalization"] = convert_instance_norm;
  for (const char* r : {"ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"}) {
    table[r] = convert_reduce_composite;
  }
}

}  // namespace fusebox::onnx_import
