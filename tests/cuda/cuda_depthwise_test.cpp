// The CUDA backend's own depthwise convolution kernel (backends/cuda/depthwise_kernel.h).
//
// Without a GPU: which convolutions it takes, and why it leaves the others to cuDNN; its source
// compiles with NVRTC in both layouts, both dtypes and with an activation; asked for NHWC, the
// lowering keeps every case's convolution on it, channels-last. With a GPU: random
// depthwise convolutions (odd sizes, strides, dilation, 1x1 to 11x11 kernels, asymmetric pads,
// batch 2) alone, with a bias, and with the fused epilogues (bias + silu, bias + residual + relu),
// f32 and f16, run through it (its run count says so) and match the reference; the same in NHWC.
//
// Tolerances: the reference sums in double and rounds once; the kernel sums kh*kw taps in f32
// (f32: within a few ulps of the partial sums, inputs in [-1, 1]); f16 rounds the sum to f16
// before the epilogue as cuDNN's result would be: cuda_conv_test's tolerances.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/assign_blocked_layout.h"
#include "backends/cuda/conv_kernel.h"
#include "backends/cuda/conv_layout.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/depthwise_kernel.h"
#include "backends/cuda/nvrtc.h"
#include "fusion/fuse.h"
#include "ir/builder.h"
#include "ir/layout.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

struct DwCase {
  std::vector<int64_t> x;       // NCHW input
  std::vector<int64_t> kernel;  // kh, kw
  std::vector<int64_t> stride{1, 1}, pad{0, 0, 0, 0}, dilation{1, 1};
  std::string name;
  int64_t channels() const { return x[1]; }
  std::vector<int64_t> w() const { return {x[1], 1, kernel[0], kernel[1]}; }
  Attrs attrs() const { return {{"stride", stride}, {"pad", pad}, {"dilation", dilation}, {"groups", x[1]}}; }
};

std::vector<DwCase> cases() {
  return {
      {{2, 7, 17, 19}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, "3x3 pad 1, batch 2"},
      {{1, 12, 23, 21}, {5, 5}, {2, 2}, {2, 2, 2, 2}, {1, 1}, "5x5 stride 2"},
      {{2, 9, 14, 19}, {5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, "5x5 pad 2 (8 results a thread)"},
      {{2, 8, 16, 16}, {3, 3}, {2, 2}, {1, 1, 0, 0}, {1, 1}, "stride 2, asymmetric pads"},
      {{1, 6, 15, 13}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, "dilation 2"},
      {{1, 3, 11, 12}, {3, 5}, {2, 1}, {1, 2, 1, 2}, {1, 1}, "3x5 stride 2x1"},
      {{2, 5, 6, 7}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, "1x1"},
      {{1, 4, 12, 12}, {11, 11}, {1, 1}, {5, 5, 5, 5}, {1, 1}, "11x11"},
  };
}

// y = conv2d(x, w[, b]) over inputs "x", "w" (and "b"); then, as fusion would make it,
// act(y + b + r) for `act` "silu" (no residual) or "relu" (with the residual "r").
Expected<Graph> depthwise_graph(DType d, const DwCase& c, bool bias, const std::string& act) {
  GraphBuilder g("depthwise");
  const int64_t ch = c.channels();
  std::vector<ValueId> in = {g.input("x", d, make_shape(c.x)), g.input("w", d, make_shape(c.w()))};
  if (act.empty()) {
    if (bias) in.push_back(g.input("b", d, make_shape({ch})));
    g.output(g.op(Op::Conv2d, in, c.attrs()));
    return g.build();
  }
  ValueId y = g.op(Op::Conv2d, in, c.attrs());
  y = g.add(y, g.reshape(g.input("b", d, make_shape({ch})), make_shape({1, ch, 1, 1})));
  if (act == "relu") y = g.relu(g.add(y, g.input("r", d, g.type(y).shape)));
  if (act == "silu") y = g.op(Op::Silu, {y});
  g.output(y);
  return g.build();
}

Status depthwise_fits_first_conv(const Expected<Graph>& g) {
  EXPECT_TRUE(g) << g.status().message();
  if (!g) return Status::invalid("no graph");
  const Node* n = testing::find_node(*g, Op::Conv2d);
  EXPECT_NE(n, nullptr);
  return n ? cuda::depthwise_fits(*g, *n) : Status::invalid("no conv");
}

TEST(CudaDepthwise, TakesDepthwiseConvsAndSaysWhyNotOthers) {
  if (const char* e = std::getenv("FUSEBOX_CUDA_DEPTHWISE"); e && std::string(e) == "0")
    GTEST_SKIP() << "turned off";
  for (const DwCase& c : cases()) {
    Status s = depthwise_fits_first_conv(depthwise_graph(DType::F32, c, true, ""));
    EXPECT_TRUE(s.is_ok()) << c.name << ": " << s.message();
  }
  auto refused = [](std::vector<int64_t> x, std::vector<int64_t> w, int64_t groups, const std::string& why) {
    GraphBuilder g("refused");
    g.output(g.op(Op::Conv2d,
                  {g.input("x", DType::F32, make_shape(x)), g.input("w", DType::F32, make_shape(w))},
                  {{"groups", groups}}));
    Status s = depthwise_fits_first_conv(g.build());
    EXPECT_FALSE(s.is_ok()) << why;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.message();
  };
  refused({1, 6, 9, 9}, {8, 6, 3, 3}, 1, "is not depthwise");
  refused({1, 6, 9, 9}, {6, 3, 3, 3}, 2, "is not depthwise");
  refused({1, 6, 9, 9}, {12, 1, 3, 3}, 6, "one output channel per input channel");
  refused({1, 6, 20, 20}, {6, 1, 13, 13}, 6, "at most 11 taps per axis");
}

TEST(CudaDepthwise, SourceCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  for (DType d : {DType::F32, DType::F16}) {
    for (bool nhwc : {false, true}) {
      for (EpilogueAct act : {EpilogueAct::None, EpilogueAct::Silu}) {
        cuda::DepthwiseConv c;
        c.dtype = d;
        c.kernel = {5, 3};
        c.stride = {2, 1};
        c.pad = {2, 1};
        c.nhwc = nhwc;
        c.epilogue.act = act;
        const std::string name =
            "depthwise_" + std::string(dtype_name(d)) + (nhwc ? "_nhwc" : "_nchw") + ".cu";
        Expected<std::string> cubin = cuda::compile_cubin(cuda::depthwise_source(c), name, 90);
        ASSERT_TRUE(cubin) << name << ": " << cubin.status().message();
        EXPECT_GT(cubin->size(), 1000u);
      }
    }
  }
}

// silu(conv2d(x, constant w) + constant b): what the NHWC lowering takes (constant weights).
Expected<Graph> depthwise_constant_graph(DType d, const DwCase& c) {
  GraphBuilder b("depthwise_nhwc");
  const int64_t ch = c.channels();
  ValueId y = b.op(Op::Conv2d,
                   {b.input("x", d, make_shape(c.x)), b.constant(testing::random_array(d, c.w(), 5, -1, 1))},
                   c.attrs());
  y = b.add(y, b.reshape(b.constant(testing::random_array(d, {ch}, 6, -1, 1)), make_shape({1, ch, 1, 1})));
  b.output(b.op(Op::Silu, {y}));
  return b.build();
}

// Asked for NHWC, the lowering puts each case's depthwise conv channels-last, and the kernel
// still takes it (what ChannelsLastMatchesTheReference then runs on the device).
TEST(CudaDepthwise, ChannelsLastLoweringKeepsTheKernel) {
  if (Status s = cuda::cudnn_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  if (const char* e = std::getenv("FUSEBOX_CUDA_DEPTHWISE"); e && std::string(e) == "0")
    GTEST_SKIP() << "turned off";
  CudaBackendOptions nhwc;
  nhwc.conv_layout = CudaConvLayout::Nhwc;
  for (const DwCase& c : cases()) {
    Expected<Graph> g = depthwise_constant_graph(DType::F16, c);
    ASSERT_TRUE(g) << g.status().message();
    Expected<Graph> fused = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run(*g);
    ASSERT_TRUE(fused) << fused.status().message();
    Expected<Graph> lowered = cuda::assign_conv_layout(*fused, nhwc);
    ASSERT_TRUE(lowered) << lowered.status().message();
    const Node* conv = testing::find_node(*lowered, Op::FusedConvBiasAct);
    ASSERT_NE(conv, nullptr) << c.name << "\n" << print_graph(*lowered);
    EXPECT_TRUE(has_nhwc_layout(*conv)) << c.name << "\n" << print_graph(*lowered);
    Status fits = cuda::depthwise_fits(*lowered, *conv);
    EXPECT_TRUE(fits.is_ok()) << c.name << ": " << fits.message();
    Claim claim = cuda::claim_conv(*lowered, *conv);
    EXPECT_TRUE(claim.yes) << c.name << ": " << claim.reason;
  }
}

// ---- on the device -------------------------------------------------------------------------

#define SKIP_WITHOUT_DEVICE_CUDNN()                                                        \
  do {                                                                                     \
    if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();        \
    if (Status s = cuda::cudnn_available(); !s.is_ok()) GTEST_SKIP() << s.message();       \
    if (const char* e = std::getenv("FUSEBOX_CUDA_DEPTHWISE"); e && std::string(e) == "0") \
      GTEST_SKIP() << "FUSEBOX_CUDA_DEPTHWISE=0";                                          \
  } while (0)

double rtol(DType d) { return d == DType::F32 ? 1e-4 : 2e-3; }
double atol(DType d, const DwCase& c) {
  const double growth = std::sqrt(double(c.kernel[0] * c.kernel[1]));
  return (d == DType::F32 ? 1e-5 : 1e-3) * growth;
}

// Runs `g` on the cuda target and on the reference with two seeds; every run must go through
// the depthwise kernel.
void expect_matches(const Graph& g, const CompileOptions& dev, DType d, const DwCase& c,
                    const std::vector<std::string>& names, bool nhwc = false) {
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  EXPECT_EQ(summarize_layout(exes->plan.graph()).block, nhwc ? kNhwcBlock : 0)
      << print_graph(exes->plan.graph());
  for (uint64_t seed : {1u, 2u}) {
    NamedArrays in;
    uint64_t k = 0;
    for (const std::string& name : names) {
      std::vector<int64_t> shape = name == "x"   ? c.x
                                   : name == "w" ? c.w()
                                   : name == "b" ? std::vector<int64_t>{c.channels()}
                                                 : static_dims(g.type(g.outputs()[0]).shape);
      in[name] = testing::random_array(d, shape, seed * 100 + k++, -1.0, 1.0);
    }
    const uint64_t before = cuda::depthwise_runs();
    Expected<std::vector<Array>> want = exes->reference.run(in), got = exes->plan.run(in);
    ASSERT_TRUE(want) << want.status().message();
    ASSERT_TRUE(got) << got.status().message();
    EXPECT_EQ(cuda::depthwise_runs() - before, 1u) << exes->plan.placement().summary() << "\n"
                                                   << print_graph(exes->plan.graph());
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], rtol(d), atol(d, c))) << "seed " << seed;
  }
}

TEST(CudaDepthwise, RandomDepthwiseConvsMatchTheReference) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  for (DType d : {DType::F32, DType::F16}) {
    for (const DwCase& c : cases()) {
      for (const char* act : {"", "silu", "relu"}) {
        for (bool bias : {false, true}) {
          if (*act && !bias) continue;  // the fused forms always have their bias
          SCOPED_TRACE(std::string(dtype_name(d)) + " " + c.name + " " + act + (bias ? " bias" : ""));
          Expected<Graph> g = depthwise_graph(d, c, bias, act);
          ASSERT_TRUE(g) << g.status().message();
          std::vector<std::string> names = {"x", "w"};
          if (bias) names.push_back("b");
          if (std::string(act) == "relu") names.push_back("r");
          expect_matches(*g, dev, d, c, names);
        }
      }
    }
  }
}

// Channels-last (CudaConvLayout::Nhwc): constant weights, the kernel's NHWC form.
TEST(CudaDepthwise, ChannelsLastMatchesTheReference) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  dev.cuda.conv_layout = CudaConvLayout::Nhwc;
  for (DType d : {DType::F32, DType::F16}) {
    for (const DwCase& c : cases()) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + c.name);
      Expected<Graph> g = depthwise_constant_graph(d, c);
      ASSERT_TRUE(g) << g.status().message();
      expect_matches(*g, dev, d, c, {"x"}, /*nhwc=*/true);
    }
  }
}

}  // namespace
}  // namespace fusebox
