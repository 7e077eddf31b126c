// Signal-processing ONNX ops (opset 17) written with fusebox ops and constants computed from
// static sizes:
//
//   DFT(x)             a product with constant cos/sin matrices along `axis`:
//                        x [..., n, ..., c]  (c = 1 real, 2 complex; the transform axis moved
//                        next to c when it is elsewhere)
//                        xr, xi = the two planes of c              [..., n]
//                        yr = xr·C - xi·S,  yi = xr·S + xi·C       C, S [n, K] constants
//                        y  = concat(yr, yi) along c               [..., K, 2] -> axis moved back
//                      C[t, k] = cos(2 pi t k / L) / s, S[t, k] = -+sin(2 pi t k / L) / s with
//                      L the dft_length (the axis size by default; a shorter input is zero-padded,
//                      which drops rows of C and S, a longer one is sliced), K = L or L/2 + 1
//                      (onesided), s = L for the inverse and 1 otherwise. The matrices are built in
//                      double (angles reduced as integers t k mod L first, so the quarter turns are
//                      exact) and rounded once to f32 (f64 for f64 inputs; f16/bf16 inputs are
//                      transformed in f32 and cast back).
//   STFT(signal)       frames by a gather with constant indices [frames, frame_length], times the
//                      window, then the DFT above along the frame axis
//   MelWeightMatrix    folded to a constant with ONNX's formula (every input known at import)
//
// L is limited to kMaxLength: the two matrices hold 2·L·K values.
#include <cmath>
#include <numbers>

#include "onnx/converters.h"
#include "onnx/tensor_data.h"

namespace fusebox::onnx_import {

namespace {

constexpr int64_t kMaxLength = 4096;

Expected<int64_t> static_size(OnnxNode& n, const TensorType& t, int axis, const std::string& what) {
  const Dim& d = t.shape[size_t(axis)];
  if (!d.is_static()) {
    return n.error(what + " needs a static size along axis " + std::to_string(axis) + ", the input is " + t.to_string());
  }
  return d.value();
}

// cos and sin of 2 pi m / l for 0 <= m < l, exact at the quarter turns.
std::pair<double, double> unit_circle(int64_t m, int64_t l) {
  if ((4 * m) % l == 0) {
    constexpr std::pair<double, double> quarters[4] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
    return quarters[(4 * m) / l];
  }
  double t = 2 * std::numbers::pi * double(m) / double(l);
  return {std::cos(t), std::sin(t)};
}

// The [rows, cols] cos and sin matrices of a length-l transform (see the file comment), read
// from one turn of l angles.
std::pair<Array, Array> dft_matrices(DType dtype, int64_t rows, int64_t cols, int64_t l, bool inverse) {
  std::vector<std::pair<double, double>> turn(static_cast<size_t>(l));
  for (int64_t m = 0; m < l; ++m) turn[size_t(m)] = unit_circle(m, l);
  Array c(dtype, {rows, cols}), s(dtype, {rows, cols});
  const double scale = inverse ? 1.0 / double(l) : 1.0, sign = inverse ? 1.0 : -1.0;
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t k = 0; k < cols; ++k) {
      auto [cv, sv] = turn[size_t((t * k) % l)];
      c.set_f64(t * cols + k, cv * scale);
      s.set_f64(t * cols + k, sign * sv * scale);
    }
  }
  return {std::move(c), std::move(s)};
}

// x with its last axis sliced to [k, k+1) and dropped.
Expected<ValueId> plane(ImportContext& ctx, OnnxNode& n, ValueId x, int64_t k) {
  const int last = ctx.type(x).rank() - 1;
  ValueId s = ctx.emit(Op::Slice, {x}, {{"starts", std::vector<int64_t>{k}}, {"ends", std::vector<int64_t>{k + 1}},
                                        {"axes", std::vector<int64_t>{last}}});
  if (s == kNoValue) return s;
  Shape dropped = ctx.type(s).shape;
  dropped.pop_back();
  return ctx.reshape(n, s, dropped);
}

// The DFT of x ([..., c], c = 1 or 2 static) along `axis` (not the last) with length `length`.
Expected<ValueId> emit_dft(ImportContext& ctx, OnnxNode& n, ValueId x, int axis, int64_t length, bool onesided,
                           bool inverse) {
  const TensorType xt = ctx.type(x);
  const int r = xt.rank();
  FUSEBOX_ASSIGN_OR_RETURN(int64_t c, static_size(n, xt, r - 1, "the complex axis"));
  if (c != 1 && c != 2) return n.error("the last axis must be 1 (real) or 2 (complex), the input is " + xt.to_string());
  if (length < 1 || length > kMaxLength) {
    return n.error("the transform length must be in [1, " + std::to_string(kMaxLength) + "], got " + std::to_string(length));
  }
  if (onesided && (c == 2 || inverse)) {
    return n.error("onesided = 1 is supported for the forward transform of a real input only");
  }
  FUSEBOX_ASSIGN_OR_RETURN(int64_t size, static_size(n, xt, axis, "the transform axis"));
  const DType compute = xt.dtype == DType::F64 ? DType::F64 : DType::F32;
  if (xt.dtype != compute) x = ctx.emit(Op::Cast, {x}, {{"to", compute}});
  // A longer input is cut to the length; a shorter one is zero-padded, which only drops rows.
  const int64_t used = std::min(size, length);
  if (size > length) {
    x = ctx.emit(Op::Slice, {x}, {{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{length}},
                                  {"axes", std::vector<int64_t>{axis}}});
  }
  // The transform axis next to the complex axis.
  std::vector<int64_t> perm, back(size_t(r), 0);
  for (int k = 0; k < r - 1; ++k) {
    if (k != axis) perm.push_back(k);
  }
  perm.push_back(axis);
  perm.push_back(r - 1);
  const bool moved = axis != r - 2;
  if (moved) x = ctx.emit(Op::Transpose, {x}, {{"perm", perm}});
  if (x == kNoValue) return x;
  for (int k = 0; k < r; ++k) back[size_t(perm[size_t(k)])] = k;

  const int64_t out_len = onesided ? length / 2 + 1 : length;
  auto [cm, sm] = dft_matrices(compute, used, out_len, length, inverse);
  ValueId cos_m = ctx.builder().constant(cm), sin_m = ctx.builder().constant(sm);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId xr, plane(ctx, n, x, 0));
  ValueId yr = ctx.emit(Op::MatMul, {xr, cos_m}), yi = ctx.emit(Op::MatMul, {xr, sin_m});
  if (c == 2) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId xi, plane(ctx, n, x, 1));
    yr = ctx.emit(Op::Sub, {yr, ctx.emit(Op::MatMul, {xi, sin_m})});
    yi = ctx.emit(Op::Add, {yi, ctx.emit(Op::MatMul, {xi, cos_m})});
  }
  if (yr == kNoValue || yi == kNoValue) return kNoValue;
  Shape with_plane = ctx.type(yr).shape;
  with_plane.push_back(Dim(1));
  FUSEBOX_ASSIGN_OR_RETURN(yr, ctx.reshape(n, yr, with_plane));
  FUSEBOX_ASSIGN_OR_RETURN(yi, ctx.reshape(n, yi, with_plane));
  ValueId y = ctx.emit(Op::Concat, {yr, yi}, {{"axis", int64_t(r - 1)}});
  if (moved) y = ctx.emit(Op::Transpose, {y}, {{"perm", back}});
  if (xt.dtype != compute) y = ctx.emit(Op::Cast, {y}, {{"to", xt.dtype}});
  return y;
}

Expected<ValueId> float_input(ImportContext& ctx, OnnxNode& n, int i, const std::string& what) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, i));
  if (!is_float(ctx.type(x).dtype)) return n.error(what + " must be a float tensor, got " + ctx.type(x).to_string());
  return x;
}

Status convert_dft(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, float_input(ctx, n, 0, "input"));
  const TensorType xt = ctx.type(x);
  if (xt.rank() < 2) return n.error("input must be [..., signal, 1 or 2], got " + xt.to_string());
  bool inverse = n.attr_int("inverse", 0) != 0, onesided = n.attr_int("onesided", 0) != 0;
  // Opset 20 moved axis from an attribute (default 1) to input 2 (default -2).
  int64_t axis_value = 1;
  if (ctx.opset() >= 20) {
    axis_value = -2;
    if (n.has_input(2)) {
      FUSEBOX_ASSIGN_OR_RETURN(double a, ctx.require_scalar(n, 2, "axis"));
      axis_value = static_cast<int64_t>(a);
    }
  } else {
    axis_value = n.attr_int("axis", 1);
  }
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, axis_value, xt.rank(), "axis"));
  if (axis == xt.rank() - 1) return n.error("axis " + std::to_string(axis_value) + " is the complex axis");
  FUSEBOX_ASSIGN_OR_RETURN(int64_t length, static_size(n, xt, axis, "DFT"));
  if (n.has_input(1)) {
    FUSEBOX_ASSIGN_OR_RETURN(double l, ctx.require_scalar(n, 1, "dft_length"));
    length = static_cast<int64_t>(l);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, emit_dft(ctx, n, x, axis, length, onesided, inverse));
  return ctx.set_output(n, 0, y);
}

Status convert_stft(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, float_input(ctx, n, 0, "signal"));
  const TensorType xt = ctx.type(x);
  if (xt.rank() != 3) return n.error("signal must be [batch, length, 1 or 2], got " + xt.to_string());
  bool onesided = n.attr_int("onesided", 1) != 0;
  FUSEBOX_ASSIGN_OR_RETURN(double step_value, ctx.require_scalar(n, 1, "frame_step"));
  const int64_t step = static_cast<int64_t>(step_value);
  if (step < 1) return n.error("frame_step must be >= 1, got " + std::to_string(step));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t signal_len, static_size(n, xt, 1, "STFT"));
  std::optional<ValueId> window;
  int64_t frame = signal_len;  // ONNX's reference: the whole signal without window or frame_length
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId w, float_input(ctx, n, 2, "window"));
    if (ctx.type(w).rank() != 1) return n.error("window must be 1-D, got " + ctx.type(w).to_string());
    FUSEBOX_ASSIGN_OR_RETURN(frame, static_size(n, ctx.type(w), 0, "window"));
    if (ctx.type(w).dtype != xt.dtype) w = ctx.emit(Op::Cast, {w}, {{"to", xt.dtype}});
    window = w;
  }
  if (n.has_input(3)) {
    FUSEBOX_ASSIGN_OR_RETURN(double fl, ctx.require_scalar(n, 3, "frame_length"));
    if (window && static_cast<int64_t>(fl) != frame) {
      return n.error("frame_length " + std::to_string(static_cast<int64_t>(fl)) + " differs from the window's length " +
                     std::to_string(frame));
    }
    frame = static_cast<int64_t>(fl);
  }
  if (frame < 1 || frame > std::min(signal_len, kMaxLength)) {
    return n.error("frame_length must be in [1, min(signal length " + std::to_string(signal_len) + ", " +
                   std::to_string(kMaxLength) + ")], got " + std::to_string(frame));
  }
  const int64_t frames = 1 + (signal_len - frame) / step;
  Array idx(DType::I64, {frames, frame});
  for (int64_t f = 0; f < frames; ++f) {
    for (int64_t t = 0; t < frame; ++t) idx.set_i64(f * frame + t, f * step + t);
  }
  // [batch, frames, frame, c]
  ValueId framed = ctx.emit(Op::Gather, {x, ctx.builder().constant(idx)}, {{"axis", int64_t(1)}});
  if (window) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId w2, ctx.reshape(n, *window, Shape{Dim(frame), Dim(1)}));
    framed = ctx.emit(Op::Mul, {framed, w2});
  }
  if (framed == kNoValue) return ctx.set_output(n, 0, framed);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, emit_dft(ctx, n, framed, 2, frame, onesided, false));
  return ctx.set_output(n, 0, y);
}

// MelWeightMatrix as ONNX defines it: num_mel_bins + 2 points equally spaced on the mel scale
// between the edges, mapped to spectrogram bins floor((dft_length + 1) f / sample_rate), and a
// triangle per mel bin rising from its left point to its centre and falling to its right one.
Status convert_mel_weight_matrix(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(double mel_bins_v, ctx.require_scalar(n, 0, "num_mel_bins"));
  FUSEBOX_ASSIGN_OR_RETURN(double dft_length_v, ctx.require_scalar(n, 1, "dft_length"));
  FUSEBOX_ASSIGN_OR_RETURN(double sample_rate_v, ctx.require_scalar(n, 2, "sample_rate"));
  FUSEBOX_ASSIGN_OR_RETURN(double lower, ctx.require_scalar(n, 3, "lower_edge_hertz"));
  FUSEBOX_ASSIGN_OR_RETURN(double upper, ctx.require_scalar(n, 4, "upper_edge_hertz"));
  int64_t onnx_type = n.attr_int("output_datatype", 1);  // FLOAT
  std::optional<DType> dtype = dtype_from_onnx(static_cast<int32_t>(onnx_type));
  if (!dtype || dtype == DType::Bool) {
    return n.error("output_datatype " + std::to_string(onnx_type) + " is not a type fusebox supports");
  }
  const auto mel_bins = static_cast<int64_t>(mel_bins_v), dft_length = static_cast<int64_t>(dft_length_v);
  const auto sample_rate = static_cast<int64_t>(sample_rate_v);
  if (mel_bins < 1 || mel_bins > 65536) return n.error("num_mel_bins must be in [1, 65536], got " + std::to_string(mel_bins));
  if (dft_length < 1 || dft_length > (int64_t(1) << 20)) {
    return n.error("dft_length must be in [1, 2^20], got " + std::to_string(dft_length));
  }
  if (sample_rate < 1) return n.error("sample_rate must be >= 1, got " + std::to_string(sample_rate));
  if (!(lower >= 0 && lower <= upper)) {
    return n.error("the edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz, got " + std::to_string(lower) +
                   " and " + std::to_string(upper));
  }
  const int64_t spectrogram_bins = dft_length / 2 + 1;
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = mel(lower), step = (mel(upper) - low_mel) / double(mel_bins + 2);
  std::vector<int64_t> points(size_t(mel_bins + 2));
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    double hz = 700 * (std::pow(10.0, (double(i) * step + low_mel) / 2595) - 1);
    double bin = std::floor(double(dft_length + 1) * hz / double(sample_rate));
    if (!(bin >= 0 && bin < double(spectrogram_bins))) {
      return n.error("mel point " + std::to_string(i) + " (" + std::to_string(hz) + " Hz) falls outside the " +
                     std::to_string(spectrogram_bins) + " spectrogram bins; upper_edge_hertz is above sample_rate / 2");
    }
    points[size_t(i)] = static_cast<int64_t>(bin);
  }
  Array w(*dtype, {spectrogram_bins, mel_bins});
  w.fill_bytes(0);
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t left = points[size_t(i)], centre = points[size_t(i + 1)], right = points[size_t(i + 2)];
    if (centre == left) {
      w.set_f64(centre * mel_bins + i, 1.0);
    } else {
      for (int64_t j = left; j <= centre; ++j) w.set_f64(j * mel_bins + i, double(j - left) / double(centre - left));
    }
    for (int64_t j = centre; j < right; ++j) w.set_f64(j * mel_bins + i, double(right - j) / double(right - centre));
  }
  return ctx.set_output_constant(n, 0, std::move(w));
}

}  // namespace

void add_signal_converters(ConverterTable& table) {
  table["DFT"] = convert_dft;
  table["STFT"] = convert_stft;
  table["MelWeightMatrix"] = convert_mel_weight_matrix;
}

}  // namespace fusebox::onnx_import
