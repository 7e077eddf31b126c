// The IO output gate (spec §4.6, select-peaks-only-outputs) through the public entry points:
// CompileOptions::optional_outputs, the pipeline per target, the unchanged output list (spec §5
// defect 10), unmaterialised slots at run time, and the values of the slots that are kept.
#include <gtest/gtest.h>

#include "fusebox/session.h"
#include "fusion/fuse.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

// x -> spectrum, peaks (values, indices); a big spectrum so the discrete-GPU estimate drops it.
Graph spectrum_graph(int64_t rows, int64_t n) {
  GraphBuilder b("spectrum");
  ValueId x = b.input("x", DType::F32, {rows, n});
  ValueId spec = b.op(Op::FftMagnitude, {x});
  std::vector<ValueId> peaks = b.op_results(Op::Peaks, {spec}, {{"k", int64_t(4)}});
  b.output(spec);
  b.output(peaks[0]);
  b.output(peaks[1]);
  Expected<Graph> g = b.build();
  EXPECT_TRUE(g) << g.status().to_string();
  return *g;
}

TEST(IoOutputGate, DiscreteTargetLeavesTheOptionalSpectrumUnmaterialisedAndKeepsTheOutputList) {
  Graph g = spectrum_graph(1024, 2048);
  g.set_optional_outputs({0});
  Expected<FuseResult> r = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run_with_report(g);
  ASSERT_TRUE(r) << r.status().to_string();
  // Defect 10: same arity, same values in the same order; only the slot's state changes.
  ASSERT_EQ(r->graph.outputs().size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(r->graph.value(r->graph.outputs()[k]).type, g.type(g.outputs()[k]));
  EXPECT_EQ(r->graph.unmaterialized_outputs(), std::vector<int64_t>{0});
  EXPECT_FALSE(r->graph.output_materialized(0));
  EXPECT_TRUE(r->graph.output_materialized(1));
  EXPECT_NE(r->report.to_string().find("io-gate  output 0"), std::string::npos) << r->report.to_string();

  // no_io_peaks_output disables it; a required spectrum is never touched.
  FusionOptions off;
  off.no_io_peaks_output = true;
  Expected<Graph> disabled = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).options(off).run(g);
  ASSERT_TRUE(disabled);
  EXPECT_TRUE(disabled->unmaterialized_outputs().empty());
  Graph required = spectrum_graph(1024, 2048);
  Expected<Graph> kept = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run(required);
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->unmaterialized_outputs().empty());
}

TEST(IoOutputGate, CpuKeepsTheSpectrumAndItsValuesMatchTheReference) {
  Graph g = spectrum_graph(3, 64);
  Array x = testing::random_array(DType::F32, {3, 64}, 11);
  CompileOptions ref;
  testing::use_backend(ref, testing::kReference);
  ref.fuse = false;
  CompileOptions cpu;
  cpu.optional_outputs = {0};
  Session session;
  Expected<Executable> a = session.compile(g, ref), b = session.compile(g, cpu);
  ASSERT_TRUE(a && b) << a.status().to_string() << b.status().to_string();
  EXPECT_TRUE(b->output_materialized(0));
  EXPECT_EQ(b->graph().optional_outputs(), std::vector<int64_t>{0});
  Expected<std::vector<Array>> ra = a->run(std::vector<Array>{x}), rb = b->run(std::vector<Array>{x});
  ASSERT_TRUE(ra && rb);
  ASSERT_EQ(rb->size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(testing::to_doubles((*ra)[k]), testing::to_doubles((*rb)[k])) << "output " << k;
}

TEST(IoOutputGate, AnUnmaterialisedSlotRunsAsAnEmptyArrayInItsPlace) {
  Expected<Module> m = parse_module(
      "func @f(%x: f32[2,16]) -> (f32[2,9], f32[2,2], i64[2,2]) {\n"
      "  %s = fft_magnitude %x : f32[2,9]\n"
      "  %p:2 = peaks %s {k = 2} : f32[2,2], i64[2,2]\n"
      "  return %s, %p#0, %p#1 {optional = [0], unmaterialized = [0]}\n"
      "}\n");
  ASSERT_TRUE(m) << m.status().to_string();
  EXPECT_EQ(print_graph(m->functions[0]).find("{optional = [0], unmaterialized = [0]}") != std::string::npos, true);
  Session session;
  Expected<Executable> exe = session.compile(m->functions[0]);
  ASSERT_TRUE(exe) << exe.status().to_string();
  Expected<std::vector<Array>> out = exe->run(std::vector<Array>{testing::random_array(DType::F32, {2, 16}, 3)});
  ASSERT_TRUE(out) << out.status().to_string();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_FALSE(exe->output_materialized(0));
  EXPECT_EQ((*out)[0].shape(), std::vector<int64_t>{0});
  EXPECT_EQ((*out)[1].shape(), (std::vector<int64_t>{2, 2}));
}

TEST(IoOutputGate, BadSlotsAreClearErrors) {
  Graph g = spectrum_graph(2, 16);
  CompileOptions o;
  o.optional_outputs = {3};
  Expected<Executable> exe = Session().compile(g, o);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.status().message().find("@spectrum has no output 3 (it returns 3 values)"), std::string::npos)
      << exe.status().message();
  const char* not_optional =
      "func @f(%x: f32[2,16]) -> f32[2,9] {\n  %s = fft_magnitude %x : f32[2,9]\n  return %s {unmaterialized = [0]}\n}\n";
  Expected<Module> m = parse_module(not_optional);
  ASSERT_FALSE(m);
  EXPECT_NE(m.status().message().find("output 0 is unmaterialized but not optional"), std::string::npos)
      << m.status().message();
  Expected<Module> range = parse_module(
      "func @f(%x: f32[2,16]) -> f32[2,9] {\n  %s = fft_magnitude %x : f32[2,9]\n  return %s {optional = [1]}\n}\n");
  ASSERT_FALSE(range);
  EXPECT_NE(range.status().message().find("'optional' names output 1 but the function returns 1 values"),
            std::string::npos)
      << range.status().message();
}

}  // namespace
}  // namespace fusebox
