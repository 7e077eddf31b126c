// ONNX ops that read or write an image at positions computed at run time, written with fusebox's
// gathers, scatters and element-wise math:
//
//   GridSample(X [N,C,H,W], grid [N,Ho,Wo,2])   per output point: the grid's (x, y) unnormalised
//       to pixels (align_corners: (g+1)/2 (d-1), else ((g+1) d - 1)/2), rounded half to even for
//       nearest, moved inside by padding_mode border (clamp) or reflection (ONNX's reflect about
//       the borders) when outside them; then 1 (nearest), 2x2 (bilinear) or 4x4 (bicubic, Keys
//       a = -0.75) taps, each a pixel index and a weight (the product of the per-axis weights).
//       Tap indices outside the image: zeros -> weight 0, border -> clamped, reflection ->
//       reflected. The taps of every point are read by one gather_nd over X as [N, H*W, C]
//       (batch_dims 1), weighted and summed.
//   RoiAlign(X, rois [R,4], batch_indices [R])   per roi, output bin and sample (a grid of
//       sampling_ratio^2 per bin): the sample's bilinear taps as ONNX's reference computes them
//       (samples beyond [-1, size] weigh 0), read by one gather_nd over X as [N, H*W, C] at
//       (batch index, pixel); avg sums the weighted taps over the bin / count, max takes the
//       largest weighted tap (ONNX's definition). sampling_ratio 0 (adaptive) needs the roi
//       sizes: the rois must be constant, each roi's count is then a constant and the samples
//       beyond it are masked.
//   MaxUnpool(X, I [, output_shape])   scatter_elements of X's values into zeros of the output's
//       element count at the flat indices I (MaxPool's Indices), reshaped to the output shape:
//       output_shape, else (in - 1) * stride - pads + kernel per spatial axis.
//
// Sizes the decompositions compute with (H, W, output size, sampling grid) must be static.
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

Expected<int64_t> static_size(OnnxNode& n, const TensorType& t, int axis, const std::string& what) {
  const Dim& d = t.shape[size_t(axis)];
  if (!d.is_static()) {
    return n.error("needs a static size along axis " + std::to_string(axis) + " of " + what + ", got " +
                   t.to_string());
  }
  return d.value();
}

Dim product_dim(const Dim& a, const Dim& b) {
  return a.is_static() && b.is_static() ? Dim(a.value() * b.value()) : Dim::dynamic();
}

// Shorthands over the context's builder for the element-wise math below.
struct Math {
  ImportContext& ctx;
  DType ct;  // compute type of coordinates and weights
  ValueId c(double v) const { return ctx.builder().scalar(ct, v); }
  ValueId i64(int64_t v) const { return ctx.builder().scalar(DType::I64, double(v)); }
  ValueId op(Op o, std::vector<ValueId> in, Attrs a = {}) const {
    return ctx.emit(o, std::move(in), std::move(a));
  }
  ValueId add(ValueId a, ValueId b) const { return op(Op::Add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) const { return op(Op::Sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) const { return op(Op::Mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) const { return op(Op::Div, {a, b}); }
  ValueId where(ValueId m, ValueId a, ValueId b) const { return op(Op::Where, {m, a, b}); }
  ValueId cast(ValueId a, DType t) const {
    return a == kNoValue || ctx.type(a).dtype == t ? a : op(Op::Cast, {a}, {{"to", t}});
  }
  ValueId clip(ValueId a, double lo, double hi) const {
    return op(Op::Clip, {a}, {{"min", lo}, {"max", hi}});
  }
  ValueId floor(ValueId a) const { return op(Op::Floor, {a}); }
  ValueId outside(ValueId v, double lo, double hi) const {
    return op(Op::Or, {op(Op::Less, {v, c(lo)}), op(Op::Greater, {v, c(hi)})});
  }
  ValueId slice_last(ValueId v, int64_t k) const {
    return op(Op::Slice, {v},
              {{"starts", std::vector<int64_t>{k}},
               {"ends", std::vector<int64_t>{k + 1}},
               {"axes", std::vector<int64_t>{ctx.type(v).rank() - 1}}});
  }
};

// Keys' cubic convolution weights (a = -0.75) of the taps floor(x)-1 .. floor(x)+2 at t = x - floor(x).
std::array<ValueId, 4> cubic_weights(const Math& m, ValueId t) {
  const double a = -0.75;
  auto near = [&](ValueId d) {  // ((a + 2) d - (a + 3)) d d + 1, |d| <= 1
    return m.add(m.mul(m.mul(m.sub(m.mul(m.c(a + 2), d), m.c(a + 3)), d), d), m.c(1));
  };
  auto far = [&](ValueId d) {  // ((a d - 5 a) d + 8 a) d - 4 a, 1 <= |d| <= 2
    return m.sub(m.mul(m.add(m.mul(m.sub(m.mul(m.c(a), d), m.c(5 * a)), d), m.c(8 * a)), d), m.c(4 * a));
  };
  ValueId one_minus = m.sub(m.c(1), t);
  return {far(m.add(t, m.c(1))), near(t), near(one_minus), far(m.add(one_minus, m.c(1)))};
}

// ONNX's GridSample reflect: v moved inside [lo, hi] by reflecting about the nearer border until
// it is inside (v itself where it is inside already).
ValueId reflect(const Math& m, ValueId v, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return m.clip(v, lo, lo);
  ValueId below = m.op(Op::Less, {v, m.c(lo)});
  ValueId dx = m.where(below, m.sub(m.c(lo), v), m.sub(v, m.c(hi)));
  ValueId k = m.floor(m.div(dx, m.c(range)));
  ValueId r = m.sub(dx, m.mul(k, m.c(range)));
  ValueId even = m.op(Op::Equal, {m.op(Op::Mod, {k, m.c(2)}, {{"fmod", true}}), m.c(0)});
  // Below and even, or above and odd: lo + r; otherwise hi - r.
  ValueId from_lo = m.op(Op::Equal, {below, even});
  ValueId moved = m.where(from_lo, m.add(m.c(lo), r), m.sub(m.c(hi), r));
  return m.where(m.outside(v, lo, hi), moved, v);
}

// X [N, C, d...] as [N, prod(d), C] in the compute type: the table gather_nd reads pixels from.
Expected<ValueId> channels_last_table(ImportContext& ctx, OnnxNode& n, const Math& m, ValueId x) {
  const TensorType xt = ctx.type(x);
  std::vector<int64_t> perm{0};
  for (int k = 2; k < xt.rank(); ++k) perm.push_back(k);
  perm.push_back(1);
  int64_t pixels = 1;
  for (int k = 2; k < xt.rank(); ++k) pixels *= xt.shape[size_t(k)].value();
  ValueId t = m.op(Op::Transpose, {m.cast(x, m.ct)}, {{"perm", perm}});
  if (t == kNoValue) return ctx.builder_status(n);
  return ctx.reshape(n, t, Shape{xt.shape[0], Dim(pixels), xt.shape[1]});
}

// ---- GridSample ----------------------------------------------------------------------------

struct AxisTap {
  ValueId index;   // i64, inside [0, size)
  ValueId weight;  // compute type
};

Status convert_grid_sample(ImportContext& ctx, OnnxNode& n) {
  std::string mode = n.attr_string("mode", "bilinear");
  std::string padding = n.attr_string("padding_mode", "zeros");
  const bool align = n.attr_int("align_corners", 0) != 0;
  if (mode == "linear") mode = "bilinear";  // opset 20's spellings
  if (mode == "cubic") mode = "bicubic";
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") {
    return n.error("attribute 'mode' = \"" + mode + "\" is not supported");
  }
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    return n.error("attribute 'padding_mode' = \"" + padding + "\" is not supported");
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId grid, ctx.value(n, 1));
  const TensorType xt = ctx.type(x), gt = ctx.type(grid);
  if (!is_float(xt.dtype) || xt.rank() != 4)
    return n.error("X must be a float [N, C, H, W] tensor, got " + xt.to_string());
  if (!is_float(gt.dtype) || gt.rank() != 4 || !(gt.shape[3] == Dim(2))) {
    return n.error("grid must be a float [N, H_out, W_out, 2] tensor, got " + gt.to_string());
  }
  FUSEBOX_ASSIGN_OR_RETURN(int64_t h, static_size(n, xt, 2, "X"));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t w, static_size(n, xt, 3, "X"));
  const Math m{ctx, xt.dtype == DType::F64 || gt.dtype == DType::F64 ? DType::F64 : DType::F32};
  ValueId g = m.cast(grid, m.ct);

  // Per axis (x along W from grid[..., 0], y along H from grid[..., 1]): the taps of every point.
  auto axis_taps = [&](int64_t k, int64_t size) {
    const double lo = align ? 0.0 : -0.5, hi = align ? double(size - 1) : double(size) - 0.5;
    ValueId v = m.add(m.slice_last(g, k), m.c(1));
    v = align ? m.mul(v, m.c(0.5 * double(size - 1)))
              : m.div(m.sub(m.mul(v, m.c(double(size))), m.c(1)), m.c(2));
    if (mode == "nearest") v = m.op(Op::Round, {v});
    if (padding == "border") v = m.where(m.outside(v, lo, hi), m.clip(v, 0, double(size - 1)), v);
    if (padding == "reflection") v = reflect(m, v, lo, hi);
    // The taps' first index and weights.
    ValueId first;
    std::vector<ValueId> weights;
    if (mode == "nearest") {
      first = v;  // whole already (rounded, then clamped or reflected by whole-number borders)
      weights = {m.c(1)};
    } else {
      first = m.floor(v);
      ValueId t = m.sub(v, first);
      if (mode == "bilinear") {
        weights = {m.sub(m.c(1), t), t};
      } else {
        std::array<ValueId, 4> cw = cubic_weights(m, t);
        weights.assign(cw.begin(), cw.end());
        first = m.sub(first, m.c(1));
      }
    }
    std::vector<AxisTap> taps;
    for (size_t i = 0; i < weights.size(); ++i) {
      ValueId at = m.add(first, m.c(double(i)));
      ValueId weight = weights[i];
      if (padding == "zeros") {
        ValueId valid = m.op(Op::Not, {m.outside(at, 0, double(size - 1))});
        weight = m.mul(weight, m.cast(valid, m.ct));
      } else if (padding == "reflection") {
        at = reflect(m, at, lo, hi);
      }
      taps.push_back({m.cast(m.clip(at, 0, double(size - 1)), DType::I64), weight});
    }
    return taps;
  };
  std::vector<AxisTap> tx = axis_taps(0, w), ty = axis_taps(1, h);
  std::vector<ValueId> index, weight;
  for (const AxisTap& a : ty) {
    for (const AxisTap& b : tx) {
      index.push_back(m.add(m.mul(a.index, m.i64(w)), b.index));
      weight.push_back(m.mul(a.weight, b.weight));
    }
  }
  const int64_t taps = int64_t(index.size());
  ValueId idx = taps == 1 ? index[0] : m.op(Op::Concat, index, {{"axis", int64_t(3)}});
  ValueId wgt = taps == 1 ? weight[0] : m.op(Op::Concat, weight, {{"axis", int64_t(3)}});
  if (idx == kNoValue || wgt == kNoValue) return ctx.builder_status(n);

  // [N, Ho, Wo, T] taps -> [N, Ho*Wo*T, 1] pixel indices into X as [N, H*W, C].
  const Dim batch = xt.shape[0], ho = gt.shape[1], wo = gt.shape[2], ch = xt.shape[1];
  const Dim points = product_dim(ho, wo);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId table, channels_last_table(ctx, n, m, x));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId flat,
                           ctx.reshape(n, idx, Shape{batch, product_dim(points, Dim(taps)), Dim(1)}));
  ValueId picked = m.op(Op::GatherNd, {table, flat}, {{"batch_dims", int64_t(1)}});
  if (picked == kNoValue) return ctx.builder_status(n);
  FUSEBOX_ASSIGN_OR_RETURN(picked, ctx.reshape(n, picked, Shape{batch, points, Dim(taps), ch}));
  // Nearest without zeros padding has the constant weight 1: nothing to multiply.
  if (ctx.type(wgt).rank() > 0) {
    FUSEBOX_ASSIGN_OR_RETURN(wgt, ctx.reshape(n, wgt, Shape{batch, points, Dim(taps), Dim(1)}));
    picked = m.mul(picked, wgt);
  }
  ValueId sum = m.op(Op::ReduceSum, {picked}, {{"axes", std::vector<int64_t>{2}}, {"keepdims", false}});
  ValueId y = m.cast(m.op(Op::Transpose, {sum}, {{"perm", std::vector<int64_t>{0, 2, 1}}}), xt.dtype);
  if (y == kNoValue) return ctx.builder_status(n);
  FUSEBOX_ASSIGN_OR_RETURN(y, ctx.reshape(n, y, Shape{batch, ch, ho, wo}));
  return ctx.set_output(n, 0, y);
}

// ---- RoiAlign -------------------------------------------------------------------------------

// Axes of the sample tensors: [R, out_h, out_w, grid_h, grid_w, tap_y, tap_x].
constexpr int kRoiAxes = 7;

std::vector<int64_t> roi_axis_shape(int axis, int64_t size) {
  std::vector<int64_t> shape(kRoiAxes, 1);
  shape[size_t(axis)] = size;
  return shape;
}

Status convert_roi_align(ImportContext& ctx, OnnxNode& n) {
  const std::string coord =
      n.attr_string("coordinate_transformation_mode", ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  const std::string mode = n.attr_string("mode", "avg");
  const int64_t oh = n.attr_int("output_height", 1), ow = n.attr_int("output_width", 1);
  const int64_t ratio = n.attr_int("sampling_ratio", 0);
  const double scale = n.attr_float("spatial_scale", 1.0f);
  if (coord != "half_pixel" && coord != "output_half_pixel") {
    return n.error("attribute 'coordinate_transformation_mode' = \"" + coord + "\" is not supported");
  }
  if (mode != "avg" && mode != "max") return n.error("attribute 'mode' = \"" + mode + "\" is not supported");
  if (oh < 1 || ow < 1 || oh > 4096 || ow > 4096) {
    return n.error("attributes 'output_height' and 'output_width' must be in [1, 4096], got " +
                   std::to_string(oh) + " and " + std::to_string(ow));
  }
  if (ratio < 0 || ratio > 64)
    return n.error("attribute 'sampling_ratio' must be in [0, 64], got " + std::to_string(ratio));
  const bool half = coord == "half_pixel";
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const Array* roi_values = ctx.constant(n, 1);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId rois, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId batch, ctx.value(n, 2));
  const TensorType xt = ctx.type(x), rt = ctx.type(rois), bt = ctx.type(batch);
  if (!is_float(xt.dtype) || xt.rank() != 4)
    return n.error("X must be a float [N, C, H, W] tensor, got " + xt.to_string());
  if (!is_float(rt.dtype) || rt.rank() != 2 || !(rt.shape[1] == Dim(4))) {
    return n.error("rois must be a float [num_rois, 4] tensor, got " + rt.to_string());
  }
  if (!is_integer(bt.dtype) || bt.rank() != 1)
    return n.error("batch_indices must be an integer [num_rois] tensor, got " + bt.to_string());
  FUSEBOX_ASSIGN_OR_RETURN(int64_t h, static_size(n, xt, 2, "X"));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t w, static_size(n, xt, 3, "X"));
  const Math m{ctx, xt.dtype == DType::F64 || rt.dtype == DType::F64 ? DType::F64 : DType::F32};
  const Dim num_rois = rt.shape[0];

  // Samples per bin: sampling_ratio, or (adaptive) ceil(roi size / output size) of each constant
  // roi, padded to the largest with the extra samples masked.
  int64_t grid_h = ratio, grid_w = ratio;
  std::vector<int64_t> roi_grid_h, roi_grid_w;
  if (ratio == 0) {
    if (!roi_values) {
      return n.error(
          "sampling_ratio 0 (adaptive) needs constant rois (the sample count depends on each roi's "
          "size); give sampling_ratio > 0");
    }
    const int64_t r = roi_values->numel() / 4;
    grid_h = grid_w = 1;
    for (int64_t i = 0; i < r; ++i) {
      auto side = [&](int k) {
        double len = (roi_values->get_f64(4 * i + k + 2) - roi_values->get_f64(4 * i + k)) * scale;
        return half ? len : std::max(len, 1.0);
      };
      double gy = std::ceil(side(1) / double(oh)), gx = std::ceil(side(0) / double(ow));
      if (!(std::abs(gy) <= 64 && std::abs(gx) <= 64)) {
        return n.error("sampling_ratio 0 gives roi " + std::to_string(i) +
                       " more than 64 samples per bin side");
      }
      roi_grid_h.push_back(int64_t(gy)), roi_grid_w.push_back(int64_t(gx));
      grid_h = std::max(grid_h, roi_grid_h.back()), grid_w = std::max(grid_w, roi_grid_w.back());
    }
  }
  // A per-roi constant [R, 1, ...] of kRoiAxes dims (adaptive), else a scalar.
  auto per_roi = [&](const std::vector<int64_t>& v, int64_t fixed, auto f, DType t) {
    if (roi_grid_h.empty()) return ctx.builder().scalar(t, f(fixed));
    Array a(t, roi_axis_shape(0, int64_t(v.size())));
    for (size_t i = 0; i < v.size(); ++i) a.set_f64(int64_t(i), f(v[i]));
    return ctx.builder().constant(a);
  };
  auto iota = [&](int axis, int64_t size, double offset) {
    Array a(m.ct, roi_axis_shape(axis, size));
    for (int64_t i = 0; i < size; ++i) a.set_f64(i, double(i) + offset);
    return ctx.builder().constant(a);
  };
  auto column = [&](int64_t k) -> Expected<ValueId> {
    ValueId col = m.op(Op::Slice, {m.cast(rois, m.ct)},
                       {{"starts", std::vector<int64_t>{k}},
                        {"ends", std::vector<int64_t>{k + 1}},
                        {"axes", std::vector<int64_t>{1}}});
    Shape s(kRoiAxes, Dim(1));
    s[0] = num_rois;
    if (col == kNoValue) return ctx.builder_status(n);
    return ctx.reshape(n, col, s);
  };

  // One axis (y: k = 1, size h; x: k = 0, size w): the sample taps' indices and weights.
  struct Taps {
    ValueId index, weight, sample_valid;
  };
  auto axis_taps = [&](int64_t k, int64_t size, int64_t out, int64_t grid,
                       const std::vector<int64_t>& roi_grid) -> Expected<Taps> {
    const int out_axis = k == 1 ? 1 : 2, grid_axis = k == 1 ? 3 : 4, tap_axis = k == 1 ? 5 : 6;
    FUSEBOX_ASSIGN_OR_RETURN(ValueId c0, column(k));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId c1, column(k + 2));
    const double offset = half ? 0.5 : 0.0;
    ValueId start = m.sub(m.mul(c0, m.c(scale)), m.c(offset));
    ValueId len = m.sub(m.sub(m.mul(c1, m.c(scale)), m.c(offset)), start);
    if (!half) len = m.op(Op::Max, {len, m.c(1)});
    ValueId bin = m.div(len, m.c(double(out)));
    ValueId count = per_roi(
        roi_grid, grid, [](int64_t g) { return double(std::max<int64_t>(g, 1)); }, m.ct);
    // start + p * bin + (i + 0.5) * bin / count
    ValueId v = m.add(m.add(start, m.mul(iota(out_axis, out, 0), bin)),
                      m.div(m.mul(iota(grid_axis, grid, 0.5), bin), count));
    ValueId valid = m.op(Op::Not, {m.outside(v, -1.0, double(size))});
    ValueId sample_valid = kNoValue;
    if (!roi_grid.empty()) {
      ValueId g = per_roi(
          roi_grid, grid, [](int64_t g) { return double(g); }, m.ct);
      sample_valid = m.op(Op::Less, {iota(grid_axis, grid, 0), g});
    }
    v = m.op(Op::Max, {v, m.c(0)});
    ValueId lo = m.op(Op::Min, {m.floor(v), m.c(double(size - 1))});
    ValueId at_edge = m.op(Op::GreaterEqual, {lo, m.c(double(size - 1))});
    ValueId hi = m.op(Op::Min, {m.add(lo, m.c(1)), m.c(double(size - 1))});
    ValueId frac = m.where(at_edge, m.c(0), m.sub(v, lo));
    ValueId valid_f = m.cast(valid, m.ct);
    ValueId index = m.op(Op::Concat, {lo, hi}, {{"axis", int64_t(tap_axis)}});
    ValueId weight = m.op(Op::Concat, {m.mul(m.sub(m.c(1), frac), valid_f), m.mul(frac, valid_f)},
                          {{"axis", int64_t(tap_axis)}});
    return Taps{m.cast(index, DType::I64), weight, sample_valid};
  };
  FUSEBOX_ASSIGN_OR_RETURN(Taps ty, axis_taps(1, h, oh, grid_h, roi_grid_h));
  FUSEBOX_ASSIGN_OR_RETURN(Taps tx, axis_taps(0, w, ow, grid_w, roi_grid_w));
  ValueId flat = m.add(m.mul(ty.index, m.i64(w)), tx.index);  // [R, oh, ow, gh, gw, 2, 2]
  ValueId weight = m.mul(ty.weight, tx.weight);
  ValueId b = m.cast(batch, DType::I64);
  Shape roi_shape(kRoiAxes, Dim(1));
  roi_shape[0] = num_rois;
  FUSEBOX_ASSIGN_OR_RETURN(b, ctx.reshape(n, b, roi_shape));
  b = m.add(m.mul(flat, m.i64(0)), b);  // broadcast to the samples' shape
  const int64_t points = oh * ow, taps = grid_h * grid_w * 4;
  Shape pairs_shape{num_rois, Dim(points * taps), Dim(1)};
  FUSEBOX_ASSIGN_OR_RETURN(ValueId bi, ctx.reshape(n, b, pairs_shape));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId pi, ctx.reshape(n, flat, pairs_shape));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId table, channels_last_table(ctx, n, m, x));
  ValueId picked = m.op(Op::GatherNd, {table, m.op(Op::Concat, {bi, pi}, {{"axis", int64_t(2)}})});
  if (picked == kNoValue) return ctx.builder_status(n);
  const Dim ch = xt.shape[1];
  FUSEBOX_ASSIGN_OR_RETURN(picked, ctx.reshape(n, picked, Shape{num_rois, Dim(points), Dim(taps), ch}));
  FUSEBOX_ASSIGN_OR_RETURN(weight, ctx.reshape(n, weight, Shape{num_rois, Dim(points), Dim(taps), Dim(1)}));
  ValueId values = m.mul(picked, weight);
  // Adaptive sampling: the samples each roi has (the rest pad the grid to the largest roi's).
  const Shape taps_shape{num_rois, Dim(points), Dim(taps), Dim(1)};
  ValueId has_sample = kNoValue;
  if (!roi_grid_h.empty()) {  // constant rois: R is static
    Shape all{num_rois, Dim(oh), Dim(ow), Dim(grid_h), Dim(grid_w), Dim(2), Dim(2)};
    ValueId s = m.op(Op::Expand, {m.op(Op::And, {ty.sample_valid, tx.sample_valid})}, {{"shape", all}});
    FUSEBOX_ASSIGN_OR_RETURN(has_sample, ctx.reshape(n, s, taps_shape));
  }
  Attrs over_taps{{"axes", std::vector<int64_t>{2}}, {"keepdims", false}};
  ValueId y;
  if (mode == "avg") {
    ValueId count = m.c(double(grid_h * grid_w));
    if (has_sample != kNoValue) {
      values = m.mul(values, m.cast(has_sample, m.ct));
      Array counts(m.ct, {int64_t(roi_grid_h.size()), 1, 1});
      for (size_t i = 0; i < roi_grid_h.size(); ++i) {
        counts.set_f64(int64_t(i), double(std::max<int64_t>(roi_grid_h[i] * roi_grid_w[i], 1)));
      }
      count = ctx.builder().constant(counts);
    }
    y = m.div(m.op(Op::ReduceSum, {values}, over_taps), count);
  } else {
    if (has_sample != kNoValue) values = m.where(has_sample, values, m.c(-std::numeric_limits<double>::infinity()));
    y = m.op(Op::ReduceMax, {values}, over_taps);
    if (has_sample != kNoValue) {  // a roi without samples gives 0
      Array any(DType::Bool, {int64_t(roi_grid_h.size()), 1, 1});
      for (size_t i = 0; i < roi_grid_h.size(); ++i) {
        any.data<bool>()[i] = roi_grid_h[i] > 0 && roi_grid_w[i] > 0;
      }
      y = m.where(ctx.builder().constant(any), y, m.c(0));
    }
  }
  y = m.cast(m.op(Op::Transpose, {y}, {{"perm", std::vector<int64_t>{0, 2, 1}}}), xt.dtype);
  if (y == kNoValue) return ctx.builder_status(n);
  FUSEBOX_ASSIGN_OR_RETURN(y, ctx.reshape(n, y, Shape{num_rois, ch, Dim(oh), Dim(ow)}));
  return ctx.set_output(n, 0, y);
}

// ---- MaxUnpool -----------------------------------------------------------------------------

Status convert_max_unpool(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId idx, ctx.value(n, 1));
  const TensorType xt = ctx.type(x), it = ctx.type(idx);
  const int spatial = xt.rank() - 2;
  if (spatial < 1) return n.error("X must be [N, C, d...], got " + xt.to_string());
  if (!is_integer(it.dtype) || !(it.shape == xt.shape)) {
    return n.error("I must be integer indices of X's shape " + xt.to_string() + ", got " + it.to_string());
  }
  std::optional<std::vector<int64_t>> kernel = n.attr_ints("kernel_shape");
  if (!kernel || int(kernel->size()) != spatial) {
    return n.error("attribute 'kernel_shape' must give " + std::to_string(spatial) + " sizes");
  }
  std::vector<int64_t> strides = n.attr_ints("strides").value_or(std::vector<int64_t>(size_t(spatial), 1));
  std::vector<int64_t> pads = n.attr_ints("pads").value_or(std::vector<int64_t>(size_t(2 * spatial), 0));
  if (int(strides.size()) != spatial)
    return n.error("attribute 'strides' must give " + std::to_string(spatial) + " sizes");
  if (int(pads.size()) != 2 * spatial)
    return n.error("attribute 'pads' must give " + std::to_string(2 * spatial) + " sizes");
  // The shape the indices address: N, C and (in - 1) * stride - pads + kernel.
  std::vector<int64_t> inferred(size_t(xt.rank()));
  FUSEBOX_ASSIGN_OR_RETURN(inferred[0], static_size(n, xt, 0, "X"));
  FUSEBOX_ASSIGN_OR_RETURN(inferred[1], static_size(n, xt, 1, "X"));
  for (int k = 0; k < spatial; ++k) {
    FUSEBOX_ASSIGN_OR_RETURN(int64_t in, static_size(n, xt, k + 2, "X"));
    inferred[size_t(k + 2)] =
        (in - 1) * strides[size_t(k)] - pads[size_t(k)] - pads[size_t(k + spatial)] + (*kernel)[size_t(k)];
  }
  // output_shape pads that at the end of each axis with zeros (ONNX's reference).
  std::vector<int64_t> out = inferred, grow(size_t(2 * xt.rank()), 0);
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(out, ctx.require_static_ints(n, 2, "output_shape"));
    if (out.size() != size_t(xt.rank())) {
      return n.error("output_shape has " + std::to_string(out.size()) + " entries for X " + xt.to_string());
    }
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k] < inferred[k]) {
        return n.error("output_shape [" + shape_to_string(make_shape(out)) +
                       "] is smaller than the unpooled shape [" + shape_to_string(make_shape(inferred)) +
                       "]");
      }
      grow[k + out.size()] = out[k] - inferred[k];
    }
  }
  int64_t total = 1;
  for (int64_t d : out) {
    if (d < 1 || d > (int64_t(1) << 40) || total > (int64_t(1) << 40) / d) {
      return n.error("output shape [" + shape_to_string(make_shape(out)) +
                     "] is empty, negative or too large");
    }
    total *= d;
  }
  total = 1;
  for (int64_t d : inferred) {
    if (d < 1) {
      return n.error("the unpooled shape [" + shape_to_string(make_shape(inferred)) +
                     "] is empty or negative");
    }
    total *= d;
  }
  Array zero(xt.dtype, {});
  zero.fill_bytes(0);
  ValueId zeros = ctx.emit(Op::Expand, {ctx.builder().constant(zero)}, {{"shape", Shape{Dim(total)}}});
  FUSEBOX_ASSIGN_OR_RETURN(ValueId values, ctx.reshape(n, x, Shape{Dim::dynamic()}));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId at, ctx.reshape(n, idx, Shape{Dim::dynamic()}));
  ValueId y = ctx.emit(Op::ScatterElements, {zeros, at, values}, {{"axis", int64_t(0)}});
  if (y == kNoValue) return ctx.builder_status(n);
  FUSEBOX_ASSIGN_OR_RETURN(y, ctx.reshape(n, y, make_shape(inferred)));
  if (out != inferred) y = ctx.emit(Op::Pad, {y}, {{"pads", grow}});
  return ctx.set_output(n, 0, y);
}

}  // namespace

void add_spatial_converters(ConverterTable& table) {
  table["GridSample"] = convert_grid_sample;
  table["MaxUnpool"] = convert_max_unpool;
  table["RoiAlign"] = convert_roi_align;
}

}  // namespace fusebox::onnx_import
