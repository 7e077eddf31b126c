// The fused contractions (fused_matmul_bias_act, fused_matmul_residual, fused_conv_bias_act) and
// the passes that build them, checked by behaviour: random graphs of matmul/conv with bias,
// batch norm, per-channel affine, residual and every epilogue activation are compiled with the
// CPU pipeline; the fused graph must contain the expected fused kind and its results must equal
// the unfused graph run op by op on the reference backend. Inputs are random, never zeros.
//
// Tolerance: 1e-5 relative to max(1, max|expected|) per output. The fused forms reassociate a
// little: a bias add moves into conv2d's own (one rounding instead of two), batch norm and the
// per-channel scale fold into the weights, and the CPU backend's contractions accumulate in f32
// (the reference in double).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fusion/fuse.h"
#include "ir/epilogue.h"
#include "ir/fused_ops.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::random_array;

using testing::close_to_scale;
using testing::count_op;

Expected<std::vector<Array>> run(const Graph& g, const NamedArrays& in, bool fused) {
  CompileOptions o;
  o.fuse = fused;
  o.verify_each_pass = true;
  if (!fused) o.backend = "reference";
  FUSEBOX_ASSIGN_OR_RETURN(Executable exe, Session().compile(g, o));
  return exe.run(in);
}

// Compiles `g` fused, checks it holds `kind` `want` times, and compares with the reference.
void expect_fused_equals_reference(const Graph& g, const NamedArrays& in, Op kind, size_t want) {
  CompileOptions o;
  o.verify_each_pass = true;
  Expected<Executable> exe = Session().compile(g, o);
  ASSERT_TRUE(exe) << exe.status().to_string();
  EXPECT_EQ(count_op(exe->graph(), kind), want) << print_graph(exe->graph());
  EXPECT_EQ(count_op(exe->graph(), Op::BatchNorm), 0u) << print_graph(exe->graph());
  Expected<std::vector<Array>> got = exe->run(in);
  Expected<std::vector<Array>> want_out = run(g, in, false);
  ASSERT_TRUE(got) << got.status().to_string();
  ASSERT_TRUE(want_out) << want_out.status().to_string();
  ASSERT_EQ(got->size(), want_out->size());
  for (size_t i = 0; i < got->size(); ++i) EXPECT_TRUE(close_to_scale((*got)[i], (*want_out)[i])) << "output " << i << "\n" << print_graph(exe->graph());
}

// The activation node of each epilogue activation, applied with the builder.
ValueId activate(GraphBuilder& b, EpilogueAct act, ValueId v) {
  switch (act) {
    case EpilogueAct::None: return v;
    case EpilogueAct::Relu: return b.relu(v);
    case EpilogueAct::LeakyRelu: return b.op(Op::LeakyRelu, {v}, {{"alpha", 0.1}});
    case EpilogueAct::Clip: return b.op(Op::Clip, {v}, {{"min", 0.0}, {"max", 6.0}});
    case EpilogueAct::Sigmoid: return b.sigmoid(v);
    case EpilogueAct::Tanh: return b.tanh(v);
    case EpilogueAct::HardSigmoid: return b.op(Op::HardSigmoid, {v}, {{"alpha", 0.25}, {"beta", 0.4}});
    case EpilogueAct::HardSwish: return b.op(Op::HardSwish, {v});
    case EpilogueAct::Silu: return b.op(Op::Silu, {v});
    case EpilogueAct::Gelu: return b.gelu(v, false);
    case EpilogueAct::GeluTanh: return b.gelu(v, true);
  }
  return v;
}

TEST(FusedContraction, EveryActivationNameIsInTheOpSchema) {
  // ir/epilogue.h's list and the act attribute of ops.def must agree.
  for (int i = 0; i < kNumEpilogueActs; ++i) {
    auto act = static_cast<EpilogueAct>(i);
    GraphBuilder b("f");
    ValueId x = b.input("x", DType::F32, make_shape({2, 3}));
    ValueId w = b.input("w", DType::F32, make_shape({3, 4}));
    Attrs attrs;
    set_epilogue(attrs, Epilogue{act, act == EpilogueAct::LeakyRelu ? std::optional(0.2) : std::nullopt});
    b.output(b.op(Op::FusedMatmulBiasAct, {x, w}, attrs));
    Expected<Graph> g = b.build();
    EXPECT_TRUE(g) << epilogue_act_name(act) << ": " << g.status().to_string();
  }
}

TEST(FusedContraction, MatmulBiasWithEveryActivationEqualsTheReference) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < kNumEpilogueActs; ++i) {
    auto act = static_cast<EpilogueAct>(i);
    // Odd sizes, batch 1, a broadcast batch and a [1,N] bias view, by turn.
    const int64_t m = 1 + int64_t(rng() % 9), k = 3 + int64_t(rng() % 40), n = 1 + int64_t(rng() % 17);
    const bool batched = i % 2 == 1;
    std::vector<int64_t> xs = batched ? std::vector<int64_t>{2, 3, m, k} : std::vector<int64_t>{m, k};
    std::vector<int64_t> bs = i % 3 == 0 ? std::vector<int64_t>{1, n} : std::vector<int64_t>{n};
    GraphBuilder b("mm");
    ValueId x = b.input("x", DType::F32, make_shape(xs));
    ValueId w = b.input("w", DType::F32, make_shape({k, n}));
    ValueId bias = b.input("b", DType::F32, make_shape(bs));
    b.output(activate(b, act, b.add(b.matmul(x, w), bias)));
    Expected<Graph> g = b.build();
    ASSERT_TRUE(g) << g.status().to_string();
    NamedArrays in{{"x", random_array(DType::F32, xs, rng())},
                   {"w", random_array(DType::F32, {k, n}, rng(), -0.5, 0.5)},
                   {"b", random_array(DType::F32, bs, rng())}};
    SCOPED_TRACE(std::string(epilogue_act_name(act)));
    expect_fused_equals_reference(*g, in, Op::FusedMatmulBiasAct, 1);
  }
}

TEST(FusedContraction, MatmulResidualEqualsTheReference) {
  // The transformer's projection: matmul, bias, residual stream; and a residual then silu.
  GraphBuilder b("res");
  ValueId h = b.input("h", DType::F32, make_shape({2, 5, 24}));
  ValueId w = b.input("w", DType::F32, make_shape({24, 24}));
  ValueId bias = b.input("b", DType::F32, make_shape({24}));
  ValueId x = b.input("x", DType::F32, make_shape({2, 5, 24}));
  ValueId y = b.add(x, b.add(b.matmul(h, w), bias));
  b.output(y);
  b.output(b.op(Op::Silu, {b.add(b.matmul(h, w), x)}));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().to_string();
  NamedArrays in{{"h", random_array(DType::F32, {2, 5, 24}, 1)}, {"w", random_array(DType::F32, {24, 24}, 2)},
                 {"b", random_array(DType::F32, {24}, 3)}, {"x", random_array(DType::F32, {2, 5, 24}, 4)}};
  expect_fused_equals_reference(*g, in, Op::FusedMatmulResidual, 2);
}

struct ConvCase {
  int64_t batch, cin, cout, h, w, k, stride, dilation, groups;
  std::vector<int64_t> pad;
};

TEST(FusedContraction, ConvWithBatchNormAffineResidualAndActivationsEqualsTheReference) {
  const std::vector<ConvCase> cases = {
      {1, 3, 8, 9, 7, 3, 1, 1, 1, {1, 1, 1, 1}},   // odd sizes
      {2, 8, 8, 8, 8, 3, 2, 1, 8, {1, 1, 1, 1}},   // depthwise, strided
      {1, 4, 6, 10, 10, 3, 1, 2, 2, {0, 1, 1, 0}},  // grouped, dilated, asymmetric pads
      {3, 6, 4, 5, 5, 1, 1, 1, 1, {0, 0, 0, 0}},   // 1x1
  };
  std::mt19937_64 rng(11);
  int variant = 0;
  for (const ConvCase& c : cases) {
    for (int i = 0; i < kNumEpilogueActs; ++i, ++variant) {
      auto act = static_cast<EpilogueAct>(i);
      const bool bn = variant % 2 == 0, residual = variant % 3 == 0, conv_bias = variant % 4 < 2;
      GraphBuilder b("conv");
      std::vector<int64_t> xs{c.batch, c.cin, c.h, c.w}, ws{c.cout, c.cin / c.groups, c.k, c.k};
      ValueId x = b.input("x", DType::F32, make_shape(xs));
      ValueId w = b.input("w", DType::F32, make_shape(ws));
      ValueId cb = b.input("cb", DType::F32, make_shape({c.cout}));
      NamedArrays in{{"x", random_array(DType::F32, xs, rng())},
                     {"w", random_array(DType::F32, ws, rng(), -0.5, 0.5)},
                     {"cb", random_array(DType::F32, {c.cout}, rng())}};
      std::vector<ValueId> operands{x, w};
      if (conv_bias) operands.push_back(cb);
      Attrs attrs{{"stride", std::vector<int64_t>{c.stride, c.stride}},
                  {"dilation", std::vector<int64_t>{c.dilation, c.dilation}},
                  {"pad", c.pad},
                  {"groups", c.groups}};
      ValueId y = b.op(Op::Conv2d, operands, attrs);
      if (bn) {
        std::vector<ValueId> p{y};
        for (const char* name : {"s", "t", "m", "v"}) {
          p.push_back(b.input(name, DType::F32, make_shape({c.cout})));
          in[name] = random_array(DType::F32, {c.cout}, rng(), name[0] == 'v' ? 0.5 : -1.0, 1.5);
        }
        y = b.op(Op::BatchNorm, p);
      } else {
        // A bias through reshape to [1,C,1,1], then conv-affine (scale and shift as [C,1,1]).
        ValueId bias = b.reshape(cb, make_shape({1, c.cout, 1, 1}));
        ValueId s = b.input("s", DType::F32, make_shape({c.cout, 1, 1}));
        ValueId t = b.input("t", DType::F32, make_shape({c.cout, 1, 1}));
        in["s"] = random_array(DType::F32, {c.cout, 1, 1}, rng());
        in["t"] = random_array(DType::F32, {c.cout, 1, 1}, rng());
        y = b.add(b.mul(b.add(y, bias), s), t);
      }
      if (residual) {
        const TensorType& yt = b.type(y);
        std::vector<int64_t> rs = static_dims(yt.shape);
        ValueId r = b.input("r", DType::F32, make_shape(rs));
        in["r"] = random_array(DType::F32, rs, rng());
        y = b.add(r, y);
      }
      b.output(activate(b, act, y));
      Expected<Graph> g = b.build();
      ASSERT_TRUE(g) << g.status().to_string();
      SCOPED_TRACE("case " + std::to_string(variant) + " act " + std::string(epilogue_act_name(act)) +
                   (bn ? " bn" : " affine") + (residual ? " residual" : ""));
      // Batch norm folds into the conv itself; with nothing after it, a plain conv2d remains.
      const bool plain = bn && !residual && act == EpilogueAct::None;
      expect_fused_equals_reference(*g, in, Op::FusedConvBiasAct, plain ? 0 : 1);
    }
  }
}

TEST(FusedContraction, TwoConvBranchesIntoOneResidualEqualTheReference) {
  // ResNet's downsampling block: conv+bn and conv+bn summed, then relu; one add, two claimants.
  GraphBuilder b("down");
  ValueId x = b.input("x", DType::F32, make_shape({2, 4, 9, 9}));
  ValueId w1 = b.input("w1", DType::F32, make_shape({8, 4, 3, 3}));
  ValueId w2 = b.input("w2", DType::F32, make_shape({8, 4, 1, 1}));
  NamedArrays in{{"x", random_array(DType::F32, {2, 4, 9, 9}, 31)},
                 {"w1", random_array(DType::F32, {8, 4, 3, 3}, 32, -0.5, 0.5)},
                 {"w2", random_array(DType::F32, {8, 4, 1, 1}, 33, -0.5, 0.5)}};
  auto bn = [&](ValueId v, const std::string& p) {
    std::vector<ValueId> ops{v};
    for (const char* name : {"s", "t", "m", "v"}) {
      ops.push_back(b.input(p + name, DType::F32, make_shape({8})));
      in[p + name] = random_array(DType::F32, {8}, 40 + in.size(), name[0] == 'v' ? 0.5 : -1.0, 1.5);
    }
    return b.op(Op::BatchNorm, ops);
  };
  Attrs s2{{"stride", std::vector<int64_t>{2, 2}}, {"pad", std::vector<int64_t>{1, 1, 1, 1}}};
  ValueId a = bn(b.op(Op::Conv2d, {x, w1}, s2), "a");
  ValueId c = bn(b.op(Op::Conv2d, {x, w2}, {{"stride", std::vector<int64_t>{2, 2}}}), "c");
  b.output(b.relu(b.add(a, c)));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().to_string();
  expect_fused_equals_reference(*g, in, Op::FusedConvBiasAct, 1);
}

TEST(FusedContraction, ATransposedConstantWeightFoldsAtAnySize) {
  // ONNX Gemm with transB imports as transpose(W): 2^17 elements, above the size limit of folds
  // that grow the graph, but no larger than W, so it folds instead of running every call.
  GraphBuilder b("gemm");
  ValueId x = b.input("x", DType::F32, make_shape({2, 512}));
  Array w = random_array(DType::F32, {256, 512}, 51);
  ValueId wt = b.transpose(b.constant(w), {1, 0});
  b.output(b.matmul(x, wt));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().to_string();
  Expected<Executable> exe = Session().compile(*g);
  ASSERT_TRUE(exe) << exe.status().to_string();
  EXPECT_EQ(count_op(exe->graph(), Op::Transpose), 0u) << print_graph(exe->graph());
  NamedArrays in{{"x", random_array(DType::F32, {2, 512}, 52)}};
  Expected<std::vector<Array>> got = exe->run(in);
  Expected<std::vector<Array>> want = run(*g, in, false);
  ASSERT_TRUE(got && want);
  EXPECT_TRUE(close_to_scale((*got)[0], (*want)[0]));
}

TEST(FusedContraction, UnfuseOfFuseComputesTheOriginalAndThePipelineIsIdempotent) {
  GraphBuilder b("block");
  ValueId x = b.input("x", DType::F32, make_shape({1, 4, 6, 6}));
  ValueId w = b.input("w", DType::F32, make_shape({4, 4, 3, 3}));
  ValueId cb = b.input("cb", DType::F32, make_shape({4}));
  ValueId fw = b.input("fw", DType::F32, make_shape({144, 10}));
  ValueId fb = b.input("fb", DType::F32, make_shape({10}));
  ValueId c = b.op(Op::Conv2d, {x, w, cb}, {{"pad", std::vector<int64_t>{1, 1, 1, 1}}});
  ValueId r = b.relu(b.add(c, x));
  ValueId flat = b.reshape(r, make_shape({1, 144}));
  b.output(b.op(Op::HardSwish, {b.add(b.matmul(flat, fw), fb)}));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().to_string();
  Expected<Graph> fused = fuse(*g, FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu));
  ASSERT_TRUE(fused) << fused.status().to_string();
  EXPECT_EQ(count_op(*fused, Op::FusedConvBiasAct), 1u);
  EXPECT_EQ(count_op(*fused, Op::FusedMatmulBiasAct), 1u);
  Expected<Graph> again = fuse(*fused, FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu));
  ASSERT_TRUE(again) << again.status().to_string();
  EXPECT_EQ(print_graph(*again), print_graph(*fused));

  Graph unfused = *fused;
  EXPECT_EQ(unfuse_contractions(unfused), 2u);
  EXPECT_EQ(count_op(unfused, Op::FusedConvBiasAct) + count_op(unfused, Op::FusedMatmulBiasAct), 0u);
  NamedArrays in{{"x", random_array(DType::F32, {1, 4, 6, 6}, 21)}, {"w", random_array(DType::F32, {4, 4, 3, 3}, 22)},
                 {"cb", random_array(DType::F32, {4}, 23)}, {"fw", random_array(DType::F32, {144, 10}, 24, -0.3, 0.3)},
                 {"fb", random_array(DType::F32, {10}, 25)}};
  Expected<std::vector<Array>> want = run(*g, in, false);
  Expected<std::vector<Array>> got = run(unfused, in, false);
  ASSERT_TRUE(want && got);
  // The unfused form is the original's ops exactly (the conv kept its own bias), so equal bits.
  EXPECT_TRUE((*got)[0].same_data((*want)[0]));
}

}  // namespace
}  // namespace fusebox
