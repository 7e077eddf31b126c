// ONNX GridSample, RoiAlign, MaxUnpool (src/onnx/convert_spatial.cpp) and the Resize modes written
// as gathers (src/onnx/convert_resize.cpp): each model runs unfused on the reference kernels and
// fused on the CPU pipeline, both compared with values computed here, point by point, from ONNX's
// definition. Inputs are random (fixed seeds); each executable first runs on NaN inputs, so that
// an output element a later run does not write shows as NaN.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportSpatial, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

Array nan_like(const Array& a) {
  Array p(a.dtype(), a.shape());
  if (is_float(a.dtype()))
    p.fill_bytes(0xFF);
  else
    std::memcpy(p.raw(), a.raw(), a.nbytes());
  return p;
}

// Output 0 of the model, unfused (reference) and fused (cpu), each after a run on NaN float inputs.
std::array<Array, 2> run_both(const OnnxModel& m, const NamedArrays& inputs) {
  Graph g = import_model(m);
  std::array<Array, 2> out;
  NamedArrays poison;
  for (const auto& [name, a] : inputs) poison.emplace(name, nan_like(a));
  for (int fused = 0; fused < 2; ++fused) {
    CompileOptions options;
    if (fused) {
      use_backend(options, kCpu);
    } else {
      options.fuse = false;
      options.backend = "reference";
    }
    Expected<Executable> exe = Session().compile(g, options);
    EXPECT_TRUE(exe.has_value()) << exe.status().to_string();
    if (!exe) return out;
    (void)exe->run(poison);
    Expected<std::vector<Array> > r = exe->run(inputs);
    EXPECT_TRUE(r.has_value()) << r.status().to_string();
    if (r && !r->empty()) out[size_t(fused)] = (*r)[0];
  }
  return out;
}

void expect_both_close(const std::array<Array, 2>& got, const Array& want, const std::string& what) {
  for (int k = 0; k < 2; ++k) {
    ASSERT_EQ(got[size_t(k)].shape(), want.shape()) << what;
    EXPECT_TRUE(arrays_close(got[size_t(k)], want, 1e-4, 1e-5)) << what << (k ? " (fused)" : " (unfused)");
  }
}

// ---- GridSample ----------------------------------------------------------------------------

double cubic(double d, double a = -0.75) {
  d = std::abs(d);
  if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

double reflect(double v, double lo, double hi) {
  double range = hi - lo;
  if (v >= lo && v <= hi) return v;
  if (range <= 0) return lo;
  double dx = v < lo ? lo - v : v - hi;
  double k = std::floor(dx / range), r = dx - k * range;
  bool even = std::fmod(k, 2.0) == 0;
  return (v < lo) == even ? lo + r : hi - r;
}

// ONNX GridSample of one [H, W] plane at grid point (gx, gy).
double grid_sample_at(const float* plane, int64_t h, int64_t w, double gx, double gy, const std::string& mode,
                      const std::string& padding, bool align) {
  auto unnormalise = [&](double g, int64_t size) {
    return align ? (g + 1) / 2 * double(size - 1) : ((g + 1) * double(size) - 1) / 2;
  };
  auto inside = [&](double v, int64_t size) {
    double lo = align ? 0 : -0.5, hi = align ? double(size - 1) : double(size) - 0.5;
    if (mode == "nearest") v = std::nearbyint(v);
    if (v < lo || v > hi) {
      if (padding == "border") v = std::clamp(v, 0.0, double(size - 1));
      if (padding == "reflection") v = reflect(v, lo, hi);
    }
    return v;
  };
  auto pixel = [&](int64_t iy, int64_t ix) -> double {
    auto fix = [&](int64_t i, int64_t size, bool& zero) {
      if (padding == "zeros") zero |= i < 0 || i >= size;
      if (padding == "border") return std::clamp<int64_t>(i, 0, size - 1);
      if (padding == "reflection") {
        double lo = align ? 0 : -0.5, hi = align ? double(size - 1) : double(size) - 0.5;
        return std::clamp<int64_t>(int64_t(reflect(double(i), lo, hi)), 0, size - 1);
      }
      return i;
    };
    bool zero = false;
    iy = fix(iy, h, zero), ix = fix(ix, w, zero);
    return zero ? 0.0 : plane[iy * w + ix];
  };
  double x = inside(unnormalise(gx, w), w), y = inside(unnormalise(gy, h), h);
  if (mode == "nearest") return pixel(int64_t(y), int64_t(x));
  const int taps = mode == "bilinear" ? 2 : 4, first = mode == "bilinear" ? 0 : -1;
  double fx = std::floor(x), fy = std::floor(y), sum = 0;
  for (int i = 0; i < taps; ++i) {
    for (int j = 0; j < taps; ++j) {
      double dy = y - (fy + first + i), dx = x - (fx + first + j);
      double wy = taps == 2 ? 1 - std::abs(dy) : cubic(dy), wx = taps == 2 ? 1 - std::abs(dx) : cubic(dx);
      sum += wy * wx * pixel(int64_t(fy) + first + i, int64_t(fx) + first + j);
    }
  }
  return sum;
}

TEST(OnnxImportSpatial, GridSampleMatchesItsDefinitionInEveryMode) {
  const int64_t n = 2, c = 3, h = 5, w = 4, ho = 3, wo = 6;
  Array x = random_array(DType::F32, {n, c, h, w}, 11);
  Array grid = random_array(DType::F32, {n, ho, wo, 2}, 12, -1.4, 1.4);
  grid.data<float>()[0] = -1.0f, grid.data<float>()[1] = 1.0f;  // the corners exactly
  for (const char* mode : {"bilinear", "nearest", "bicubic"}) {
    for (const char* padding : {"zeros", "border", "reflection"}) {
      for (int64_t align : {0, 1}) {
        OnnxModel m(16);
        m.input("x", {n, c, h, w});
        m.input("grid", {n, ho, wo, 2});
        auto& node = m.node("GridSample", {"x", "grid"}, {"y"}, "gs");
        set_attr(node, "mode", mode);
        set_attr(node, "padding_mode", padding);
        set_attr(node, "align_corners", align);
        m.output("y");
        Array want(DType::F32, {n, c, ho, wo});
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t ch = 0; ch < c; ++ch) {
            for (int64_t p = 0; p < ho * wo; ++p) {
              const float* g = grid.data<float>() + (b * ho * wo + p) * 2;
              want.data<float>()[(b * c + ch) * ho * wo + p] = float(grid_sample_at(
                  x.data<float>() + (b * c + ch) * h * w, h, w, g[0], g[1], mode, padding, align != 0));
            }
          }
        }
        expect_both_close(run_both(m, {{"x", x}, {"grid", grid}}), want,
                          std::string(mode) + " " + padding + " align_corners " + std::to_string(align));
      }
    }
  }
}

// ---- RoiAlign ------------------------------------------------------------------------------

// ONNX's RoiAlign, point by point.
Array roi_align_direct(const Array& x, const Array& rois, const std::vector<int64_t>& batch, int64_t oh,
                       int64_t ow, int64_t ratio, double scale, bool half, bool max_mode) {
  const int64_t c = x.shape()[1], h = x.shape()[2], w = x.shape()[3], r = rois.shape()[0];
  Array y(DType::F32, {r, c, oh, ow});
  for (int64_t i = 0; i < r; ++i) {
    const double off = half ? 0.5 : 0.0;
    double x0 = rois.get_f64(4 * i) * scale - off, y0 = rois.get_f64(4 * i + 1) * scale - off;
    double rw = rois.get_f64(4 * i + 2) * scale - off - x0, rh = rois.get_f64(4 * i + 3) * scale - off - y0;
    if (!half) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    double bh = rh / double(oh), bw = rw / double(ow);
    int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / double(oh)));
    int64_t gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / double(ow)));
    double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* plane = x.data<float>() + (batch[size_t(i)] * c + ch) * h * w;
      for (int64_t ph = 0; ph < oh; ++ph) {
        for (int64_t pw = 0; pw < ow; ++pw) {
          double acc = 0;
          bool any = false;
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              double yy = y0 + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
              double xx = x0 + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
              std::array<double, 4> v{0, 0, 0, 0};
              if (!(yy < -1.0 || yy > double(h) || xx < -1.0 || xx > double(w))) {
                yy = std::max(yy, 0.0), xx = std::max(xx, 0.0);
                int64_t yl = int64_t(yy), xl = int64_t(xx), yh, xh;
                if (yl >= h - 1)
                  yh = yl = h - 1, yy = double(yl);
                else
                  yh = yl + 1;
                if (xl >= w - 1)
                  xh = xl = w - 1, xx = double(xl);
                else
                  xh = xl + 1;
                double ly = yy - double(yl), lx = xx - double(xl);
                v = {(1 - ly) * (1 - lx) * plane[yl * w + xl], (1 - ly) * lx * plane[yl * w + xh],
                     ly * (1 - lx) * plane[yh * w + xl], ly * lx * plane[yh * w + xh]};
              }
              if (max_mode) {
                double best = *std::max_element(v.begin(), v.end());
                acc = any ? std::max(acc, best) : best;
                any = true;
              } else {
                acc += v[0] + v[1] + v[2] + v[3];
              }
            }
          }
          y.data<float>()[((i * c + ch) * oh + ph) * ow + pw] = float(max_mode ? acc : acc / count);
        }
      }
    }
  }
  return y;
}

Array random_rois(int64_t r, uint64_t seed, double extent) {
  Array a = random_array(DType::F32, {r, 4}, seed, -1.0, extent);
  for (int64_t i = 0; i < r; ++i) {  // x1 <= x2, y1 <= y2 (one roi crosses the image's edge)
    float* p = a.data<float>() + 4 * i;
    if (p[0] > p[2]) std::swap(p[0], p[2]);
    if (p[1] > p[3]) std::swap(p[1], p[3]);
  }
  return a;
}

TEST(OnnxImportSpatial, RoiAlignMatchesItsDefinition) {
  const int64_t n = 2, c = 3, h = 7, w = 9, r = 4, oh = 3, ow = 2;
  Array x = random_array(DType::F32, {n, c, h, w}, 21);
  Array rois = random_rois(r, 22, 10.0);
  std::vector<int64_t> batch{1, 0, 1, 1};
  for (const char* mode : {"avg", "max"}) {
    for (const char* coord : {"half_pixel", "output_half_pixel"}) {
      for (bool constant_rois : {false, true}) {
        const int64_t ratio = constant_rois ? 0 : 2;
        OnnxModel m(16);
        m.input("x", {n, c, h, w});
        if (constant_rois)
          m.initializer("rois", rois);
        else
          m.input("rois", {r, 4});
        m.input("b", TP::INT64, {r});
        auto& node = m.node("RoiAlign", {"x", "rois", "b"}, {"y"}, "roi");
        set_attr(node, "mode", mode);
        set_attr(node, "coordinate_transformation_mode", coord);
        set_attr(node, "output_height", oh);
        set_attr(node, "output_width", ow);
        set_attr(node, "sampling_ratio", ratio);
        set_attr(node, "spatial_scale", 0.75f);
        m.output("y");
        NamedArrays in{{"x", x}, {"b", i64s(batch)}};
        if (!constant_rois) in.emplace("rois", rois);
        Array want = roi_align_direct(x, rois, batch, oh, ow, ratio, 0.75, coord == std::string("half_pixel"),
                                      mode == std::string("max"));
        expect_both_close(run_both(m, in), want,
                          std::string(mode) + " " + coord + " sampling_ratio " + std::to_string(ratio));
      }
    }
  }
}

TEST(OnnxImportSpatial, RunTimeBatchAndRoiCounts) {
  // N and the roi count as symbols: one import runs at every size.
  OnnxModel m(16);
  m.input("x", {"N", 2, 5, 6});
  m.input("grid", {"N", 3, 4, 2});
  m.input("rois", {"R", 4});
  m.input("b", TP::INT64, {"R"});
  set_attr(m.node("GridSample", {"x", "grid"}, {"g"}, "gs"), "mode", "bicubic");
  auto& roi = m.node("RoiAlign", {"x", "rois", "b"}, {"r"}, "roi");
  set_attr(roi, "sampling_ratio", int64_t(2));
  set_attr(roi, "output_height", int64_t(2));
  set_attr(roi, "output_width", int64_t(3));
  m.output("g");
  m.output("r");
  Graph g = import_model(m);
  for (int64_t n : {1, 3}) {
    Array x = random_array(DType::F32, {n, 2, 5, 6}, 51 + uint64_t(n));
    Array grid = random_array(DType::F32, {n, 3, 4, 2}, 52, -1.2, 1.2);
    Array rois = random_rois(n + 1, 53, 6.0);
    std::vector<int64_t> batch(size_t(n + 1));
    for (int64_t i = 0; i <= n; ++i) batch[size_t(i)] = i % n;
    Expected<Executable> exe = Session().compile(g);
    ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
    Expected<std::vector<Array> > out =
        exe->run({{"x", x}, {"grid", grid}, {"rois", rois}, {"b", i64s(batch)}});
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    Array want_g(DType::F32, {n, 2, 3, 4});
    for (int64_t p = 0; p < n * 2; ++p) {
      for (int64_t k = 0; k < 12; ++k) {
        const float* at = grid.data<float>() + ((p / 2) * 12 + k) * 2;
        want_g.data<float>()[p * 12 + k] =
            float(grid_sample_at(x.data<float>() + p * 30, 5, 6, at[0], at[1], "bicubic", "zeros", false));
      }
    }
    EXPECT_TRUE(arrays_close((*out)[0], want_g, 1e-4, 1e-5)) << "GridSample, N = " << n;
    EXPECT_TRUE(
        arrays_close((*out)[1], roi_align_direct(x, rois, batch, 2, 3, 2, 1.0, true, false), 1e-4, 1e-5))
        << "RoiAlign, N = " << n;
  }
}

// ---- MaxUnpool -----------------------------------------------------------------------------

TEST(OnnxImportSpatial, MaxUnpoolScattersToMaxPoolIndices) {
  // A 2x2, stride 2 max pool of a random [2, 2, 4, 6] image gives values and flat indices.
  const int64_t n = 2, c = 2, h = 4, w = 6, ph = 2, pw = 3;
  Array image = random_array(DType::F32, {n, c, h, w}, 31);
  Array vals(DType::F32, {n, c, ph, pw}), idx(DType::I64, {n, c, ph, pw});
  for (int64_t p = 0; p < n * c; ++p) {
    for (int64_t i = 0; i < ph; ++i) {
      for (int64_t j = 0; j < pw; ++j) {
        int64_t best = p * h * w + 2 * i * w + 2 * j;
        for (int64_t a = 0; a < 2; ++a) {
          for (int64_t b = 0; b < 2; ++b) {
            int64_t at = p * h * w + (2 * i + a) * w + 2 * j + b;
            if (image.data<float>()[at] > image.data<float>()[best]) best = at;
          }
        }
        vals.data<float>()[(p * ph + i) * pw + j] = image.data<float>()[best];
        idx.data<int64_t>()[(p * ph + i) * pw + j] = best;
      }
    }
  }
  for (bool with_shape : {false, true}) {
    OnnxModel m(11);
    m.input("x", {n, c, ph, pw});
    m.input("i", TP::INT64, {n, c, ph, pw});
    if (with_shape) m.initializer("shape", i64s({n, c, h + 1, w + 2}));
    auto& node =
        m.node("MaxUnpool",
               with_shape ? std::vector<std::string>{"x", "i", "shape"} : std::vector<std::string>{"x", "i"},
               {"y"}, "unpool");
    set_attr(node, "kernel_shape", std::vector<int64_t>{2, 2});
    set_attr(node, "strides", std::vector<int64_t>{2, 2});
    m.output("y");
    // The values at their positions, zeros elsewhere; output_shape pads the end of each axis.
    const int64_t oh = with_shape ? h + 1 : h, ow = with_shape ? w + 2 : w;
    Array want(DType::F32, {n, c, oh, ow});
    want.fill_bytes(0);
    for (int64_t k = 0; k < vals.numel(); ++k) {
      int64_t at = idx.data<int64_t>()[k], p = at / (h * w), yx = at % (h * w);
      want.data<float>()[(p * oh + yx / w) * ow + yx % w] = vals.data<float>()[k];
    }
    expect_both_close(run_both(m, {{"x", vals}, {"i", idx}}), want,
                      with_shape ? "with output_shape" : "without");
  }
}

// ---- Resize modes written as gathers --------------------------------------------------------

// ONNX's reference resize of a [H, W] plane, separable: per axis the source coordinate by
// `coord`, then nearest (round_prefer_floor), linear (clamped) or cubic (edge taps, a = -0.75).
Array resize_direct(const Array& x, int64_t oh, int64_t ow,
                    const std::function<double(int axis, int64_t o)>& source, const std::string& mode,
                    const std::function<bool(int axis, int64_t o)>& inside, double extrapolation) {
  const int64_t h = x.shape()[2], w = x.shape()[3];
  auto taps = [&](int axis, int64_t o, int64_t size) {
    std::vector<std::pair<int64_t, double> > t;
    double s = source(axis, o);
    auto clamp = [&](int64_t i) { return std::clamp<int64_t>(i, 0, size - 1); };
    if (mode == "nearest") {
      double f = std::floor(s);
      t.push_back({clamp(int64_t(s - f == 0.5 ? f : std::round(s))), 1.0});
    } else if (mode == "linear") {
      s = std::clamp(s, 0.0, double(size - 1));
      double f = std::floor(s);
      t = {{clamp(int64_t(f)), 1 - (s - f)}, {clamp(int64_t(f) + 1), s - f}};
    } else {
      double f = std::floor(s);
      for (int k = -1; k <= 2; ++k) t.push_back({clamp(int64_t(f) + k), cubic(s - (f + k))});
    }
    return t;
  };
  Array y(DType::F32, {1, 1, oh, ow});
  for (int64_t i = 0; i < oh; ++i) {
    for (int64_t j = 0; j < ow; ++j) {
      double v = 0;
      for (auto [yi, wy] : taps(0, i, h)) {
        for (auto [xj, wx] : taps(1, j, w)) v += wy * wx * x.data<float>()[yi * w + xj];
      }
      y.data<float>()[i * ow + j] = float(inside(0, i) && inside(1, j) ? v : extrapolation);
    }
  }
  return y;
}

TEST(OnnxImportSpatial, ResizeCoordinateModesWrittenAsGathers) {
  Array x = random_array(DType::F32, {1, 1, 5, 7}, 41);
  auto always = [](int, int64_t) { return true; };
  {  // tf_crop_and_resize, linear, sizes [4, 6]: roi [0.2, 0.1] .. [0.9, 1.2], extrapolation 10
    OnnxModel m(13);
    m.input("x", {1, 1, 5, 7});
    m.initializer("roi", f32s({0, 0, 0.2f, 0.1f, 1, 1, 0.9f, 1.2f}));
    m.initializer("sizes", i64s({1, 1, 4, 6}));
    auto& node = m.node("Resize", {"x", "roi", "", "sizes"}, {"y"}, "crop");
    set_attr(node, "mode", "linear");
    set_attr(node, "coordinate_transformation_mode", "tf_crop_and_resize");
    set_attr(node, "extrapolation_value", 10.0f);
    m.output("y");
    const double start[2] = {0.2f, 0.1f}, end[2] = {0.9f, 1.2f}, in[2] = {5, 7}, out[2] = {4, 6};
    auto source = [&](int a, int64_t o) {
      return start[a] * (in[a] - 1) + double(o) * (end[a] - start[a]) * (in[a] - 1) / (out[a] - 1);
    };
    auto inside = [&](int a, int64_t o) { return source(a, o) >= 0 && source(a, o) <= in[a] - 1; };
    expect_both_close(run_both(m, {{"x", x}}), resize_direct(x, 4, 6, source, "linear", inside, 10.0),
                      "tf_crop_and_resize");
  }
  {  // tf_half_pixel_for_nn, nearest, sizes [3, 10]
    OnnxModel m(13);
    m.input("x", {1, 1, 5, 7});
    m.initializer("sizes", i64s({1, 1, 3, 10}));
    auto& node = m.node("Resize", {"x", "", "", "sizes"}, {"y"}, "nn");
    set_attr(node, "coordinate_transformation_mode", "tf_half_pixel_for_nn");
    m.output("y");
    auto source = [](int a, int64_t o) { return (double(o) + 0.5) / (a == 0 ? 3.0 / 5.0 : 10.0 / 7.0); };
    expect_both_close(run_both(m, {{"x", x}}), resize_direct(x, 3, 10, source, "nearest", always, 0),
                      "tf_half_pixel_for_nn");
  }
  for (const char* mode : {"linear", "cubic"}) {  // align_corners, scales 0.6: divides by in * 0.6 - 1
    OnnxModel m(13);
    m.input("x", {1, 1, 5, 7});
    m.initializer("scales", f32s({1, 1, 0.6f, 0.6f}));
    auto& node = m.node("Resize", {"x", "", "scales"}, {"y"}, "ac");
    set_attr(node, "mode", mode);
    set_attr(node, "coordinate_transformation_mode", "align_corners");
    m.output("y");
    auto source = [](int a, int64_t o) {
      double in = a == 0 ? 5 : 7, len = in * double(0.6f);
      return double(o) * (in - 1) / (len - 1);
    };
    expect_both_close(run_both(m, {{"x", x}}), resize_direct(x, 3, 4, source, mode, always, 0),
                      std::string("align_corners ") + mode);
  }
}

// ---- refusals ------------------------------------------------------------------------------

TEST(OnnxImportSpatial, RefusalsNameTheNodeAndTheReason) {
  {
    OnnxModel m(16);
    m.input("x", {1, 1, 4, 4});
    m.input("grid", {1, 2, 2, 2});
    set_attr(m.node("GridSample", {"x", "grid"}, {"y"}, "gs"), "mode", "lanczos");
    m.output("y");
    std::string e = import_error(m);
    EXPECT_CONTAINS(e, "GridSample node 'gs'");
    EXPECT_CONTAINS(e, "'mode' = \"lanczos\"");
  }
  {
    OnnxModel m(16);
    m.input("x", {1, 1, "H", 4});
    m.input("grid", {1, 2, 2, 2});
    m.node("GridSample", {"x", "grid"}, {"y"}, "gs");
    m.output("y");
    EXPECT_CONTAINS(import_error(m), "GridSample node 'gs': needs a static size along axis 2 of X");
  }
  {
    OnnxModel m(16);
    m.input("x", {1, 1, 4, 4});
    m.input("rois", {2, 4});
    m.input("b", TP::INT64, {2});
    m.node("RoiAlign", {"x", "rois", "b"}, {"y"}, "roi");  // sampling_ratio 0 by default
    m.output("y");
    std::string e = import_error(m);
    EXPECT_CONTAINS(e, "RoiAlign node 'roi'");
    EXPECT_CONTAINS(e, "sampling_ratio 0 (adaptive) needs constant rois");
  }
  {
    OnnxModel m(11);
    m.input("x", {1, 1, 2, 2});
    m.input("i", TP::INT64, {1, 1, 2, 2});
    m.initializer("shape", i64s({1, 1, 3, 3}));
    auto& node = m.node("MaxUnpool", {"x", "i", "shape"}, {"y"}, "up");
    set_attr(node, "kernel_shape", std::vector<int64_t>{2, 2});
    set_attr(node, "strides", std::vector<int64_t>{2, 2});
    m.output("y");
    std::string e = import_error(m);
    EXPECT_CONTAINS(e, "MaxUnpool node 'up'");
    EXPECT_CONTAINS(e, "output_shape [1,1,3,3] is smaller than the unpooled shape [1,1,4,4]");
  }
  {
    OnnxModel m(13);
    m.input("x", {1, 1, 4, 4});
    m.initializer("roi", f32s({0, 0, 0, 0, 1, 1, 1, 1}));
    m.initializer("scales", f32s({1, 1, 2, 2}));
    set_attr(m.node("Resize", {"x", "roi", "scales"}, {"y"}, "crop"), "coordinate_transformation_mode",
             "tf_crop_and_resize");
    m.output("y");
    std::string e = import_error(m);
    EXPECT_CONTAINS(e, "Resize node 'crop'");
    EXPECT_CONTAINS(e, "tf_crop_and_resize is supported with sizes, not scales");
  }
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
