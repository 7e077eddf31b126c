// ONNX tensor ops written with fusebox ops and constants the importer computes from static sizes:
//
//   Trilu(x, k)         where(mask, x, 0); mask[i, j] = j - i >= k (upper) or <= k (lower),
//                       a constant over the last two dims, which must be static; k constant
//   Hardmax(x)          cast(eq(argmax(x, axis, keepdims), iota along axis)): the first maximum
//                       is 1, the rest 0; the axis size must be static
//   DepthToSpace        reshape -> transpose -> reshape (DCR and CRD modes)
//   SpaceToDepth        reshape -> transpose -> reshape
//   EyeLike(x)          a constant of x's static shape (ones on diagonal k)
//   NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: see convert_nll_loss
//   GatherElements      see convert_gather_elements
//   OneHot(i, depth, [off, on])  where(eq(unsqueeze(i', axis), iota over depth), on, off) with
//                       i' = i + depth where i < 0 (opset 11 on), float indices cast to int64
//                       first; out-of-range indices match no iota entry and give `off`, as the
//                       spec says (depth known at import or given at run time)
//   Tile(x, r)          reshape x [d0, d1] to [1, d0, 1, d1], expand to [r0, d0, r1, d1], reshape
//                       to [r0*d0, r1*d1]: out[i] = x[i mod d] on every axis (r known at import or
//                       given at run time)
#include <algorithm>
#include <limits>

#include "onnx/converters.h"
#include "onnx/tensor_data.h"

namespace fusebox::onnx_import {

namespace {

Expected<int64_t> static_dim(OnnxNode& n, const TensorType& t, int axis) {
  const Dim& d = t.shape[size_t(axis)];
  if (!d.is_static()) return n.error("needs a static size along axis " + std::to_string(axis) + ", the input is " + t.to_string());
  return d.value();
}

Status convert_trilu(ImportContext& ctx, OnnxNode& n) {
  bool upper = n.attr_int("upper", 1) != 0;
  int64_t k = 0;
  if (n.has_input(1)) {
    FUSEBOX_ASSIGN_OR_RETURN(double kv, ctx.require_scalar(n, 1, "k"));
    k = static_cast<int64_t>(kv);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.rank() < 2) return n.error("input must have rank >= 2, got " + xt.to_string());
  FUSEBOX_ASSIGN_OR_RETURN(int64_t rows, static_dim(n, xt, xt.rank() - 2));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t cols, static_dim(n, xt, xt.rank() - 1));
  Array mask(DType::Bool, {rows, cols});
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) mask.data<bool>()[i * cols + j] = upper ? j - i >= k : j - i <= k;
  }
  Array zero(xt.dtype, {});
  zero.fill_bytes(0);
  ValueId m = ctx.builder().constant(mask), z = ctx.builder().constant(zero);
  return ctx.set_output(n, 0, ctx.emit(Op::Where, {m, x, z}));
}

Status convert_hardmax(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.rank() == 0) return n.error("input must have rank >= 1");
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, n.attr_int("axis", ctx.opset() >= 13 ? -1 : 1), xt.rank(), "axis"));
  // Before opset 13 the input is flattened to 2-D at `axis`: the same only for the last axis.
  if (ctx.opset() < 13 && axis != xt.rank() - 1) {
    return n.error("before opset 13, only the last axis is supported (the input is flattened at 'axis')");
  }
  FUSEBOX_ASSIGN_OR_RETURN(int64_t size, static_dim(n, xt, axis));
  std::vector<int64_t> shape(size_t(xt.rank()), 1);
  shape[size_t(axis)] = size;
  Array iota(DType::I64, shape);
  for (int64_t i = 0; i < size; ++i) iota.data<int64_t>()[i] = i;
  ValueId arg = ctx.emit(Op::ArgMax, {x}, {{"axis", int64_t(axis)}, {"keepdims", true}});
  ValueId hot = ctx.emit(Op::Equal, {arg, ctx.builder().constant(iota)});
  return ctx.set_output(n, 0, ctx.emit(Op::Cast, {hot}, {{"to", xt.dtype}}));
}

// DepthToSpace / SpaceToDepth over a static [N, C, H, W] (N may be symbolic).
Status convert_depth_space(ImportContext& ctx, OnnxNode& n) {
  bool to_space = n.op_type() == "DepthToSpace";
  std::optional<int64_t> b = n.attr_int("blocksize");
  std::string mode = to_space ? n.attr_string("mode", "DCR") : "DCR";
  if (!b || *b <= 0) return n.error("attribute 'blocksize' must be given and positive");
  if (mode != "DCR" && mode != "CRD") return n.error("attribute 'mode' = \"" + mode + "\" is not supported");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.rank() != 4) return n.error("input must be [N, C, H, W], got " + xt.to_string());
  FUSEBOX_ASSIGN_OR_RETURN(int64_t c, static_dim(n, xt, 1));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t h, static_dim(n, xt, 2));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t w, static_dim(n, xt, 3));
  const Dim batch = xt.shape[0];
  const int64_t bs = *b;
  Shape split, out;
  std::vector<int64_t> perm;
  if (to_space) {
    if (c % (bs * bs) != 0) return n.error("channels " + std::to_string(c) + " are not a multiple of blocksize^2");
    int64_t cb = c / (bs * bs);
    split = mode == "DCR" ? Shape{batch, Dim(bs), Dim(bs), Dim(cb), Dim(h), Dim(w)}
                          : Shape{batch, Dim(cb), Dim(bs), Dim(bs), Dim(h), Dim(w)};
    perm = mode == "DCR" ? std::vector<int64_t>{0, 3, 4, 1, 5, 2} : std::vector<int64_t>{0, 1, 4, 2, 5, 3};
    out = Shape{batch, Dim(cb), Dim(h * bs), Dim(w * bs)};
  } else {
    if (h % bs != 0 || w % bs != 0) return n.error("spatial size is not a multiple of blocksize, the input is " + xt.to_string());
    split = Shape{batch, Dim(c), Dim(h / bs), Dim(bs), Dim(w / bs), Dim(bs)};
    perm = {0, 3, 5, 1, 2, 4};
    out = Shape{batch, Dim(c * bs * bs), Dim(h / bs), Dim(w / bs)};
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId s, ctx.reshape(n, x, split));
  ValueId t = ctx.emit(Op::Transpose, {s}, {{"perm", perm}});
  if (t == kNoValue) return ctx.set_output(n, 0, t);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, t, out));
  return ctx.set_output(n, 0, y);
}

Status convert_eye_like(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(TensorType xt, ctx.type_of(n, 0));
  int64_t k = n.attr_int("k", 0);
  DType dtype = xt.dtype;
  if (std::optional<int64_t> t = n.attr_int("dtype")) {
    std::optional<DType> d = dtype_from_onnx(static_cast<int32_t>(*t));
    if (!d) return n.error("attribute 'dtype' = " + onnx_type_name(static_cast<int32_t>(*t)) + " is not supported");
    dtype = *d;
  }
  if (xt.rank() != 2) return n.error("input must be 2-D, got " + xt.to_string());
  FUSEBOX_ASSIGN_OR_RETURN(int64_t rows, static_dim(n, xt, 0));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t cols, static_dim(n, xt, 1));
  Array eye(dtype, {rows, cols});
  eye.fill_bytes(0);
  for (int64_t i = 0; i < rows; ++i) {
    if (i + k >= 0 && i + k < cols) {
      if (dtype == DType::Bool) eye.data<bool>()[i * cols + i + k] = true;
      else eye.set_f64(i * cols + i + k, 1.0);
    }
  }
  return ctx.set_output_constant(n, 0, std::move(eye));
}

// NegativeLogLikelihoodLoss over input [N, C, d...] and target [N, d...] (C static):
//   picked[n, d] = reduce_sum(where(eq(target[n, 1, d], iota_C), input, 0), axis 1)   (exact:
//   one term is not zero), w = weight[target] (gather) times (target != ignore_index), loss =
//   -picked * w; "sum" sums it, "mean" divides the sum by the sum of w (by the count without
//   weights and ignore_index). SoftmaxCrossEntropyLoss is the same over log_softmax(scores, 1).
Status convert_nll_loss(ImportContext& ctx, OnnxNode& n) {
  bool softmax = n.op_type() == "SoftmaxCrossEntropyLoss";
  std::string reduction = n.attr_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none") {
    return n.error("attribute 'reduction' = \"" + reduction + "\" is not supported");
  }
  std::optional<int64_t> ignore = n.attr_int("ignore_index");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId t, ctx.value(n, 1));
  const TensorType xt = ctx.type(x), tt = ctx.type(t);
  if (!is_float(xt.dtype) || xt.rank() < 2) return n.error("input must be a float [N, C, ...] tensor, got " + xt.to_string());
  if (!is_integer(tt.dtype) || tt.rank() != xt.rank() - 1) {
    return n.error("target must be an integer [N, ...] tensor of rank " + std::to_string(xt.rank() - 1) + ", got " + tt.to_string());
  }
  FUSEBOX_ASSIGN_OR_RETURN(int64_t classes, static_dim(n, xt, 1));
  if (softmax) {
    x = ctx.emit(Op::LogSoftmax, {x}, {{"axis", int64_t(1)}});
    if (n.has_output(1)) FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 1, x));
  }
  if (tt.dtype != DType::I64) t = ctx.emit(Op::Cast, {t}, {{"to", DType::I64}});
  Array zero_i(DType::I64, {});
  zero_i.fill_bytes(0);
  ValueId keep = kNoValue;  // target != ignore_index
  if (ignore) {
    Array ii(DType::I64, {});
    ii.data<int64_t>()[0] = *ignore;
    keep = ctx.emit(Op::NotEqual, {t, ctx.builder().constant(ii)});
    t = ctx.emit(Op::Where, {keep, t, ctx.builder().constant(zero_i)});
  }
  Shape unsqueezed = tt.shape;
  unsqueezed.insert(unsqueezed.begin() + 1, Dim(1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId tu, ctx.reshape(n, t, unsqueezed));
  std::vector<int64_t> iota_shape(size_t(xt.rank()), 1);
  iota_shape[1] = classes;
  Array iota(DType::I64, iota_shape);
  for (int64_t c = 0; c < classes; ++c) iota.data<int64_t>()[c] = c;
  Array zero(xt.dtype, {});
  zero.fill_bytes(0);
  ValueId z = ctx.builder().constant(zero);
  ValueId hot = ctx.emit(Op::Equal, {tu, ctx.builder().constant(iota)});
  ValueId picked = ctx.emit(Op::ReduceSum, {ctx.emit(Op::Where, {hot, x, z})},
                            {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}});
  ValueId w = kNoValue;
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId weight, ctx.value(n, 2));
    w = ctx.emit(Op::Gather, {weight, t}, {{"axis", int64_t(0)}});
  }
  if (keep != kNoValue) {
    ValueId k = ctx.emit(Op::Cast, {keep}, {{"to", xt.dtype}});
    w = w == kNoValue ? k : ctx.emit(Op::Mul, {w, k});
  }
  ValueId loss = ctx.emit(Op::Neg, {w == kNoValue ? picked : ctx.emit(Op::Mul, {picked, w})});
  Attrs all{{"axes", std::vector<int64_t>{}}, {"keepdims", false}};
  if (reduction == "sum") loss = ctx.emit(Op::ReduceSum, {loss}, all);
  if (reduction == "mean") {
    loss = w == kNoValue ? ctx.emit(Op::ReduceMean, {loss}, all)
                         : ctx.emit(Op::Div, {ctx.emit(Op::ReduceSum, {loss}, all), ctx.emit(Op::ReduceSum, {w}, all)});
  }
  return ctx.set_output(n, 0, loss);
}

// GatherElements(data, indices, axis a) over a static data size along a: the indices compared
// with an iota of that size give a one-hot [indices..., D_a]; data with a moved last (sliced to
// the indices' sizes elsewhere) selects through it, and a sum over the one-hot axis (one non-zero
// term: exact) gives out[..] = data[.., indices[..], ..]. Negative indices count from the end.
Status convert_gather_elements(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId data, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId idx, ctx.value(n, 1));
  const TensorType dt = ctx.type(data), it = ctx.type(idx);
  if (dt.dtype == DType::Bool) return n.error("bool data is not supported");
  if (!is_integer(it.dtype) || it.rank() != dt.rank() || dt.rank() == 0) {
    return n.error("indices must be integers of the data's rank, got " + it.to_string() + " for " + dt.to_string());
  }
  const int r = dt.rank();
  FUSEBOX_ASSIGN_OR_RETURN(int a, normalize_onnx_axis(n, n.attr_int("axis", 0), r, "axis"));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t size, static_dim(n, dt, a));
  // Data sliced to the indices' sizes on the other axes (they must be static where they differ).
  std::vector<int64_t> starts, ends, axes;
  for (int k = 0; k < r; ++k) {
    if (k == a || it.shape[size_t(k)] == dt.shape[size_t(k)]) continue;
    FUSEBOX_ASSIGN_OR_RETURN(int64_t want, static_dim(n, it, k));
    starts.push_back(0), ends.push_back(want), axes.push_back(k);
  }
  if (!axes.empty()) data = ctx.emit(Op::Slice, {data}, {{"starts", starts}, {"ends", ends}, {"axes", axes}});
  std::vector<int64_t> perm;
  for (int k = 0; k < r; ++k) {
    if (k != a) perm.push_back(k);
  }
  perm.push_back(a);
  if (a != r - 1) data = ctx.emit(Op::Transpose, {data}, {{"perm", perm}});
  if (data == kNoValue) return ctx.set_output(n, 0, data);
  // [.., D_a] with the axis' place kept as a size-1 dim: [d0, .., 1 (at a), .., D_a].
  Shape ds = ctx.type(data).shape;
  ds.insert(ds.begin() + a, Dim(1));
  FUSEBOX_ASSIGN_OR_RETURN(data, ctx.reshape(n, data, ds));
  if (it.dtype != DType::I64) idx = ctx.emit(Op::Cast, {idx}, {{"to", DType::I64}});
  Array zero_i(DType::I64, {}), size_i(DType::I64, {});
  zero_i.fill_bytes(0);
  size_i.data<int64_t>()[0] = size;
  ValueId zi = ctx.builder().constant(zero_i);
  idx = ctx.emit(Op::Where, {ctx.emit(Op::Less, {idx, zi}), ctx.emit(Op::Add, {idx, ctx.builder().constant(size_i)}), idx});
  Shape is = it.shape;
  is.push_back(Dim(1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId iu, ctx.reshape(n, idx, is));
  std::vector<int64_t> iota_shape(size_t(r + 1), 1);
  iota_shape[size_t(r)] = size;
  Array iota(DType::I64, iota_shape);
  for (int64_t i = 0; i < size; ++i) iota.data<int64_t>()[i] = i;
  ValueId hot = ctx.emit(Op::Equal, {iu, ctx.builder().constant(iota)});
  Array zero(dt.dtype, {});
  zero.fill_bytes(0);
  ValueId picked = ctx.emit(Op::Where, {hot, data, ctx.builder().constant(zero)});
  return ctx.set_output(n, 0, ctx.emit(Op::ReduceSum, {picked}, {{"axes", std::vector<int64_t>{r}}, {"keepdims", false}}));
}

Status convert_one_hot(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId idx, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(double depth_value, ctx.require_scalar(n, 1, "depth"));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId values, ctx.value(n, 2));
  const TensorType it = ctx.type(idx), vt = ctx.type(values);
  if (vt.rank() != 1 || !vt.shape[0].is_static() || vt.shape[0].value() != 2) {
    return n.error("values must be [off, on] (2 elements), got " + vt.to_string());
  }
  if (it.dtype == DType::Bool) return n.error("indices must be numbers, got " + it.to_string());
  const int64_t depth = static_cast<int64_t>(depth_value);
  if (depth < 1 || depth > (int64_t(1) << 24)) return n.error("depth must be in [1, 2^24], got " + std::to_string(depth_value));
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, n.attr_int("axis", -1), it.rank() + 1, "axis"));

  // ONNX casts non-integer indices to int64 before use (truncating, as fusebox's cast does).
  ValueId i = is_float(it.dtype) ? ctx.emit(Op::Cast, {idx}, {{"to", DType::I64}}) : idx;
  const DType id = is_float(it.dtype) ? DType::I64 : it.dtype;
  if (ctx.opset() >= 11) {
    Array zero(id, {}), d(id, {});
    zero.set_f64(0, 0), d.set_f64(0, double(depth));
    ValueId negative = ctx.emit(Op::Less, {i, ctx.builder().constant(zero)});
    i = ctx.emit(Op::Where, {negative, ctx.emit(Op::Add, {i, ctx.builder().constant(d)}), i});
  }
  Shape unsqueezed = it.shape, iota_shape(size_t(it.rank() + 1), Dim(1));
  unsqueezed.insert(unsqueezed.begin() + axis, Dim(1));
  iota_shape[size_t(axis)] = Dim(depth);
  FUSEBOX_ASSIGN_OR_RETURN(i, ctx.reshape(n, i, unsqueezed));
  Array iota(id, static_dims(iota_shape));
  for (int64_t k = 0; k < depth; ++k) iota.set_f64(k, double(k));
  ValueId hot = ctx.emit(Op::Equal, {i, ctx.builder().constant(iota)});
  auto pick = [&](int64_t k) {
    ValueId one = ctx.emit(Op::Slice, {values}, {{"starts", std::vector<int64_t>{k}}, {"ends", std::vector<int64_t>{k + 1}}});
    return ctx.emit(Op::Reshape, {one}, {{"shape", Shape{}}});
  };
  return ctx.set_output(n, 0, ctx.emit(Op::Where, {hot, pick(1), pick(0)}));
}

Status convert_tile(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> reps, ctx.require_static_ints(n, 1, "repeats"));
  if (int64_t(reps.size()) != xt.rank()) {
    return n.error("repeats has " + std::to_string(reps.size()) + " entries for an input of rank " +
                   std::to_string(xt.rank()));
  }
  Shape split, expanded, out;
  for (size_t k = 0; k < reps.size(); ++k) {
    const Dim& d = xt.shape[k];
    int64_t r = reps[k];
    if (r < 0) return n.error("repeats must be >= 0, got " + std::to_string(r) + " for axis " + std::to_string(k));
    if (d.is_static() && d.value() > 0 && r > std::numeric_limits<int64_t>::max() / d.value()) {
      return n.error("repeats " + std::to_string(r) + " overflows the size of axis " + std::to_string(k));
    }
    split.insert(split.end(), {Dim(1), d});
    expanded.insert(expanded.end(), {Dim(r), d});
    // A symbolic size repeated r > 1 times has no name: ctx.reshape infers it (one at most).
    out.push_back(r == 1 ? d : r == 0 ? Dim(0) : d.is_static() ? Dim(r * d.value()) : Dim::dynamic());
  }
  bool empty = std::find(reps.begin(), reps.end(), 0) != reps.end();
  if (empty && std::any_of(out.begin(), out.end(), [](const Dim& d) { return d.is_dynamic(); })) {
    // An empty result leaves nothing to infer that size from.
    return n.error("repeats [" + shape_to_string(make_shape(reps)) + "] empty the result and repeat a run-time size; "
                   "its size cannot be named");
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId s, ctx.reshape(n, x, split));
  ValueId e = ctx.emit(Op::Expand, {s}, {{"shape", expanded}});
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, e, out));
  return ctx.set_output(n, 0, y);
}

}  // namespace

void add_decomposed_tensor_converters(ConverterTable& table) {
  table["GatherElements"] = convert_gather_elements;
  table["NegativeLogLikelihoodLoss"] = convert_nll_loss;
  table["SoftmaxCrossEntropyLoss"] = convert_nll_loss;
  table["Trilu"] = convert_trilu;
  table["Hardmax"] = convert_hardmax;
  table["DepthToSpace"] = convert_depth_space;
  table["SpaceToDepth"] = convert_depth_space;
  table["EyeLike"] = convert_eye_like;
  table["Tile"] = convert_tile;
  table["OneHot"] = convert_one_hot;
}

}  // namespace fusebox::onnx_import
