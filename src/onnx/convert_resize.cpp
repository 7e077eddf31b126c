// Resize (opset 10, 11, 13, 18, 19) and Upsample (opset 7, 9) to fusebox `resize`.
//
// fusebox resize implements ONNX Resize without roi/antialias: output sizes from `sizes` or
// floor(in * scale), coordinates from the given scales (or out/in for sizes), the four
// coordinate modes half_pixel, align_corners, asymmetric, pytorch_half_pixel, the four nearest
// modes, linear, and cubic (opset 11 on) with cubic_coeff_a and exclude_outside. Everything
// outside that is refused, naming the attribute:
//   coordinate modes tf_crop_and_resize, tf_half_pixel_for_nn,
//   half_pixel_symmetric, antialias with linear, keep_aspect_ratio_policy other than stretch.
//
// Opset 10 Resize and Upsample have no coordinate or nearest mode: ONNX Runtime maps
// coordinates asymmetrically and rounds nearest down when upsampling and up when downsampling
// (its "simple" mode). Upsampling maps to nearest_mode floor, downsampling to ceil; a resize
// that does both on different axes is refused.
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

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
  if (coord != "half_pixel" && coord != "align_corners" && coord != "asymmetric" && coord != "pytorch_half_pixel") {
    return n.error("attribute 'coordinate_transformation_mode' = \"" + coord + "\" is not supported");
  }
  if (!legacy && nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
      nearest != "ceil") {
    return n.error("attribute 'nearest_mode' = \"" + nearest + "\" is not supported");
  }
  Attrs attrs{{"mode", mode}, {"coordinate", coord}};
  if (mode == "cubic") {
    attrs.set("cubic_coeff_a", double(n.attr_float("cubic_coeff_a", -0.75f)));
    attrs.set("exclude_outside", n.attr_int("exclude_outside", 0) != 0);
  } else {  // only meaningful for cubic
    n.accept_attr("cubic_coeff_a");
    n.accept_attr("exclude_outside");
  }
  n.accept_attr("extrapolation_value");  // only meaningful for tf_crop_and_resize, refused above
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
  if (!legacy && n.has_input(1)) n.input(1);  // roi: only read by tf_crop_and_resize
  std::vector<double> scales;
  if (legacy && n.op_type() == "Upsample" && n.has_attr("scales")) {
    std::optional<std::vector<float>> attr = n.attr_floats("scales");
    if (!attr) return n.status();
    scales.assign(attr->begin(), attr->end());
  } else if (n.has_input(scales_input)) {
    FUSEBOX_ASSIGN_OR_RETURN(Array s, ctx.require_constant(n, scales_input, "scales"));
    for (int64_t i = 0; i < s.numel(); ++i) scales.push_back(static_cast<float>(s.get_f64(i)));
  }
  if (!scales.empty()) {
    if (scales.size() != axes.size()) {
      return n.error("scales has " + std::to_string(scales.size()) + " entries for " + std::to_string(axes.size()) + " axes");
    }
    std::vector<double> full(size_t(rank), 1.0);
    for (size_t i = 0; i < axes.size(); ++i) full[size_t(axes[i])] = scales[i];
    if (n.has_input(3)) return n.error("give scales or sizes, not both");
    attrs.set("scales", full);
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
  } else {
    return n.error("needs scales or sizes");
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
