// ONNX ops whose output size depends on the values of an input. Each takes that input at run
// time: a bind_symbols node (rule count_nonzero) binds the count as the plan runs, a nonzero node
// lists what it counted. An input known at import is folded instead (the same code computes both):
//
//   Compress(x, condition, axis)   gather(x, indices of condition's true entries, axis): x stays
//                                  a run-time value; without axis x is flattened first. A
//                                  condition shorter than the axis drops the slices past its end;
//                                  a longer one may only be false there (numpy.compress's rule).
//                                  A run-time condition: gather(x, reshape(nonzero(condition)))
//   NonZero(x)                     the [rank, nnz] int64 coordinates of x's non-zero elements in
//                                  row-major order (NaN is non-zero, -0 is zero): folded when x
//                                  is known, else bind_symbols + nonzero
//   Unique(x, axis, sorted)        Y, indices, inverse_indices, counts (ir/unique_slices.h): the
//                                  slices along axis (elements without axis), sorted or in order
//                                  of first occurrence; folded when x is known, else
//                                  unique_select + bind_symbols + nonzero + gathers
//   NonMaxSuppression(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold)
//                                  [num_selected, 3] int64 (batch, class, box) by ONNX's algorithm
//                                  (ir/non_max_suppression.h): folded when every input is known,
//                                  else nms_select + bind_symbols + nonzero (see below)
#include <algorithm>
#include <cstring>

#include "ir/bind_symbols.h"
#include "ir/non_max_suppression.h"
#include "ir/unique_slices.h"
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

Array i64_array(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  Array a(DType::I64, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) a.set_i64(int64_t(i), values[i]);
  return a;
}

// x as one axis (Compress and Unique without an axis); its element count may be a run-time size.
Expected<ValueId> flattened(ImportContext& ctx, OnnxNode& n, ValueId x) {
  const TensorType xt = ctx.type(x);
  if (xt.rank() == 1) return x;
  bool is_static = std::all_of(xt.shape.begin(), xt.shape.end(), [](const Dim& d) { return d.is_static(); });
  return ctx.reshape(n, x, Shape{is_static ? Dim(product(static_dims(xt.shape))) : Dim::dynamic()});
}

// The i64[K] positions of the non-zero entries of a 1-D mask known only at run time, counted as
// the plan runs.
Expected<ValueId> run_time_positions(ImportContext& ctx, OnnxNode& n, ValueId mask) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId found, ctx.run_time_nonzero(n, mask));  // i64[1, K]
  return ctx.emit(Op::Reshape, {found}, {{"shape", Shape{ctx.type(found).shape[1]}}});
}

Status convert_compress(ImportContext& ctx, OnnxNode& n) {
  std::optional<int64_t> axis_attr = n.attr_int("axis");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(TensorType cond_type, ctx.type_of(n, 1));
  if (cond_type.dtype != DType::Bool || cond_type.rank() != 1) {
    return n.error("condition must be a 1-D bool tensor, got " + cond_type.to_string());
  }
  int axis = 0;
  const TensorType xt = ctx.type(x);
  if (axis_attr) {
    FUSEBOX_ASSIGN_OR_RETURN(axis, normalize_onnx_axis(n, *axis_attr, xt.rank(), "axis"));
  } else {  // without an axis the input is flattened
    FUSEBOX_ASSIGN_OR_RETURN(x, flattened(ctx, n, x));
    if (x == kNoValue) return ctx.set_output(n, 0, x);
  }
  const Dim size = ctx.type(x).shape[size_t(axis)];
  if (!ctx.constant(n, 1)) {
    // Known only at run time: its true entries' positions, counted when the plan runs (an entry
    // past the axis is gather's run-time error).
    FUSEBOX_ASSIGN_OR_RETURN(ValueId cond, ctx.value(n, 1));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId idx, run_time_positions(ctx, n, cond));
    return ctx.set_output(n, 0, ctx.emit(Op::Gather, {x, idx}, {{"axis", int64_t(axis)}}));
  }
  const Array& cond = *ctx.constant(n, 1);
  std::vector<int64_t> picked;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!cond.data<bool>()[i]) continue;
    // A static size is checked here; gather checks a run-time one.
    if (size.is_static() && i >= size.value()) {
      return n.error("condition (input 1 '" + n.input(1) + "') selects index " + std::to_string(i) +
                     ", beyond the size " + std::to_string(size.value()) +
                     (axis_attr ? " of axis " + std::to_string(axis) : std::string(" of the flattened input")));
    }
    picked.push_back(i);
  }
  ValueId idx = ctx.builder().constant(i64_array({int64_t(picked.size())}, picked));
  return ctx.set_output(n, 0, ctx.emit(Op::Gather, {x, idx}, {{"axis", int64_t(axis)}}));
}

Status convert_non_zero(ImportContext& ctx, OnnxNode& n) {
  if (!ctx.constant(n, 0)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId found, ctx.run_time_nonzero(n, x));
    return ctx.set_output(n, 0, found);
  }
  return ctx.set_output_constant(n, 0, nonzero_coordinates(*ctx.constant(n, 0)));
}

// ---- Unique ----

// Known only at run time: unique_select gives the first occurrences in output order (padded with
// -1), the inverse and the counts (padded with 0) at the input's size; the unique ones are counted
// and listed as the plan runs (bind_symbols + nonzero), then gathered.
Status run_time_unique(ImportContext& ctx, OnnxNode& n, ValueId x, int axis, bool sorted) {
  std::vector<ValueId> r =
      ctx.builder().op_results(Op::UniqueSelect, {x}, {{"axis", int64_t(axis)}, {"sorted", sorted}});
  if (r.size() != 3) return ctx.builder_status(n);
  ValueId valid = ctx.emit(Op::GreaterEqual, {r[0], ctx.builder().scalar(DType::I64, 0)});
  FUSEBOX_ASSIGN_OR_RETURN(ValueId pos, run_time_positions(ctx, n, valid));
  ValueId indices = ctx.emit(Op::Gather, {r[0], pos}, {{"axis", int64_t(0)}});
  FUSEBOX_RETURN_IF_ERROR(
      ctx.set_output(n, 0, ctx.emit(Op::Gather, {x, indices}, {{"axis", int64_t(axis)}})));
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 1, indices));
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 2, r[1]));
  return ctx.set_output(n, 3, ctx.emit(Op::Gather, {r[2], pos}, {{"axis", int64_t(0)}}));
}

Status convert_unique(ImportContext& ctx, OnnxNode& n) {
  std::optional<int64_t> axis_attr = n.attr_int("axis");
  int64_t sorted = n.attr_int("sorted", 1);
  if (sorted != 0 && sorted != 1) return n.error("attribute 'sorted' must be 0 or 1, got " + std::to_string(sorted));
  if (!ctx.constant(n, 0)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
    int axis = 0;
    if (axis_attr) {
      FUSEBOX_ASSIGN_OR_RETURN(axis, normalize_onnx_axis(n, *axis_attr, ctx.type(x).rank(), "axis"));
    } else {  // the unique elements of the flattened input
      FUSEBOX_ASSIGN_OR_RETURN(x, flattened(ctx, n, x));
      if (x == kNoValue) return ctx.set_output(n, 0, x);
    }
    return run_time_unique(ctx, n, x, axis, sorted == 1);
  }
  Array x = *ctx.constant(n, 0);
  // Without an axis: the unique elements of the flattened input.
  int axis = 0;
  if (axis_attr) {
    FUSEBOX_ASSIGN_OR_RETURN(axis, normalize_onnx_axis(n, *axis_attr, x.rank(), "axis"));
  } else {
    x = x.reshaped({x.numel()});
  }
  UniqueResult r = unique_slices(x, axis, sorted != 0);
  const int64_t unique = int64_t(r.first.size()), count = x.shape()[size_t(axis)];
  std::vector<int64_t> y_shape = x.shape();
  y_shape[size_t(axis)] = unique;
  Array y(x.dtype(), y_shape);
  // y's slice u is x's slice first[u]: copied as runs of `inner` elements per outer index.
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) outer *= x.shape()[size_t(d)];
    if (d > axis) inner *= x.shape()[size_t(d)];
  }
  const size_t run = size_t(inner) * size_t(dtype_size(x.dtype()));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t u = 0; u < unique; ++u) {
      std::memcpy(static_cast<uint8_t*>(y.raw()) + size_t(o * unique + u) * run,
                  static_cast<const uint8_t*>(x.raw()) + size_t(o * count + r.first[size_t(u)]) * run, run);
    }
  }
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output_constant(n, 0, std::move(y)));
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output_constant(n, 1, i64_array({unique}, r.first)));
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output_constant(n, 2, i64_array({count}, r.inverse)));
  return ctx.set_output_constant(n, 3, i64_array({unique}, r.counts));
}

// ---- NonMaxSuppression ----

// All inputs known at import: the selection folded to a constant [num_selected, 3].
Status fold_non_max_suppression(ImportContext& ctx, OnnxNode& n, bool center) {
  const Array& boxes = *ctx.constant(n, 0);
  const Array& scores = *ctx.constant(n, 1);
  if (boxes.dtype() != DType::F32 || boxes.rank() != 3 || boxes.shape()[2] != 4) {
    return n.error("boxes must be f32[num_batches, spatial_dimension, 4], got " + boxes.type_string());
  }
  if (scores.dtype() != DType::F32 || scores.rank() != 3 || scores.shape()[0] != boxes.shape()[0] ||
      scores.shape()[2] != boxes.shape()[1]) {
    return n.error("scores must be f32[num_batches, num_classes, spatial_dimension] matching boxes " +
                   boxes.type_string() + ", got " + scores.type_string());
  }
  auto optional = [&](int i) { return n.has_input(i) ? ctx.constant(n, i) : nullptr; };
  Expected<NmsParams> p = nms_params(optional(2), optional(3), optional(4), center);
  if (!p) return n.error(p.status().message());
  const int64_t batches = boxes.shape()[0], classes = scores.shape()[1];
  std::vector<std::vector<int64_t>> kept =
      nms_keep(boxes.data<float>(), scores.data<float>(), batches, classes, boxes.shape()[1], *p);
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      for (int64_t i : kept[size_t(b * classes + c)]) rows.insert(rows.end(), {b, c, i});
    }
  }
  return ctx.set_output_constant(n, 0, i64_array({int64_t(rows.size() / 3), 3}, rows));
}

// Known only at run time: nms_select keeps per batch and class (padded with -1 to every box), the
// kept entries are counted and listed as the plan runs (bind_symbols + nonzero: batch, class,
// position), and each row's position is replaced by the box it holds.
Status run_time_non_max_suppression(ImportContext& ctx, OnnxNode& n, bool center) {
  std::vector<ValueId> operands;
  for (int i = 0; i < 5; ++i) {
    if (n.has_input(i)) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, i));
      operands.push_back(v);
    } else if (i < 4) {  // max_output_boxes_per_class and iou_threshold absent: 0
      operands.push_back(ctx.builder().scalar(i == 2 ? DType::I64 : DType::F32, 0));
    }
  }
  ValueId sel = ctx.emit(Op::NmsSelect, operands, {{"center_point_box", center}});
  if (sel == kNoValue) return ctx.builder_status(n);
  ValueId valid = ctx.emit(Op::GreaterEqual, {sel, ctx.builder().scalar(DType::I64, 0)});
  FUSEBOX_ASSIGN_OR_RETURN(ValueId found, ctx.run_time_nonzero(n, valid));  // i64[3, K]
  ValueId rows = ctx.emit(Op::Transpose, {found}, {{"perm", std::vector<int64_t>{1, 0}}});
  ValueId boxes = ctx.emit(Op::GatherNd, {sel, rows});  // i64[K]
  const Dim k = ctx.type(found).shape[1];
  ValueId batch_class = ctx.emit(Op::Slice, {rows},
                                 {{"starts", std::vector<int64_t>{0}},
                                  {"ends", std::vector<int64_t>{2}},
                                  {"axes", std::vector<int64_t>{1}}});
  ValueId box_column = ctx.emit(Op::Reshape, {boxes}, {{"shape", Shape{k, Dim(1)}}});
  return ctx.set_output(n, 0, ctx.emit(Op::Concat, {batch_class, box_column}, {{"axis", int64_t(1)}}));
}

Status convert_non_max_suppression(ImportContext& ctx, OnnxNode& n) {
  int64_t center = n.attr_int("center_point_box", 0);
  if (center != 0 && center != 1) return n.error("attribute 'center_point_box' must be 0 or 1, got " + std::to_string(center));
  bool known = true;
  for (int i = 0; i < 5; ++i) known = known && (!n.has_input(i) || ctx.constant(n, i));
  return known ? fold_non_max_suppression(ctx, n, center == 1)
               : run_time_non_max_suppression(ctx, n, center == 1);
}

}  // namespace

void add_data_dependent_converters(ConverterTable& table) {
  table["Compress"] = convert_compress;
  table["NonZero"] = convert_non_zero;
  table["Unique"] = convert_unique;
  table["NonMaxSuppression"] = convert_non_max_suppression;
}

}  // namespace fusebox::onnx_import
