// The blocked activation layout nChw<b>c: the to_nchwc / to_nchw ops, convolution and pooling
// with layout = "nchwc", and the CPU backend's lowering that keeps CNN activations blocked
// between convolutions (backends/assign_blocked_layout.h).
//
// Checked by behaviour: small CNN blocks (dense, depthwise and 1x1 convs, per-channel and
// channel-free broadcasts, constants, a squeeze-excite gate, residuals, pooling, concat,
// values read by both blocked and plain consumers, graph outputs in the middle) are
//  - lowered and run on the reference backend: bit-identical to the original, since every op
//    computes the same values, only their place in memory changes;
//  - compiled on the cpu backend with every block (0 = NCHW, 4, 8, 16, NHWC; the blocks this host's
//    oneDNN does not prefer take its slower kernels, so both paths run on any host) and compared
//    with the reference within 1e-5 of max(1, max|expected|) (oneDNN accumulates in f32 in its
//    own order).
// Inputs are random, never zeros; the runtime poisons intermediate buffers in tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "backends/assign_blocked_layout.h"
#include "backends/cpu/onednn/onednn_kernels.h"
#include "ir/layout.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::random_array;

// conv (bias, relu) -> depthwise conv -> per-channel scale [1,16,1,1] -> sigmoid -> conv ->
// residual add -> relu -> max pool (an output) -> global average pool (an output).
constexpr const char* kResidualBlock = R"(
func @block(%x: f32[N,16,9,7], %w1: f32[16,16,3,3], %b1: f32[16], %dw: f32[16,1,3,3], %s: f32[1,16,1,1],
            %w2: f32[16,16,3,3]) -> (f32[N,16,9,7], f32[N,16,1,1]) {
  %0 = conv2d %x, %w1, %b1 {pad = [1, 1, 1, 1]} : f32[N,16,9,7]
  %1 = relu %0 : f32[N,16,9,7]
  %2 = conv2d %1, %dw {pad = [1, 1, 1, 1], groups = 16} : f32[N,16,9,7]
  %3 = mul %2, %s : f32[N,16,9,7]
  %4 = sigmoid %3 : f32[N,16,9,7]
  %5 = conv2d %4, %w2 {pad = [1, 1, 1, 1]} : f32[N,16,9,7]
  %6 = add %5, %1 : f32[N,16,9,7]
  %7 = relu %6 : f32[N,16,9,7]
  %p = max_pool2d %7 {kernel = [3, 3], pad = [1, 1, 1, 1]} : f32[N,16,9,7]
  %g = global_avg_pool %p : f32[N,16,1,1]
  return %p, %g
}
)";

// A squeeze-excite gate whose inner convs have channel counts the block does not divide (so they
// stay NCHW), a rank-3 constant scale, a scalar, a channel-free [1,1,6,6] operand, concat along
// channels, an average pool and a softmax that needs NCHW.
constexpr const char* kSqueezeExcite = R"(
func @se(%x: f32[1,8,6,6], %w: f32[16,8,3,3], %wa: f32[4,16,1,1], %wb: f32[16,4,1,1], %m: f32[1,1,6,6])
    -> (f32[1,32,3,3], f32[1,16,6,6]) {
  %c = constant {value = dense<f32[16,1,1]: [0.5, -1.0, 1.5, 2.0, -0.25, 0.75, 1.25, -2.0, 0.125, 3.0, -0.5, 1.0, 0.25, -1.5, 2.5, -0.75]>} : f32[16,1,1]
  %h = constant {value = dense<f32[]: [0.5]>} : f32[]
  %0 = conv2d %x, %w {pad = [1, 1, 1, 1]} : f32[1,16,6,6]
  %1 = mul %0, %c : f32[1,16,6,6]
  %2 = add %1, %h : f32[1,16,6,6]
  %a = add %2, %m : f32[1,16,6,6]
  %g = global_avg_pool %a : f32[1,16,1,1]
  %3 = conv2d %g, %wa : f32[1,4,1,1]
  %4 = relu %3 : f32[1,4,1,1]
  %5 = conv2d %4, %wb : f32[1,16,1,1]
  %6 = sigmoid %5 : f32[1,16,1,1]
  %7 = mul %a, %6 : f32[1,16,6,6]
  %8 = concat %7, %a {axis = 1} : f32[1,32,6,6]
  %y = avg_pool2d %8 {kernel = [2, 2], stride = [2, 2]} : f32[1,32,3,3]
  %z = softmax %a {axis = 1} : f32[1,16,6,6]
  return %y, %z
}
)";

// An FPN-like merge: nearest upsampling by scales and by sizes (blocked), concat with a conv at
// the larger size, a linear upsampling (left NCHW) and a transposed conv (NCHW only).
constexpr const char* kUpsample = R"(
func @fpn(%x: f32[N,8,4,6], %big: f32[N,8,8,12], %w: f32[16,8,3,3], %w2: f32[16,32,1,1], %wt: f32[16,8,2,2])
    -> (f32[N,16,8,12], f32[N,16,16,24], f32[N,8,16,24]) {
  %0 = conv2d %x, %w {pad = [1, 1, 1, 1]} : f32[N,16,4,6]
  %1 = resize %0 {scales = [1.0, 1.0, 2.0, 2.0], coordinate = "asymmetric", nearest_mode = "floor"} : f32[N,16,8,12]
  %2 = conv2d %big, %w {pad = [1, 1, 1, 1]} : f32[N,16,8,12]
  %3 = concat %1, %2 {axis = 1} : f32[N,32,8,12]
  %4 = conv2d %3, %w2 : f32[N,16,8,12]
  %5 = relu %4 : f32[N,16,8,12]
  %6 = resize %5 {sizes = [N, 16, 16, 24]} : f32[N,16,16,24]
  %7 = resize %5 {scales = [1.0, 1.0, 2.0, 2.0], mode = "linear"} : f32[N,16,16,24]
  %8 = add %6, %7 : f32[N,16,16,24]
  %9 = conv_transpose2d %5, %wt {stride = [2, 2]} : f32[N,8,16,24]
  return %5, %8, %9
}
)";

Graph parse_one(const char* text) {
  Expected<Module> m = parse_module(text);
  EXPECT_TRUE(m) << m.status().to_string();
  return m ? m->functions.at(0) : Graph();
}

NamedArrays random_inputs(const Graph& g, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  NamedArrays in;
  for (ValueId v : g.inputs()) {
    std::vector<int64_t> dims;
    for (const Dim& d : g.type(v).shape) dims.push_back(d.is_static() ? d.value() : n);
    bool weight = g.value(v).name.size() > 1 && g.value(v).name[0] == 'w';
    in[g.value(v).name] = random_array(DType::F32, dims, rng(), weight ? -0.5 : -2.0, weight ? 0.5 : 2.0);
  }
  return in;
}

std::vector<Array> run(const Graph& g, const NamedArrays& in, const char* backend, bool fuse, int64_t block,
                       bool winograd = false) {
  CompileOptions o;
  o.cpu.winograd = winograd;
  o.backend = backend;
  o.fuse = fuse;
  o.verify_each_pass = true;
  o.cpu.nchwc_block = block;
  Expected<Executable> exe = Session(0).compile(g, o);
  EXPECT_TRUE(exe) << exe.status().to_string();
  if (!exe) return {};
  Expected<std::vector<Array>> out = exe->run(in);
  EXPECT_TRUE(out) << out.status().to_string() << "\n" << print_graph(exe->graph());
  return out ? *out : std::vector<Array>{};
}

::testing::AssertionResult close(const Array& got, const Array& want) {
  if (got.shape() != want.shape()) return ::testing::AssertionFailure() << got.type_string() << " vs " << want.type_string();
  std::vector<double> a = testing::to_doubles(got), b = testing::to_doubles(want);
  double scale = 1;
  for (double v : b) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(a[i] - b[i]) <= 1e-5 * scale)) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

size_t count_op(const Graph& g, Op op) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

TEST(BlockedLayout, ConversionsRoundTripAndPlaceEachChannel) {
  Array x = random_array(DType::F32, {2, 24, 3, 5}, 11);
  for (int64_t b : {4, 8, 24}) {
    Array blocked = to_nchwc(x, b);
    ASSERT_EQ(blocked.shape(), (std::vector<int64_t>{2, 24 / b, 3, 5, b}));
    // Element (n, c, h, w) lies at [n, c/b, h, w, c%b].
    for (int64_t n : {0, 1}) {
      for (int64_t c : {0, 5, 23}) {
        int64_t plain_at = ((n * 24 + c) * 3 + 2) * 5 + 4;
        int64_t blocked_at = ((((n * (24 / b) + c / b) * 3 + 2) * 5 + 4) * b) + c % b;
        EXPECT_EQ(x.get_f64(plain_at), blocked.get_f64(blocked_at)) << "b " << b << " c " << c;
      }
    }
    EXPECT_TRUE(to_nchw(blocked).same_data(x));
  }
}

TEST(BlockedLayout, OneDnnReorderEqualsTheReferenceConversion) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "built without oneDNN";
  Array x = random_array(DType::F32, {3, 32, 7, 9}, 5);
  for (int64_t b : {8, 16, 32}) {  // 32: one block of all channels, NHWC's order
    Array want = to_nchwc(x, b);
    Array got(DType::F32, want.shape());
    got.fill_bytes(0xFF);
    ASSERT_TRUE(cpu::onednn::reorder_layout(x, got).is_ok());
    EXPECT_TRUE(got.same_data(want));
    Array back(DType::F32, x.shape());
    back.fill_bytes(0xFF);
    ASSERT_TRUE(cpu::onednn::reorder_layout(got, back).is_ok());
    EXPECT_TRUE(back.same_data(x));
  }
  // A few channels in NHWC's order (a network's input image), small and large.
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{1, 3, 5, 7}, {2, 1, 4, 3}, {2, 4, 97, 203}}) {
    Array img = random_array(DType::F32, shape, 6);
    Array want = to_nchwc(img, shape[1]);
    Array got(DType::F32, want.shape());
    got.fill_bytes(0xFF);
    ASSERT_TRUE(cpu::onednn::reorder_layout(img, got).is_ok());
    EXPECT_TRUE(got.same_data(want)) << img.type_string();
    Array back(DType::F32, img.shape());
    back.fill_bytes(0xFF);
    ASSERT_TRUE(cpu::onednn::reorder_layout(got, back).is_ok());
    EXPECT_TRUE(back.same_data(img)) << img.type_string();
  }
}

TEST(BlockedLayout, ShapeErrorsNameTheOperand) {
  Expected<Module> m = parse_module(R"(
func @f(%x: f32[1,12,4,4]) -> f32[1,2,4,4,8] {
  %0 = to_nchwc %x {block = 8} : f32[1,2,4,4,8]
  return %0
}
)");
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("static C divisible by 8"), std::string::npos) << m.status().message();
  m = parse_module(R"(
func @f(%x: f32[1,16,4,4], %w: f32[16,16,1,1]) -> f32[1,16,4,4] {
  %0 = conv2d %x, %w {layout = "nchwc"} : f32[1,16,4,4]
  return %0
}
)");
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("must be [N,C/b,H,W,b]"), std::string::npos) << m.status().message();
  m = parse_module(R"(
func @f(%x: f32[1,2,4,4,8], %w: f32[16,16,1,1]) -> f32[1,1,4,4,16] {
  %0 = conv2d %x, %w {layout = "nhwc"} : f32[1,1,4,4,16]
  return %0
}
)");
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("layout nhwc: operand 0 must be [N,1,H,W,C]"), std::string::npos)
      << m.status().message();
}

// Channels-last: every value is one block of its own channels, so the convs whose channel counts
// no block of 4, 8 or 16 divides (the squeeze-excite's 16->4->16) stay in it too, and a concat of
// channels joins the last axis.
TEST(BlockedLayout, NhwcKeepsEveryChannelCountChannelsLast) {
  Graph g = parse_one(kSqueezeExcite);
  Expected<Graph> lowered = assign_blocked_layout(g, kNhwcBlock);
  ASSERT_TRUE(lowered) << lowered.status().to_string();
  ASSERT_TRUE(verify(*lowered).is_ok()) << print_graph(*lowered);
  int nhwc_convs = 0;
  for (const Node& n : lowered->nodes()) {
    if (n.op == Op::Conv2d) {
      EXPECT_TRUE(has_nhwc_layout(n)) << print_graph(*lowered);
      nhwc_convs += has_nhwc_layout(n);
      EXPECT_EQ(lowered->type(n.outputs[0]).shape[1], Dim(1));
    }
    if (n.op == Op::Concat) {
      EXPECT_EQ(n.attr_i64("axis"), 4);
      EXPECT_EQ(lowered->type(n.outputs[0]).to_string(), "f32[1,1,6,6,32]");
    }
  }
  EXPECT_EQ(nhwc_convs, 3);
  LayoutSummary s = summarize_layout(*lowered);
  EXPECT_EQ(s.block, kNhwcBlock);
  EXPECT_EQ(s.to_string().rfind("nhwc: ", 0), 0u) << s.to_string();
  // x enters once; the softmax over channels and the pooled output leave (the 16-channel value
  // feeds both the pool and the softmax: one to_nchw for it).
  EXPECT_EQ(s.to_nchwc, 1) << print_graph(*lowered);
  EXPECT_EQ(s.to_nchw, 2) << print_graph(*lowered);
}

TEST(BlockedLayout, LoweringKeepsActivationsBlockedBetweenConvs) {
  Graph g = parse_one(kResidualBlock);
  Expected<Graph> lowered = assign_blocked_layout(g, 8);
  ASSERT_TRUE(lowered) << lowered.status().to_string();
  ASSERT_TRUE(verify(*lowered).is_ok()) << print_graph(*lowered);
  // One reorder in (x) and one out (y); nothing between the convs. The scale input [1,16,1,1]
  // and the pooled output [N,16,1,1] are one pixel each, where both layouts hold the same bytes:
  // they convert by reshape.
  LayoutSummary s = summarize_layout(*lowered);
  EXPECT_EQ(s.to_nchwc, 1) << print_graph(*lowered);
  EXPECT_EQ(s.to_nchw, 1) << print_graph(*lowered);
  EXPECT_EQ(count_op(*lowered, Op::Reshape), 2u) << print_graph(*lowered);
  EXPECT_EQ(s.blocked_nodes, 10) << print_graph(*lowered);
  EXPECT_EQ(s.block, 8);
  for (const Node& n : lowered->nodes()) {
    if (n.op == Op::Conv2d || n.op == Op::MaxPool2d || n.op == Op::GlobalAvgPool) EXPECT_TRUE(has_nchwc_layout(n));
  }
  // The outputs keep their names and NCHW types.
  EXPECT_EQ(lowered->value(lowered->outputs()[0]).name, "p");
  EXPECT_EQ(lowered->type(lowered->outputs()[1]).to_string(), "f32[N,16,1,1]");
}

TEST(BlockedLayout, ChannelCountsTheBlockDoesNotDivideStayPlain) {
  Graph g = parse_one(kSqueezeExcite);
  Expected<Graph> lowered = assign_blocked_layout(g, 8);
  ASSERT_TRUE(lowered) << lowered.status().to_string();
  ASSERT_TRUE(verify(*lowered).is_ok()) << print_graph(*lowered);
  int plain_convs = 0;
  for (const Node& n : lowered->nodes()) {
    if (n.op == Op::Conv2d && !has_nchwc_layout(n)) ++plain_convs;
  }
  EXPECT_EQ(plain_convs, 2) << print_graph(*lowered);  // 16->4 and 4->16
  EXPECT_EQ(count_op(*lowered, Op::Softmax), 1u);
}

TEST(BlockedLayout, NearestResizeAndConcatStayBlocked) {
  Graph g = parse_one(kUpsample);
  Expected<Graph> lowered = assign_blocked_layout(g, 8);
  ASSERT_TRUE(lowered) << lowered.status().to_string();
  ASSERT_TRUE(verify(*lowered).is_ok()) << print_graph(*lowered);
  int blocked_resizes = 0, plain_resizes = 0;
  for (const Node& n : lowered->nodes()) {
    if (n.op == Op::Resize) (lowered->type(n.outputs[0]).rank() == 5 ? blocked_resizes : plain_resizes)++;
    if (n.op == Op::Concat) EXPECT_EQ(lowered->type(n.outputs[0]).rank(), 5);
    if (n.op == Op::ConvTranspose2d) EXPECT_EQ(lowered->type(n.inputs[0]).rank(), 4);
  }
  EXPECT_EQ(blocked_resizes, 2) << print_graph(*lowered);
  EXPECT_EQ(plain_resizes, 1) << print_graph(*lowered);
}

TEST(BlockedLayout, LoweredGraphsAreBitIdenticalOnTheReference) {
  for (const char* text : {kResidualBlock, kSqueezeExcite, kUpsample}) {
    Graph g = parse_one(text);
    NamedArrays in = random_inputs(g, 2, 3);
    std::vector<Array> want = run(g, in, "reference", false, 0);
    for (int64_t b : {int64_t(4), int64_t(8), int64_t(16), kNhwcBlock}) {
      Expected<Graph> lowered = assign_blocked_layout(g, b);
      ASSERT_TRUE(lowered) << lowered.status().to_string();
      std::vector<Array> got = run(*lowered, in, "reference", false, 0);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(got[i].same_data(want[i])) << g.name() << " block " << b << " output " << i;
      }
    }
  }
}

TEST(BlockedLayout, CpuBackendEqualsTheReferenceWithEveryBlock) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "built without oneDNN";
  for (const char* text : {kResidualBlock, kSqueezeExcite, kUpsample}) {
    Graph g = parse_one(text);
    for (int64_t n : {1, 3}) {
      NamedArrays in = random_inputs(g, n, 17 + uint64_t(n));
      std::vector<Array> want = run(g, in, "reference", false, 0);
      for (int64_t b : {int64_t(0), int64_t(4), int64_t(8), int64_t(16), CpuBackendOptions::kNhwc,
                        CpuBackendOptions::kAutoBlock}) {
        std::vector<Array> got = run(g, in, "cpu", true, b);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_TRUE(close(got[i], want[i])) << g.name() << " N " << n << " block " << b << " output " << i;
        }
      }
    }
  }
}

// got against want element by element: NaN where want is NaN, equal where want is infinite,
// within rel * |want| elsewhere (rel 0: equal).
void expect_elements(const Array& got, const Array& want, double rel, const std::string& label) {
  const std::vector<double> a = testing::to_doubles(got), w = testing::to_doubles(want);
  ASSERT_EQ(a.size(), w.size()) << label;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(w[i])) {
      EXPECT_TRUE(std::isnan(a[i])) << label << " element " << i;
    } else if (rel == 0 || std::isinf(w[i])) {
      EXPECT_EQ(a[i], w[i]) << label << " element " << i;
    } else {
      EXPECT_NEAR(a[i], w[i], rel * std::fabs(w[i])) << label << " element " << i;
    }
  }
}

// oneDNN's max pool drops a NaN in the window; the cpu backend gives such an input to the
// reference kernel, so the NaN wins as it does unfused, in every layout.
TEST(BlockedLayout, ANanInAMaxPoolWindowWinsInEveryLayout) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "built without oneDNN";
  Graph g = parse_one(R"(
func @pool(%x: f32[N,16,8,8]) -> (f32[N,16,4,4]) {
  %p = max_pool2d %x {kernel = [2, 2], stride = [2, 2]} : f32[N,16,4,4]
  return %p
}
)");
  NamedArrays in = random_inputs(g, 2, 31);
  Array& x = in.begin()->second;
  for (int64_t i : {int64_t(0), int64_t(77), int64_t(300), int64_t(1029), int64_t(2047)}) {
    x.set_f64(i, std::nan(""));
  }
  std::vector<Array> want = run(g, in, "reference", false, 0);
  ASSERT_EQ(want.size(), 1u);
  const std::vector<double> w = testing::to_doubles(want[0]);
  EXPECT_EQ(std::count_if(w.begin(), w.end(), [](double v) { return std::isnan(v); }), 5);
  for (int64_t b :
       {int64_t(0), int64_t(8), int64_t(16), CpuBackendOptions::kNhwc, CpuBackendOptions::kAutoBlock}) {
    std::vector<Array> got = run(g, in, "cpu", true, b);
    ASSERT_EQ(got.size(), 1u);
    expect_elements(got[0], want[0], 0, "block " + std::to_string(b));
  }
}

// The cpu backend's global_avg_pool kernel (f32 lanes in blocks of 256 positions, each block's sum
// in double; with fewer slabs than threads, parts of a slab's positions or runs of its lanes on
// different threads) against the reference, in every layout, at batch 1 and 3, with values far
// from zero: 23x23 = 529 positions (three blocks) with 144 channels (groups of 32 and 16 lanes in
// NHWC) and 147 (three lanes alone), and 16x16 (one block: lanes split) with 147; the depthwise
// conv keeps channels apart, so the NaN of one channel and the infinity of another reach their
// means alone.
TEST(BlockedLayout, GlobalAvgPoolMatchesTheReferenceInEveryLayout) {
  for (auto [c, hw] : {std::pair<int64_t, int64_t>{144, 23}, {147, 23}, {147, 16}}) {
    const std::string cs = std::to_string(c), xs = cs + "," + std::to_string(hw) + "," + std::to_string(hw);
    const std::string text = "func @gap(%x: f32[N," + xs + "], %w: f32[" + cs + ",1,1,1]) -> (f32[N," + cs +
                             ",1,1]) {\n  %c = conv2d %x, %w {groups = " + cs + "} : f32[N," + xs +
                             "]\n  %p = global_avg_pool %c : f32[N," + cs + ",1,1]\n  return %p\n}\n";
    Graph g = parse_one(text.c_str());
    for (int64_t n : {int64_t(1), int64_t(3)}) {
      NamedArrays in = random_inputs(g, n, 40 + n);
      Array& x = in.at("x");
      for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, x.get_f64(i) + 300.0);
      const int64_t plane = hw * hw;
      x.set_f64(5 * plane + 17, std::nan(""));                              // channel 5 of item 0
      x.set_f64(131 * plane - 1, std::numeric_limits<double>::infinity());  // channel 130
      std::vector<Array> want = run(g, in, "reference", false, 0);
      ASSERT_EQ(want.size(), 1u);
      const std::vector<double> w = testing::to_doubles(want[0]);
      ASSERT_TRUE(std::isnan(w[5]) && std::isinf(w[130]));
      for (int64_t b :
           {int64_t(0), int64_t(8), int64_t(16), CpuBackendOptions::kNhwc, CpuBackendOptions::kAutoBlock}) {
        std::vector<Array> got = run(g, in, "cpu", true, b);
        ASSERT_EQ(got.size(), 1u);
        expect_elements(got[0], want[0], 2e-6,
                        "c " + cs + " hw " + std::to_string(hw) + " n " + std::to_string(n) + " block " + std::to_string(b));
      }
    }
  }
}

// CpuBackendOptions::winograd: 3x3 stride-1 convs (with bias, residual and relu, as in ResNet) stay
// within 5e-5 of the largest output of the reference in every layout; the convs it does not take
// (stride 2, groups) give bit for bit what the direct algorithm gives.
TEST(BlockedLayout, WinogradConvsMatchTheReferenceAndOthersAreUnchanged) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "built without oneDNN";
  Graph g = parse_one(R"(
func @res(%x: f32[N,64,14,14], %w1: f32[64,64,3,3], %b1: f32[64], %w2: f32[64,64,3,3], %b2: f32[64], %w3: f32[64,16,3,3], %w4: f32[32,64,3,3]) -> (f32[N,64,14,14], f32[N,32,7,7]) {
  %c1 = conv2d %x, %w1, %b1 {pad = [1, 1, 1, 1]} : f32[N,64,14,14]
  %r1 = relu %c1 : f32[N,64,14,14]
  %c2 = conv2d %r1, %w2, %b2 {pad = [1, 1, 1, 1]} : f32[N,64,14,14]
  %s = add %c2, %x : f32[N,64,14,14]
  %r2 = relu %s : f32[N,64,14,14]
  %c3 = conv2d %r2, %w3 {pad = [1, 1, 1, 1], groups = 4} : f32[N,64,14,14]
  %c4 = conv2d %c3, %w4 {pad = [1, 1, 1, 1], stride = [2, 2]} : f32[N,32,7,7]
  return %r2, %c4
}
)");
  for (int64_t n : {int64_t(1), int64_t(2)}) {
    NamedArrays in = random_inputs(g, n, 50 + n);
    std::vector<Array> want = run(g, in, "reference", false, 0);
    ASSERT_EQ(want.size(), 2u);
    for (int64_t b : {int64_t(0), int64_t(16), CpuBackendOptions::kNhwc}) {
      std::vector<Array> got = run(g, in, "cpu", true, b, true);
      ASSERT_EQ(got.size(), 2u);
      std::vector<double> a = testing::to_doubles(got[0]), w = testing::to_doubles(want[0]);
      double scale = 1;
      for (double v : w) scale = std::max(scale, std::fabs(v));
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(a[i], w[i], 5e-5 * scale) << "n " << n << " block " << b << " element " << i;
      }
      // The last two convs read %r2: feed both plans the same %r2 to compare them alone.
      Graph tail = parse_one(R"(
func @tail(%r: f32[N,64,14,14], %w3: f32[64,16,3,3], %w4: f32[32,64,3,3]) -> (f32[N,32,7,7]) {
  %c3 = conv2d %r, %w3 {pad = [1, 1, 1, 1], groups = 4} : f32[N,64,14,14]
  %c4 = conv2d %c3, %w4 {pad = [1, 1, 1, 1], stride = [2, 2]} : f32[N,32,7,7]
  return %c4
}
)");
      NamedArrays tail_in{{"r", got[0]}, {"w3", in.at("w3")}, {"w4", in.at("w4")}};
      std::vector<Array> direct = run(tail, tail_in, "cpu", true, b, false);
      std::vector<Array> wino = run(tail, tail_in, "cpu", true, b, true);
      ASSERT_EQ(direct.size(), 1u);
      ASSERT_EQ(wino.size(), 1u);
      EXPECT_EQ(testing::to_doubles(direct[0]), testing::to_doubles(wino[0])) << "block " << b;
    }
  }
}

TEST(BlockedLayout, TheCpuBackendLowersOnlyWithOneDnnAndABlock) {
  Graph g = parse_one(kResidualBlock);
  for (int64_t b : {int64_t(0), int64_t(8)}) {
    CompileOptions o;
    o.cpu.nchwc_block = b;
    Expected<Executable> exe = Session(0).compile(g, o);
    ASSERT_TRUE(exe) << exe.status().to_string();
    size_t reorders = count_op(exe->graph(), Op::ToNchwc) + count_op(exe->graph(), Op::ToNchw);
    EXPECT_EQ(reorders > 0, b != 0 && cpu::onednn::available()) << print_graph(exe->graph());
  }
}

}  // namespace
}  // namespace fusebox
