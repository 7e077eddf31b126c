// The CPU attention kernel (backends/cpu/attention_kernel.h) against fused_attention's reference
// kernel (its unfused primitives, one op at a time), on every instruction set this processor runs
// (generic 128-bit vectors always, AVX2 and AVX-512 where present), over random shapes: sequence
// 1, odd lengths (37, 129: partial query and key blocks), Tq != Tk, several heads, head dims that
// are not a multiple of the vector width, both operand layouts, broadcast masks, causal.
//
// Inputs are random and never zero; the result is poisoned (three byte patterns) before each run,
// so an element the kernel does not write shows. Tolerance (f32): 2e-5 relative plus 2e-5
// absolute per element: the kernel reassociates the two products' sums and the softmax's (blocks,
// fused multiply-adds, an online maximum) and its e^x is exact to 2e-7.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/attention_kernel.h"
#include "ir/fused_attention_op.h"
#include "ir/parser.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using cpu::AttentionIsa;

Array nonzero(std::vector<int64_t> shape, uint64_t seed) {
  Array a = testing::random_array(DType::F32, std::move(shape), seed);
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = a.get_f64(i);
    if (std::fabs(v) < 0.25) a.set_f64(i, v < 0 ? -0.25 : 0.25);
  }
  return a;
}

struct Shape4 {
  int64_t b, h, tq, tk, d;
  bool merged_q = true, merged_kv = true, merge_out = true;
  std::vector<int64_t> mask;  // empty: no mask; a -1 entry stands for "use a random -inf pattern"
  bool causal = false;
  bool masked_rows = false;   // mask some whole rows with -inf (NaN results)
};

std::vector<int64_t> operand_shape(const Shape4& s, int64_t t, bool merged) {
  return merged ? std::vector<int64_t>{s.b, t, s.h * s.d} : std::vector<int64_t>{s.b, s.h, t, s.d};
}

void check(const Shape4& s, uint64_t seed) {
  Node n{Op::FusedAttention, {}, {}, {}, nullptr, {}};
  n.attrs.set("heads", s.h);
  n.attrs.set("head_dim", s.d);
  n.attrs.set("scale", 1.0 / std::sqrt(double(s.d)));
  n.attrs.set("causal", s.causal);
  n.attrs.set("merge_heads", s.merge_out);
  std::vector<Array> in{nonzero(operand_shape(s, s.tq, s.merged_q), seed),
                        nonzero(operand_shape(s, s.tk, s.merged_kv), seed + 1),
                        nonzero(operand_shape(s, s.tk, s.merged_kv), seed + 2)};
  if (!s.mask.empty()) {
    Array m = nonzero(s.mask, seed + 3);
    // Some -inf entries, as padding masks have (never a whole row unless asked).
    for (int64_t i = 0; i < m.numel(); i += 5) m.set_f64(i, -INFINITY);
    if (s.masked_rows && m.shape().back() == m.numel()) {
      for (int64_t i = 0; i < m.numel(); ++i) m.set_f64(i, -INFINITY);
    }
    in.push_back(m);
  }
  std::vector<Array> want = testing::run_op(Op::FusedAttention, in, n.attrs);
  ASSERT_EQ(want.size(), 1u);
  for (AttentionIsa isa : cpu::attention_isas()) {
    for (uint8_t poison : testing::kPoisonBytes) {
      Array got(DType::F32, want[0].shape());
      std::memset(got.raw(), poison, got.nbytes());
      Status st = cpu::run_attention(n, in, got, isa);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      EXPECT_TRUE(testing::arrays_close(got, want[0], 2e-5, 2e-5))
          << cpu::attention_isa_name(isa) << " B=" << s.b << " H=" << s.h << " Tq=" << s.tq << " Tk=" << s.tk
          << " D=" << s.d << " causal=" << s.causal << " mask rank " << s.mask.size();
    }
  }
}

TEST(AttentionKernel, EveryInstructionSetIsListed) {
  std::vector<AttentionIsa> isas = cpu::attention_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), AttentionIsa::Generic);
}

TEST(AttentionKernel, MatchesReferenceOverShapes) {
  const Shape4 cases[] = {
      {1, 1, 1, 1, 8},           // sequence 1
      {1, 2, 37, 37, 16},        // odd: a partial query and key block
      {2, 3, 129, 129, 8},       // several blocks, batch 2
      {1, 4, 5, 70, 32},         // Tq < Tk
      {1, 2, 70, 9, 16},         // Tq > Tk
      {1, 2, 33, 40, 24},        // head dim not a multiple of the vector width
      {2, 2, 17, 19, 7},         // odd head dim
      {1, 8, 128, 128, 64},      // the benchmark's head size
      {1, 2, 5, 0, 8},           // no keys: 0, as the empty softmax times an empty v
      {1, 2, 0, 5, 8},           // no queries: an empty result
  };
  uint64_t seed = 1;
  for (const Shape4& s : cases) check(s, seed += 10);
}

TEST(AttentionKernel, SplitHeadLayouts) {
  Shape4 a{2, 3, 37, 41, 16};
  a.merged_q = false;
  check(a, 5);
  Shape4 b{1, 2, 37, 41, 16};
  b.merged_kv = false;
  b.merge_out = false;
  check(b, 6);
}

TEST(AttentionKernel, Masks) {
  // Every broadcast form: per key, per (batch, key) padding, per (query, key), full.
  for (std::vector<int64_t> mask : {std::vector<int64_t>{41}, std::vector<int64_t>{2, 1, 1, 41},
                                    std::vector<int64_t>{37, 41}, std::vector<int64_t>{2, 3, 37, 41},
                                    std::vector<int64_t>{1, 3, 1, 1}}) {
    Shape4 s{2, 3, 37, 41, 16};
    s.mask = mask;
    check(s, 7);
  }
}

TEST(AttentionKernel, Causal) {
  for (Shape4 s : {Shape4{1, 2, 37, 37, 16}, Shape4{2, 2, 129, 129, 8}, Shape4{1, 2, 5, 70, 16},
                   Shape4{1, 2, 70, 9, 16}, Shape4{1, 1, 1, 1, 8}}) {
    s.causal = true;
    check(s, 9);
    s.mask = {s.tq, s.tk};
    check(s, 10);
  }
}

TEST(AttentionKernel, RowsThatSeeNoKeyAreNaN) {
  Shape4 s{1, 2, 9, 41, 16};
  s.mask = {41};
  s.masked_rows = true;  // every key masked: softmax of -inf alone
  check(s, 11);
}

// A graph through the whole runtime: fused on the cpu backend (one fused_attention) equals
// unfused on the reference backend.
void expect_fused_equals_reference(const char* text) {
  Expected<Graph> g = parse_graph(text);
  ASSERT_TRUE(g) << g.status().to_string();
  NamedArrays in;
  uint64_t seed = 40;
  for (ValueId v : g->inputs()) in.emplace(g->value(v).name, nonzero(static_dims(g->type(v).shape), seed++));
  CompileOptions fused;
  fused.backend = "cpu";
  Expected<Executable> fast = Session().compile(*g, fused);
  ASSERT_TRUE(fast) << fast.status().to_string();
  ASSERT_EQ(testing::count_op(fast->graph(), Op::FusedAttention), 1u);
  CompileOptions plain;
  plain.fuse = false;
  plain.backend = "reference";
  Expected<Executable> slow = Session().compile(*g, plain);
  ASSERT_TRUE(slow) << slow.status().to_string();
  Expected<std::vector<Array>> got = fast->run(in), want = slow->run(in);
  ASSERT_TRUE(got && want);
  EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 2e-5, 2e-5));
}

// The demo's form with a key padding mask.
TEST(AttentionKernel, FusedGraphMatchesReference) {
  expect_fused_equals_reference(R"(
func @attn(%q: f32[2,45,64], %k: f32[2,45,64], %v: f32[2,45,64], %m: f32[2,1,1,45]) -> f32[2,45,64] {
  %0 = reshape %q {shape = [2, 45, 4, 16]} : f32[2,45,4,16]
  %1 = transpose %0 {perm = [0, 2, 1, 3]} : f32[2,4,45,16]
  %2 = reshape %k {shape = [2, 45, 4, 16]} : f32[2,45,4,16]
  %3 = transpose %2 {perm = [0, 2, 3, 1]} : f32[2,4,16,45]
  %4 = reshape %v {shape = [2, 45, 4, 16]} : f32[2,45,4,16]
  %5 = transpose %4 {perm = [0, 2, 1, 3]} : f32[2,4,45,16]
  %6 = matmul %1, %3 : f32[2,4,45,45]
  %7 = constant {value = dense<f32[]: [0.25]>} : f32[]
  %8 = mul %6, %7 : f32[2,4,45,45]
  %9 = add %8, %m : f32[2,4,45,45]
  %10 = softmax %9 {axis = -1} : f32[2,4,45,45]
  %11 = matmul %10, %5 : f32[2,4,45,16]
  %12 = transpose %11 {perm = [0, 2, 1, 3]} : f32[2,45,4,16]
  %13 = reshape %12 {shape = [2, 45, 64]} : f32[2,45,64]
  return %13
})");
}

// The scale folded into q and kᵀ by an exporter, cross attention (Tk != Tq).
TEST(AttentionKernel, ScaledInputsGraphMatchesReference) {
  expect_fused_equals_reference(R"(
func @attn(%q: f32[1,21,64], %k: f32[1,33,64], %v: f32[1,33,64]) -> f32[1,21,64] {
  %c = constant {value = dense<f32[]: [0.4]>} : f32[]
  %d = constant {value = dense<f32[]: [0.6]>} : f32[]
  %0 = mul %q, %c : f32[1,21,64]
  %1 = reshape %0 {shape = [1, 21, 2, 32]} : f32[1,21,2,32]
  %2 = transpose %1 {perm = [0, 2, 1, 3]} : f32[1,2,21,32]
  %3 = reshape %k {shape = [1, 33, 2, 32]} : f32[1,33,2,32]
  %4 = transpose %3 {perm = [0, 2, 1, 3]} : f32[1,2,33,32]
  %5 = transpose %4 {perm = [0, 1, 3, 2]} : f32[1,2,32,33]
  %6 = mul %5, %d : f32[1,2,32,33]
  %7 = reshape %v {shape = [1, 33, 2, 32]} : f32[1,33,2,32]
  %8 = transpose %7 {perm = [0, 2, 1, 3]} : f32[1,2,33,32]
  %9 = matmul %2, %6 : f32[1,2,21,33]
  %10 = softmax %9 {axis = -1} : f32[1,2,21,33]
  %11 = matmul %10, %8 : f32[1,2,21,32]
  %12 = transpose %11 {perm = [0, 2, 1, 3]} : f32[1,21,2,32]
  %y = reshape %12 {shape = [1, 21, 64]} : f32[1,21,64]
  return %y
})");
}

// PyTorch's nn.MultiheadAttention export (opset 17, sequence first, 4 heads of 16 over a batch of
// 2): in-projection, slices, [T,N,D] heads, q divided by sqrt(D), kᵀ by transpose [1,2,0],
// rank-3 scores, the heads merged back and the out-projection. The input is scaled down first:
// with every operand drawn from [0.25, 2] in size, the scores would reach about 60 and the
// softmax would be close to one-hot, where any rounding difference of the projections shows.
TEST(AttentionKernel, MultiheadAttentionExportMatchesReference) {
  expect_fused_equals_reference(R"(
func @mha(%x0: f32[10,2,64], %w: f32[64,192], %b: f32[192], %wo: f32[64,64], %bo: f32[64]) -> f32[10,2,64] {
  %s = constant {value = dense<f32[]: [0.05]>} : f32[]
  %x = mul %x0, %s : f32[10,2,64]
  %0 = matmul %x, %w : f32[10,2,192]
  %1 = add %b, %0 : f32[10,2,192]
  %2 = slice %1 {starts = [0], ends = [64], axes = [-1], steps = [1]} : f32[10,2,64]
  %3 = slice %1 {starts = [64], ends = [128], axes = [-1], steps = [1]} : f32[10,2,64]
  %4 = slice %1 {starts = [128], ends = [192], axes = [-1], steps = [1]} : f32[10,2,64]
  %5 = reshape %2 {shape = [10, 8, 16]} : f32[10,8,16]
  %6 = transpose %5 {perm = [1, 0, 2]} : f32[8,10,16]
  %7 = reshape %3 {shape = [10, 8, 16]} : f32[10,8,16]
  %8 = reshape %4 {shape = [10, 8, 16]} : f32[10,8,16]
  %9 = transpose %8 {perm = [1, 0, 2]} : f32[8,10,16]
  %c = constant {value = dense<f32[]: [4.0]>} : f32[]
  %10 = div %6, %c : f32[8,10,16]
  %11 = transpose %7 {perm = [1, 2, 0]} : f32[8,16,10]
  %12 = matmul %10, %11 : f32[8,10,10]
  %13 = softmax %12 {axis = 2} : f32[8,10,10]
  %14 = matmul %13, %9 : f32[8,10,16]
  %15 = transpose %14 {perm = [1, 0, 2]} : f32[10,8,16]
  %16 = reshape %15 {shape = [20, 64]} : f32[20,64]
  %17 = transpose %wo {perm = [1, 0]} : f32[64,64]
  %18 = matmul %16, %17 : f32[20,64]
  %19 = add %18, %bo : f32[20,64]
  %y = reshape %19 {shape = [10, 2, 64]} : f32[10,2,64]
  return %y
})");
}

}  // namespace
}  // namespace fusebox
