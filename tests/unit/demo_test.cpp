// Tests of the demo programs: each builds, verifies and accepts its inputs at both scales, and
// the small ones compute what their structure promises (properties that a wrong reshape,
// transpose or broadcast would break, not golden numbers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "demo_programs.h"
#include "ir/verifier.h"
#include "support/test_util.h"

namespace fusebox::cli {
namespace {

using fusebox::testing::arrays_close;

const DemoProgram& find(const std::vector<DemoProgram>& programs, const std::string& name) {
  for (const DemoProgram& p : programs) {
    if (p.name == name) return p;
  }
  ADD_FAILURE() << "no demo program " << name;
  static const DemoProgram none;
  return none;
}

std::vector<Array> run(const DemoProgram& p, const NamedArrays& inputs, const CompileOptions& options = {}) {
  Session session;
  Expected<Executable> exe = session.compile(p.graph, options);
  EXPECT_TRUE(exe) << exe.status().to_string();
  if (!exe) return {};
  Expected<std::vector<Array>> outs = exe->run(inputs);
  EXPECT_TRUE(outs) << p.name << ": " << outs.status().to_string();
  if (!outs) return {};
  return *outs;
}

// Rows [begin, end) of the leading axis, as a new array.
Array rows(const Array& a, int64_t begin, int64_t end) {
  std::vector<int64_t> shape = a.shape();
  const size_t row_bytes = a.nbytes() / size_t(shape[0]);
  shape[0] = end - begin;
  Array out(a.dtype(), shape);
  std::memcpy(out.raw(), static_cast<const char*>(a.raw()) + size_t(begin) * row_bytes, size_t(end - begin) * row_bytes);
  return out;
}

// The tokens (axis 1 of [B,T,D]) in reverse order.
Array reverse_tokens(const Array& a) {
  Array out(a.dtype(), a.shape());
  const int64_t b = a.shape()[0], t = a.shape()[1], d = a.shape()[2];
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < t; ++j)
      for (int64_t k = 0; k < d; ++k) out.set_f64((i * t + (t - 1 - j)) * d + k, a.get_f64((i * t + j) * d + k));
  return out;
}

TEST(DemoPrograms, BuildVerifyAndAcceptTheirInputs) {
  for (DemoScale scale : {DemoScale::Full, DemoScale::Small}) {
    Expected<std::vector<DemoProgram>> programs = demo_programs(scale);
    ASSERT_TRUE(programs) << programs.status().to_string();
    ASSERT_EQ(programs->size(), 3u);
    std::set<std::string> names;
    for (const DemoProgram& p : *programs) {
      EXPECT_TRUE(names.insert(p.name).second) << "duplicate name " << p.name;
      EXPECT_EQ(p.graph.name(), p.name);
      EXPECT_FALSE(p.description.empty());
      Status v = verify(p.graph);
      EXPECT_TRUE(v.is_ok()) << p.name << ": " << v.to_string();
      EXPECT_GE(p.graph.nodes().size(), 8u) << p.name << " is meant to be a realistic program";
      EXPECT_EQ(p.inputs.size(), p.graph.inputs().size()) << p.name;
      Session session;
      Expected<Executable> exe = session.compile(p.graph);
      ASSERT_TRUE(exe) << exe.status().to_string();
      Expected<SymbolBindings> bound = exe->bind(p.inputs);
      EXPECT_TRUE(bound) << p.name << ": " << bound.status().to_string();
    }
  }
}

TEST(DemoPrograms, FullSizesAreTheAdvertisedOnes) {
  Expected<std::vector<DemoProgram>> programs = demo_programs(DemoScale::Full);
  ASSERT_TRUE(programs);
  EXPECT_EQ(find(*programs, "transformer_block").inputs.at("x").type_string(), "f32[2,128,256]");
  EXPECT_EQ(find(*programs, "image_pipeline").inputs.at("frame").type_string(), "u8[480,640,3]");
  const Graph& image = find(*programs, "image_pipeline").graph;
  EXPECT_EQ(image.type(image.outputs()[0]).to_string(), "f32[4,3,112,112]");
}

// What `fusebox demo` runs (fused, on the fast CPU path, at full size) equals the reference
// backend running the graph as written.
TEST(DemoPrograms, FullSizeFusedRunsMatchTheReference) {
  Expected<std::vector<DemoProgram>> programs = demo_programs(DemoScale::Full);
  ASSERT_TRUE(programs);
  CompileOptions reference;
  reference.fuse = false;
  testing::use_backend(reference, testing::kReference);
  for (const DemoProgram& p : *programs) {
    std::vector<Array> fused = run(p, p.inputs);
    std::vector<Array> expected = run(p, p.inputs, reference);
    ASSERT_EQ(fused.size(), expected.size()) << p.name;
    for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(arrays_close(fused[i], expected[i], 1e-4, 1e-5)) << p.name;
  }
}

// The pre-processing program (four crops of one frame, resize, normalise, CHW, concat) is one
// batch_elementwise_region, one kernel, at both sizes.
TEST(DemoPrograms, ImagePipelineIsOneKernel) {
  for (DemoScale scale : {DemoScale::Small, DemoScale::Full}) {
    Expected<std::vector<DemoProgram>> programs = demo_programs(scale);
    ASSERT_TRUE(programs);
    Session session;
    Expected<Executable> exe = session.compile(find(*programs, "image_pipeline").graph, CompileOptions{});
    ASSERT_TRUE(exe) << exe.status().to_string();
    EXPECT_EQ(exe->report().kernels_after, 1u);
    EXPECT_EQ(testing::count_op(exe->graph(), Op::BatchElementwiseRegion), 1u);
  }
}

// Without positional encodings or a mask, attention treats tokens as a set: reversing the tokens
// reverses the output. Batch rows are independent. Both break if heads and tokens are mixed up.
TEST(DemoPrograms, TransformerBlockIsTokenEquivariantAndBatchIndependent) {
  Expected<std::vector<DemoProgram>> programs = demo_programs(DemoScale::Small);
  ASSERT_TRUE(programs);
  const DemoProgram& p = find(*programs, "transformer_block");
  std::vector<Array> base = run(p, p.inputs);
  ASSERT_EQ(base.size(), 1u);
  for (double v : fusebox::testing::to_doubles(base[0])) ASSERT_TRUE(std::isfinite(v));

  NamedArrays reversed = p.inputs;
  reversed["x"] = reverse_tokens(p.inputs.at("x"));
  std::vector<Array> out = run(p, reversed);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(arrays_close(out[0], reverse_tokens(base[0]), 1e-4, 1e-5));

  NamedArrays second = p.inputs;
  second["x"] = rows(p.inputs.at("x"), 1, 2);
  out = run(p, second);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(arrays_close(out[0], rows(base[0], 1, 2), 1e-5, 1e-6));
}

TEST(DemoPrograms, CnnBlockSamplesAreIndependent) {
  Expected<std::vector<DemoProgram>> programs = demo_programs(DemoScale::Small);
  ASSERT_TRUE(programs);
  const DemoProgram& p = find(*programs, "cnn_block");
  std::vector<Array> base = run(p, p.inputs);
  ASSERT_EQ(base.size(), 1u);
  EXPECT_EQ(base[0].shape(), p.inputs.at("x").shape());
  NamedArrays second = p.inputs;
  second["x"] = rows(p.inputs.at("x"), 1, 2);
  std::vector<Array> out = run(p, second);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(arrays_close(out[0], rows(base[0], 1, 2), 1e-5, 1e-6));
  // The block is not the identity: the residual branch contributes.
  EXPECT_FALSE(arrays_close(base[0], p.inputs.at("x"), 1e-3, 1e-3));
}

// A frame of one colour stays that colour through crops and bilinear resizing; each channel then
// normalises to (value - mean) / std, in CHW order.
TEST(DemoPrograms, ImagePipelineNormalisesAConstantFramePerChannel) {
  Expected<std::vector<DemoProgram>> programs = demo_programs(DemoScale::Small);
  ASSERT_TRUE(programs);
  const DemoProgram& p = find(*programs, "image_pipeline");
  Array frame(DType::U8, p.inputs.at("frame").shape());
  const double colour[3] = {10, 128, 250};
  for (int64_t i = 0; i < frame.numel(); ++i) frame.set_f64(i, colour[i % 3]);
  std::vector<Array> out = run(p, {{"frame", frame}});
  ASSERT_EQ(out.size(), 1u);
  const Array& y = out[0];
  ASSERT_EQ(y.rank(), 4);
  EXPECT_EQ(y.shape()[0], 4);
  EXPECT_EQ(y.shape()[1], 3);
  const double mean[3] = {0.485, 0.456, 0.406}, std_dev[3] = {0.229, 0.224, 0.225};
  const int64_t plane = y.shape()[2] * y.shape()[3];
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t c = (i / plane) % 3;
    const double want = (colour[c] - 255 * mean[c]) / (255 * std_dev[c]);
    ASSERT_NEAR(y.get_f64(i), want, 1e-4) << "element " << i << " (channel " << c << ")";
  }
}

}  // namespace
}  // namespace fusebox::cli
