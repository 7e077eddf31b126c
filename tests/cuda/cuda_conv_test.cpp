// conv2d and fused_conv_bias_act on the CUDA backend (cuDNN) against the CPU reference.
//
// Without a GPU: cuDNN loads (or says that libcudnn is missing), the claim accepts and refuses
// what it should with its reason, and fusion for the cuda target turns conv + add(bias through a
// reshape) [+ add(residual)] + activation into the fused op the claim accepts; cuDNN's own
// descriptors give each case the graph's result size; the epilogue kernel of every activation
// compiles with NVRTC. With a GPU: random convolutions of several shapes (odd sizes, stride,
// dilation, groups, depthwise, 1x1, batch 2, asymmetric pads, with and without bias) and the
// fused epilogues (bias, residual, relu through cuDNN, the others through the epilogue kernel;
// depthwise ones through depthwise_kernel.h unless FUSEBOX_CUDA_DEPTHWISE=0, 1x1 ones at stride 1
// as cuBLASLt products unless FUSEBOX_CUDA_CONV_GEMM=0, or where timed faster with =timed) run on
// the device and match the reference; the placement shows them on cuda. What the claim refuses (bf16) runs
// on the CPU and matches too.
//
// Tolerances: the reference sums in double and rounds once; cuDNN sums in f32 in its own order
// (implicit GEMM tiles, split over channels and taps), so f32 results differ by rounding errors
// growing like sqrt(K) ulps of the partial sums, K = C/groups * KH * KW (inputs in [-1, 1]):
// rtol 1e-4, atol 1e-5 per sqrt(K). f16: cuDNN rounds the convolution to f16 before adding the
// bias and the residual where it runs them as separate calls, and the reference rounds the
// conv + bias once, then the residual add: one or two ulps of f16 (2^-10 relative) of the
// partial values, which a cancelling bias leaves standing: rtol 2e-3, atol 1e-3 per sqrt(K).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backends/cuda/conv_epilogue.h"
#include "backends/cuda/conv_kernel.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cudnn.h"  // empty without FUSEBOX_HAVE_CUDNN
#include "backends/cuda/depthwise_kernel.h"
#include "backends/cuda/nvrtc.h"
#include "fusion/fuse.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance(DType d, int64_t k) {
  const double growth = std::sqrt(double(std::max<int64_t>(k, 1)));
  if (d == DType::F32) return {1e-4, 1e-5 * growth};
  return {2e-3, 1e-3 * growth};
}

// Whether cuDNN is usable here: its headers were found at build time and the library loads.
Status cudnn_status() { return cuda::cudnn_available(); }

// Skips a device test without a GPU, or without cuDNN, with the reason.
#define SKIP_WITHOUT_DEVICE_CUDNN()                                                 \
  do {                                                                              \
    if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message(); \
    if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();         \
  } while (0)

struct ConvCase {
  std::vector<int64_t> x, w;  // NCHW input, OIHW weights (I = C / groups)
  std::vector<int64_t> stride{1, 1}, pad{0, 0, 0, 0}, dilation{1, 1};
  int64_t groups = 1;
  std::string name;
  int64_t k() const { return w[1] * w[2] * w[3]; }
  Attrs attrs() const {
    return {{"stride", stride}, {"pad", pad}, {"dilation", dilation}, {"groups", groups}};
  }
};

// The brief's cases: odd sizes, pad, stride, dilation, groups, depthwise, 1x1, batch 2.
std::vector<ConvCase> conv_cases() {
  return {
      {{1, 3, 17, 19}, {8, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, "3x3 pad 1"},
      {{1, 3, 17, 19}, {5, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, "stride 2"},
      {{1, 4, 17, 19}, {6, 4, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1, "dilation 2"},
      {{1, 6, 15, 13}, {10, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, "groups 2"},
      {{1, 7, 17, 19}, {7, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 7, "depthwise 3x3"},
      {{1, 16, 9, 11}, {24, 16, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "1x1"},
      {{2, 5, 12, 14}, {9, 5, 3, 5}, {2, 1}, {1, 2, 1, 2}, {1, 1}, 1, "batch 2, 3x5, stride 2x1"},
      {{2, 8, 9, 9}, {8, 8, 3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}, 1, "asymmetric pads of cuDNN's size"},
      {{3, 12, 7, 5}, {20, 12, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, "1x1 batch 3"},
      {{2, 6, 9, 9}, {10, 6, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, "1x1 stride 2"},
  };
}

// y = conv2d(x, w[, b]) with inputs "x", "w" (and "b").
Expected<Graph> conv_graph(DType d, const ConvCase& c, bool bias) {
  GraphBuilder g("conv");
  std::vector<ValueId> in = {g.input("x", d, make_shape(c.x)), g.input("w", d, make_shape(c.w))};
  if (bias) in.push_back(g.input("b", d, make_shape({c.w[0]})));
  g.output(g.op(Op::Conv2d, in, c.attrs()));
  return g.build();
}

// The unfused form fusion turns into fused_conv_bias_act: conv2d, add(reshape(b, [1,O,1,1])),
// optionally add(residual "r"), then `activation` (its name in the epilogue, or "none").
Expected<Graph> conv_bias_act_graph(DType d, const ConvCase& c, bool residual,
                                    const std::string& activation) {
  GraphBuilder g("conv_bias_act");
  ValueId y =
      g.op(Op::Conv2d, {g.input("x", d, make_shape(c.x)), g.input("w", d, make_shape(c.w))}, c.attrs());
  y = g.add(y, g.reshape(g.input("b", d, make_shape({c.w[0]})), make_shape({1, c.w[0], 1, 1})));
  if (residual) y = g.add(y, g.input("r", d, g.type(y).shape));
  if (activation == "relu") y = g.relu(y);
  if (activation == "clip") y = g.op(Op::Clip, {y}, {{"min", 0.0}, {"max", 6.0}});
  if (activation == "sigmoid") y = g.sigmoid(y);
  if (activation == "tanh") y = g.tanh(y);
  if (activation == "silu") y = g.op(Op::Silu, {y});
  if (activation == "gelu") y = g.gelu(y);
  if (activation == "gelu_tanh") y = g.gelu(y, true);
  if (activation == "hardswish") y = g.op(Op::HardSwish, {y});
  if (activation == "hardsigmoid") y = g.op(Op::HardSigmoid, {y}, {{"alpha", 0.3}, {"beta", 0.4}});
  if (activation == "leaky_relu") y = g.op(Op::LeakyRelu, {y}, {{"alpha", 0.1}});
  g.output(y);
  return g.build();
}

// The fused op written directly: x, w[, b][, r] with `act`.
Expected<Graph> fused_graph(DType d, const Shape& x, const Shape& w, bool bias, std::optional<Shape> residual,
                            Attrs attrs) {
  GraphBuilder g("fused");
  std::vector<ValueId> in = {g.input("x", d, x), g.input("w", d, w)};
  if (bias) in.push_back(g.input("b", d, Shape{w[0]}));
  if (residual) {
    in.push_back(g.input("r", d, *residual));
    attrs.set("has_residual", true);
  }
  g.output(g.op(Op::FusedConvBiasAct, in, attrs));
  return g.build();
}

using testing::backend_of;
using testing::find_node;

Claim claim_of(const Expected<Graph>& g, Op op) {
  EXPECT_TRUE(g) << g.status().message();
  if (!g) return Claim::refuse("no graph");
  const Node* n = find_node(*g, op);
  EXPECT_NE(n, nullptr);
  return n ? cuda::claim_conv(*g, *n) : Claim::refuse("no node");
}

#ifdef FUSEBOX_HAVE_CUDNN
bool cudnn_shipped() {
  for (std::string dir : {std::string("/usr/local/cuda/lib64"),
                          std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "") + "/lib64"}) {
    if (std::filesystem::exists(dir + "/libcudnn.so.9")) return true;
  }
  return false;
}

TEST(CudaConv, CudnnLoadsOrNamesTheLibrary) {
  Expected<const cuda::Cudnn*> dnn = cuda::cudnn();
  if (!dnn) {
    // A toolkit that ships the library must load it (no GPU is needed to load it).
    EXPECT_FALSE(cudnn_shipped()) << dnn.status().message();
    EXPECT_NE(dnn.status().message().find("libcudnn"), std::string::npos) << dnn.status().message();
    // Then the CUDA backend refuses every convolution, saying why.
    Claim c = claim_of(conv_graph(DType::F32, conv_cases()[0], true), Op::Conv2d);
    EXPECT_FALSE(c);
    EXPECT_NE(c.reason.find("libcudnn"), std::string::npos) << c.reason;
    return;
  }
  const std::string version = (*dnn)->version();
  EXPECT_EQ(std::stoi(version), 9) << version;
  EXPECT_NE((*dnn)->status_text(CUDNN_STATUS_NOT_SUPPORTED).find("NOT_SUPPORTED"), std::string::npos)
      << (*dnn)->status_text(CUDNN_STATUS_NOT_SUPPORTED);
  EXPECT_FALSE((*dnn)->check(CUDNN_STATUS_BAD_PARAM, "a call").is_ok());
}

// cuDNN's descriptors (host calls: no GPU needed) give every case's result the size the graph
// types it with: pads, strides, dilations and groups are passed as the reference reads them.
TEST(CudaConv, CudnnDescriptorsGiveTheGraphsResultSize) {
  Expected<const cuda::Cudnn*> loaded = cuda::cudnn();
  if (!loaded) GTEST_SKIP() << loaded.status().message();
  const cuda::Cudnn& d = **loaded;
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    Expected<Graph> g = conv_graph(DType::F32, c, false);
    ASSERT_TRUE(g) << g.status().message();
    const std::vector<int64_t> y = static_dims(g->type(g->outputs()[0]).shape);
    cudnnTensorDescriptor_t x = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    ASSERT_TRUE(d.check(d.cudnnCreateTensorDescriptor(&x), "x").is_ok());
    ASSERT_TRUE(d.check(d.cudnnCreateFilterDescriptor(&w), "w").is_ok());
    ASSERT_TRUE(d.check(d.cudnnCreateConvolutionDescriptor(&conv), "conv").is_ok());
    EXPECT_TRUE(d.check(d.cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(c.x[0]),
                                                     int(c.x[1]), int(c.x[2]), int(c.x[3])),
                        "x")
                    .is_ok());
    EXPECT_TRUE(d.check(d.cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(c.w[0]),
                                                     int(c.w[1]), int(c.w[2]), int(c.w[3])),
                        "w")
                    .is_ok());
    EXPECT_TRUE(
        d.check(d.cudnnSetConvolution2dDescriptor(conv, int(c.pad[0]), int(c.pad[1]), int(c.stride[0]),
                                                  int(c.stride[1]), int(c.dilation[0]), int(c.dilation[1]),
                                                  CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "conv")
            .is_ok());
    EXPECT_TRUE(d.check(d.cudnnSetConvolutionGroupCount(conv, int(c.groups)), "groups").is_ok());
    EXPECT_TRUE(d.check(d.cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH), "math").is_ok());
    int n = 0, o = 0, h = 0, wd = 0;
    Status s = d.check(d.cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &o, &h, &wd), "result size");
    EXPECT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ((std::vector<int64_t>{n, o, h, wd}), y);
    d.cudnnDestroyConvolutionDescriptor(conv);
    d.cudnnDestroyFilterDescriptor(w);
    d.cudnnDestroyTensorDescriptor(x);
  }
}

#else
TEST(CudaConv, WithoutCudnnHeadersTheClaimSaysWhy) {
  Claim c = claim_of(conv_graph(DType::F32, conv_cases()[0], true), Op::Conv2d);
  EXPECT_FALSE(c);
  EXPECT_NE(c.reason.find("cudnn.h"), std::string::npos) << c.reason;
}

#endif

TEST(CudaConv, ClaimAcceptsWhatCudnnComputes) {
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (DType d : {DType::F32, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    for (const ConvCase& c : conv_cases()) {
      EXPECT_TRUE(claim_of(conv_graph(d, c, false), Op::Conv2d).yes) << c.name;
      EXPECT_TRUE(claim_of(conv_graph(d, c, true), Op::Conv2d).yes) << c.name;
    }
    const Shape x = {Dim::symbol("N"), 8, Dim::symbol("H"), Dim::symbol("W")}, w = {16, 8, 3, 3};
    const Shape y = {Dim::symbol("N"), 16, Dim::symbol("H"), Dim::symbol("W")};
    const Attrs pad1{{"pad", std::vector<int64_t>{1, 1, 1, 1}}};
    for (const char* act : {"none", "relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "hardswish",
                            "hardsigmoid", "leaky_relu", "clip"}) {
      Attrs a = pad1;
      a.set("act", std::string(act));
      for (bool bias : {false, true}) {
        EXPECT_TRUE(claim_of(fused_graph(d, x, w, bias, std::nullopt, a), Op::FusedConvBiasAct).yes)
            << act << bias;
        Claim r = claim_of(fused_graph(d, x, w, bias, y, a), Op::FusedConvBiasAct);
        EXPECT_TRUE(r.yes) << act << " " << bias << ": " << r.reason;
      }
    }
  }
}

TEST(CudaConv, ClaimRefusesWithTheReason) {
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  auto expect_refused = [](const Expected<Graph>& g, Op op, const std::string& why) {
    Claim c = claim_of(g, op);
    EXPECT_FALSE(c) << why;
    EXPECT_NE(c.reason.find(why), std::string::npos) << c.reason;
  };
  const ConvCase c = conv_cases()[0];
  for (DType d : {DType::F64, DType::BF16})
    expect_refused(conv_graph(d, c, true), Op::Conv2d, "runs f32 and f16");
  // The blocked layout.
  {
    Expected<Graph> g = conv_graph(DType::F32, c, false);
    ASSERT_TRUE(g) << g.status().message();
    Node n = *find_node(*g, Op::Conv2d);
    n.attrs.set("layout", std::string("nchwc"));
    Claim claim = cuda::claim_conv(*g, n);
    EXPECT_FALSE(claim);
    EXPECT_NE(claim.reason.find("runs NCHW and NHWC only"), std::string::npos) << claim.reason;
    // NHWC takes [N,1,H,W,C] activations (conv_layout.h makes them), not this graph's NCHW ones.
    n.attrs.set("layout", std::string("nhwc"));
    claim = cuda::claim_conv(*g, n);
    EXPECT_FALSE(claim);
    EXPECT_NE(claim.reason.find("[N,1,H,W,C] activations"), std::string::npos) << claim.reason;
  }
  // Asymmetric pads that give a result cuDNN's symmetric pads do not.
  ConvCase asym = c;
  asym.pad = {0, 0, 2, 2};
  expect_refused(conv_graph(DType::F32, asym, false), Op::Conv2d, "cuDNN pads both sides alike");
  // Asymmetric pads on run-time sizes: the result size is not known at the claim.
  {
    GraphBuilder g("dynamic");
    g.output(g.op(Op::Conv2d,
                  {g.input("x", DType::F32, {1, 3, Dim::symbol("H"), 19}),
                   g.input("w", DType::F32, make_shape({4, 3, 3, 3}))},
                  {{"pad", std::vector<int64_t>{0, 1, 1, 1}}}));
    expect_refused(g.build(), Op::Conv2d, "cuDNN pads both sides alike");
  }
}

TEST(CudaConv, FusionForCudaProducesTheFusedOpTheClaimAccepts) {
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  // A lone conv2d (its own bias or none) stays what it is.
  for (bool bias : {false, true}) {
    Expected<Graph> g = conv_graph(DType::F32, conv_cases()[3], bias);
    ASSERT_TRUE(g) << g.status().message();
    Expected<Graph> fused = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run(*g);
    ASSERT_TRUE(fused) << fused.status().message();
    EXPECT_EQ(testing::count_op(*fused, Op::Conv2d), 1u) << print_graph(*fused);
  }
  const ConvCase c = conv_cases()[0];
  for (DType d : {DType::F32, DType::F16}) {
    for (bool residual : {false, true}) {
      for (const char* act : {"relu", "none", "sigmoid", "clip"}) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + act + (residual ? " residual" : ""));
        Expected<Graph> g = conv_bias_act_graph(d, c, residual, act);
        ASSERT_TRUE(g) << g.status().message();
        Expected<Graph> fused = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run(*g);
        ASSERT_TRUE(fused) << fused.status().message();
        const Node* n = find_node(*fused, Op::Conv2d) ? find_node(*fused, Op::Conv2d)
                                                      : find_node(*fused, Op::FusedConvBiasAct);
        ASSERT_NE(n, nullptr) << print_graph(*fused);
        EXPECT_EQ(testing::count_op(*fused, Op::FusedConvBiasAct), 1u) << print_graph(*fused);
        EXPECT_EQ(testing::count_op(*fused, Op::Conv2d), 0u) << print_graph(*fused);
        Claim claim = cuda::claim_conv(*fused, *n);
        EXPECT_TRUE(claim.yes) << claim.reason;
      }
    }
  }
}

TEST(CudaConv, EpilogueKernelCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  // Every activation, none and relu included (cuDNN's fused call takes bias + relu only in exact
  // f32, where it supports the shapes).
  for (DType d : {DType::F32, DType::F16}) {
    const Epilogue epilogues[] = {{EpilogueAct::None},
                                  {EpilogueAct::Relu},
                                  {EpilogueAct::Sigmoid},
                                  {EpilogueAct::Tanh},
                                  {EpilogueAct::Silu},
                                  {EpilogueAct::Gelu},
                                  {EpilogueAct::GeluTanh},
                                  {EpilogueAct::HardSwish},
                                  {EpilogueAct::LeakyRelu, 0.2},
                                  {EpilogueAct::LeakyRelu},
                                  {EpilogueAct::HardSigmoid, 0.3, 0.4},
                                  {EpilogueAct::Clip, 0.0, 6.0},
                                  {EpilogueAct::Clip},
                                  {EpilogueAct::Clip, std::nullopt, 1.5}};
    for (const Epilogue& e : epilogues) {
      const std::string name =
          "conv_epilogue_" + std::string(dtype_name(d)) + "_" + std::string(epilogue_act_name(e.act)) + ".cu";
      Expected<std::string> cubin = cuda::compile_cubin(cuda::conv_epilogue_source(d, e), name, 90);
      ASSERT_TRUE(cubin) << name << ": " << cubin.status().message();
      EXPECT_GT(cubin->size(), 1000u);
    }
  }
  // Parameters are written exactly; a missing clip bound is unbounded.
  const std::string clip = cuda::conv_epilogue_source(DType::F32, {EpilogueAct::Clip, 0.0, std::nullopt});
  EXPECT_NE(clip.find("fb_clip(t, __uint_as_float(0x00000000u), __uint_as_float(0x7f800000u))"),
            std::string::npos);
}

// ---- on the device -------------------------------------------------------------------------

// Compiles `g` for the reference (unfused) and for the cuda target, checks where `op` runs,
// then runs both twice on random inputs (two seeds: a second run must not see the first's
// results) and compares with `tol`.
void expect_device_matches_reference(const Graph& g, Op op, const std::string& expected_backend,
                                     Tolerance tol,
                                     const std::map<std::string, std::vector<int64_t>>& shapes) {
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  const Executable* want_exe = &exes->reference;
  const Executable* got_exe = &exes->plan;
  EXPECT_EQ(backend_of(*got_exe, op), expected_backend) << got_exe->placement().summary() << "\n"
                                                        << print_graph(got_exe->graph());
  const DType d = g.type(g.inputs()[0]).dtype;
  for (uint64_t seed : {1u, 2u}) {
    NamedArrays in;
    uint64_t k = 0;
    for (const auto& [name, shape] : shapes)
      in[name] = testing::random_array(d, shape, seed * 100 + k++, -1.0, 1.0);
    Expected<std::vector<Array>> want = want_exe->run(in), got = got_exe->run(in);
    ASSERT_TRUE(want) << want.status().message();
    ASSERT_TRUE(got) << got.status().message();
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], tol.rtol, tol.atol)) << "seed " << seed;
  }
}

std::vector<int64_t> result_dims(const Graph& g) { return static_dims(g.type(g.outputs()[0]).shape); }

// How case `c` may run as one cuBLASLt product (conv_kernel.cpp's gemm_fits and GemmMode): never
// (not 1x1 at stride 1 without pads or groups, or FUSEBOX_CUDA_CONV_GEMM=0), always (the
// default), or either way (FUSEBOX_CUDA_CONV_GEMM=timed: whichever was faster when timed).
enum class GemmWay { Never, Always, Either };
GemmWay gemm_way(const ConvCase& c) {
  const bool fits = c.w[2] == 1 && c.w[3] == 1 && c.groups == 1 && c.stride == std::vector<int64_t>{1, 1} &&
                    c.pad == std::vector<int64_t>{0, 0, 0, 0};
  const char* e = std::getenv("FUSEBOX_CUDA_CONV_GEMM");
  const std::string_view v = e ? e : "";
  if (!fits || v == "0") return GemmWay::Never;
  return v == "timed" ? GemmWay::Either : GemmWay::Always;
}

// Checks that the two runs of case `c` went the way they should: each convolution once, through
// cuBLASLt as gemm_way allows. Returns how many ran through cuBLASLt.
uint64_t expect_runs(const ConvCase& c, const cuda::ConvRuns& before, uint64_t depthwise_before) {
  const cuda::ConvRuns after = cuda::conv_runs();
  const uint64_t gemm = after.gemm - before.gemm;
  EXPECT_EQ(after.fused + after.separate - before.fused - before.separate + gemm + cuda::depthwise_runs() -
                depthwise_before,
            2u);
  switch (gemm_way(c)) {
    case GemmWay::Never:
      EXPECT_EQ(gemm, 0u);
      break;
    case GemmWay::Always:
      EXPECT_EQ(gemm, 2u);
      break;
    case GemmWay::Either:
      EXPECT_TRUE(gemm == 0 || gemm == 2) << gemm;
      break;
  }
  return gemm;
}

TEST(CudaConv, RandomConvsMatchTheReference) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  for (DType d : {DType::F32, DType::F16}) {
    for (const ConvCase& c : conv_cases()) {
      for (bool bias : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + c.name + (bias ? " with bias" : ""));
        Expected<Graph> g = conv_graph(d, c, bias);
        ASSERT_TRUE(g) << g.status().message();
        std::map<std::string, std::vector<int64_t>> shapes = {{"x", c.x}, {"w", c.w}};
        if (bias) shapes["b"] = {c.w[0]};
        const cuda::ConvRuns before = cuda::conv_runs();
        const uint64_t depthwise_before = cuda::depthwise_runs();
        expect_device_matches_reference(*g, Op::Conv2d, "cuda", tolerance(d, c.k()), shapes);
        expect_runs(c, before, depthwise_before);
      }
    }
  }
}

TEST(CudaConv, FusedEpiloguesFromFusionMatchTheReference) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  for (DType d : {DType::F32, DType::F16}) {
    for (const ConvCase& c : conv_cases()) {
      for (bool residual : {false, true}) {
        for (const char* act : {"relu", "none", "sigmoid", "gelu"}) {
          SCOPED_TRACE(std::string(dtype_name(d)) + " " + c.name + " " + act + (residual ? " residual" : ""));
          Expected<Graph> g = conv_bias_act_graph(d, c, residual, act);
          ASSERT_TRUE(g) << g.status().message();
          std::map<std::string, std::vector<int64_t>> shapes = {{"x", c.x}, {"w", c.w}, {"b", {c.w[0]}}};
          if (residual) shapes["r"] = result_dims(*g);
          const Op op = Op::FusedConvBiasAct;
          const cuda::ConvRuns before = cuda::conv_runs();
          const uint64_t depthwise_before = cuda::depthwise_runs();
          expect_device_matches_reference(*g, op, "cuda", tolerance(d, c.k()), shapes);
          const uint64_t gemm = expect_runs(c, before, depthwise_before);
          const cuda::ConvRuns after = cuda::conv_runs();
          if (std::string(act) == "relu" && after.fused == before.fused && gemm == 0) {
            std::cout << "  cudnnConvolutionBiasActivationForward not supported, ran separately: "
                      << dtype_name(d) << " " << c.name << (residual ? " residual" : "") << "\n";
          }
        }
      }
    }
  }
}

// Every activation the epilogue kernel computes, on a few cases (CUDA's transcendental functions
// are within 2 ulp of the correctly rounded value: far inside the tolerances).
TEST(CudaConv, EveryEpilogueActivationMatchesTheReference) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  const std::vector<ConvCase> cases = conv_cases();
  for (DType d : {DType::F32, DType::F16}) {
    for (size_t i : {size_t(0), size_t(3), size_t(4)}) {
      const ConvCase& c = cases[i];
      for (const char* act : {"sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "hardswish", "hardsigmoid",
                              "leaky_relu", "clip"}) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + c.name + " " + act);
        Expected<Graph> g = conv_bias_act_graph(d, c, true, act);
        ASSERT_TRUE(g) << g.status().message();
        expect_device_matches_reference(*g, Op::FusedConvBiasAct, "cuda", tolerance(d, c.k()),
                                        {{"x", c.x}, {"w", c.w}, {"b", {c.w[0]}}, {"r", result_dims(*g)}});
      }
    }
  }
}

// What the claim refuses (bf16) runs on the CPU and still matches.
TEST(CudaConv, RefusedConvRunsOnTheCpu) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  const ConvCase c = conv_cases()[0];
  Expected<Graph> g = conv_graph(DType::BF16, c, true);
  ASSERT_TRUE(g) << g.status().message();
  const double growth = std::sqrt(double(c.k()));
  expect_device_matches_reference(*g, Op::Conv2d, "cpu", {1.6e-2, 8e-3 * growth},
                                  {{"x", c.x}, {"w", c.w}, {"b", {c.w[0]}}});
}

// Constant weights are operands like any other.
TEST(CudaConv, ConstantWeightsMatchTheReference) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  const ConvCase c = conv_cases()[3];
  GraphBuilder b("const_w");
  ValueId y = b.op(Op::Conv2d,
                   {b.input("x", DType::F32, make_shape(c.x)),
                    b.constant(testing::random_array(DType::F32, c.w, 7, -1, 1))},
                   c.attrs());
  b.output(b.relu(b.add(y, b.reshape(b.constant(testing::random_array(DType::F32, {c.w[0]}, 8, -1, 1)),
                                     make_shape({1, c.w[0], 1, 1})))));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().message();
  expect_device_matches_reference(*g, Op::FusedConvBiasAct, "cuda", tolerance(DType::F32, c.k()),
                                  {{"x", c.x}});
}

// One executable, several sizes (symbolic batch and spatial sizes): each run makes or reuses the
// descriptors and algorithm of its shapes.
TEST(CudaConv, OneExecutableRunsNewSizes) {
  SKIP_WITHOUT_DEVICE_CUDNN();
  const Shape x = {Dim::symbol("N"), 6, Dim::symbol("H"), Dim::symbol("W")}, w = make_shape({10, 6, 3, 3});
  const Shape y = {Dim::symbol("N"), 10, Dim::symbol("H"), Dim::symbol("W")};
  Expected<Graph> g = fused_graph(DType::F32, x, w, true, y,
                                  {{"pad", std::vector<int64_t>{1, 1, 1, 1}}, {"act", std::string("relu")}});
  ASSERT_TRUE(g) << g.status().message();
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(*g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  const Executable* want_exe = &exes->reference;
  const Executable* got_exe = &exes->plan;
  EXPECT_EQ(backend_of(*got_exe, Op::FusedConvBiasAct), "cuda") << got_exe->placement().summary();
  uint64_t seed = 0;
  for (std::vector<int64_t> size : {std::vector<int64_t>{2, 13, 9}, {1, 1, 1}, {3, 32, 31}, {2, 13, 9}}) {
    SCOPED_TRACE(shape_to_string(make_shape(size)));
    NamedArrays in = {
        {"x", testing::random_array(DType::F32, {size[0], 6, size[1], size[2]}, ++seed, -1, 1)},
        {"w", testing::random_array(DType::F32, {10, 6, 3, 3}, ++seed, -1, 1)},
        {"b", testing::random_array(DType::F32, {10}, ++seed, -1, 1)},
        {"r", testing::random_array(DType::F32, {size[0], 10, size[1], size[2]}, ++seed, -1, 1)}};
    Expected<std::vector<Array>> want = want_exe->run(in), got = got_exe->run(in);
    ASSERT_TRUE(want && got) << got.status().message();
    const Tolerance tol = tolerance(DType::F32, 54);
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], tol.rtol, tol.atol));
  }
}

}  // namespace
}  // namespace fusebox
