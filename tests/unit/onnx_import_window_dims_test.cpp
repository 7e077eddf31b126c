// ONNX windowed ops over 1 and 3 spatial axes (src/onnx/convert_window_dims.cpp), ConvTranspose's
// output_shape pads, the integer and QLinear products (src/onnx/convert_quantize.cpp), and
// `fusebox run` on a model whose shape input is given. Each model runs unfused on the reference
// kernels, compared with values computed here from ONNX's definition, and fused on the CPU
// pipeline, compared with the unfused run. Inputs are random; results start poisoned (the
// reference runs write every element or the comparison fails).
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportWindowDims, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sys/wait.h>

#include "onnx_test_model.h"
#include "runtime/npy.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

// Runs the model unfused (reference) and fused (cpu, after a poisoned run); the two must agree
// to `rtol`.
std::vector<Array> run_both(const OnnxModel& m, const NamedArrays& inputs, double rtol = 1e-5) {
  return run_fused_and_unfused(m, inputs, [rtol](const Array& got, const Array& want) {
    return arrays_close(got, want, rtol, 1e-6);
  });
}

// An array of `dtype` and `shape` filled with NaN (floats) or a large value: what the direct
// computations below start from, so an element they forget shows.
Array poisoned(DType dtype, std::vector<int64_t> shape) {
  Array a(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, is_float(dtype) ? std::nan("") : 1e6);
  return a;
}

TEST(OnnxImportWindowDims, Conv1dMatchesItsDefinition) {
  const int64_t n = 2, c = 3, l = 11, m = 4, k = 3, stride = 2, dil = 2, pad0 = 1, pad1 = 2;
  OnnxModel model(17);
  model.input("x", {n, c, l});
  model.initializer("w", random_array(DType::F32, {m, c, k}, 11));
  model.initializer("b", random_array(DType::F32, {m}, 12));
  auto& node = model.node("Conv", {"x", "w", "b"}, {"y"});
  set_attr(node, "strides", std::vector<int64_t>{stride});
  set_attr(node, "dilations", std::vector<int64_t>{dil});
  set_attr(node, "pads", std::vector<int64_t>{pad0, pad1});
  model.output("y");
  Array x = random_array(DType::F32, {n, c, l}, 10);
  std::vector<Array> got = run_both(model, {{"x", x}});
  ASSERT_EQ(got.size(), 1u);
  const Array w = random_array(DType::F32, {m, c, k}, 11), b = random_array(DType::F32, {m}, 12);
  const int64_t lo = (l + pad0 + pad1 - dil * (k - 1) - 1) / stride + 1;
  Array want = poisoned(DType::F32, {n, m, lo});
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < m; ++o) {
      for (int64_t p = 0; p < lo; ++p) {
        double s = b.get_f64(o);
        for (int64_t ci = 0; ci < c; ++ci) {
          for (int64_t t = 0; t < k; ++t) {
            int64_t at = p * stride + t * dil - pad0;
            if (at >= 0 && at < l) s += x.get_f64((i * c + ci) * l + at) * w.get_f64((o * c + ci) * k + t);
          }
        }
        want.set_f64((i * m + o) * lo + p, s);
      }
    }
  }
  EXPECT_TRUE(arrays_close(got[0], want, 1e-5, 1e-6));
}

// MaxPool and AveragePool over [N,C,D,H,W] with pads, strides and (average) both counting rules,
// against a direct 3-D window loop.
TEST(OnnxImportWindowDims, Pool3dMatchesItsDefinition) {
  const std::vector<int64_t> in{2, 3, 5, 6, 7}, kernel{2, 3, 2}, stride{2, 1, 2}, pads{1, 0, 1, 0, 1, 1};
  Array x = random_array(DType::F32, in, 20);
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (int64_t include_pad : {0, 1}) {
      if (std::string(op) == "MaxPool" && include_pad) continue;
      SCOPED_TRACE(std::string(op) + " count_include_pad " + std::to_string(include_pad));
      OnnxModel model(17);
      model.input("x", {in[0], in[1], in[2], in[3], in[4]});
      auto& node = model.node(op, {"x"}, {"y"});
      set_attr(node, "kernel_shape", kernel);
      set_attr(node, "strides", stride);
      set_attr(node, "pads", pads);
      if (std::string(op) == "AveragePool") set_attr(node, "count_include_pad", include_pad);
      model.output("y");
      std::vector<Array> got = run_both(model, {{"x", x}});
      ASSERT_EQ(got.size(), 1u);
      std::vector<int64_t> out{in[0], in[1]};
      for (int a = 0; a < 3; ++a) out.push_back((in[2 + a] + pads[a] + pads[a + 3] - kernel[a]) / stride[a] + 1);
      Array want = poisoned(DType::F32, out);
      int64_t idx = 0;
      for (int64_t nc = 0; nc < in[0] * in[1]; ++nc) {
        for (int64_t d = 0; d < out[2]; ++d) {
          for (int64_t h = 0; h < out[3]; ++h) {
            for (int64_t w = 0; w < out[4]; ++w) {
              double best = -std::numeric_limits<double>::infinity(), sum = 0;
              int64_t count = 0;
              for (int64_t a = 0; a < kernel[0]; ++a) {
                for (int64_t bb = 0; bb < kernel[1]; ++bb) {
                  for (int64_t cc = 0; cc < kernel[2]; ++cc) {
                    int64_t zd = d * stride[0] + a - pads[0], zh = h * stride[1] + bb - pads[1],
                            zw = w * stride[2] + cc - pads[2];
                    if (zd < 0 || zd >= in[2] || zh < 0 || zh >= in[3] || zw < 0 || zw >= in[4]) continue;
                    double v = x.get_f64(((nc * in[2] + zd) * in[3] + zh) * in[4] + zw);
                    best = std::max(best, v);
                    sum += v;
                    ++count;
                  }
                }
              }
              double avg = sum / double(include_pad ? kernel[0] * kernel[1] * kernel[2] : count);
              want.set_f64(idx++, std::string(op) == "MaxPool" ? best : avg);
            }
          }
        }
      }
      EXPECT_TRUE(arrays_close(got[0], want, 1e-5, 1e-6));
    }
  }
}

// 1-D ConvTranspose whose output_shape lies beyond what the product reaches: the result is the
// unpadded product extended at the end, the bias everywhere (ONNX's pads rule).
TEST(OnnxImportWindowDims, ConvTranspose1dOutputShapeExtendsTheResult) {
  const int64_t n = 2, c = 3, l = 4, m = 2, k = 3, stride = 2, want_len = 11;  // product: (4-1)*2+3 = 9
  OnnxModel model(17);
  model.input("x", {n, c, l});
  model.initializer("w", random_array(DType::F32, {c, m, k}, 31));
  model.initializer("b", random_array(DType::F32, {m}, 32));
  auto& node = model.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  set_attr(node, "strides", std::vector<int64_t>{stride});
  set_attr(node, "output_shape", std::vector<int64_t>{want_len});
  model.output("y");
  Array x = random_array(DType::F32, {n, c, l}, 30);
  std::vector<Array> got = run_both(model, {{"x", x}});
  ASSERT_EQ(got.size(), 1u);
  const Array w = random_array(DType::F32, {c, m, k}, 31), b = random_array(DType::F32, {m}, 32);
  // total padding -2: floor halves put -1 before and -1 after.
  Array want(DType::F32, {n, m, want_len});
  for (int64_t i = 0; i < n * m; ++i) {
    for (int64_t p = 0; p < want_len; ++p) want.set_f64(i * want_len + p, b.get_f64(i % m));
  }
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ci = 0; ci < c; ++ci) {
      for (int64_t p = 0; p < l; ++p) {
        for (int64_t o = 0; o < m; ++o) {
          for (int64_t t = 0; t < k; ++t) {
            int64_t at = p * stride + t + 1;  // one position of extension before
            int64_t e = (i * m + o) * want_len + at;
            want.set_f64(e, want.get_f64(e) + x.get_f64((i * c + ci) * l + p) * w.get_f64((ci * m + o) * k + t));
          }
        }
      }
    }
  }
  EXPECT_TRUE(arrays_close(got[0], want, 1e-5, 1e-6));
}

// MatMulInteger with K = 300: sums of u8 products beyond 2^24, which f32 would round, must be
// exact; per-row a and per-column b zero points.
TEST(OnnxImportWindowDims, MatMulIntegerIsExact) {
  const int64_t m = 3, k = 300, n = 4;
  OnnxModel model(17);
  model.input("a", TP::UINT8, {m, k});
  model.input("b", TP::UINT8, {k, n});
  model.input("azp", TP::UINT8, {m});
  model.input("bzp", TP::UINT8, {n});
  model.node("MatMulInteger", {"a", "b", "azp", "bzp"}, {"y"});
  model.output("y");
  Array a = random_array(DType::U8, {m, k}, 40, 0, 255), b = random_array(DType::U8, {k, n}, 41, 0, 255);
  for (int64_t i = 0; i < k; ++i) a.set_f64(i, 255), b.set_f64(i * n, 255);  // a large first sum
  Array azp = random_array(DType::U8, {m}, 42, 0, 3), bzp = random_array(DType::U8, {n}, 43, 0, 3);
  azp.set_f64(0, 0);
  bzp.set_f64(0, 0);
  std::vector<Array> got = run_both(model, {{"a", a}, {"b", b}, {"azp", azp}, {"bzp", bzp}}, 0);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].dtype(), DType::I32);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t t = 0; t < k; ++t) {
        s += (int64_t(a.get_f64(i * k + t)) - int64_t(azp.get_f64(i))) * (int64_t(b.get_f64(t * n + j)) - int64_t(bzp.get_f64(j)));
      }
      EXPECT_EQ(got[0].get_i64(i * n + j), s) << "element " << i << "," << j;
    }
  }
  EXPECT_EQ(got[0].get_i64(0), 300 * 255 * 255);
}

// QLinearMatMul: the integer product scaled, rounded half to even and saturated, as ONNX defines
// it; scales given as 1-element 1-D tensors (as exporters write them).
TEST(OnnxImportWindowDims, QLinearMatMulRequantizes) {
  const int64_t m = 4, k = 9, n = 5;
  OnnxModel model(17);
  model.input("a", TP::UINT8, {m, k});
  model.input("b", TP::UINT8, {k, n});
  model.initializer("as", f32s({0.02f}));
  model.initializer("bs", f32s({0.03f}));
  model.initializer("ys", f32s({0.1f}));
  Array zp(DType::U8, {1});
  zp.set_f64(0, 128);
  model.initializer("azp", zp);
  model.initializer("bzp", zp);
  Array yzp(DType::U8, {1});
  yzp.set_f64(0, 128);
  model.initializer("yzp", yzp);
  model.node("QLinearMatMul", {"a", "as", "azp", "b", "bs", "bzp", "ys", "yzp"}, {"y"});
  model.output("y");
  Array a = random_array(DType::U8, {m, k}, 50, 0, 255), b = random_array(DType::U8, {k, n}, 51, 0, 255);
  std::vector<Array> got = run_both(model, {{"a", a}, {"b", b}}, 0);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].dtype(), DType::U8);
  int saturated = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t s = 0;
      for (int64_t t = 0; t < k; ++t) s += (int64_t(a.get_f64(i * k + t)) - 128) * (int64_t(b.get_f64(t * n + j)) - 128);
      float real = float(s) * (0.02f * 0.03f);
      double q = std::nearbyint(double(real / 0.1f)) + 128;
      q = std::min(255.0, std::max(0.0, q));
      saturated += q == 0 || q == 255;
      EXPECT_EQ(got[0].get_f64(i * n + j), q) << "element " << i << "," << j;
    }
  }
  EXPECT_LT(saturated, m * n) << "the random data should not saturate every element";
}

TEST(OnnxImportWindowDims, UnsupportedShapesAreClearErrors) {
  {
    OnnxModel model(17);
    model.input("x", {1, 2, 4, 4, 4});
    model.initializer("w", random_array(DType::F32, {3, 2, 2, 2, 2}, 60));
    model.node("Conv", {"x", "w"}, {"y"});
    model.output("y");
    EXPECT_NE(import_error(model).find("only 1-D and 2-D convolution"), std::string::npos);
  }
  {
    OnnxModel model(17);
    model.input("x", {1, "C", 4, 4, 4});
    auto& node = model.node("MaxPool", {"x"}, {"y"});
    set_attr(node, "kernel_shape", std::vector<int64_t>{2, 2, 2});
    model.output("y");
    std::string e = import_error(model);
    EXPECT_NE(e.find("MaxPool"), std::string::npos) << e;
    EXPECT_NE(e.find("static channel"), std::string::npos) << e;
  }
  {
    OnnxModel model(17);
    model.input("x", {1, 2, 8});
    auto& node = model.node("AveragePool", {"x"}, {"y"});
    set_attr(node, "kernel_shape", std::vector<int64_t>{2, 2});
    model.output("y");
    EXPECT_NE(import_error(model).find("kernel_shape needs 1 entries"), std::string::npos);
  }
  {
    OnnxModel model(17);
    model.input("a", TP::UINT8, {2, 3});
    model.input("b", TP::UINT8, {3, 2});
    model.input("as", {2});
    model.initializer("s", f32s({0.1f}));
    Array zp(DType::U8, {});
    model.initializer("zp", zp);
    model.node("QLinearMatMul", {"a", "as", "zp", "b", "s", "zp", "s", "zp"}, {"y"});
    model.output("y");
    EXPECT_NE(import_error(model).find("per-tensor"), std::string::npos);
  }
}

// `fusebox run` on a model whose Reshape shape is a graph input of run-time length (so not bound
// as the plan runs, ir/bind_symbols.h): the given value specialises the import; without it the
// message says which input to give.
TEST(OnnxImportWindowDims, RunCommandUsesGivenShapeInputs) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("fusebox_cli_onnx_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                     "_" + std::to_string(reinterpret_cast<uintptr_t>(&dir)));
  std::filesystem::create_directories(dir);
  OnnxModel model(17);
  model.input("x", {2, 6});
  model.input("shape", TP::INT64, {"K"});
  model.node("Reshape", {"x", "shape"}, {"y"});
  model.output("y");
  const std::string path = (dir / "reshape.onnx").string();
  {
    std::ofstream f(path, std::ios::binary);
    f << model.bytes();
  }
  Array x = random_array(DType::F32, {2, 6}, 70);
  ASSERT_TRUE(write_npy((dir / "x.npy").string(), x).is_ok());
  ASSERT_TRUE(write_npy((dir / "shape.npy").string(), i64s({3, 4})).is_ok());
  const std::string out = (dir / "out").string();
  const std::string run = std::string(FUSEBOX_CLI) + " run " + path + " --input x=" + (dir / "x.npy").string();
  EXPECT_EQ(std::system((run + " --input shape=" + (dir / "shape.npy").string() + " --output-dir " + out).c_str()), 0);
  Expected<Array> y = read_npy((std::filesystem::path(out) / "y.npy").string());
  ASSERT_TRUE(y.has_value()) << y.status().to_string();
  EXPECT_EQ(y->shape(), (std::vector<int64_t>{3, 4}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(y->get_f64(i), x.get_f64(i));
  // Without the shape's value: an error exit, not a crash.
  const std::string log = (dir / "log.txt").string();
  int rc = std::system((run + " 2> " + log).c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 1);
  std::ifstream f(log);
  std::string message((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(message.find("give its value with --input shape=FILE.npy"), std::string::npos) << message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
