// ONNX signal and selection ops the importer decomposes (src/onnx/convert_signal.cpp,
// src/onnx/convert_topk.cpp): DFT, STFT, MelWeightMatrix, TopK, MaxPool's Indices output and
// 8-bit MaxPool. Each model runs unfused on the reference kernels, compared with values computed
// here straight from ONNX's definitions on random inputs (ties, infinities and NaN included), and
// fused on the CPU pipeline, compared with the unfused run; bad input is refused with a message
// naming the node.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportSignal, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Fused and unfused runs agree to f32 rounding (the products of DFT sum in another order).
std::vector<Array> run_both(const OnnxModel& m, const NamedArrays& inputs) {
  return run_fused_and_unfused(m, inputs, [](const Array& f, const Array& u) { return arrays_close(f, u, 1e-5, 1e-5); });
}

// Row-major strides of a shape.
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// ONNX's DFT of x ([..., c], c = 1 or 2) along `axis` with length `len`, in double.
Array expected_dft(const Array& x, int axis, int64_t len, bool onesided, bool inverse) {
  std::vector<int64_t> in_shape = x.shape(), out_shape = x.shape();
  const int64_t c = in_shape.back(), n = in_shape[size_t(axis)];
  out_shape[size_t(axis)] = onesided ? len / 2 + 1 : len;
  out_shape.back() = 2;
  Array y(x.dtype(), out_shape);
  const std::vector<int64_t> is = strides_of(in_shape), os = strides_of(out_shape);
  for (int64_t o = 0; o < y.numel(); ++o) {
    // The output's coordinates; the input's base offset is the same with the axis and c at 0.
    int64_t base = 0, k = 0, part = 0;
    for (size_t d = 0; d < out_shape.size(); ++d) {
      int64_t coord = (o / os[d]) % out_shape[d];
      if (int(d) == axis) k = coord;
      else if (d + 1 == out_shape.size()) part = coord;
      else base += coord * is[d];
    }
    double re = 0, im = 0;
    for (int64_t t = 0; t < std::min(n, len); ++t) {
      double xr = x.get_f64(base + t * is[size_t(axis)]);
      double xi = c == 2 ? x.get_f64(base + t * is[size_t(axis)] + 1) : 0.0;
      double angle = (inverse ? 2 : -2) * std::numbers::pi * double(t * k % len) / double(len);
      re += xr * std::cos(angle) - xi * std::sin(angle);
      im += xr * std::sin(angle) + xi * std::cos(angle);
    }
    double v = part == 0 ? re : im;
    y.set_f64(o, inverse ? v / double(len) : v);
  }
  return y;
}

TEST(OnnxImportSignal, DftMatchesTheDirectSum) {
  struct Case {
    std::string name;
    int64_t opset;
    std::vector<int64_t> shape;
    int64_t axis;
    std::optional<int64_t> length;
    bool onesided, inverse;
  };
  std::vector<Case> cases = {
      {"real, axis 1 moved, zero-padded to 9", 17, {2, 7, 3, 1}, 1, 9, false, false},
      {"real onesided, odd length", 17, {2, 7, 3, 1}, 1, std::nullopt, true, false},
      {"real onesided, even length", 17, {3, 10, 1}, 1, std::nullopt, true, false},
      {"complex inverse, cut to 6", 17, {3, 8, 2}, 1, 6, false, true},
      {"complex forward, axis -3 as an input (opset 20)", 20, {2, 5, 4, 2}, -3, std::nullopt, false, false},
      {"complex inverse, default axis -2 (opset 20)", 20, {2, 5, 4, 2}, -2, 12, false, true},
  };
  uint64_t seed = 101;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Array x = random_array(DType::F32, c.shape, seed++, -3, 3);
    OnnxModel m(c.opset);
    m.input("x", std::vector<OnnxDim>(c.shape.begin(), c.shape.end()));
    std::vector<std::string> inputs{"x", ""};
    if (c.length) {
      m.initializer("len", array_of_ints(DType::I64, {}, {*c.length}));
      inputs[1] = "len";
    }
    if (c.opset >= 20 && c.axis != -2) {
      m.initializer("axis", array_of_ints(DType::I64, {}, {c.axis}));
      inputs.push_back("axis");
    }
    while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
    auto& n = m.node("DFT", inputs, {"y"});
    if (c.opset < 20) set_attr(n, "axis", c.axis);
    if (c.onesided) set_attr(n, "onesided", int64_t(1));
    if (c.inverse) set_attr(n, "inverse", int64_t(1));
    m.output("y");
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    int axis = int(c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis);
    Array e = expected_dft(x, axis, c.length.value_or(c.shape[size_t(axis)]), c.onesided, c.inverse);
    EXPECT_TRUE(arrays_close(out[0], e, 1e-5, 1e-5));
  }
}

// A run-time batch size stays a symbol: one import runs at every batch.
TEST(OnnxImportSignal, DftAndStftOverARunTimeBatch) {
  OnnxModel m(17);
  m.input("x", {"N", 24, 1});
  m.initializer("step", array_of_ints(DType::I64, {}, {4}));
  m.initializer("frame", array_of_ints(DType::I64, {}, {8}));
  set_attr(m.node("DFT", {"x"}, {"spectrum"}), "axis", int64_t(1));
  m.node("STFT", {"x", "step", "", "frame"}, {"frames"});
  m.output("spectrum");
  m.output("frames");
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    Array x = random_array(DType::F32, {batch, 24, 1}, 70 + uint64_t(batch));
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(arrays_close(out[0], expected_dft(x, 1, 24, false, false), 1e-5, 1e-5));
    Array framed(DType::F32, {batch, 5, 8, 1});
    for (int64_t i = 0; i < framed.numel(); ++i) {
      int64_t b = i / 40, f = (i / 8) % 5, t = i % 8;
      framed.set_f64(i, x.get_f64(b * 24 + f * 4 + t));
    }
    EXPECT_TRUE(arrays_close(out[1], expected_dft(framed, 2, 8, true, false), 1e-5, 1e-5));
  }
}

TEST(OnnxImportSignal, StftIsTheDftOfWindowedFrames) {
  // A real signal with a window (onesided by default) and a complex one with frame_length only.
  for (bool complex : {false, true}) {
    SCOPED_TRACE(complex ? "complex, frame_length 8, step 2, two-sided" : "real, window of 10, step 6");
    const int64_t batch = complex ? 1 : 2, len = complex ? 30 : 40, frame = complex ? 8 : 10, step = complex ? 2 : 6;
    Array x = random_array(DType::F32, {batch, len, complex ? 2 : 1}, complex ? 7 : 8, -2, 2);
    Array window = random_array(DType::F32, {frame}, 9, 0.1, 1);
    OnnxModel m(17);
    m.input("x", {batch, len, complex ? 2 : 1});
    m.initializer("step", array_of_ints(DType::I64, {}, {step}));
    NamedArrays in{{"x", x}};
    if (complex) {
      m.initializer("frame", array_of_ints(DType::I64, {}, {frame}));
      set_attr(m.node("STFT", {"x", "step", "", "frame"}, {"y"}), "onesided", int64_t(0));
    } else {
      m.input("w", {frame});
      m.node("STFT", {"x", "step", "w"}, {"y"});
      in.emplace("w", window);
    }
    m.output("y");
    std::vector<Array> out = run_both(m, in);
    ASSERT_EQ(out.size(), 1u);
    // The frames, windowed, as a [batch, frames, frame, c] input of the direct DFT.
    const int64_t frames = 1 + (len - frame) / step, c = complex ? 2 : 1;
    Array framed(DType::F32, {batch, frames, frame, c});
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t f = 0; f < frames; ++f) {
        for (int64_t t = 0; t < frame; ++t) {
          for (int64_t p = 0; p < c; ++p) {
            double w = complex ? 1.0 : window.get_f64(t);
            framed.set_f64(((b * frames + f) * frame + t) * c + p, w * x.get_f64((b * len + f * step + t) * c + p));
          }
        }
      }
    }
    EXPECT_TRUE(arrays_close(out[0], expected_dft(framed, 2, frame, !complex, false), 1e-5, 1e-5));
  }
}

TEST(OnnxImportSignal, MelWeightMatrixFoldsToOnnxsTriangles) {
  const int64_t mel_bins = 10, dft_length = 64, sample_rate = 16000;
  const double lower = 100, upper = 7000;
  OnnxModel m(17);
  m.initializer("bins", array_of_ints(DType::I64, {}, {mel_bins}));
  m.initializer("len", array_of_ints(DType::I64, {}, {dft_length}));
  m.initializer("rate", array_of_ints(DType::I64, {}, {sample_rate}));
  m.initializer("lo", scalar_f32(float(lower)));
  m.initializer("hi", scalar_f32(float(upper)));
  set_attr(m.node("MelWeightMatrix", {"bins", "len", "rate", "lo", "hi"}, {"w"}), "output_datatype",
           int64_t(TP::DOUBLE));
  m.output("w");
  std::vector<Array> out = run_both(m, {});
  ASSERT_EQ(out.size(), 1u);
  // The triangles: mel points equally spaced from mel(lower) in steps of (mel(upper) - mel(lower))
  // / (bins + 2), each mapped to the spectrogram bin floor((len + 1) hz / rate).
  auto to_mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  std::vector<int64_t> point;
  for (int64_t i = 0; i < mel_bins + 2; ++i) {
    double mel = to_mel(lower) + double(i) * (to_mel(upper) - to_mel(lower)) / double(mel_bins + 2);
    double hz = 700 * (std::pow(10, mel / 2595) - 1);
    point.push_back(int64_t(std::floor(double(dft_length + 1) * hz / double(sample_rate))));
  }
  Array e(DType::F64, {dft_length / 2 + 1, mel_bins});
  for (int64_t j = 0; j < e.shape()[0]; ++j) {
    for (int64_t i = 0; i < mel_bins; ++i) {
      int64_t l = point[size_t(i)], c = point[size_t(i + 1)], r = point[size_t(i + 2)];
      double v = 0;
      if (j >= l && j <= c) v = c == l ? (j == c ? 1.0 : 0.0) : double(j - l) / double(c - l);
      if (j >= c && j < r) v = double(r - j) / double(r - c);
      e.set_f64(j * mel_bins + i, v);
    }
  }
  EXPECT_TRUE(arrays_close(out[0], e, 0, 1e-12));
}

// TopK along `axis` as a stable sort would give it: ties in index order, NaN first.
std::pair<Array, Array> expected_topk(const Array& x, int axis, int64_t k, bool largest) {
  std::vector<int64_t> shape = x.shape();
  const int64_t n = shape[size_t(axis)];
  shape[size_t(axis)] = k;
  Array values(x.dtype(), shape), indices(DType::I64, shape);
  const std::vector<int64_t> xs = strides_of(x.shape()), os = strides_of(shape);
  const int64_t xstep = xs[size_t(axis)], ostep = os[size_t(axis)];
  for (int64_t o = 0; o < values.numel(); ++o) {
    if ((o / ostep) % k != 0) continue;  // one pass per line, from its first output element
    int64_t base = 0;
    for (size_t d = 0; d < shape.size(); ++d) base += ((o / os[d]) % shape[d]) * xs[d];
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    auto at = [&](int64_t i) { return x.get_f64(base + i * xstep); };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      double va = at(a), vb = at(b);
      if (std::isnan(va) || std::isnan(vb)) return std::isnan(va) && !std::isnan(vb);
      return largest ? va > vb : va < vb;
    });
    for (int64_t r = 0; r < k; ++r) {
      values.set_f64(o + r * ostep, at(order[size_t(r)]));
      indices.set_i64(o + r * ostep, order[size_t(r)]);
    }
  }
  return {values, indices};
}

OnnxModel topk_model(int64_t opset, DType dtype, const std::vector<int64_t>& shape, int64_t axis, int64_t k,
                     bool largest) {
  OnnxModel m(opset);
  m.input("x", onnx_type_of(dtype), std::vector<OnnxDim>(shape.begin(), shape.end()));
  std::vector<std::string> in{"x"};
  if (opset >= 10) {
    m.initializer("k", array_of_ints(DType::I64, {1}, {k}));
    in.push_back("k");
  }
  auto& n = m.node("TopK", in, {"values", "indices"}, "topk");
  set_attr(n, "axis", axis);
  if (opset < 10) set_attr(n, "k", k);
  if (opset >= 11) set_attr(n, "largest", int64_t(largest));
  m.output("values");
  m.output("indices");
  return m;
}

TEST(OnnxImportSignal, TopKKeepsIndexOrderOnTies) {
  // Small integers as floats (many ties), with infinities and a NaN among them.
  Array x = random_array(DType::F32, {4, 9}, 41, -3, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::trunc(x.get_f64(i)));
  x.set_f64(2, -kInf), x.set_f64(5, -kInf), x.set_f64(11, kInf), x.set_f64(20, kNaN), x.set_f64(30, -kInf);
  struct Case {
    int64_t opset;
    DType dtype;
    int64_t axis, k;
    bool largest;
  };
  std::vector<Case> cases = {
      {11, DType::F32, 1, 9, true},  {11, DType::F32, 1, 9, false}, {11, DType::F32, 0, 3, false},
      {10, DType::F32, -1, 4, true}, {9, DType::F32, 0, 2, true},   {11, DType::F64, 1, 6, false},
      {11, DType::I32, 1, 5, true},  {11, DType::F16, 0, 4, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("opset " + std::to_string(c.opset) + " " + std::string(dtype_name(c.dtype)) + " axis " +
                 std::to_string(c.axis) + " k " + std::to_string(c.k) + (c.largest ? " largest" : " smallest"));
    Array xc(c.dtype, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = x.get_f64(i);
      xc.set_f64(i, c.dtype == DType::I32 && !std::isfinite(v) ? (std::isnan(v) ? 7 : v > 0 ? 9 : -9) : v);
    }
    std::vector<Array> out = run_both(topk_model(c.opset, c.dtype, {4, 9}, c.axis, c.k, c.largest), {{"x", xc}});
    ASSERT_EQ(out.size(), 2u);
    auto [values, indices] = expected_topk(xc, int(c.axis < 0 ? c.axis + 2 : c.axis), c.k, c.largest);
    EXPECT_TRUE(arrays_close(out[0], values, 0, 0));
    EXPECT_EQ(to_ints(out[1]), to_ints(indices));
  }
  // i64 keeps every bit, the extremes included.
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Array xi = array_of_ints(DType::I64, {2, 5}, {hi, 3, lo, hi - 1, 3, lo, (int64_t(1) << 60) + 1, int64_t(1) << 60, lo, 0});
  for (bool largest : {true, false}) {
    SCOPED_TRACE(largest ? "i64 largest" : "i64 smallest");
    std::vector<Array> out = run_both(topk_model(11, DType::I64, {2, 5}, 1, 5, largest), {{"x", xi}});
    ASSERT_EQ(out.size(), 2u);
    std::vector<int64_t> v = to_ints(out[0]), want = largest ? std::vector<int64_t>{hi, hi - 1, 3, 3, lo}
                                                            : std::vector<int64_t>{lo, 3, 3, hi - 1, hi};
    EXPECT_EQ(std::vector<int64_t>(v.begin(), v.begin() + 5), want);
    std::vector<int64_t> second = largest ? std::vector<int64_t>{(int64_t(1) << 60) + 1, int64_t(1) << 60, 0, lo, lo}
                                          : std::vector<int64_t>{lo, lo, 0, int64_t(1) << 60, (int64_t(1) << 60) + 1};
    EXPECT_EQ(std::vector<int64_t>(v.begin() + 5, v.end()), second);
    std::vector<int64_t> idx = to_ints(out[1]);
    EXPECT_EQ(std::vector<int64_t>(idx.begin() + 5, idx.end()),
              largest ? std::vector<int64_t>({1, 2, 4, 0, 3}) : std::vector<int64_t>({0, 3, 4, 2, 1}));
  }
}

// MaxPool as ONNX's reference computes it: the first strictly greater element of each window
// (pads skipped), its flattened index row-major or (storage_order 1) column-major over H, W.
struct Pool {
  std::vector<int64_t> kernel, stride{1, 1}, pads{0, 0, 0, 0}, dilation{1, 1};
  bool ceil = false;
  int64_t storage_order = 0;
};

std::pair<Array, Array> expected_max_pool(const Array& x, const Pool& p) {
  const int64_t nc = x.shape()[0] * x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  int64_t out[2];
  for (int i = 0; i < 2; ++i) {
    int64_t in = i == 0 ? h : w, span = (p.kernel[i] - 1) * p.dilation[i] + 1;
    int64_t room = in + p.pads[i] + p.pads[i + 2] - span;
    out[i] = (p.ceil ? (room + p.stride[i] - 1) / p.stride[i] : room / p.stride[i]) + 1;
    if (p.ceil && (out[i] - 1) * p.stride[i] >= in + p.pads[i]) --out[i];
  }
  Array y(x.dtype(), {x.shape()[0], x.shape()[1], out[0], out[1]}), idx(DType::I64, y.shape());
  for (int64_t c = 0; c < nc; ++c) {
    for (int64_t oh = 0; oh < out[0]; ++oh) {
      for (int64_t ow = 0; ow < out[1]; ++ow) {
        double best = 0;
        int64_t at = -1;
        for (int64_t i = 0; i < p.kernel[0]; ++i) {
          for (int64_t j = 0; j < p.kernel[1]; ++j) {
            int64_t r = oh * p.stride[0] - p.pads[0] + i * p.dilation[0];
            int64_t q = ow * p.stride[1] - p.pads[1] + j * p.dilation[1];
            if (r < 0 || r >= h || q < 0 || q >= w) continue;
            double v = x.get_f64(c * h * w + r * w + q);
            // fusebox's max_pool2d lets NaN win (ONNX's reference keeps a NaN only when it comes
            // first): the first NaN of a window is its maximum.
            if (at < 0 || (!std::isnan(best) && (std::isnan(v) || v > best))) {
              best = v, at = p.storage_order == 0 ? r * w + q : r + q * h;
            }
          }
        }
        y.set_f64((c * out[0] + oh) * out[1] + ow, best);
        idx.set_i64((c * out[0] + oh) * out[1] + ow, c * h * w + at);
      }
    }
  }
  return {y, idx};
}

OnnxModel max_pool_model(DType dtype, const std::vector<OnnxDim>& shape, const Pool& p, bool with_indices) {
  OnnxModel m(12);
  m.input("x", onnx_type_of(dtype), shape);
  std::vector<std::string> outs{"y"};
  if (with_indices) outs.push_back("i");
  auto& n = m.node("MaxPool", {"x"}, outs, "pool");
  set_attr(n, "kernel_shape", p.kernel);
  set_attr(n, "strides", p.stride);
  set_attr(n, "pads", p.pads);
  set_attr(n, "dilations", p.dilation);
  set_attr(n, "ceil_mode", int64_t(p.ceil));
  set_attr(n, "storage_order", p.storage_order);
  for (const std::string& o : outs) m.output(o);
  return m;
}

TEST(OnnxImportSignal, MaxPoolIndicesPickTheFirstMaximum) {
  // Small integers (ties in most windows) and a -inf.
  Array x = random_array(DType::F32, {2, 3, 7, 6}, 51, -2, 2);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, std::trunc(x.get_f64(i)));
  x.set_f64(8, -kInf);
  std::vector<Pool> pools = {
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, false, 0},
      {{2, 3}, {1, 2}, {0, 1, 1, 0}, {2, 1}, true, 1},
      {{5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, false, 1},
      {{1, 1}, {3, 2}, {0, 0, 0, 0}, {1, 1}, true, 0},
  };
  for (const Pool& p : pools) {
    SCOPED_TRACE("kernel " + std::to_string(p.kernel[0]) + "x" + std::to_string(p.kernel[1]) + " storage_order " +
                 std::to_string(p.storage_order));
    std::vector<Array> out = run_both(max_pool_model(DType::F32, {2, 3, 7, 6}, p, true), {{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    auto [y, idx] = expected_max_pool(x, p);
    EXPECT_TRUE(arrays_close(out[0], y, 0, 0));
    EXPECT_EQ(out[1].shape(), idx.shape());
    EXPECT_EQ(to_ints(out[1]), to_ints(idx));
  }
}

// A window holding NaN: max_pool2d's reference kernel lets NaN win, and Indices points at the
// window's first NaN. (Only the unfused run: the fused CPU pool does not propagate NaN.)
TEST(OnnxImportSignal, MaxPoolIndicesOfANanWindow) {
  Array x = random_array(DType::F32, {1, 2, 5, 5}, 53, -2, 2);
  x.set_f64(7, kNaN), x.set_f64(33, kNaN), x.set_f64(34, kNaN);
  Pool p{{3, 3}, {2, 2}, {1, 1, 1, 1}};
  std::vector<Array> out = import_and_run(max_pool_model(DType::F32, {1, 2, 5, 5}, p, true), {{"x", x}});
  ASSERT_EQ(out.size(), 2u);
  auto [y, idx] = expected_max_pool(x, p);
  EXPECT_TRUE(arrays_close(out[0], y, 0, 0));
  EXPECT_EQ(to_ints(out[1]), to_ints(idx));
}

TEST(OnnxImportSignal, MaxPoolOverEightBitIntegers) {
  Pool p{{3, 2}, {2, 1}, {1, 0, 1, 1}};
  for (DType dt : {DType::U8, DType::I8}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Array x = random_array(dt, {1, 2, 6, 5}, 61, dt == DType::U8 ? 0 : -128, dt == DType::U8 ? 256 : 128);
    std::vector<Array> out = run_both(max_pool_model(dt, {1, 2, 6, 5}, p, true), {{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    auto [y, idx] = expected_max_pool(x, p);
    EXPECT_EQ(out[0].dtype(), dt);
    EXPECT_TRUE(out[0].same_data(y));
    EXPECT_EQ(to_ints(out[1]), to_ints(idx));
  }
}

TEST(OnnxImportSignal, RefusalsNameTheNodeAndTheReason) {
  auto refused = [](const OnnxModel& m, const std::string& part) {
    std::string e = import_error(m);
    EXPECT_CONTAINS(e, part);
    return e;
  };
  // TopK: k above the bound, above the axis size, a run-time axis size.
  std::string e = refused(topk_model(11, DType::F32, {2, 100}, 1, 65, true), "k = 65 is above 64");
  EXPECT_CONTAINS(e, "TopK node 'topk'");
  refused(topk_model(11, DType::F32, {2, 5}, 1, 6, true), "k = 6 must be in [1, 5]");
  OnnxModel dynamic(11);
  dynamic.input("x", {2, "N"});
  dynamic.initializer("k", array_of_ints(DType::I64, {1}, {2}));
  dynamic.node("TopK", {"x", "k"}, {"v", "i"}, "topk");
  dynamic.output("v");
  refused(dynamic, "needs a static size along axis 1");

  // DFT: a length above 4096, onesided complex input, the complex axis as the transform axis.
  auto dft = [](int64_t length, int64_t complex_dim, int64_t axis, bool onesided) {
    OnnxModel m(17);
    m.input("x", {2, 8, complex_dim});
    m.initializer("len", array_of_ints(DType::I64, {}, {length}));
    auto& n = m.node("DFT", {"x", "len"}, {"y"}, "dft");
    set_attr(n, "axis", axis);
    set_attr(n, "onesided", int64_t(onesided));
    m.output("y");
    return m;
  };
  e = refused(dft(5000, 1, 1, false), "the transform length must be in [1, 4096], got 5000");
  EXPECT_CONTAINS(e, "DFT node 'dft'");
  refused(dft(8, 2, 1, true), "onesided = 1 is supported for the forward transform of a real input only");
  refused(dft(8, 2, 2, false), "axis 2 is the complex axis");

  // STFT: a zero step.
  OnnxModel stft(17);
  stft.input("x", {1, 32, 1});
  stft.initializer("step", array_of_ints(DType::I64, {}, {0}));
  stft.initializer("frame", array_of_ints(DType::I64, {}, {8}));
  stft.node("STFT", {"x", "step", "", "frame"}, {"y"}, "stft");
  stft.output("y");
  refused(stft, "STFT node 'stft': frame_step must be >= 1, got 0");

  // MelWeightMatrix: an upper edge above the Nyquist frequency; a size not known at import.
  auto mel = [](double upper, bool bins_as_input) {
    OnnxModel m(17);
    if (bins_as_input) m.input("bins", TP::INT64, {});
    else m.initializer("bins", array_of_ints(DType::I64, {}, {8}));
    m.initializer("len", array_of_ints(DType::I64, {}, {16}));
    m.initializer("rate", array_of_ints(DType::I64, {}, {8000}));
    m.initializer("lo", scalar_f32(0));
    m.initializer("hi", scalar_f32(float(upper)));
    m.node("MelWeightMatrix", {"bins", "len", "rate", "lo", "hi"}, {"w"}, "mel");
    m.output("w");
    return m;
  };
  refused(mel(9000, false), "upper_edge_hertz is above sample_rate / 2");
  e = refused(mel(4000, true), "num_mel_bins");
  EXPECT_CONTAINS(e, "MelWeightMatrix node 'mel'");

  // MaxPool Indices over a run-time batch size.
  refused(max_pool_model(DType::F32, {"N", 1, 4, 4}, Pool{{2, 2}}, true), "output 'Indices' needs a static input shape");
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
