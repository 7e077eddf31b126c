// ONNX ops whose output size depends on the values of an input. NonZero and Compress take that
// input at run time: a bind_symbols node (rule count_nonzero) binds the count as the plan runs.
// For Unique and NonMaxSuppression it must be known at import time: an initializer, a value
// folded at import, or a graph input whose value OnnxExecutable binds (one compiled plan per
// distinct value; require_constant names the input):
//
//   Compress(x, condition, axis)   gather(x, indices of condition's true entries, axis): x stays
//                                  a run-time value; without axis x is flattened first. A
//                                  condition shorter than the axis drops the slices past its end;
//                                  a longer one may only be false there (numpy.compress's rule).
//                                  A run-time condition: gather(x, reshape(nonzero(condition)))
//   NonZero(x)                     the [rank, nnz] int64 coordinates of x's non-zero elements in
//                                  row-major order (NaN is non-zero, -0 is zero): folded when x
//                                  is known, else bind_symbols + nonzero
//   Unique(x, axis, sorted)        folded: Y, indices, inverse_indices, counts. The slices along
//                                  axis (elements without axis) are sorted stably in the order of
//                                  compare_slices; equal neighbours form one unique slice whose
//                                  first occurrence gives Y and indices; sorted = 0 lists the
//                                  unique slices in order of first occurrence instead
//   NonMaxSuppression(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold)
//                                  folded: [num_selected, 3] int64 (batch, class, box) by ONNX's
//                                  algorithm, computed in f32 like ONNX's reference (see nms_select)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ir/bind_symbols.h"
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

Array i64_array(std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  Array a(DType::I64, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) a.set_i64(int64_t(i), values[i]);
  return a;
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
  } else if (xt.rank() != 1) {
    // Without an axis the input is flattened; its element count may be a run-time size.
    bool is_static = std::all_of(xt.shape.begin(), xt.shape.end(), [](const Dim& d) { return d.is_static(); });
    Shape flat{is_static ? Dim(product(static_dims(xt.shape))) : Dim::dynamic()};
    FUSEBOX_ASSIGN_OR_RETURN(x, ctx.reshape(n, x, flat));
    if (x == kNoValue) return ctx.set_output(n, 0, x);
  }
  const Dim size = ctx.type(x).shape[size_t(axis)];
  if (!ctx.constant(n, 1)) {
    // Known only at run time: its true entries' positions, counted when the plan runs (an entry
    // past the axis is gather's run-time error).
    FUSEBOX_ASSIGN_OR_RETURN(ValueId cond, ctx.value(n, 1));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId found, ctx.run_time_nonzero(n, cond));
    ValueId idx = ctx.emit(Op::Reshape, {found}, {{"shape", Shape{ctx.type(found).shape[1]}}});
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
  const Array x = *ctx.constant(n, 0);
  // A scalar counts as one element of a 1-D tensor (numpy.nonzero's rule): [1, nnz].
  std::vector<int64_t> shape = x.rank() == 0 ? std::vector<int64_t>{1} : x.shape();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (nonzero_at(x, i)) hits.push_back(i);
  }
  const int64_t nnz = int64_t(hits.size()), rank = int64_t(shape.size());
  std::vector<int64_t> strides = contiguous_strides(shape);
  Array out(DType::I64, {rank, nnz});
  for (int64_t k = 0; k < nnz; ++k) {
    for (int64_t d = 0; d < rank; ++d) out.set_i64(d * nnz + k, hits[size_t(k)] / strides[size_t(d)] % shape[size_t(d)]);
  }
  return ctx.set_output_constant(n, 0, std::move(out));
}

// ---- Unique ----

// Three-way comparison of two elements of `a`: numbers in their order (-0 equals 0), NaN equal to
// NaN and above every number; integers compared exactly.
int compare_elements(const Array& a, int64_t i, int64_t j) {
  if (!is_float(a.dtype())) {
    int64_t x = a.get_i64(i), y = a.get_i64(j);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  double x = a.get_f64(i), y = a.get_f64(j);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) == std::isnan(y) ? 0 : std::isnan(x) ? 1 : -1;
  return x < y ? -1 : x > y ? 1 : 0;
}

// x seen as [outer, count, inner]: slice s holds x[o, s, i] in (o, i) row-major order.
struct Slices {
  int64_t outer = 1, count = 0, inner = 1;
  int64_t element(int64_t s, int64_t k) const { return (k / inner * count + s) * inner + k % inner; }
  int64_t size() const { return outer * inner; }
};

// Lexicographic order of two slices.
int compare_slices(const Array& x, const Slices& sl, int64_t s, int64_t t) {
  for (int64_t k = 0; k < sl.size(); ++k) {
    if (int c = compare_elements(x, sl.element(s, k), sl.element(t, k))) return c;
  }
  return 0;
}

struct UniqueResult {
  std::vector<int64_t> first;    // per unique slice, in output order: its first occurrence
  std::vector<int64_t> inverse;  // per input slice: its unique slice's position
  std::vector<int64_t> counts;   // per unique slice: how many input slices equal it
};

UniqueResult unique_slices(const Array& x, const Slices& sl, bool sorted) {
  std::vector<int64_t> order(size_t(sl.count));
  std::iota(order.begin(), order.end(), 0);
  // Stable: among equal slices the first occurrence comes first.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t s, int64_t t) { return compare_slices(x, sl, s, t) < 0; });
  std::vector<std::vector<int64_t>> groups;  // members of each unique slice, in ascending order
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compare_slices(x, sl, order[k - 1], order[k]) != 0) groups.emplace_back();
    groups.back().push_back(order[k]);
  }
  if (!sorted) {
    std::stable_sort(groups.begin(), groups.end(),
                     [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) { return a.front() < b.front(); });
  }
  UniqueResult r;
  r.inverse.resize(size_t(sl.count));
  for (size_t u = 0; u < groups.size(); ++u) {
    r.first.push_back(groups[u].front());
    r.counts.push_back(int64_t(groups[u].size()));
    for (int64_t s : groups[u]) r.inverse[size_t(s)] = int64_t(u);
  }
  return r;
}

Status convert_unique(ImportContext& ctx, OnnxNode& n) {
  std::optional<int64_t> axis_attr = n.attr_int("axis");
  int64_t sorted = n.attr_int("sorted", 1);
  if (sorted != 0 && sorted != 1) return n.error("attribute 'sorted' must be 0 or 1, got " + std::to_string(sorted));
  FUSEBOX_ASSIGN_OR_RETURN(Array x, ctx.require_constant(n, 0, "X"));
  // Without an axis: the unique elements of the flattened input.
  int axis = 0;
  if (axis_attr) {
    FUSEBOX_ASSIGN_OR_RETURN(axis, normalize_onnx_axis(n, *axis_attr, x.rank(), "axis"));
  } else {
    x = x.reshaped({x.numel()});
  }
  Slices sl;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) sl.outer *= x.shape()[size_t(d)];
    if (d > axis) sl.inner *= x.shape()[size_t(d)];
  }
  sl.count = x.shape()[size_t(axis)];
  UniqueResult r = unique_slices(x, sl, sorted != 0);
  const int64_t unique = int64_t(r.first.size());
  std::vector<int64_t> y_shape = x.shape();
  y_shape[size_t(axis)] = unique;
  Array y(x.dtype(), y_shape);
  const Slices picked{sl.outer, unique, sl.inner};
  const size_t esize = size_t(dtype_size(x.dtype()));
  for (int64_t u = 0; u < unique; ++u) {
    for (int64_t k = 0; k < sl.size(); ++k) {
      std::memcpy(static_cast<uint8_t*>(y.raw()) + size_t(picked.element(u, k)) * esize,
                  static_cast<const uint8_t*>(x.raw()) + size_t(sl.element(r.first[size_t(u)], k)) * esize, esize);
    }
  }
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output_constant(n, 0, std::move(y)));
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output_constant(n, 1, i64_array({unique}, r.first)));
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output_constant(n, 2, i64_array({sl.count}, r.inverse)));
  return ctx.set_output_constant(n, 3, i64_array({unique}, r.counts));
}

// ---- NonMaxSuppression ----

// Whether box b suppresses box a: their IoU is above the threshold. ONNX's reference, in f32 and
// in its order of operations: boxes are [y1, x1, y2, x2] with corners in any order
// (center_point_box 0) or [x_center, y_center, width, height] (1); no overlap, an empty
// intersection or a box of no area never suppresses.
bool suppresses(const float* a, const float* b, bool center, float iou_threshold) {
  struct Span {
    float lo, hi;
  };
  auto span = [&](const float* box, int axis) {  // axis 0: x, 1: y
    if (center) {
      float c = box[axis], half = box[axis + 2] / 2.0f;
      return Span{c - half, c + half};
    }
    float p = box[1 - axis], q = box[3 - axis];
    return q <= p ? Span{q, p} : Span{p, q};
  };
  Span ax = span(a, 0), bx = span(b, 0), ay = span(a, 1), by = span(b, 1);
  float ix_lo = std::max(ax.lo, bx.lo), ix_hi = std::min(ax.hi, bx.hi);
  if (ix_hi <= ix_lo) return false;
  float iy_lo = std::max(ay.lo, by.lo), iy_hi = std::min(ay.hi, by.hi);
  if (iy_hi <= iy_lo) return false;
  float inter = (ix_hi - ix_lo) * (iy_hi - iy_lo);
  if (inter <= 0) return false;
  float area_a = (ax.hi - ax.lo) * (ay.hi - ay.lo), area_b = (bx.hi - bx.lo) * (by.hi - by.lo);
  float uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

struct NmsParams {
  int64_t max_per_class = 0;  // absent or empty: 0, nothing is selected
  float iou_threshold = 0;
  std::optional<float> score_threshold;  // absent: every box is a candidate
  bool center = false;
};

// Per batch and class: the boxes scoring above score_threshold (NaN scores never count), by score
// descending and ties by box index, each kept unless a box kept before suppresses it, until
// max_per_class are kept. Rows (batch, class, box) in that order.
std::vector<int64_t> nms_select(const Array& boxes, const Array& scores, const NmsParams& p) {
  const int64_t batches = boxes.shape()[0], count = boxes.shape()[1], classes = scores.shape()[1];
  const float* box_data = boxes.data<float>();
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches; ++b) {
    const float* bb = box_data + b * count * 4;
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = scores.data<float>() + (b * classes + c) * count;
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < count; ++i) {
        if (!std::isnan(sc[i]) && (!p.score_threshold || sc[i] > *p.score_threshold)) cand.push_back(i);
      }
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return sc[i] > sc[j]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= p.max_per_class) break;
        bool keep = std::none_of(kept.begin(), kept.end(),
                                 [&](int64_t k) { return suppresses(bb + i * 4, bb + k * 4, p.center, p.iou_threshold); });
        if (!keep) continue;
        kept.push_back(i);
        rows.insert(rows.end(), {b, c, i});
      }
    }
  }
  return rows;
}

// An optional one-value input: nullopt when absent or empty.
Expected<std::optional<Array>> optional_scalar(ImportContext& ctx, OnnxNode& n, int i, const std::string& what) {
  if (!n.has_input(i)) return std::optional<Array>();
  FUSEBOX_ASSIGN_OR_RETURN(Array a, ctx.require_constant(n, i, what));
  if (a.numel() > 1) return n.error(what + " (input " + std::to_string(i) + ") must hold one value, got " + a.type_string());
  if (a.numel() == 0) return std::optional<Array>();
  return std::optional<Array>(std::move(a));
}

Status convert_non_max_suppression(ImportContext& ctx, OnnxNode& n) {
  int64_t center = n.attr_int("center_point_box", 0);
  if (center != 0 && center != 1) return n.error("attribute 'center_point_box' must be 0 or 1, got " + std::to_string(center));
  FUSEBOX_ASSIGN_OR_RETURN(Array boxes, ctx.require_constant(n, 0, "boxes"));
  FUSEBOX_ASSIGN_OR_RETURN(Array scores, ctx.require_constant(n, 1, "scores"));
  FUSEBOX_ASSIGN_OR_RETURN(std::optional<Array> max_out, optional_scalar(ctx, n, 2, "max_output_boxes_per_class"));
  FUSEBOX_ASSIGN_OR_RETURN(std::optional<Array> iou, optional_scalar(ctx, n, 3, "iou_threshold"));
  FUSEBOX_ASSIGN_OR_RETURN(std::optional<Array> score, optional_scalar(ctx, n, 4, "score_threshold"));
  if (boxes.dtype() != DType::F32 || boxes.rank() != 3 || boxes.shape()[2] != 4) {
    return n.error("boxes must be f32[num_batches, spatial_dimension, 4], got " + boxes.type_string());
  }
  if (scores.dtype() != DType::F32 || scores.rank() != 3 || scores.shape()[0] != boxes.shape()[0] ||
      scores.shape()[2] != boxes.shape()[1]) {
    return n.error("scores must be f32[num_batches, num_classes, spatial_dimension] matching boxes " +
                   boxes.type_string() + ", got " + scores.type_string());
  }
  NmsParams p;
  if (max_out) {
    if (!is_integer(max_out->dtype())) return n.error("max_output_boxes_per_class must be an integer, got " + max_out->type_string());
    p.max_per_class = std::max<int64_t>(max_out->get_i64(0), 0);
  }
  if (iou) p.iou_threshold = float(iou->get_f64(0));
  if (score) p.score_threshold = float(score->get_f64(0));
  p.center = center == 1;
  std::vector<int64_t> rows = nms_select(boxes, scores, p);
  return ctx.set_output_constant(n, 0, i64_array({int64_t(rows.size() / 3), 3}, rows));
}

}  // namespace

void add_data_dependent_converters(ConverterTable& table) {
  table["Compress"] = convert_compress;
  table["NonZero"] = convert_non_zero;
  table["Unique"] = convert_unique;
  table["NonMaxSuppression"] = convert_non_max_suppression;
}

}  // namespace fusebox::onnx_import
