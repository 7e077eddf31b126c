// Tests of the oneDNN matmul, conv and pool kernels (src/backends/cpu/onednn) against the unfused
// reference computation: the reference contraction, then the reference add of the bias, the
// reference add of the residual and the reference activation op, each run on its own kernel.
// Inputs are uniform in [-1, 1) from fixed seeds; results are poisoned (0xFF: NaN) before every
// run, so an element the kernel does not write fails.
//
// Tolerance: max|got - want| <= 1e-5 * max(1, max|want|) over every element. oneDNN accumulates
// in f32 in a blocked order (and may use FMA), the reference in double in ascending order, so
// the error grows with the contraction length K; for K up to ~600 with these inputs it stays
// well below 1e-5 (f32 epsilon 1.2e-7 times sqrt-ish growth), and the activations are oneDNN's
// f32 approximations of tanh/erf/exp, which are accurate to a few ulp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <thread>

#include "backends/cpu/onednn/onednn_kernels.h"
#include "backends/cpu/reference/reference.h"
#include "ir/shape_inference.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using cpu::onednn::Act;
using cpu::onednn::ConvKernel;
using cpu::onednn::ConvSpec;
using cpu::onednn::Epilogue;
using cpu::onednn::MatmulKernel;
using cpu::onednn::MatmulSpec;
using testing::random_array;
using I64s = std::vector<int64_t>;

constexpr double kTol = 1e-5;
constexpr double kInf = std::numeric_limits<double>::infinity();

#define SKIP_WITHOUT_ONEDNN() \
  if (!cpu::onednn::available()) GTEST_SKIP() << "fusebox was built without oneDNN (libdnnl-dev)"

Array rand(I64s shape, uint64_t seed) { return random_array(DType::F32, std::move(shape), seed, -1.0, 1.0); }

// One op on its reference kernel, result shape from shape inference, result poisoned.
Array ref(Op op, const std::vector<Array>& in, Attrs attrs = {}) {
  Node node{op, {}, {}, std::move(attrs), nullptr, {}};
  std::vector<TensorType> types;
  for (const Array& a : in) types.push_back(TensorType{a.dtype(), make_shape(a.shape())});
  Expected<std::vector<TensorType>> rt = infer_result_types(node, types);
  EXPECT_TRUE(rt) << rt.status().to_string();
  if (!rt) return Array();
  std::vector<Array> out{Array(DType::F32, static_dims((*rt)[0].shape))};
  out[0].fill_bytes(0xFF);
  Status s = cpu::run_reference(node, in, out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out[0];
}

// y = act(y + bias + residual) on reference kernels; bias already shaped to broadcast.
Array ref_epilogue(Array y, const Epilogue& ep, const Array* bias, const Array* residual) {
  I64s shape = y.shape();
  if (bias) y = ref(Op::Add, {y, *bias});
  if (residual) y = ref(Op::Add, {y, *residual});
  switch (ep.act) {
    case Act::None: break;
    case Act::Relu: y = ref(Op::Relu, {y}); break;
    case Act::LeakyRelu: y = ref(Op::LeakyRelu, {y}, {{"alpha", ep.alpha}}); break;
    case Act::Clip: {
      Attrs a;
      if (std::isfinite(ep.alpha)) a.set("min", ep.alpha);
      if (std::isfinite(ep.beta)) a.set("max", ep.beta);
      y = ref(Op::Clip, {y}, a);
      break;
    }
    case Act::Sigmoid: y = ref(Op::Sigmoid, {y}); break;
    case Act::Tanh: y = ref(Op::Tanh, {y}); break;
    case Act::HardSigmoid: y = ref(Op::HardSigmoid, {y}, {{"alpha", ep.alpha}, {"beta", ep.beta}}); break;
    case Act::HardSwish: y = ref(Op::HardSwish, {y}); break;
    case Act::Silu: y = ref(Op::Silu, {y}); break;
    case Act::Gelu: y = ref(Op::Gelu, {y}, {{"approximate", std::string("none")}}); break;
    case Act::GeluTanh: y = ref(Op::Gelu, {y}, {{"approximate", std::string("tanh")}}); break;
  }
  return y.reshaped(shape);  // a [1] bias on a rank-0 result broadcasts to [1]
}

::testing::AssertionResult close(const Array& got, const Array& want) {
  if (got.shape() != want.shape()) return ::testing::AssertionFailure() << got.type_string() << " vs " << want.type_string();
  double scale = 1, worst = 0;
  int64_t at = -1;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.get_f64(i)));
  for (int64_t i = 0; i < want.numel(); ++i) {
    double d = std::abs(got.get_f64(i) - want.get_f64(i));
    if (!(d <= worst)) {  // NaN counts as the worst
      worst = std::isnan(d) ? kInf : d;
      at = i;
    }
  }
  if (worst <= kTol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << at << ": got " << got.get_f64(at) << ", want "
                                       << want.get_f64(at) << " (max |diff| " << worst << " > " << kTol * scale << ")";
}

const Act kEveryAct[] = {Act::None,        Act::Relu,      Act::LeakyRelu, Act::Clip, Act::Sigmoid, Act::Tanh,
                         Act::HardSigmoid, Act::HardSwish, Act::Silu,      Act::Gelu, Act::GeluTanh};

Epilogue with_act(Epilogue ep, Act act) {
  ep.act = act;
  if (act == Act::LeakyRelu) ep.alpha = 0.1;
  if (act == Act::Clip) ep.alpha = -0.3, ep.beta = 0.6;
  if (act == Act::HardSigmoid) ep.alpha = 0.7, ep.beta = 0.4;  // not the defaults, so a swap shows
  return ep;
}

// ---- matmul --------------------------------------------------------------------------------

// Runs `k` on random operands of these shapes and compares with the reference; bias_shape
// empty means [N].
::testing::AssertionResult check_matmul(const MatmulKernel& k, const Epilogue& ep, I64s as, I64s bs, uint64_t seed,
                                        std::optional<I64s> bias_shape = std::nullopt) {
  Array a = rand(as, seed), b = rand(bs, seed + 1);
  Array y0 = ref(Op::MatMul, {a, b});
  int64_t n = bs.size() == 1 ? 1 : bs.back();
  Array bias = rand(bias_shape.value_or(I64s{n}), seed + 2), residual = rand(y0.shape(), seed + 3);
  Array bias_flat = bias.reshaped({bias.numel()});
  Array want = ref_epilogue(y0, ep, ep.bias ? &bias_flat : nullptr, ep.residual ? &residual : nullptr);
  Array out(DType::F32, y0.shape());
  out.fill_bytes(0xFF);
  Status s = k.run(a, b, ep.bias ? &bias : nullptr, ep.residual ? &residual : nullptr, out);
  if (!s.is_ok()) return ::testing::AssertionFailure() << s.to_string();
  return close(out, want);
}

std::unique_ptr<MatmulKernel> matmul_kernel(const Epilogue& ep) {
  auto k = MatmulKernel::create(MatmulSpec{DType::F32, ep});
  EXPECT_TRUE(k) << k.status().to_string();
  return k ? std::move(*k) : nullptr;
}

TEST(OnednnMatmul, Odd2D) {
  SKIP_WITHOUT_ONEDNN();
  EXPECT_TRUE(check_matmul(*matmul_kernel({}), {}, {7, 13}, {13, 5}, 1));
  Epilogue ep{true, true, Act::Relu};
  EXPECT_TRUE(check_matmul(*matmul_kernel(ep), ep, {7, 13}, {13, 5}, 2));
  EXPECT_TRUE(check_matmul(*matmul_kernel(ep), ep, {33, 600}, {600, 17}, 3));  // the longest K the tolerance covers
}

TEST(OnednnMatmul, BatchBroadcast) {
  SKIP_WITHOUT_ONEDNN();
  Epilogue ep{true, true, Act::Tanh};
  auto k = matmul_kernel(ep);
  EXPECT_TRUE(check_matmul(*k, ep, {2, 3, 7, 13}, {13, 5}, 10));         // rank-2 b: batch folds into M
  EXPECT_TRUE(check_matmul(*k, ep, {2, 1, 7, 13}, {1, 3, 13, 5}, 11));   // 1s on both sides
  EXPECT_TRUE(check_matmul(*k, ep, {7, 13}, {4, 13, 5}, 12));            // a broadcast over b's batch
  EXPECT_TRUE(check_matmul(*k, ep, {1, 7, 13}, {1, 13, 5}, 13));         // batch 1
  EXPECT_TRUE(check_matmul(*k, ep, {2, 3, 4, 7, 13}, {3, 1, 13, 5}, 14));  // dims merge and broadcast
  EXPECT_TRUE(check_matmul(*k, ep, {2, 1, 3, 5, 6}, {1, 4, 3, 6, 2}, 15));  // alternating pattern
}

TEST(OnednnMatmul, VectorOperands) {
  SKIP_WITHOUT_ONEDNN();
  Epilogue plain;
  Epilogue ep{true, true, Act::Sigmoid};
  for (const Epilogue& e : {plain, ep}) {
    auto k = matmul_kernel(e);
    EXPECT_TRUE(check_matmul(*k, e, {13}, {13, 5}, 20));
    EXPECT_TRUE(check_matmul(*k, e, {7, 13}, {13}, 21));
    EXPECT_TRUE(check_matmul(*k, e, {13}, {13}, 22));
    EXPECT_TRUE(check_matmul(*k, e, {2, 7, 13}, {13}, 23));
    EXPECT_TRUE(check_matmul(*k, e, {13}, {3, 13, 5}, 24));
  }
}

TEST(OnednnMatmul, BiasShapes) {
  SKIP_WITHOUT_ONEDNN();
  Epilogue ep{true, false, Act::None};
  auto k = matmul_kernel(ep);
  EXPECT_TRUE(check_matmul(*k, ep, {2, 7, 13}, {13, 5}, 30, I64s{5}));
  EXPECT_TRUE(check_matmul(*k, ep, {2, 7, 13}, {13, 5}, 31, I64s{1}));
  EXPECT_TRUE(check_matmul(*k, ep, {2, 7, 13}, {13, 5}, 32, I64s{1, 1, 5}));
  EXPECT_TRUE(check_matmul(*k, ep, {2, 7, 13}, {2, 13, 5}, 33, I64s{}));
  Array a = rand({7, 13}, 1), b = rand({13, 5}, 2), bias = rand({7, 5}, 3), out(DType::F32, {7, 5});
  EXPECT_EQ(k->run(a, b, &bias, nullptr, out).code(), StatusCode::kInvalidArgument);
}

TEST(OnednnMatmul, EveryActivation) {
  SKIP_WITHOUT_ONEDNN();
  for (Act act : kEveryAct) {
    Epilogue ep = with_act({true, true}, act);
    EXPECT_TRUE(check_matmul(*matmul_kernel(ep), ep, {2, 5, 9}, {9, 11}, 40 + int(act))) << "act " << int(act);
  }
  // Scaled up so that the activations' saturating ranges are reached too.
  Epilogue ep = with_act({false, false}, Act::GeluTanh);
  EXPECT_TRUE(check_matmul(*matmul_kernel(ep), ep, {8, 256}, {256, 8}, 60));
}

TEST(OnednnMatmul, ClipWithAbsentBounds) {
  SKIP_WITHOUT_ONEDNN();
  for (auto [lo, hi] : {std::pair{-kInf, 0.25}, std::pair{-0.25, kInf}, std::pair{-kInf, kInf}}) {
    Epilogue ep{true, false, Act::Clip, lo, hi};
    EXPECT_TRUE(check_matmul(*matmul_kernel(ep), ep, {6, 10}, {10, 7}, 70)) << lo << " " << hi;
  }
}

TEST(OnednnMatmul, CachesPerShape) {
  SKIP_WITHOUT_ONEDNN();
  Epilogue ep{true, true, Act::Silu};
  auto k = matmul_kernel(ep);
  EXPECT_TRUE(check_matmul(*k, ep, {4, 9, 16}, {16, 8}, 80));
  EXPECT_TRUE(check_matmul(*k, ep, {3, 17}, {17, 6}, 81));
  EXPECT_TRUE(check_matmul(*k, ep, {4, 9, 16}, {16, 8}, 82));  // the first entry, other data
}

TEST(OnednnMatmul, ConcurrentRuns) {
  SKIP_WITHOUT_ONEDNN();
  Epilogue ep{true, true, Act::Gelu};
  auto k = matmul_kernel(ep);
  ::testing::AssertionResult r[2] = {::testing::AssertionSuccess(), ::testing::AssertionSuccess()};
  auto work = [&](int t) {
    for (int i = 0; i < 6 && r[t]; ++i) {
      I64s as = i % 2 ? I64s{3, 31, 40} : I64s{64, 40};  // both threads meet both shapes
      r[t] = check_matmul(*k, ep, as, {40, 24}, 100 + 10 * t + i);
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  EXPECT_TRUE(r[0]);
  EXPECT_TRUE(r[1]);
}

TEST(OnednnMatmul, Refusals) {
  SKIP_WITHOUT_ONEDNN();
  auto f16 = MatmulKernel::create(MatmulSpec{DType::F16, {}});
  ASSERT_FALSE(f16);
  EXPECT_EQ(f16.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(f16.status().message().find("f16"), std::string::npos) << f16.status().message();
  auto k = matmul_kernel({});
  Array a = rand({7, 13}, 1), b = rand({12, 5}, 2), out(DType::F32, {7, 5});
  EXPECT_EQ(k->run(a, b, nullptr, nullptr, out).code(), StatusCode::kInvalidArgument);
  Array bias = rand({5}, 3);  // the spec has no bias
  Array b2 = rand({13, 5}, 2);
  EXPECT_EQ(k->run(a, b2, &bias, nullptr, out).code(), StatusCode::kInvalidArgument);
}

// ---- conv ----------------------------------------------------------------------------------

struct ConvCase {
  I64s x, w;  // x NCHW; w [O, C/g, kh, kw] or [C, O/g, kh, kw]
  ConvSpec spec;
};

ConvSpec conv_spec(Epilogue ep, int64_t stride = 1, I64s pad = {0, 0, 0, 0}, int64_t dilation = 1, int64_t groups = 1) {
  ConvSpec s;
  s.stride[0] = s.stride[1] = stride;
  for (int i = 0; i < 4; ++i) s.pad[i] = pad[static_cast<size_t>(i)];
  s.dilation[0] = s.dilation[1] = dilation;
  s.groups = groups;
  s.ep = ep;
  return s;
}

Attrs conv_attrs(const ConvSpec& s) {
  Attrs a{{"stride", I64s{s.stride[0], s.stride[1]}},
          {"pad", I64s{s.pad[0], s.pad[1], s.pad[2], s.pad[3]}},
          {"dilation", I64s{s.dilation[0], s.dilation[1]}},
          {"groups", s.groups}};
  if (s.transposed) a.set("output_padding", I64s{s.output_padding[0], s.output_padding[1]});
  return a;
}

// Runs `k` on random operands (weights: `w` when given, for a constant-weights kernel) and
// compares with the reference.
::testing::AssertionResult check_conv(const ConvKernel& k, const ConvSpec& spec, I64s xs, I64s ws, uint64_t seed,
                                      const Array* w_given = nullptr) {
  Array x = rand(xs, seed), w = w_given ? *w_given : rand(ws, seed + 1);
  Array y0 = ref(spec.transposed ? Op::ConvTranspose2d : Op::Conv2d, {x, w}, conv_attrs(spec));
  int64_t o = y0.shape()[1];
  Array bias = rand({o}, seed + 2), residual = rand(y0.shape(), seed + 3);
  Array bias_col = bias.reshaped({o, 1, 1});
  Array want = ref_epilogue(y0, spec.ep, spec.ep.bias ? &bias_col : nullptr, spec.ep.residual ? &residual : nullptr);
  Array out(DType::F32, y0.shape());
  out.fill_bytes(0xFF);
  Status s = k.run(x, w, spec.ep.bias ? &bias : nullptr, spec.ep.residual ? &residual : nullptr, out);
  if (!s.is_ok()) return ::testing::AssertionFailure() << s.to_string();
  return close(out, want);
}

std::unique_ptr<ConvKernel> conv_kernel(const ConvSpec& spec, const Array* constant = nullptr) {
  auto k = ConvKernel::create(spec, constant);
  EXPECT_TRUE(k) << k.status().to_string();
  return k ? std::move(*k) : nullptr;
}

::testing::AssertionResult check_conv(const ConvSpec& spec, I64s xs, I64s ws, uint64_t seed) {
  auto k = conv_kernel(spec);
  if (!k) return ::testing::AssertionFailure() << "no kernel";
  return check_conv(*k, spec, xs, ws, seed);
}

// The cases every layout must pass; run under the layout rule and under each forced layout.
void check_conv_shapes() {
  Epilogue bias{true, false, Act::None};
  Epilogue all{true, true, Act::Relu};
  EXPECT_TRUE(check_conv(conv_spec(bias, 1, {1, 1, 1, 1}), {2, 16, 10, 9}, {24, 16, 3, 3}, 200)) << "3x3";
  EXPECT_TRUE(check_conv(conv_spec({}, 1, {1, 1, 1, 1}), {1, 8, 9, 9}, {8, 8, 3, 3}, 201)) << "no bias";
  EXPECT_TRUE(check_conv(conv_spec(all, 1, {1, 1, 1, 1}, 1, 2), {1, 16, 9, 11}, {32, 8, 3, 3}, 202)) << "groups 2";
  EXPECT_TRUE(check_conv(conv_spec(all, 1, {1, 1, 1, 1}, 1, 24), {2, 24, 12, 12}, {24, 1, 3, 3}, 203)) << "depthwise";
  EXPECT_TRUE(check_conv(conv_spec(all, 2, {1, 1, 1, 1}), {1, 16, 13, 14}, {16, 16, 3, 3}, 204)) << "stride 2";
  EXPECT_TRUE(check_conv(conv_spec(all, 1, {2, 2, 2, 2}, 2), {1, 16, 11, 11}, {16, 16, 3, 3}, 205)) << "dilation 2";
  EXPECT_TRUE(check_conv(conv_spec(all, 1, {0, 1, 1, 0}), {1, 16, 10, 10}, {16, 16, 3, 3}, 206)) << "pads 0,1,1,0";
  EXPECT_TRUE(check_conv(conv_spec(all), {1, 64, 7, 7}, {32, 64, 1, 1}, 207)) << "1x1";
  // Stride 2 over an even size without end pad: the last row is never read (oneDNN's end pad -1).
  EXPECT_TRUE(check_conv(conv_spec(all, 2), {1, 16, 8, 8}, {32, 16, 1, 1}, 208)) << "1x1 stride 2";
  EXPECT_TRUE(check_conv(conv_spec(all, 2, {3, 3, 3, 3}), {1, 3, 32, 32}, {16, 3, 7, 7}, 209)) << "first layer";
  EXPECT_TRUE(check_conv(conv_spec(bias, 1, {1, 1, 1, 1}), {1, 64, 6, 6}, {8, 64, 3, 3}, 210)) << "K 576";
}

void check_conv_transpose_shapes() {
  ConvSpec s = conv_spec({true, true, Act::Tanh}, 2, {1, 1, 1, 1});
  s.transposed = true;
  s.output_padding[0] = s.output_padding[1] = 1;
  EXPECT_TRUE(check_conv(s, {1, 16, 7, 6}, {16, 8, 3, 3}, 220)) << "stride 2, output_padding 1";
  s.groups = 2;
  EXPECT_TRUE(check_conv(s, {2, 16, 5, 5}, {16, 4, 3, 3}, 221)) << "groups 2";
  ConvSpec t = conv_spec({true, false, Act::None}, 2, {0, 0, 0, 0});
  t.transposed = true;
  t.output_padding[0] = 1;  // the result outgrows the last input position: end pad -1
  EXPECT_TRUE(check_conv(t, {1, 8, 5, 5}, {8, 8, 2, 2}, 222)) << "pad 0, output_padding 1";
  ConvSpec u = conv_spec({false, true, Act::None}, 1, {0, 1, 1, 0}, 2);
  u.transposed = true;
  EXPECT_TRUE(check_conv(u, {1, 8, 6, 7}, {8, 16, 3, 3}, 223)) << "dilation 2, asymmetric pads";
  // A bias alone is added after the primitive (per image, per channel); with an activation the
  // primitive takes it.
  ConvSpec d = conv_spec({true, false, Act::None}, 2, {0, 0, 0, 0});
  d.transposed = true;
  EXPECT_TRUE(check_conv(d, {2, 24, 9, 8}, {24, 24, 2, 2}, 224)) << "bias, batch 2";
  d.ep.act = Act::Relu;
  EXPECT_TRUE(check_conv(d, {2, 24, 9, 8}, {24, 24, 2, 2}, 225)) << "bias + relu, batch 2";
}

TEST(OnednnConv, Shapes) {
  SKIP_WITHOUT_ONEDNN();
  check_conv_shapes();
}

TEST(OnednnConv, TransposedShapes) {
  SKIP_WITHOUT_ONEDNN();
  check_conv_transpose_shapes();
}

// The layout rule picks one per convolution; both must be right everywhere.
TEST(OnednnConv, EveryShapeInBothLayouts) {
  SKIP_WITHOUT_ONEDNN();
  for (const char* layout : {"plain", "blocked"}) {
    SCOPED_TRACE(layout);
    setenv("FUSEBOX_ONEDNN_CONV_LAYOUT", layout, 1);
    check_conv_shapes();
    check_conv_transpose_shapes();
    Epilogue ep{true, true, Act::HardSwish};
    Array w = rand({16, 16, 3, 3}, 5);
    ConvSpec s = conv_spec(ep, 1, {1, 1, 1, 1});
    auto k = conv_kernel(s, &w);
    EXPECT_TRUE(check_conv(*k, s, {1, 16, 12, 12}, w.shape(), 230, &w)) << "constant weights";
  }
  unsetenv("FUSEBOX_ONEDNN_CONV_LAYOUT");
}

TEST(OnednnConv, EveryActivation) {
  SKIP_WITHOUT_ONEDNN();
  for (Act act : kEveryAct) {
    ConvSpec s = conv_spec(with_act({true, true}, act), 1, {1, 1, 1, 1});
    EXPECT_TRUE(check_conv(s, {1, 16, 8, 8}, {16, 16, 3, 3}, 240 + int(act))) << "act " << int(act);
  }
}

TEST(OnednnConv, ConstantWeightsAtTwoShapes) {
  SKIP_WITHOUT_ONEDNN();
  Array w = rand({32, 16, 3, 3}, 7);
  ConvSpec s = conv_spec({true, false, Act::Relu}, 1, {1, 1, 1, 1});
  auto k = conv_kernel(s, &w);
  EXPECT_TRUE(check_conv(*k, s, {1, 16, 10, 10}, w.shape(), 250, &w));
  EXPECT_TRUE(check_conv(*k, s, {2, 16, 7, 5}, w.shape(), 251, &w));
  EXPECT_TRUE(check_conv(*k, s, {1, 16, 10, 10}, w.shape(), 252, &w));
  Array other = rand({32, 16, 1, 1}, 8), x = rand({1, 16, 4, 4}, 9), out(DType::F32, {1, 32, 4, 4});
  EXPECT_EQ(k->run(x, other, nullptr, nullptr, out).code(), StatusCode::kInvalidArgument);
}

TEST(OnednnConv, CachesPerShape) {
  SKIP_WITHOUT_ONEDNN();
  ConvSpec s = conv_spec({true, true, Act::Sigmoid}, 2, {1, 1, 1, 1});
  auto k = conv_kernel(s);
  EXPECT_TRUE(check_conv(*k, s, {1, 16, 12, 12}, {16, 16, 3, 3}, 260));
  EXPECT_TRUE(check_conv(*k, s, {2, 16, 9, 7}, {16, 16, 3, 3}, 261));
  EXPECT_TRUE(check_conv(*k, s, {1, 16, 12, 12}, {16, 16, 3, 3}, 262));
}

TEST(OnednnConv, ConcurrentRuns) {
  SKIP_WITHOUT_ONEDNN();
  ConvSpec s = conv_spec({true, true, Act::Relu}, 1, {1, 1, 1, 1});
  auto k = conv_kernel(s);
  ::testing::AssertionResult r[2] = {::testing::AssertionSuccess(), ::testing::AssertionSuccess()};
  auto work = [&](int t) {
    for (int i = 0; i < 6 && r[t]; ++i) {
      I64s xs = i % 2 ? I64s{1, 16, 14, 14} : I64s{2, 16, 9, 12};
      r[t] = check_conv(*k, s, xs, {16, 16, 3, 3}, 300 + 10 * t + i);
    }
  };
  std::thread t0(work, 0), t1(work, 1);
  t0.join();
  t1.join();
  EXPECT_TRUE(r[0]);
  EXPECT_TRUE(r[1]);
}

TEST(OnednnConv, Refusals) {
  SKIP_WITHOUT_ONEDNN();
  ConvSpec bf16;
  bf16.dtype = DType::BF16;
  auto k = ConvKernel::create(bf16);
  ASSERT_FALSE(k);
  EXPECT_EQ(k.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(k.status().message().find("bf16"), std::string::npos) << k.status().message();
  auto conv = conv_kernel(conv_spec({}, 1, {0, 0, 0, 0}, 1, 2));
  Array x = rand({1, 6, 4, 4}, 1), w = rand({4, 2, 1, 1}, 2), out(DType::F32, {1, 4, 4, 4});
  EXPECT_EQ(conv->run(x, w, nullptr, nullptr, out).code(), StatusCode::kInvalidArgument);  // 6/2 != 2
}

// ---- pool ----------------------------------------------------------------------------------

::testing::AssertionResult check_pool(const cpu::onednn::PoolSpec& spec, bool ceil_mode, I64s xs, uint64_t seed) {
  Array x = rand(xs, seed);
  Attrs attrs{{"kernel", I64s{spec.kernel[0], spec.kernel[1]}},
              {"stride", I64s{spec.stride[0], spec.stride[1]}},
              {"pad", I64s{spec.pad[0], spec.pad[1], spec.pad[2], spec.pad[3]}},
              {"ceil_mode", ceil_mode}};
  if (spec.max) attrs.set("dilation", I64s{spec.dilation[0], spec.dilation[1]});
  else attrs.set("count_include_pad", spec.count_include_pad);
  Array want = ref(spec.max ? Op::MaxPool2d : Op::AvgPool2d, {x}, attrs);
  auto k = cpu::onednn::PoolKernel::create(spec);
  if (!k) return ::testing::AssertionFailure() << k.status().to_string();
  Array out(DType::F32, want.shape());
  out.fill_bytes(0xFF);
  Status s = (*k)->run(x, out);
  if (!s.is_ok()) return ::testing::AssertionFailure() << s.to_string();
  return close(out, want);
}

cpu::onednn::PoolSpec pool_spec(bool max, int64_t k, int64_t stride, I64s pad, int64_t dilation = 1, bool include = false) {
  cpu::onednn::PoolSpec s;
  s.max = max;
  s.kernel[0] = s.kernel[1] = k;
  s.stride[0] = s.stride[1] = stride;
  for (int i = 0; i < 4; ++i) s.pad[i] = pad[static_cast<size_t>(i)];
  s.dilation[0] = s.dilation[1] = dilation;
  s.count_include_pad = include;
  return s;
}

TEST(OnednnPool, MaxPool) {
  SKIP_WITHOUT_ONEDNN();
  EXPECT_TRUE(check_pool(pool_spec(true, 3, 2, {1, 1, 1, 1}), false, {2, 8, 14, 15}, 400)) << "3x3 s2 pad 1";
  EXPECT_TRUE(check_pool(pool_spec(true, 2, 2, {0, 0, 0, 0}), true, {1, 4, 7, 9}, 401)) << "ceil_mode";
  EXPECT_TRUE(check_pool(pool_spec(true, 3, 1, {0, 1, 1, 0}), false, {1, 4, 8, 8}, 402)) << "asymmetric pads";
  EXPECT_TRUE(check_pool(pool_spec(true, 3, 1, {2, 2, 2, 2}, 2), false, {1, 4, 9, 9}, 403)) << "dilation 2";
}

TEST(OnednnPool, AvgPool) {
  SKIP_WITHOUT_ONEDNN();
  EXPECT_TRUE(check_pool(pool_spec(false, 3, 2, {1, 1, 1, 1}), false, {2, 8, 14, 15}, 410)) << "exclude pad";
  EXPECT_TRUE(check_pool(pool_spec(false, 3, 2, {1, 1, 1, 1}), true, {1, 4, 14, 14}, 411)) << "exclude pad, ceil";
  EXPECT_TRUE(check_pool(pool_spec(false, 3, 2, {1, 1, 1, 1}, 1, true), false, {1, 4, 15, 15}, 412)) << "include pad";
  EXPECT_TRUE(check_pool(pool_spec(false, 2, 2, {0, 1, 1, 0}, 1, true), false, {1, 4, 8, 9}, 413)) << "include, asym";
  // A ceil_mode window past the end pad divides differently in oneDNN: left to the reference.
  auto k = cpu::onednn::PoolKernel::create(pool_spec(false, 2, 2, {0, 0, 0, 0}, 1, true));
  ASSERT_TRUE(k);
  Array x = rand({1, 2, 5, 5}, 1), out(DType::F32, {1, 2, 3, 3});
  EXPECT_EQ((*k)->run(x, out).code(), StatusCode::kUnimplemented);
}

TEST(OnednnKernels, UnavailableBuildSaysWhy) {
  if (cpu::onednn::available()) GTEST_SKIP() << "this build links oneDNN";
  auto k = MatmulKernel::create(MatmulSpec{});
  ASSERT_FALSE(k);
  EXPECT_EQ(k.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(k.status().message().find("libdnnl-dev"), std::string::npos);
  EXPECT_FALSE(ConvKernel::create(ConvSpec{}));
  EXPECT_FALSE(cpu::onednn::PoolKernel::create(cpu::onednn::PoolSpec{}));
}

}  // namespace
}  // namespace fusebox
