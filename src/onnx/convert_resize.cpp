// Resize (opset 10, 11, 13, 18, 19) and Upsample (opset 7, 9) to fusebox `resize`.
//
// fusebox resize implements ONNX Resize without roi/antialias: output sizes from `sizes` or
// floor(in * scale), coordinates from the given scales (or out/in for sizes), the four
// coordinate modes half_pixel, align_corners, asymmetric, pytorch_half_pixel, the four nearest
// modes, linear, and cubic (opset 11 on) with cubic_coeff_a and exclude_outside. The modes it
// lacks are gathers (below); everything else is refused, naming the attribute:
//   coordinate mode half_pixel_symmetric, tf_crop_and_resize with scales, antialias with
//   linear, keep_aspect_ratio_policy other than stretch.
//
// Opset 10 Resize and Upsample have no coordinate or nearest mode: ONNX Runtime maps
// coordinates asymmetrically and rounds nearest down when upsampling and up when downsampling
// (its "simple" mode). Upsampling maps to nearest_mode floor, downsampling to ceil; a resize
// that does both on different axes is refused.
//
// What `resize` cannot express is written as gathers along each resized axis, with source
// indices and weights computed here from the static sizes (resample_by_gathers):
//   tf_crop_and_resize   x_ori = start (in-1) + x (end - start)(in-1)/(out-1) from the constant
//                        roi; an output element whose coordinate on any axis leaves [0, in-1]
//                        is extrapolation_value (a constant mask, one `where` at the end)
//   tf_half_pixel_for_nn x_ori = (x + 0.5) / scale
//   align_corners with scales whose in * scale is not a whole number: ONNX's reference divides
//                        by in * scale - 1 (the unrounded output length), not by out - 1, so
//                        with in = 4, scale 0.6 it samples x * 3 / 1.4 (the node tests'
//                        expected data); the `resize` op divides by out - 1, exact otherwise
// Per axis: nearest is one gather; linear 2 and cubic 4 gathers, each times a constant weight
// vector along the axis, added. Taps outside [0, in-1] read the edge element (cubic's
// exclude_outside gives them weight 0 and renormalises), as in ONNX's reference.
#include <algorithm>
#include <array>
#include <cmath>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// Source coordinate of output index x along one axis, by ONNX's formulas (double precision).
double source_coordinate(const std::string& coord, int64_t x, double scale, int64_t in, double out_len,
                         double roi_start, double roi_end) {
  double xf = double(x);
  if (coord == "align_corners") return out_len == 1 ? 0.0 : xf * double(in - 1) / (out_len - 1);
  if (coord == "asymmetric") return xf / scale;
  if (coord == "tf_half_pixel_for_nn") return (xf + 0.5) / scale;
  if (coord == "pytorch_half_pixel") return out_len > 1 ? (xf + 0.5) / scale - 0.5 : -0.5;
  if (coord == "tf_crop_and_resize") {
    double span = (roi_end - roi_start) * double(in - 1);
    return roi_start * double(in - 1) + (out_len == 1 ? span / 2 : xf * span / (out_len - 1));
  }
  return (xf + 0.5) / scale - 0.5;  // half_pixel
}

int64_t round_nearest(double c, const std::string& mode) {
  double f = std::floor(c);
  if (mode == "floor") return int64_t(f);
  if (mode == "ceil") return int64_t(std::ceil(c));
  if (c - f == 0.5) return int64_t(mode == "round_prefer_ceil" ? f + 1 : f);
  return int64_t(std::round(c));
}

// Keys' cubic convolution weights of the taps floor(c)-1 .. floor(c)+2 for t = c - floor(c).
std::array<double, 4> cubic_weights(double t, double a) {
  auto near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  return {far(t + 1), near(t), near(1 - t), far(2 - t)};
}

struct ResampleSpec {
  std::string mode, coord, nearest;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  std::vector<double> scales;              // per axis of the input
  std::vector<int64_t> out;                // per axis
  std::vector<double> out_len;             // the output length the coordinates use
  std::vector<bool> same;                  // axes that keep their (symbolic) size unchanged
  std::vector<double> roi_start, roi_end;  // per axis (tf_crop_and_resize)
  double extrapolation = 0;
};

// x resampled axis by axis with gathers of constant indices and constant weights (see the top).
Expected<ValueId> resample_by_gathers(ImportContext& ctx, OnnxNode& n, ValueId x, const ResampleSpec& s) {
  const TensorType xt = ctx.type(x);
  const int rank = xt.rank();
  const bool crop = s.coord == "tf_crop_and_resize";
  const int taps = s.mode == "nearest" ? 1 : s.mode == "linear" ? 2 : 4;
  std::vector<int64_t> mask_shape(size_t(rank), 1);
  std::vector<std::vector<uint8_t>> axis_inside{size_t(rank)};
  for (int d = 0; d < rank; ++d) {
    const Dim& dim = xt.shape[size_t(d)];
    const int64_t out = s.out[size_t(d)];
    const bool full_roi = s.roi_start[size_t(d)] == 0 && s.roi_end[size_t(d)] == 1;
    const bool unchanged = s.same[size_t(d)] || (dim.is_static() && dim.value() == out);
    if (crop ? unchanged && full_roi : s.scales[size_t(d)] == 1.0 && s.coord != "tf_half_pixel_for_nn") {
      continue;  // x_ori = x: the axis stays as it is
    }
    if (!dim.is_static()) {
      return n.error("needs a static size along resized axis " + std::to_string(d) + ", the input is " +
                     xt.to_string());
    }
    const int64_t in = dim.value();
    std::vector<int64_t> weight_shape(size_t(rank), 1);
    weight_shape[size_t(d)] = out;
    std::vector<Array> index, weight;  // one buffer each (copies of an Array share theirs)
    for (int k = 0; k < taps; ++k) {
      index.emplace_back(DType::I64, std::vector<int64_t>{out});
      weight.emplace_back(xt.dtype, weight_shape);
    }
    axis_inside[size_t(d)].assign(size_t(out), 1);
    for (int64_t o = 0; o < out; ++o) {
      double c = source_coordinate(s.coord, o, s.scales[size_t(d)], in, s.out_len[size_t(d)],
                                   s.roi_start[size_t(d)], s.roi_end[size_t(d)]);
      if (crop && !(c >= 0 && c <= double(in - 1))) {
        axis_inside[size_t(d)][size_t(o)] = 0;
        c = 0;
      }
      auto clamp = [in](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
      if (taps == 1) {
        index[0].set_i64(o, clamp(round_nearest(c, s.nearest)));
        continue;
      }
      if (taps == 2) c = std::clamp(c, 0.0, double(in - 1));
      double f = std::floor(c), t = c - f;
      int64_t first = int64_t(f) - (taps == 4 ? 1 : 0);
      std::array<double, 4> w =
          taps == 4 ? cubic_weights(t, s.cubic_a) : std::array<double, 4>{1 - t, t, 0, 0};
      if (taps == 4 && s.exclude_outside) {
        double sum = 0;
        for (int k = 0; k < 4; ++k) {
          if (first + k < 0 || first + k >= in) w[size_t(k)] = 0;
          sum += w[size_t(k)];
        }
        for (double& v : w) v = sum != 0 ? v / sum : 0;
      }
      for (int k = 0; k < taps; ++k) {
        index[size_t(k)].set_i64(o, clamp(first + k));
        weight[size_t(k)].set_f64(o, w[size_t(k)]);
      }
    }
    ValueId sum = kNoValue;
    for (int k = 0; k < taps; ++k) {
      ValueId g = ctx.emit(Op::Gather, {x, ctx.builder().constant(index[size_t(k)])}, {{"axis", int64_t(d)}});
      if (taps > 1) g = ctx.emit(Op::Mul, {g, ctx.builder().constant(weight[size_t(k)])});
      sum = sum == kNoValue ? g : ctx.emit(Op::Add, {sum, g});
    }
    x = sum;
    if (x == kNoValue) return ctx.builder_status(n);
    if (crop) mask_shape[size_t(d)] = out;
  }
  if (!crop) return x;
  // Outside the roi on any axis: extrapolation_value (a constant mask over the resized axes).
  Array mask(DType::Bool, mask_shape);
  std::vector<int64_t> strides = contiguous_strides(mask_shape);
  for (int64_t i = 0; i < mask.numel(); ++i) {
    bool in_all = true;
    for (int d = 0; d < rank; ++d) {
      if (axis_inside[size_t(d)].empty()) continue;
      in_all &= axis_inside[size_t(d)][size_t((i / strides[size_t(d)]) % mask_shape[size_t(d)])] != 0;
    }
    mask.data<bool>()[i] = in_all;
  }
  Array fill(xt.dtype, {});
  fill.set_f64(0, s.extrapolation);
  return ctx.emit(Op::Where, {ctx.builder().constant(mask), x, ctx.builder().constant(fill)});
}

Status convert_resize(ImportContext& ctx, OnnxNode& n) {
  bool legacy = n.op_type() == "Upsample" || ctx.opset() < 11;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  int rank = xt.rank();
  std::string mode = n.attr_string("mode", "nearest");
  std::string coord = legacy ? "asymmetric" : n.attr_string("coordinate_transformation_mode", "half_pixel");
  std::string nearest = legacy ? "" : n.attr_string("nearest_mode", "round_prefer_floor");
  if (mode == "bilinear" && legacy) mode = "linear";  // Upsample-7's spelling
  if (mode != "nearest" && mode != "linear" && (mode != "cubic" || legacy)) {
    return n.error("attribute 'mode' = \"" + mode + "\" is not supported");
  }
  const bool crop = coord == "tf_crop_and_resize";
  if (coord != "half_pixel" && coord != "align_corners" && coord != "asymmetric" &&
      coord != "pytorch_half_pixel" && coord != "tf_half_pixel_for_nn" && !crop) {
    return n.error("attribute 'coordinate_transformation_mode' = \"" + coord + "\" is not supported");
  }
  if (!legacy && nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
      nearest != "ceil") {
    return n.error("attribute 'nearest_mode' = \"" + nearest + "\" is not supported");
  }
  Attrs attrs{{"mode", mode}, {"coordinate", coord}};
  ResampleSpec spec{mode, coord, nearest};
  if (mode == "cubic") {
    spec.cubic_a = double(n.attr_float("cubic_coeff_a", -0.75f));
    spec.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
    attrs.set("cubic_coeff_a", spec.cubic_a);
    attrs.set("exclude_outside", spec.exclude_outside);
  } else {  // only meaningful for cubic
    n.accept_attr("cubic_coeff_a");
    n.accept_attr("exclude_outside");
  }
  if (crop)
    spec.extrapolation = double(n.attr_float("extrapolation_value", 0.0f));
  else
    n.accept_attr("extrapolation_value");  // only meaningful for tf_crop_and_resize
  if (n.attr_int("antialias", 0) != 0 && mode != "nearest") {
    return n.error("attribute 'antialias' = 1 is not supported");
  }
  std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") return n.error("attribute 'keep_aspect_ratio_policy' = \"" + policy + "\" is not supported");
  std::vector<int> axes;
  if (std::optional<std::vector<int64_t>> a = n.attr_ints("axes")) {
    for (int64_t v : *a) {
      FUSEBOX_ASSIGN_OR_RETURN(int ax, normalize_onnx_axis(n, v, rank, "axes entry"));
      axes.push_back(ax);
    }
  } else {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }

  // Inputs: Upsample-9 and Resize-10 (X, scales); Resize-11+ (X, roi, scales, sizes).
  int scales_input = legacy ? 1 : 2;
  spec.same.assign(size_t(rank), false);
  spec.roi_start.assign(size_t(rank), 0.0);
  spec.roi_end.assign(size_t(rank), 1.0);
  if (crop) {
    if (!n.has_input(1))
      return n.error("coordinate_transformation_mode tf_crop_and_resize needs the roi input");
    FUSEBOX_ASSIGN_OR_RETURN(Array roi, ctx.require_constant(n, 1, "roi"));
    if (roi.numel() != int64_t(2 * axes.size())) {
      return n.error("roi has " + std::to_string(roi.numel()) + " entries for " +
                     std::to_string(axes.size()) + " axes (starts, then ends)");
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      spec.roi_start[size_t(axes[i])] = roi.get_f64(int64_t(i));
      spec.roi_end[size_t(axes[i])] = roi.get_f64(int64_t(i + axes.size()));
    }
  } else if (!legacy && n.has_input(1)) {
    n.input(1);  // roi: only read by tf_crop_and_resize
  }
  std::vector<double> scales;
  if (legacy && n.op_type() == "Upsample" && n.has_attr("scales")) {
    std::optional<std::vector<float>> attr = n.attr_floats("scales");
    if (!attr) return n.status();
    scales.assign(attr->begin(), attr->end());
  } else if (n.has_input(scales_input)) {
    FUSEBOX_ASSIGN_OR_RETURN(Array s, ctx.require_constant(n, scales_input, "scales"));
    for (int64_t i = 0; i < s.numel(); ++i) scales.push_back(static_cast<float>(s.get_f64(i)));
  }
  // Whether the `resize` op computes what ONNX's reference does (else: resample_by_gathers).
  bool exact_op = !crop && coord != "tf_half_pixel_for_nn";
  if (!scales.empty()) {
    if (scales.size() != axes.size()) {
      return n.error("scales has " + std::to_string(scales.size()) + " entries for " + std::to_string(axes.size()) + " axes");
    }
    std::vector<double> full(size_t(rank), 1.0);
    for (size_t i = 0; i < axes.size(); ++i) full[size_t(axes[i])] = scales[i];
    if (n.has_input(3)) return n.error("give scales or sizes, not both");
    // ONNX does not say how roi shapes the output of scales; its spec and reference disagree.
    if (crop)
      return n.error("coordinate_transformation_mode tf_crop_and_resize is supported with sizes, not scales");
    attrs.set("scales", full);
    spec.scales = full;
    for (int d = 0; d < rank; ++d) {
      const Dim& dim = xt.shape[size_t(d)];
      double len = dim.is_static() ? double(dim.value()) * full[size_t(d)] : 0.0;
      spec.out.push_back(int64_t(len));
      spec.out_len.push_back(len);
      // align_corners divides by in * scale - 1: the op's out - 1 only when that is a whole number.
      if (coord == "align_corners" && full[size_t(d)] != std::floor(full[size_t(d)])) {
        if (!dim.is_static()) {
          return n.error("align_corners with scale " + std::to_string(full[size_t(d)]) +
                         " needs a static size along axis " + std::to_string(d) + ", the input is " +
                         xt.to_string());
        }
        exact_op &= len == std::floor(len);
      }
    }
  } else if (!legacy && n.has_input(3)) {
    FUSEBOX_ASSIGN_OR_RETURN(KnownInts sizes, ctx.require_ints(n, 3, "sizes"));
    if (sizes.elems.size() != axes.size()) {
      return n.error("sizes has " + std::to_string(sizes.elems.size()) + " entries for " + std::to_string(axes.size()) + " axes");
    }
    Shape full = xt.shape;
    for (size_t i = 0; i < axes.size(); ++i) full[size_t(axes[i])] = sizes.elems[i].to_dim();
    for (const Dim& d : full) {
      if (d.is_dynamic()) return n.error("sizes " + sizes.to_string() + " must be numbers or input sizes");
    }
    attrs.set("sizes", full);
    for (int d = 0; d < rank && !exact_op; ++d) {
      const Dim &in = xt.shape[size_t(d)], &out = full[size_t(d)];
      if (!out.is_static()) {
        if (out == in) {  // a symbolic size kept: x_ori = x in every mode but tf_half_pixel_for_nn
          spec.scales.push_back(1.0), spec.out.push_back(0), spec.out_len.push_back(0),
              spec.same[size_t(d)] = true;
          continue;
        }
        return n.error("sizes " + sizes.to_string() + " must be numbers for coordinate_transformation_mode " +
                       coord);
      }
      spec.out.push_back(out.value());
      spec.out_len.push_back(double(out.value()));
      spec.scales.push_back(in.is_static() ? double(out.value()) / double(in.value()) : 0.0);
    }
  } else {
    return n.error("needs scales or sizes");
  }
  if (!exact_op) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId y, resample_by_gathers(ctx, n, x, spec));
    return ctx.set_output(n, 0, y);
  }

  if (legacy) {
    if (mode == "nearest") {
      // ONNX Runtime's "simple" rounding: floor when upsampling, ceil when downsampling.
      bool up = false, down = false;
      if (const auto* s = std::get_if<std::vector<double>>(attrs.find("scales"))) {
        for (double v : *s) {
          up |= v > 1.0;
          down |= v < 1.0;
        }
      }
      if (up && down) return n.error("upsampling and downsampling in one legacy nearest resize is not supported");
      attrs.set("nearest_mode", std::string(down ? "ceil" : "floor"));
    }
  } else {
    attrs.set("nearest_mode", nearest);
  }
  return ctx.set_output(n, 0, ctx.emit(Op::Resize, {x}, std::move(attrs)));
}

}  // namespace

void add_resize_converters(ConverterTable& table) {
  table["Resize"] = convert_resize;
  table["Upsample"] = convert_resize;
}

}  // namespace fusebox::onnx_import
