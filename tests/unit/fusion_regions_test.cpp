// Element-wise region fusion: the pass decisions (what groups, what stays apart and why), the
// exact inverse, and fused execution on the CPU region executor against the reference backend.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "fusion/fuse.h"
#include "fusion/pipeline.h"
#include "ir/outline.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::arrays_close;
using testing::random_array;

size_t count_op(const Graph& g, Op op) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

Graph run_passes(const Graph& g, std::vector<std::string> passes, FusionOptions o = FusionOptions::for_cpu(),
                 PassContext* out_ctx = nullptr) {
  PassContext ctx;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  ctx.options = o;
  Graph out = g;
  PipelineHooks hooks;
  hooks.verify_each = true;
  Status s = run_pipeline(out, passes, ctx, hooks);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (out_ctx) *out_ctx = ctx;
  return out;
}

// relu(x*a+b)*0.5+tanh(x): the 5-op chain of the benchmark (plus its constant).
Graph chain5(Shape shape) {
  GraphBuilder b("chain5");
  ValueId x = b.input("x", DType::F32, shape);
  ValueId a = b.input("a", DType::F32, shape);
  ValueId c = b.input("b", DType::F32, shape);
  ValueId half = b.scalar(DType::F32, 0.5);
  // One statement per op: C++ leaves the order of argument evaluation open.
  ValueId m = b.mul(x, a);
  ValueId s = b.add(m, c);
  ValueId r = b.relu(s);
  ValueId h = b.mul(r, half);
  ValueId t = b.tanh(x);
  b.output(b.add(h, t));
  return *b.build();
}

std::vector<Array> run(const Graph& g, const NamedArrays& in, bool fuse, testing::BackendChoice ex) {
  Session s;
  CompileOptions o;
  o.fuse = fuse;
  testing::use_backend(o, ex);
  o.verify_each_pass = true;
  Expected<Executable> exe = s.compile(g, o);
  EXPECT_TRUE(exe) << exe.status().to_string();
  if (!exe) return {};
  Expected<std::vector<Array>> out = exe->run(in);
  EXPECT_TRUE(out) << out.status().to_string();
  return out ? *out : std::vector<Array>{};
}

void expect_fused_matches_reference(const Graph& g, const NamedArrays& in, double rtol = 1e-5, double atol = 1e-6) {
  std::vector<Array> want = run(g, in, false, testing::kReference);
  std::vector<Array> fused = run(g, in, true, testing::kCpu);
  std::vector<Array> fused_ref = run(g, in, true, testing::kReference);
  ASSERT_EQ(want.size(), fused.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(arrays_close(fused[i], want[i], rtol, atol)) << "output " << i;
    EXPECT_TRUE(arrays_close(fused_ref[i], want[i], rtol, atol)) << "output " << i << " (region by reference)";
  }
}

TEST(MarkElementwiseRegions, FusesTheChainIntoOneRegion) {
  Graph g = chain5({64, 33});
  Graph f = run_passes(g, {"mark-elementwise-regions"});
  ASSERT_EQ(f.nodes().size(), 1u);
  const Node& r = f.nodes()[0];
  EXPECT_EQ(r.op, Op::ElementwiseRegion);
  EXPECT_EQ(r.inputs.size(), 3u);  // the 0.5 constant moved into the body
  EXPECT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.attr_str("name"), "fused_mul_add_relu_mul_tanh_add");
  NamedArrays in{{"x", random_array(DType::F32, {64, 33}, 1)},
                 {"a", random_array(DType::F32, {64, 33}, 2)},
                 {"b", random_array(DType::F32, {64, 33}, 3)}};
  expect_fused_matches_reference(g, in);
}

TEST(MarkElementwiseRegions, UnfuseIsTheExactInverse) {
  Graph g = chain5({8, 5});
  Graph f = run_passes(g, {"mark-elementwise-regions", "unfuse-elementwise-regions"});
  EXPECT_EQ(count_op(f, Op::ElementwiseRegion), 0u);
  ASSERT_EQ(f.nodes().size(), g.nodes().size());
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    bool found = false;
    for (const Node& n : f.nodes()) found = found || n.op == g.nodes()[i].op;
    EXPECT_TRUE(found) << op_keyword(g.nodes()[i].op);
  }
  for (ValueId v : f.outputs()) EXPECT_EQ(f.type(v), g.type(g.outputs()[0]));
}

TEST(MarkElementwiseRegions, GraphOutputInTheMiddleBecomesASecondResult) {
  GraphBuilder b("mid");
  ValueId x = b.input("x", DType::F32, {16});
  ValueId e = b.op(Op::Exp, {x});
  ValueId y = b.relu(b.mul(e, x));
  b.output(y);
  b.output(e);  // the middle of the chain is also returned
  Graph g = *b.build();
  Graph f = run_passes(g, {"mark-elementwise-regions"});
  ASSERT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(f.nodes()[0].outputs.size(), 2u);
  EXPECT_EQ(f.outputs()[0], y);  // positions and ids are kept
  EXPECT_EQ(f.outputs()[1], e);
  expect_fused_matches_reference(g, {{"x", random_array(DType::F32, {16}, 4)}});
}

TEST(MarkElementwiseRegions, ValueUsedOutsideIsComputedOnceAndStillAvailable) {
  GraphBuilder b("two_outside");
  ValueId x = b.input("x", DType::F32, {4, 6});
  ValueId w = b.input("w", DType::F32, {6, 3});
  ValueId t = b.tanh(b.add(x, x));
  ValueId m1 = b.matmul(t, w);
  ValueId s = b.op(Op::ReduceSum, {t}, {{"axes", std::vector<int64_t>{1}}});
  b.output(m1);
  b.output(s);
  Graph g = *b.build();
  Graph f = run_passes(g, {"mark-elementwise-regions"});
  EXPECT_EQ(count_op(f, Op::ElementwiseRegion), 1u);
  EXPECT_EQ(count_op(f, Op::MatMul), 1u);
  EXPECT_EQ(count_op(f, Op::ReduceSum), 1u);
  expect_fused_matches_reference(g, {{"x", random_array(DType::F32, {4, 6}, 5)}, {"w", random_array(DType::F32, {6, 3}, 6)}});
}

TEST(MarkElementwiseRegions, BroadcastColumnAgainstMatrixUsesRealStrides) {
  // Spec §5 defect 1: [C,1] against [C,T] must not be indexed by `i % count`.
  GraphBuilder b("bcast");
  ValueId x = b.input("x", DType::F32, {5, 7});
  ValueId c = b.input("c", DType::F32, {5, 1});
  ValueId r = b.input("r", DType::F32, {7});
  b.output(b.sigmoid(b.mul(b.add(x, c), r)));
  Graph g = *b.build();
  Graph f = run_passes(g, {"mark-elementwise-regions"});
  ASSERT_EQ(count_op(f, Op::ElementwiseRegion), 1u);
  Array xa = random_array(DType::F32, {5, 7}, 7), ca = random_array(DType::F32, {5, 1}, 8),
        ra = random_array(DType::F32, {7}, 9);
  std::vector<Array> fused = run(g, {{"x", xa}, {"c", ca}, {"r", ra}}, true, testing::kCpu);
  ASSERT_EQ(fused.size(), 1u);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 7; ++j) {
      float v = (xa.data<float>()[i * 7 + j] + ca.data<float>()[i]) * ra.data<float>()[j];
      float want = 1.0f / (1.0f + std::exp(-v));
      EXPECT_NEAR(fused[0].data<float>()[i * 7 + j], want, 1e-6f) << i << "," << j;
    }
  }
}

TEST(MarkElementwiseRegions, OverLimitChainsSplitAndVerify) {
  GraphBuilder b("long");
  ValueId x = b.input("x", DType::F32, {3, 9});
  ValueId v = x;
  for (int i = 0; i < 10; ++i) v = i % 2 ? b.tanh(v) : b.add(v, x);
  b.output(v);
  Graph g = *b.build();
  FusionOptions o = FusionOptions::for_cpu();
  o.fusion_limits = FusionLimits{4, 16};
  PassContext ctx;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  Graph f = run_passes(g, {"mark-elementwise-regions"}, o, &ctx);
  EXPECT_EQ(count_op(f, Op::ElementwiseRegion), 3u);  // 4 + 4 + 2 steps
  for (const Node& n : f.nodes()) EXPECT_LE(n.body->nodes().size(), 4u);
  ASSERT_EQ(ctx.remarks.missed.size(), 1u);
  EXPECT_EQ(ctx.remarks.missed[0].reason, MissReason::LimitReached);
  EXPECT_TRUE(verify(f).is_ok());
  // The same split through the whole compiler, with numbers.
  Expected<FuseResult> r = Fuse(FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu)).limits(FusionLimits{4, 16}).verify_each_pass().run_with_report(g);
  ASSERT_TRUE(r) << r.status().to_string();
  EXPECT_EQ(count_op(r->graph, Op::ElementwiseRegion), 3u);
  expect_fused_matches_reference(g, {{"x", random_array(DType::F32, {3, 9}, 10)}});
}

TEST(MarkElementwiseRegions, InputCapSplitsWideRegions) {
  GraphBuilder b("wide");
  std::vector<ValueId> ins;
  for (int i = 0; i < 6; ++i) ins.push_back(b.input("x" + std::to_string(i), DType::F32, {10}));
  ValueId v = ins[0];
  for (int i = 1; i < 6; ++i) v = b.add(v, ins[static_cast<size_t>(i)]);
  b.output(v);
  Graph g = *b.build();
  FusionOptions o = FusionOptions::for_cpu();
  o.fusion_limits = FusionLimits{32, 3};
  Graph f = run_passes(g, {"mark-elementwise-regions"}, o);
  for (const Node& n : f.nodes()) EXPECT_LE(n.inputs.size(), 3u);
  EXPECT_GE(count_op(f, Op::ElementwiseRegion), 2u);
}

TEST(MarkElementwiseRegions, RefusesAMergeThatWouldCreateACycle) {
  // e -> reduce (outside) -> y, and e -> y directly: fusing e with y would need the reduction
  // inside the region.
  GraphBuilder b("cycle");
  ValueId x = b.input("x", DType::F32, {4, 8});
  ValueId e = b.op(Op::Exp, {b.op(Op::Neg, {x})});
  ValueId s = b.op(Op::ReduceSum, {e}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", true}});
  ValueId y = b.div(b.add(e, e), s);
  b.output(y);
  Graph g = *b.build();
  PassContext ctx;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  Graph f = run_passes(g, {"mark-elementwise-regions"}, FusionOptions::for_cpu(), &ctx);
  EXPECT_TRUE(verify(f).is_ok());
  bool cycle_noted = false;
  for (const MissedFusion& m : ctx.remarks.missed) cycle_noted = cycle_noted || m.reason == MissReason::WouldCreateCycle;
  EXPECT_TRUE(cycle_noted);
  expect_fused_matches_reference(g, {{"x", random_array(DType::F32, {4, 8}, 11)}});
}

// Issue 10: marking was quadratic in region length (a 100k-op chain did not finish in 120 s).
// These check the grouping of long chains; the timing is reported, never asserted.
Graph long_chain(int n) {
  GraphBuilder b("long_chain");
  ValueId x = b.input("x", DType::F32, {8});
  ValueId v = x;
  for (int i = 0; i < n; ++i) v = i % 2 ? b.relu(v) : b.add(v, x);
  b.output(v);
  return *b.build();
}

TEST(MarkElementwiseRegions, HundredThousandOpChainBecomesOneRegion) {
  Graph f = run_passes(long_chain(100000), {"mark-elementwise-regions"});
  ASSERT_EQ(f.nodes().size(), 1u);
  EXPECT_EQ(f.nodes()[0].op, Op::ElementwiseRegion);
  EXPECT_EQ(f.nodes()[0].body->nodes().size(), 100000u);
}

TEST(MarkElementwiseRegions, HundredThousandOpChainSplitsIntoEqualChunks) {
  FusionOptions o = FusionOptions::for_cpu();
  o.fusion_limits = FusionLimits{32, 16};
  PassContext ctx;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  Graph f = run_passes(long_chain(100000), {"mark-elementwise-regions"}, o, &ctx);
  ASSERT_EQ(f.nodes().size(), 3125u);  // 100000 / 32
  for (const Node& n : f.nodes()) {
    ASSERT_EQ(n.op, Op::ElementwiseRegion);
    EXPECT_EQ(n.body->nodes().size(), 32u);
  }
  ASSERT_EQ(ctx.remarks.missed.size(), 1u);
  EXPECT_EQ(ctx.remarks.missed[0].reason, MissReason::LimitReached);
}

TEST(MarkElementwiseRegions, LongChainWithSideReductionsSplitsAtEachOne) {
  // Every 1000th value also feeds a reduction that a later step reads: the chain cannot run
  // through the reduction, so the step that reads it back starts a new region (the cycle check
  // at scale): 1..1999, then 19 more from each read-back; the last read-back and the final div
  // are single steps, left alone.
  GraphBuilder b("side");
  ValueId x = b.input("x", DType::F32, {4, 8});
  ValueId v = x;
  ValueId pending = -1;
  for (int i = 1; i <= 20000; ++i) {
    v = i % 2 ? b.relu(v) : b.add(v, x);
    if (i % 1000 == 0) {
      if (pending >= 0) v = b.add(v, pending);
      pending = b.op(Op::ReduceSum, {v}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", true}});
    }
  }
  b.output(b.div(v, pending));
  Graph g = *b.build();
  Graph f = run_passes(g, {"mark-elementwise-regions"});
  EXPECT_TRUE(verify(f).is_ok());
  EXPECT_EQ(count_op(f, Op::ReduceSum), 20u);
  EXPECT_EQ(count_op(f, Op::ElementwiseRegion), 19u);
}

TEST(MarkElementwiseRegions, SingleNodesAndNonElementwiseOpsStayAlone) {
  GraphBuilder b("alone");
  ValueId x = b.input("x", DType::F32, {4, 8});
  ValueId w = b.input("w", DType::F32, {8, 2});
  b.output(b.relu(b.matmul(x, w)));
  Graph g = *b.build();
  Graph f = run_passes(g, {"mark-elementwise-regions"});
  EXPECT_EQ(count_op(f, Op::ElementwiseRegion), 0u);
  EXPECT_EQ(f.nodes().size(), 2u);
}

TEST(MarkElementwiseRegions, MixedDtypesThroughCasts) {
  GraphBuilder b("mixed");
  ValueId img = b.input("img", DType::U8, {6, 10, 3});
  ValueId mean = b.input("mean", DType::F32, {3});
  ValueId f = b.cast(img, DType::F32);
  ValueId n = b.mul(b.sub(f, mean), b.scalar(DType::F32, 1.0 / 255.0));
  ValueId mask = b.op(Op::Greater, {n, b.scalar(DType::F32, 0.1)});
  ValueId h = b.cast(n, DType::F16);
  b.output(b.op(Op::Where, {mask, n, b.scalar(DType::F32, 0.0)}));
  b.output(h);
  Graph g = *b.build();
  Graph fused = run_passes(g, {"mark-elementwise-regions"});
  EXPECT_EQ(count_op(fused, Op::ElementwiseRegion), 1u);
  expect_fused_matches_reference(g, {{"img", random_array(DType::U8, {6, 10, 3}, 12, 0, 255)},
                                     {"mean", random_array(DType::F32, {3}, 13, 0, 100)}});
}

TEST(FusionReport, CountsKernelsBytesAndRegions) {
  Graph g = chain5({1024, 1024});
  Expected<FuseResult> r = Fuse(FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu)).run_with_report(g);
  ASSERT_TRUE(r) << r.status().to_string();
  const FusionReport& rep = r->report;
  EXPECT_EQ(rep.kernels_before, 6u);
  EXPECT_EQ(rep.kernels_after, 1u);
  EXPECT_EQ(rep.nodes_after, 1u);
  // Unfused: 6 kernels, each reading its operands and writing 4 MiB; fused: 3 reads + 1 write.
  EXPECT_DOUBLE_EQ(rep.bytes_after, 4.0 * 4 * 1024 * 1024);
  ASSERT_EQ(rep.fused.size(), 1u);
  EXPECT_EQ(rep.fused[0].ops, 6u);
  std::string text = rep.to_string();
  EXPECT_NE(text.find("kernels  6 -> 1"), std::string::npos) << text;
  EXPECT_NE(text.find("fused    elementwise_region x1 (fused_mul_add_relu_mul_tanh_add: 6 ops, 3 inputs, 1 output)"),
            std::string::npos) << text;
  EXPECT_NE(text.find("missed   none"), std::string::npos) << text;
  EXPECT_TRUE(assert_fusion_clean(rep).is_ok());
}

TEST(FusionReport, AssertFusionCleanFailsOnMissedPatterns) {
  GraphBuilder b("long");
  ValueId x = b.input("x", DType::F32, {8});
  ValueId v = x;
  for (int i = 0; i < 6; ++i) v = b.tanh(v);
  b.output(v);
  Expected<FuseResult> r = Fuse(FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu)).limits(FusionLimits{2, 16}).run_with_report(*b.build());
  ASSERT_TRUE(r);
  Status s = assert_fusion_clean(r->report);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("limit-reached"), std::string::npos) << s.message();
}

TEST(Pipeline, UnknownPassIsAnError) {
  Graph g = chain5({4});
  PassContext ctx;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  Status s = run_pipeline(g, {"mark-elementwise-regions", "fuse-everything"}, ctx);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unknown pass 'fuse-everything'"), std::string::npos) << s.message();
}

TEST(Canonicalize, FoldsConstantsAndRemovesDeadNodes) {
  GraphBuilder b("fold");
  ValueId x = b.input("x", DType::F32, {3});
  ValueId two = b.scalar(DType::F32, 2.0);
  ValueId three = b.scalar(DType::F32, 3.0);
  ValueId six = b.mul(two, three);
  b.tanh(x);  // dead
  b.output(b.add(x, six));
  Graph g = *b.build();
  Session s;
  CompileOptions o;
  o.fuse = true;
  Expected<Executable> exe = s.compile(g, o);
  ASSERT_TRUE(exe) << exe.status().to_string();
  EXPECT_EQ(count_op(exe->graph(), Op::Tanh), 0u);
  EXPECT_EQ(count_op(exe->graph(), Op::Mul), 0u);
  Array xa = random_array(DType::F32, {3}, 14);
  Expected<std::vector<Array>> out = exe->run({{"x", xa}});
  ASSERT_TRUE(out);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ((*out)[0].data<float>()[i], xa.data<float>()[i] + 6.0f);
}

TEST(RegionExecutor, ManyTilesAndThreadsMatchTheReference) {
  Graph g = chain5({3, 100003});  // not a multiple of the tile size
  NamedArrays in{{"x", random_array(DType::F32, {3, 100003}, 15)},
                 {"a", random_array(DType::F32, {3, 100003}, 16)},
                 {"b", random_array(DType::F32, {3, 100003}, 17)}};
  expect_fused_matches_reference(g, in);
}

// Broadcast operands are gathered per chunk (4096 elements generated, 512 interpreted) along
// coalesced dims; a contiguous inner vector under a stretched dim is copied once per chunk and
// doubled. Periods that do not divide the chunk start chunks at every phase; each shape here is
// run on both executors against the reference, outputs poisoned first.
TEST(RegionExecutor, BroadcastGathersMatchTheReferenceAtEveryChunkPhase) {
  struct Case {
    std::vector<int64_t> out, operand;
  };
  const Case cases[] = {
      {{2, 3, 37, 29, 7}, {1, 3, 1, 1, 7}},    // per-channel vector over a blocked layout, b = 7
      {{2, 5, 61, 13}, {2, 1, 1, 13}},         // period 13 under a stretched 5*61
      {{3, 700, 13}, {3, 1, 13}},              // one stretch longer than a chunk
      {{2, 9, 33, 31}, {1, 9, 1, 1}},          // NCHW per-channel [1,C,1,1]: H*W filled at once
      {{4, 1, 50, 3}, {4, 1, 50, 1}},          // stretched inner dim under a contiguous one
      {{6, 5, 7, 11}, {6, 1, 7, 1}},           // alternating stretched and real strides
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(Array(DType::F32, c.out).type_string() + " x " + Array(DType::F32, c.operand).type_string());
    Array x = random_array(DType::F32, c.out, 21), y = random_array(DType::F32, c.operand, 22);
    std::vector<Array> want = testing::run_op(Op::Mul, {x, y});
    for (testing::BackendChoice choice : {testing::kCpuJit, testing::kCpuInterpreter}) {
      CompileOptions o;
      testing::use_backend(o, choice);
      Expected<std::vector<Array>> got = testing::try_run_op_with(Op::Mul, {x, y}, {}, o);
      ASSERT_TRUE(got) << got.status().to_string();
      EXPECT_TRUE(arrays_close((*got)[0], want[0], 0, 0));
      Expected<std::vector<Array>> swapped = testing::try_run_op_with(Op::Mul, {y, x}, {}, o);
      ASSERT_TRUE(swapped) << swapped.status().to_string();
      EXPECT_TRUE(arrays_close((*swapped)[0], want[0], 0, 0));
    }
  }
}

TEST(RegionExecutor, PoolReusesBuffersAcrossRuns) {
  Graph g = chain5({256});
  Session s;
  Expected<Executable> exe = s.compile(g);
  ASSERT_TRUE(exe);
  NamedArrays in{{"x", random_array(DType::F32, {256}, 18)},
                 {"a", random_array(DType::F32, {256}, 19)},
                 {"b", random_array(DType::F32, {256}, 20)}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(exe->run(in));
  PoolStats st = exe->pool_stats();
  EXPECT_EQ(st.allocations, 1u);
  EXPECT_EQ(st.reuses, 2u);
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

TEST(SpecDefects, ExactGeluIsNotApproximatedInsideRegions) {
  // Spec §5 defect 3: a region must not turn exact gelu into the tanh form (or any unknown step
  // into identity). At x = -2.5 the two forms differ by about 2e-4.
  GraphBuilder b("gelu");
  ValueId x = b.input("x", DType::F32, {5});
  ValueId y = b.gelu(b.mul(x, b.scalar(DType::F32, 1.0)), false);
  b.output(b.op(Op::Erf, {y}));
  b.output(y);
  Graph g = *b.build();
  Array xa = testing::array_f32({5}, {-2.5f, -1.0f, 0.3f, 1.7f, 3.1f});
  std::vector<Array> fused = run(g, {{"x", xa}}, true, testing::kCpu);
  ASSERT_EQ(fused.size(), 2u);
  for (int i = 0; i < 5; ++i) {
    double v = xa.data<float>()[i];
    double exact = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    EXPECT_NEAR(fused[1].data<float>()[i], exact, 1e-6) << v;
    EXPECT_NEAR(fused[0].data<float>()[i], std::erf(exact), 1e-6) << v;
  }
  double tanh_form = 0.5 * -2.5 * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (-2.5 + 0.044715 * -15.625)));
  EXPECT_GT(std::fabs(fused[1].data<float>()[0] - tanh_form), 1e-4);
}

TEST(SpecDefects, StepsWithoutVectorLoopsKeepTheirSemantics) {
  // mod, pow, f16 casts and integer division have no vectorised loop: the region runs their
  // reference kernels on each tile and must agree exactly.
  GraphBuilder b("slow_steps");
  ValueId x = b.input("x", DType::F32, {7, 300});
  ValueId i = b.input("i", DType::I32, {7, 1});
  ValueId m = b.op(Op::Mod, {x, b.scalar(DType::F32, 0.75)});
  ValueId p = b.op(Op::Pow, {b.op(Op::Abs, {m}), b.scalar(DType::F32, 1.5)});
  ValueId h = b.cast(b.cast(p, DType::F16), DType::F32);
  ValueId q = b.div(b.cast(b.mul(x, b.scalar(DType::F32, 10.0)), DType::I32), i);
  b.output(b.add(h, b.cast(q, DType::F32)));
  Graph g = *b.build();
  NamedArrays in{{"x", testing::random_array(DType::F32, {7, 300}, 21)},
                 {"i", testing::array_of(DType::I32, {7, 1}, {3, -2, 0, 7, 1, -5, 4})}};
  std::vector<Array> want = run(g, in, false, testing::kReference);
  std::vector<Array> fused = run(g, in, true, testing::kCpu);
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_TRUE(want[0].same_data(fused[0]));  // bit for bit
}

TEST(SpecDefects, CompilesFromSeveralThreadsGiveIdenticalResults) {
  // Spec §5 defect 9: no pipeline state in globals or thread-locals.
  Graph g = chain5({32, 17});
  FusionOptions a = FusionOptions::for_cpu();
  FusionOptions b = FusionOptions::for_cpu();
  b.fusion_limits = FusionLimits{2, 16};
  std::string want_a = print_graph(*Fuse(FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu)).options(a).run(g));
  std::string want_b = print_graph(*Fuse(FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu)).options(b).run(g));
  ASSERT_NE(want_a, want_b);
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::string last;
      for (int k = 0; k < 25; ++k) {
        Expected<Graph> f = Fuse(FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu)).options(t % 2 ? b : a).run(g);
        last = f ? print_graph(*f) : f.status().to_string();
      }
      got[static_cast<size_t>(t)] = last;
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(got[static_cast<size_t>(t)], t % 2 ? want_b : want_a) << t;
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

TEST(RegionExecutor, BroadcastGatherAtHighRankAndAcrossRows) {
  // Rank 18 (above the gather's fixed index buffer) with stretched and contiguous operands whose
  // rows are shorter than a tile, so runs cross row boundaries inside a tile.
  std::vector<int64_t> big(18, 1), row(18, 1), col(18, 1);
  big[0] = 3, big[16] = 70, big[17] = 5;
  row[17] = 5;
  col[16] = 70;
  GraphBuilder b("rank18");
  ValueId x = b.input("x", DType::F32, make_shape(big));
  ValueId r = b.input("r", DType::F32, make_shape(row));
  ValueId c = b.input("c", DType::F32, make_shape(col));
  b.output(b.relu(b.mul(b.add(x, r), c)));
  Graph g = *b.build();
  expect_fused_matches_reference(g, {{"x", random_array(DType::F32, big, 31)},
                                     {"r", random_array(DType::F32, row, 32)},
                                     {"c", random_array(DType::F32, col, 33)}});
}

}  // namespace
}  // namespace fusebox
