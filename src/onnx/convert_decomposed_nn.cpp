// ONNX normalisations written with fusebox ops, each as ONNX defines it:
//
//   LRN(x)                        x / (bias + alpha / size * square_sum)^beta, where
//                                 square_sum[n, c, ...] = sum of x[n, i, ...]^2 over the channels
//                                 i in [c - floor((size-1)/2), c + ceil((size-1)/2)] inside [0, C)
//   MeanVarianceNormalization(x)  (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9), means over `axes`
//                                 (ONNX's function body, term for term)
//
// The LRN window sum pads the squares with zeros along the channels and adds `size` shifted
// slices in channel order (the same terms as the definition; added zeros change nothing), so C
// may be a run-time size:
//
//          x^2  [N, C, ...]
//           | pad channels: lo = floor((size-1)/2), hi = ceil((size-1)/2) zeros
//           v
//   [N, lo + C + hi, ...]  -- slice [j, j + C) for j = 0 .. size-1 --> add, in order
#include <limits>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

ValueId scalar(ImportContext& ctx, DType dtype, double v) {
  Array s(dtype, {});
  s.set_f64(0, v);
  return ctx.builder().constant(s);
}

Status convert_lrn(ImportContext& ctx, OnnxNode& n) {
  std::optional<int64_t> size = n.attr_int("size");
  if (!size || *size < 1) return n.error("attribute 'size' must be given and >= 1");
  const double alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f),
               bias = n.attr_float("bias", 1.0f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (!is_float(xt.dtype) || xt.rank() < 2)
    return n.error("input must be a float tensor [N, C, ...], got " + xt.to_string());
  const int rank = xt.rank();
  const int64_t lo = (*size - 1) / 2, hi = *size - 1 - lo;
  ValueId sq = ctx.emit(Op::Mul, {x, x});
  std::vector<int64_t> pads(size_t(2 * rank), 0);
  pads[1] = lo;
  pads[size_t(rank) + 1] = hi;
  ValueId padded = lo + hi > 0 ? ctx.emit(Op::Pad, {sq}, {{"pads", pads}}) : sq;
  ValueId sum = kNoValue;
  for (int64_t j = 0; j < *size; ++j) {
    // [j, j + C) of the padded channels: the end counts from the back, j - (size - 1).
    int64_t end = j == *size - 1 ? kMax : j - (*size - 1);
    ValueId part = ctx.emit(Op::Slice, {padded},
                            {{"starts", std::vector<int64_t>{j}},
                             {"ends", std::vector<int64_t>{end}},
                             {"axes", std::vector<int64_t>{1}}});
    sum = j == 0 ? part : ctx.emit(Op::Add, {sum, part});
  }
  ValueId scaled = ctx.emit(Op::Mul, {scalar(ctx, xt.dtype, alpha / double(*size)), sum});
  ValueId base = ctx.emit(Op::Add, {scalar(ctx, xt.dtype, bias), scaled});
  ValueId denom = ctx.emit(Op::Pow, {base, scalar(ctx, xt.dtype, beta)});
  return ctx.set_output(n, 0, ctx.emit(Op::Div, {x, denom}));
}

Status convert_mvn(ImportContext& ctx, OnnxNode& n) {
  std::vector<int64_t> axes = n.attr_ints("axes").value_or(std::vector<int64_t>{0, 2, 3});
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (!is_float(xt.dtype)) return n.error("input must be a float tensor, got " + xt.to_string());
  for (int64_t a : axes) {
    FUSEBOX_RETURN_IF_ERROR(normalize_onnx_axis(n, a, xt.rank(), "axes entry").status());
  }
  Attrs keep{{"axes", axes}, {"keepdims", true}};
  ValueId mean = ctx.emit(Op::ReduceMean, {x}, keep);
  ValueId mean_sq = ctx.emit(Op::Mul, {mean, mean});
  ValueId sq_mean = ctx.emit(Op::ReduceMean, {ctx.emit(Op::Mul, {x, x})}, keep);
  ValueId std_dev = ctx.emit(Op::Sqrt, {ctx.emit(Op::Sub, {sq_mean, mean_sq})});
  ValueId denom = ctx.emit(Op::Add, {std_dev, scalar(ctx, xt.dtype, 1e-9)});
  return ctx.set_output(n, 0, ctx.emit(Op::Div, {ctx.emit(Op::Sub, {x, mean}), denom}));
}

}  // namespace

void add_decomposed_nn_converters(ConverterTable& table) {
  table["LRN"] = convert_lrn;
  table["MeanVarianceNormalization"] = convert_mvn;
}

}  // namespace fusebox::onnx_import
