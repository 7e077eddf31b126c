// Tests of two attribute variants of existing reference kernels: mod with fmod = true (truncated
// modulo, the dividend's sign) against std::fmod and C++ `%` on random data, and resize with mode
// "cubic" against ONNX's own definition written here (the four nearest source indices of the
// edge-padded axis, Keys' coefficients, exclude_outside renormalising), on random images for every
// coordinate mode, up- and downsampling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "fusebox/session.h"
#include "ir/parser.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::array_of_ints;
using testing::arrays_close;
using testing::random_array;
using testing::run_reference_poisoned;
using I64s = std::vector<int64_t>;

TEST(ReferenceFmod, TruncatedModuloTakesTheDividendsSign) {
  Array a = random_array(DType::F32, {64}, 3, -20, 20), b = random_array(DType::F32, {64}, 4, -5, 5);
  auto y = run_reference_poisoned(Op::Mod, {a, b}, {{"fmod", true}});
  ASSERT_EQ(y.size(), 1u);
  Array want(DType::F32, {64});
  for (int64_t i = 0; i < 64; ++i) want.set_f64(i, std::fmod(float(a.get_f64(i)), float(b.get_f64(i))));
  EXPECT_TRUE(arrays_close(y[0], want, 0, 0));
  // ONNX's mixed-sign example, and integers (x % 0 = 0, INT_MIN % -1 = 0).
  y = run_reference_poisoned(Op::Mod,
                             {array_of(DType::F64, {6}, {-4.3, 7.2, 5.0, 4.3, -7.2, 8.0}),
                              array_of(DType::F64, {6}, {2.1, -3.4, 8.0, -2.1, 3.4, 5.0})},
                             {{"fmod", true}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0],
                           array_of(DType::F64, {6},
                                    {std::fmod(-4.3, 2.1), std::fmod(7.2, -3.4), 5.0, std::fmod(4.3, -2.1),
                                     std::fmod(-7.2, 3.4), 3.0}),
                           0, 0));
  Array ia = array_of_ints(DType::I64, {6}, {-7, 7, -7, 7, 5, INT64_MIN});
  Array ib = array_of_ints(DType::I64, {6}, {3, -3, -3, 3, 0, -1});
  y = run_reference_poisoned(Op::Mod, {ia, ib}, {{"fmod", true}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of_ints(DType::I64, {6}, {-1, 1, -1, 1, 0, 0}), 0, 0));
  // The default stays floor modulo.
  y = run_reference_poisoned(Op::Mod, {ia, ib});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of_ints(DType::I64, {6}, {2, -2, -1, 1, 0, 0}), 0, 0));
}

// mod {fmod = true} inside a fused element-wise region (the region's interpreter runs the
// reference kernel for mod, attributes included; the code generator does not take mod) equals
// the unfused graph, on the interpreter and the code generator alike; so does a cubic resize
// next to transform steps, which stays out of the transform region.
TEST(ReferenceFmod, FusedRegionsMatchTheReference) {
  Expected<Graph> g = parse_graph(
      R"(func @f(%a: f32[4,16], %b: f32[4,16], %img: f32[1,2,6,6]) -> (f32[4,16], f32[2,1,12,12]) {
  %0 = mod %a, %b {fmod = true} : f32[4,16]
  %1 = mul %0, %a : f32[4,16]
  %2 = add %1, %b : f32[4,16]
  %3 = flip %img {axes = [3]} : f32[1,2,6,6]
  %4 = resize %3 {scales = [1.0, 1.0, 2.0, 2.0], mode = "cubic"} : f32[1,2,12,12]
  %5 = transpose %4 {perm = [1, 0, 2, 3]} : f32[2,1,12,12]
  return %2, %5
})");
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  NamedArrays in{{"a", random_array(DType::F32, {4, 16}, 1, -9, 9)},
                 {"b", random_array(DType::F32, {4, 16}, 2, -3, 3)},
                 {"img", random_array(DType::F32, {1, 2, 6, 6}, 3)}};
  auto run = [&](bool fuse, testing::BackendChoice c) {
    CompileOptions o;
    o.fuse = fuse;
    testing::use_backend(o, c);
    Expected<Executable> exe = Session().compile(*g, o);
    EXPECT_TRUE(exe.has_value()) << exe.status().to_string();
    if (!exe) return std::vector<Array>{};
    Expected<std::vector<Array>> out = exe->run(in);
    EXPECT_TRUE(out.has_value()) << out.status().to_string();
    return out ? *out : std::vector<Array>{};
  };
  std::vector<Array> want = run(false, testing::kReference);
  ASSERT_EQ(want.size(), 2u);
  for (testing::BackendChoice c : {testing::kCpuInterpreter, testing::kCpuJit, testing::kCpu}) {
    std::vector<Array> got = run(true, c);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(arrays_close(got[0], want[0], 1e-6, 1e-6)) << c.backend;
    EXPECT_TRUE(arrays_close(got[1], want[1], 0, 0)) << c.backend;
  }
}

// ONNX's cubic interpolation of one axis at coordinate x: (source index, weight) pairs.
std::vector<std::pair<int64_t, double>> onnx_cubic_taps(double x, int64_t in, double a, bool exclude) {
  double ratio = x - std::floor(x);
  if (ratio == 0) ratio = 1;
  auto c = [a](double t) {  // Keys' kernel at distance t
    t = std::fabs(t);
    if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0.0;
  };
  const double coeffs[4] = {c(ratio + 1), c(ratio), c(1 - ratio), c(2 - ratio)};
  // The 4 indices of the edge-padded axis (2 on each side) nearest to x, ties to the smaller.
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < in + 4; ++i) idx.push_back(i);
  const double xp = x + 2;
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t p, int64_t q) {
    return std::fabs(xp - double(p)) < std::fabs(xp - double(q));
  });
  idx.resize(4);
  std::sort(idx.begin(), idx.end());
  std::vector<std::pair<int64_t, double>> taps;
  double sum = 0;
  for (int k = 0; k < 4; ++k) {
    int64_t i = idx[size_t(k)] - 2;
    double w = exclude && (i < 0 || i >= in) ? 0.0 : coeffs[k];
    taps.push_back({std::clamp<int64_t>(i, 0, in - 1), w});
    sum += w;
  }
  if (exclude)
    for (auto& t : taps) t.second /= sum;
  return taps;
}

double coordinate(const std::string& mode, int64_t o, double scale, int64_t in, int64_t out) {
  if (mode == "align_corners") return out == 1 ? 0 : double(o) * double(in - 1) / double(out - 1);
  if (mode == "asymmetric") return double(o) / scale;
  if (mode == "pytorch_half_pixel" && out == 1) return 0;
  return (double(o) + 0.5) / scale - 0.5;
}

TEST(ReferenceResizeCubic, MatchesOnnxDefinition) {
  const int64_t H = 5, W = 6;
  Array x = random_array(DType::F32, {1, 2, H, W}, 12);
  uint64_t variant = 0;
  for (const char* coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    for (double scale : {0.6, 1.8, 3.0}) {
      for (bool exclude : {false, true}) {
        const double a = ++variant % 2 ? -0.75 : -0.5;
        Attrs attrs{{"scales", std::vector<double>{1.0, 1.0, scale, scale}},
                    {"mode", std::string("cubic")},
                    {"coordinate", std::string(coord)},
                    {"cubic_coeff_a", a},
                    {"exclude_outside", exclude}};
        auto y = run_reference_poisoned(Op::Resize, {x}, attrs);
        ASSERT_EQ(y.size(), 1u);
        const int64_t OH = int64_t(double(H) * scale), OW = int64_t(double(W) * scale);
        ASSERT_EQ(I64s(y[0].shape().begin(), y[0].shape().end()), (I64s{1, 2, OH, OW}));
        const float fs = float(scale);  // the kernel's scales are floats, like ONNX Runtime's
        Array want(DType::F32, {1, 2, OH, OW});
        for (int64_t c = 0; c < 2; ++c)
          for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
              double acc = 0;
              for (auto [iy, wy] : onnx_cubic_taps(coordinate(coord, oy, fs, H, OH), H, a, exclude))
                for (auto [ix, wx] : onnx_cubic_taps(coordinate(coord, ox, fs, W, OW), W, a, exclude))
                  acc += wy * wx * x.get_f64((c * H + iy) * W + ix);
              want.set_f64((c * OH + oy) * OW + ox, acc);
            }
        EXPECT_TRUE(arrays_close(y[0], want, 1e-5, 1e-5))
            << coord << " scale " << scale << " exclude " << exclude;
      }
    }
  }
}

}  // namespace
}  // namespace fusebox
