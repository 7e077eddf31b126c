// The CUDA backend's channels-last convolutions (backends/cuda/conv_layout.h) on a small CNN
// that has what real ones have between convolutions: conv + bias + relu, max pooling, a conv
// with a residual, a depthwise conv, a squeeze-excite block (global average pool, 1x1 conv,
// sigmoid, the broadcast product), average pooling, a pooled classifier and an NCHW output.
//
// Without a GPU (cuDNN loads): asked for NHWC, the lowering puts the convolutions and pools in
// NHWC and converts only at the input and the outputs; the CUDA claims accept every converted
// node; the lowered graph computes what the graph computes on the reference backend (same f16
// roundings: only where values lie changes). By default everything stays NCHW. With a GPU: the
// network runs on the device in NHWC (every node but the constants on cuda) and matches the
// reference, in f16 and f32.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/assign_blocked_layout.h"
#include "backends/cuda/conv_kernel.h"
#include "backends/cuda/conv_layout.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/layout_kernel.h"
#include "backends/cuda/pool_kernel.h"
#include "fusion/fuse.h"
#include "ir/builder.h"
#include "ir/layout.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

Status cudnn_status() { return cuda::cudnn_available(); }

constexpr int64_t kC = 16;

// x [N,8,17,19] -> two outputs: the feature map [N,16,5,5] and the classifier's [N,10].
Expected<Graph> small_cnn(DType d) {
  GraphBuilder b("small_cnn_" + std::string(dtype_name(d)));
  uint64_t seed = 10;
  auto weights = [&](std::vector<int64_t> shape) {
    double fan_in = double(shape.size() > 1 ? shape[1] : 1);
    for (size_t i = 2; i < shape.size(); ++i) fan_in *= double(shape[i]);
    const double bound = 1.0 / std::sqrt(fan_in);
    return b.constant(testing::random_array(d, shape, ++seed, -bound, bound));
  };
  auto channel_bias = [&]() { return b.reshape(weights({kC}), make_shape({1, kC, 1, 1})); };
  auto conv = [&](ValueId x, std::vector<int64_t> w, int64_t pad, int64_t groups) {
    return b.op(Op::Conv2d, {x, weights(std::move(w))},
                {{"pad", std::vector<int64_t>{pad, pad, pad, pad}}, {"groups", groups}});
  };
  ValueId x = b.input("x", d, {Dim::symbol("N"), 8, 17, 19});
  ValueId c1 = b.relu(b.add(conv(x, {kC, 8, 3, 3}, 1, 1), channel_bias()));
  ValueId p1 = b.op(Op::MaxPool2d, {c1},
                    {{"kernel", std::vector<int64_t>{3, 3}},
                     {"stride", std::vector<int64_t>{2, 2}},
                     {"pad", std::vector<int64_t>{1, 1, 1, 1}}});
  ValueId c2 = b.relu(b.add(b.add(conv(p1, {kC, kC, 3, 3}, 1, 1), channel_bias()), p1));
  ValueId dw = b.relu(b.add(conv(c2, {kC, 1, 3, 3}, 1, kC), channel_bias()));
  ValueId se = b.op(Op::GlobalAvgPool, {dw});
  ValueId gate = b.sigmoid(b.add(conv(se, {kC, kC, 1, 1}, 0, 1), channel_bias()));
  ValueId scaled = b.mul(dw, gate);
  ValueId p2 = b.op(Op::AvgPool2d, {scaled},
                    {{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}});
  ValueId pooled = b.reshape(b.op(Op::GlobalAvgPool, {p2}), {Dim::symbol("N"), kC});
  ValueId logits = b.add(b.matmul(pooled, weights({kC, 10})), weights({10}));
  b.output(p2);
  b.output(logits);
  return b.build();
}

Expected<Graph> fused_for_cuda(const Graph& g) {
  return Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run(g);
}

CudaBackendOptions with_layout(CudaConvLayout layout) {
  CudaBackendOptions o;
  o.conv_layout = layout;
  return o;
}

TEST(CudaNhwc, F16ConvsAndPoolsRunChannelsLastConvertedOnlyAtTheEdges) {
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  Expected<Graph> g = small_cnn(DType::F16);
  ASSERT_TRUE(g) << g.status().message();
  Expected<Graph> fused = fused_for_cuda(*g);
  ASSERT_TRUE(fused) << fused.status().message();
  Expected<Graph> lowered = cuda::assign_conv_layout(*fused, with_layout(CudaConvLayout::Nhwc));
  ASSERT_TRUE(lowered) << lowered.status().message();
  const std::string text = print_graph(*lowered);
  size_t convs = 0, pools = 0;
  for (const Node& n : lowered->nodes()) {
    const bool conv = n.op == Op::Conv2d || n.op == Op::FusedConvBiasAct;
    const bool pool = n.op == Op::MaxPool2d || n.op == Op::AvgPool2d || n.op == Op::GlobalAvgPool;
    if (!conv && !pool && n.op != Op::ToNchwc && n.op != Op::ToNchw) continue;
    if (conv || pool) {
      EXPECT_TRUE(has_nhwc_layout(n)) << n.info().keyword << "\n" << text;
    }
    convs += conv;
    pools += pool;
    // Each node the lowering made is one the CUDA backend claims.
    Claim claim = conv   ? cuda::claim_conv(*lowered, n)
                  : pool ? *cuda::claim_pool_op(*lowered, n)
                         : cuda::claim_layout_op(*lowered, n);
    EXPECT_TRUE(claim.yes) << n.info().keyword << ": " << claim.reason;
  }
  EXPECT_EQ(convs, 4u) << text;
  EXPECT_EQ(pools, 4u) << text;
  // In at the input, out at the feature-map output; the pooled vector leaves by a reshape.
  const LayoutSummary s = summarize_layout(*lowered);
  EXPECT_EQ(s.block, kNhwcBlock);
  EXPECT_EQ(s.to_nchwc, 1) << text;
  EXPECT_EQ(s.to_nchw, 1) << text;

  // Where values lie changes, not what is computed: the reference runs both graphs alike.
  CompileOptions ref;
  ref.fuse = false;
  ref.backend = "reference";
  Expected<Executable> want = Session().compile(*fused, ref), got = Session().compile(*lowered, ref);
  ASSERT_TRUE(want && got) << (want ? got.status().message() : want.status().message());
  NamedArrays in = {{"x", testing::random_array(DType::F16, {2, 8, 17, 19}, 3, -1, 1)}};
  Expected<std::vector<Array>> a = want->run(in), b = got->run(in);
  ASSERT_TRUE(a && b) << (a ? b.status().message() : a.status().message());
  ASSERT_EQ(a->size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_TRUE((*a)[k].same_data((*b)[k])) << "output " << k;
}

TEST(CudaNhwc, ConvsStayNchwUnlessAskedFor) {
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (DType d : {DType::F16, DType::F32}) {
    Expected<Graph> g = small_cnn(d);
    ASSERT_TRUE(g) << g.status().message();
    Expected<Graph> fused = fused_for_cuda(*g);
    ASSERT_TRUE(fused) << fused.status().message();
    if (const char* e = std::getenv("FUSEBOX_CUDA_NHWC"); !e || !*e) {
      Expected<Graph> plain = cuda::assign_conv_layout(*fused, with_layout(CudaConvLayout::Auto));
      ASSERT_TRUE(plain) << plain.status().message();
      EXPECT_EQ(summarize_layout(*plain).to_string(), "nchw");
    }
    Expected<Graph> asked = cuda::assign_conv_layout(*fused, with_layout(CudaConvLayout::Nhwc));
    ASSERT_TRUE(asked) << asked.status().message();
    EXPECT_EQ(summarize_layout(*asked).block, kNhwcBlock) << print_graph(*asked);
    Expected<Graph> never = cuda::assign_conv_layout(*fused, with_layout(CudaConvLayout::Nchw));
    ASSERT_TRUE(never) << never.status().message();
    EXPECT_EQ(summarize_layout(*never).to_string(), "nchw");
  }
}

// A conv whose weights are a graph input stays NCHW: the NHWC kernel reorders constant weights once.
TEST(CudaNhwc, WeightsThatAreInputsStayNchw) {
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  GraphBuilder b("input_weights");
  ValueId y = b.op(Op::Conv2d, {b.input("x", DType::F16, make_shape({1, 8, 9, 9})),
                                b.input("w", DType::F16, make_shape({8, 8, 3, 3}))});
  b.output(b.relu(y));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().message();
  Expected<Graph> lowered = cuda::assign_conv_layout(*g, with_layout(CudaConvLayout::Nhwc));
  ASSERT_TRUE(lowered) << lowered.status().message();
  EXPECT_EQ(summarize_layout(*lowered).to_string(), "nchw") << print_graph(*lowered);
}

// ---- on the device -------------------------------------------------------------------------

void expect_runs_on_cuda_in_nhwc(DType d, CudaConvLayout layout, double rtol, double atol) {
  Expected<Graph> g = small_cnn(d);
  ASSERT_TRUE(g) << g.status().message();
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  dev.cuda.conv_layout = layout;
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(*g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  const Executable& plan = exes->plan;
  const Graph& lowered = plan.graph();
  EXPECT_EQ(summarize_layout(lowered).block, kNhwcBlock) << print_graph(lowered);
  for (size_t i = 0; i < lowered.nodes().size(); ++i) {
    const Node& n = lowered.nodes()[i];
    if (n.op == Op::Constant) continue;
    const Backend& on = *plan.placement().backends[size_t(plan.placement().node_backend[i])];
    EXPECT_EQ(on.name(), "cuda") << n.info().keyword << "\n" << print_graph(lowered);
  }
  for (int64_t batch : {2, 1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    NamedArrays in = {{"x", testing::random_array(d, {batch, 8, 17, 19}, uint64_t(batch), -1, 1)}};
    Expected<std::vector<Array>> want = exes->reference.run(in), got = plan.run(in);
    ASSERT_TRUE(want && got) << (want ? got.status().message() : want.status().message());
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_TRUE(testing::arrays_close((*got)[k], (*want)[k], rtol, atol)) << "output " << k;
    }
  }
}

// Tolerances as cuda_conv_test's: cuDNN sums in f32 in its own order (K = 144 here), and in f16
// it rounds the convolution to f16 before the epilogue adds the bias.
TEST(CudaNhwc, SmallCnnInF16MatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  expect_runs_on_cuda_in_nhwc(DType::F16, CudaConvLayout::Nhwc, 2e-3, 1.2e-2);
}

TEST(CudaNhwc, SmallCnnInF32MatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  if (Status s = cudnn_status(); !s.is_ok()) GTEST_SKIP() << s.message();
  expect_runs_on_cuda_in_nhwc(DType::F32, CudaConvLayout::Nhwc, 1e-4, 1.2e-4);
}

}  // namespace
}  // namespace fusebox
