// Region prologues (fuse-region-prologue, ir/region_prologue.h) end to end: pre-processing
// programs on random u8 images compiled for the CPU under every option combination that changes
// the pipeline, against the reference backend running them unfused; crops touching the border,
// 1-pixel crops and several sizes; the inverse (decompose / unfuse) against the reference; and
// defect 5 of spec §5 (a chain is never "a 2x resize": odd scales and a transpose in a prologue).
#include <gtest/gtest.h>

#include <string>

#include "fusebox/session.h"
#include "fusion/env.h"
#include "fusion/pass.h"
#include "fusion/pipeline.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/region_prologue.h"
#include "ir/verifier.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::random_array;

struct Crop {
  int64_t y0, x0, h, w;
};

// frame u8[H,W,3] -> crop -> f32 -> resize (mode) to [oh,ow,3] -> (x - m) * s -> relu? ...
std::string program(int64_t H, int64_t W, Crop c, int64_t oh, int64_t ow, const std::string& mode) {
  auto dims = [](std::initializer_list<int64_t> d) {
    std::string s;
    for (int64_t v : d) s += (s.empty() ? "" : ",") + std::to_string(v);
    return s;
  };
  std::string resize_attrs = mode == "linear" ? R"(mode = "linear")"
                                              : R"(mode = "nearest", coordinate = "asymmetric", nearest_mode = "floor")";
  return "func @pre(%frame: u8[" + dims({H, W, 3}) + "]) -> f32[" + dims({oh, ow, 3}) + "] {\n" +
         "  %m = constant {value = dense<f32[1,1,3]: [123.675, 116.28, 103.53]>} : f32[1,1,3]\n"
         "  %s = constant {value = dense<f32[1,1,3]: [0.017124753, 0.017507004, 0.017429193]>} : f32[1,1,3]\n"
         "  %0 = slice %frame {starts = [" + dims({c.y0, c.x0}) + "], ends = [" + dims({c.y0 + c.h, c.x0 + c.w}) +
         "], axes = [0, 1]} : u8[" + dims({c.h, c.w, 3}) + "]\n" +
         "  %1 = cast %0 {to = f32} : f32[" + dims({c.h, c.w, 3}) + "]\n" +
         "  %2 = resize %1 {sizes = [" + dims({oh, ow, 3}) + "], " + resize_attrs + "} : f32[" + dims({oh, ow, 3}) + "]\n" +
         "  %3 = sub %2, %m : f32[" + dims({oh, ow, 3}) + "]\n" +
         "  %4 = mul %3, %s : f32[" + dims({oh, ow, 3}) + "]\n" +
         "  return %4\n}\n";
}

Graph parse_one(const std::string& text) {
  Expected<Module> m = parse_module(text);
  EXPECT_TRUE(m) << m.status().to_string() << "\n" << text;
  return m ? m->functions[0] : Graph();
}

size_t count_prologues(const Graph& g) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += prologue_input(node) >= 0;
  return n;
}

// Fused (these options) equals the reference backend running the program unfused, on several
// random frames; returns the fused graph for the caller's structural checks.
Graph expect_matches_reference(const Graph& g, std::optional<FusionOptions> options, const std::vector<int64_t>& frame) {
  return testing::expect_frame_program_matches_reference(g, std::move(options), frame, {11u, 12u, 13u});
}

TEST(RegionPrologue, CropsOfEverySizeMatchTheReference) {
  struct Case {
    int64_t H, W;
    Crop crop;
    int64_t oh, ow;
  };
  const Case cases[] = {
      {48, 64, {4, 6, 36, 44}, 8, 8},     // inside
      {48, 64, {0, 0, 48, 64}, 13, 7},    // the whole frame: every border touched
      {48, 64, {40, 50, 8, 14}, 9, 11},   // bottom-right corner, upscaled
      {31, 17, {0, 16, 1, 1}, 5, 3},      // a 1-pixel crop on the right border
      {31, 17, {30, 0, 1, 17}, 4, 6},     // a 1-row crop on the bottom border
      {5, 9, {1, 2, 3, 4}, 3, 4},         // crop size equals output size: no interpolation
  };
  for (const Case& c : cases) {
    for (const std::string mode : {"linear", "nearest"}) {
      SCOPED_TRACE(std::to_string(c.H) + "x" + std::to_string(c.W) + " crop " + std::to_string(c.crop.h) + "x" +
                   std::to_string(c.crop.w) + " -> " + std::to_string(c.oh) + "x" + std::to_string(c.ow) + " " + mode);
      Graph g = parse_one(program(c.H, c.W, c.crop, c.oh, c.ow, mode));
      Graph fused = expect_matches_reference(g, std::nullopt, {c.H, c.W, 3});
      EXPECT_EQ(count_prologues(fused), 1u) << print_graph(fused);
      EXPECT_EQ(fused.nodes().size(), 3u) << print_graph(fused);  // two constants and the region
    }
  }
}

// The program fused for the CPU (one prologue, passes verified) against the reference backend
// running it unfused, on each set of inputs.
void expect_windowed_runs_match(const Graph& g, const std::vector<NamedArrays>& inputs) {
  Session session;
  CompileOptions ref_opts;
  ref_opts.fuse = false;
  testing::use_backend(ref_opts, testing::kReference);
  CompileOptions fused_opts;
  fused_opts.verify_each_pass = true;
  Expected<Executable> ref = session.compile(g, ref_opts);
  Expected<Executable> fused = session.compile(g, fused_opts);
  ASSERT_TRUE(ref && fused) << fused.status().to_string();
  EXPECT_EQ(count_prologues(fused->graph()), 1u) << print_graph(fused->graph());
  for (const NamedArrays& in : inputs) {
    Expected<std::vector<Array>> want = ref->run(in);
    Expected<std::vector<Array>> got = fused->run(in);
    ASSERT_TRUE(want && got) << got.status().to_string();
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6));
  }
}

// Results large enough that the CPU runs the prologue a window of rows at a time, with an operand
// that varies along the cut axis (viewed per window) and one that broadcasts over it.
TEST(RegionPrologue, WindowedRunsMatchTheReference) {
  for (const std::string resize : {R"(mode = "linear")", R"(mode = "nearest", coordinate = "half_pixel")"}) {
    SCOPED_TRACE(resize);
    Graph g = parse_one(R"(
func @windows(%frame: u8[300,400,3], %noise: f32[200,180,3]) -> f32[200,180,3] {
  %m = constant {value = dense<f32[1,1,3]: [123.675, 116.28, 103.53]>} : f32[1,1,3]
  %0 = slice %frame {starts = [7, 13], ends = [297, 393], axes = [0, 1]} : u8[290,380,3]
  %1 = cast %0 {to = f32} : f32[290,380,3]
  %2 = resize %1 {sizes = [200, 180, 3], )" + resize + R"(} : f32[200,180,3]
  %3 = sub %2, %m : f32[200,180,3]
  %4 = mul %3, %noise : f32[200,180,3]
  return %4
}
)");
    std::vector<NamedArrays> inputs;
    for (uint64_t seed : {21u, 22u}) {
      inputs.push_back({{"frame", random_array(DType::U8, {300, 400, 3}, seed, 0, 256)},
                        {"noise", random_array(DType::F32, {200, 180, 3}, seed + 100, 0.5, 2.0)}});
    }
    expect_windowed_runs_match(g, inputs);
  }
}

// A channels-first result (the transpose and a reshape to a batch of one inside the prologue, as
// the Preprocessor builds it): its rows are (channel, y), so windows are one channel and a run of
// rows, with operands that vary along the channels, the rows or both, and one result shape
// without the leading unit axis.
TEST(RegionPrologue, ChannelsFirstWindowedRunsMatchTheReference) {
  for (const std::string resize : {R"(mode = "linear")", R"(mode = "nearest", coordinate = "half_pixel")"}) {
    for (const bool batch_axis : {true, false}) {
      SCOPED_TRACE(resize + (batch_axis ? " [1,3,200,180]" : " [3,200,180]"));
      const std::string out = batch_axis ? "f32[1,3,200,180]" : "f32[3,200,180]";
      const std::string lead = batch_axis ? "1," : "";
      const std::string shape = batch_axis ? "1, 3, 200, 180" : "3, 200, 180";
      Graph g = parse_one(
          "func @chw(%frame: u8[300,400,3], %rows: f32[" + lead + "3,200,1], %cols: f32[" + lead +
          "1,200,180]) -> " + out + " {\n  %m = constant {value = dense<f32[" + lead +
          "3,1,1]: [123.675, 116.28, 103.53]>} : f32[" + lead + "3,1,1]\n" +
          "  %0 = slice %frame {starts = [7, 13], ends = [297, 393], axes = [0, 1]} : u8[290,380,3]\n"
          "  %1 = cast %0 {to = f32} : f32[290,380,3]\n"
          "  %2 = resize %1 {sizes = [200, 180, 3], " +
          resize +
          "} : f32[200,180,3]\n"
          "  %4 = transpose %2 {perm = [2, 0, 1]} : f32[3,200,180]\n"
          "  %5 = reshape %4 {shape = [" +
          shape + "]} : " + out + "\n" + "  %6 = sub %5, %m : " + out + "\n  %7 = mul %6, %rows : " + out +
          "\n  %8 = add %7, %cols : " + out + "\n  return %8\n}\n");
      const std::vector<int64_t> rows =
          batch_axis ? std::vector<int64_t>{1, 3, 200, 1} : std::vector<int64_t>{3, 200, 1};
      const std::vector<int64_t> cols =
          batch_axis ? std::vector<int64_t>{1, 1, 200, 180} : std::vector<int64_t>{1, 200, 180};
      std::vector<NamedArrays> inputs;
      for (uint64_t seed : {31u, 32u}) {
        inputs.push_back({{"frame", random_array(DType::U8, {300, 400, 3}, seed, 0, 256)},
                          {"rows", random_array(DType::F32, rows, seed + 100, 0.5, 2.0)},
                          {"cols", random_array(DType::F32, cols, seed + 200, -1.0, 1.0)}});
      }
      expect_windowed_runs_match(g, inputs);
    }
  }
}

// Every option that changes the pipeline: the prologue forms only with fk_fusion and
// fuse_region_prologue on and without decompose_fusion_regions; every variant equals the reference.
TEST(RegionPrologue, EveryOptionCombinationMatchesTheReference) {
  Graph g = parse_one(program(40, 52, {3, 5, 30, 41}, 12, 10, "linear"));
  for (int bits = 0; bits < 32; ++bits) {
    FusionOptions o = FusionOptions::for_cpu();
    o.fk_fusion = bits & 1;
    o.fuse_region_prologue = bits & 2;
    o.decompose_fusion_regions = bits & 4;
    o.native_fk_regions = bits & 8;
    o.unfuse_elementwise_regions = bits & 16;
    SCOPED_TRACE("options " + to_string(o));
    Graph fused = expect_matches_reference(g, o, {40, 52, 3});
    const bool prologue = o.fk_fusion && o.fuse_region_prologue && !o.decompose_fusion_regions &&
                          !o.unfuse_elementwise_regions;
    EXPECT_EQ(count_prologues(fused), prologue ? 1u : 0u) << print_graph(fused);
  }
}

// The environment's veto on native FK regions (FUSEBOX_NO_NATIVE_FK_REGIONS) and the prologue
// switch (FUSEBOX_FUSE_REGION_PROLOGUE=0) reach the pipeline: no prologue, same values.
TEST(RegionPrologue, EnvironmentOverridesMatchTheReference) {
  Graph g = parse_one(program(40, 52, {3, 5, 30, 41}, 12, 10, "linear"));
  const std::pair<const char*, size_t> cases[] = {{"FUSEBOX_NO_NATIVE_FK_REGIONS", 0u},
                                                  {"FUSEBOX_FUSE_REGION_PROLOGUE", 0u}};
  for (const auto& [name, prologues] : cases) {
    SCOPED_TRACE(name);
    Session session;
    CompileOptions opts;
    opts.merge_env = true;
    opts.env = map_env({{name, std::string(name) == "FUSEBOX_FUSE_REGION_PROLOGUE" ? "0" : "1"}});
    opts.verify_each_pass = true;
    Expected<Executable> fused = session.compile(g, opts);
    ASSERT_TRUE(fused) << fused.status().to_string();
    EXPECT_EQ(count_prologues(fused->graph()), prologues) << print_graph(fused->graph());
    CompileOptions ref_opts;
    ref_opts.fuse = false;
    testing::use_backend(ref_opts, testing::kReference);
    Expected<Executable> ref = session.compile(g, ref_opts);
    ASSERT_TRUE(ref);
    NamedArrays in{{"frame", random_array(DType::U8, {40, 52, 3}, 9, 0, 256)}};
    Expected<std::vector<Array>> want = ref->run(in);
    Expected<std::vector<Array>> got = fused->run(in);
    ASSERT_TRUE(want && got);
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6));
  }
}

// The inverse: split_region_prologues gives back the transform and the plain region, and
// decompose-fusion-regions the primitive steps; both compute what the original computes.
TEST(RegionPrologue, DecomposeIsTheExactInverse) {
  Graph g = parse_one(program(33, 45, {0, 2, 33, 40}, 10, 12, "linear"));
  Session session;
  CompileOptions opts;
  opts.verify_each_pass = true;
  Expected<Executable> fused = session.compile(g, opts);
  ASSERT_TRUE(fused) << fused.status().to_string();
  ASSERT_EQ(count_prologues(fused->graph()), 1u);

  Graph split = fused->graph();
  Expected<int64_t> n = split_region_prologues(split);
  ASSERT_TRUE(n) << n.status().to_string();
  EXPECT_EQ(*n, 1);
  ASSERT_TRUE(verify(split).is_ok()) << print_graph(split);
  EXPECT_EQ(count_prologues(split), 0u);
  EXPECT_EQ(testing::count_op(split, Op::TransformRegion), 1u) << print_graph(split);

  Graph steps = fused->graph();
  PassContext ctx;  // neither pass reads the claim table
  ASSERT_TRUE(run_pipeline(steps, {"decompose-fusion-regions", "unfuse-elementwise-regions"}, ctx).is_ok());
  ASSERT_TRUE(verify(steps).is_ok()) << print_graph(steps);
  EXPECT_EQ(testing::count_op(steps, Op::TransformRegion), 0u);
  EXPECT_EQ(testing::count_op(steps, Op::ElementwiseRegion), 0u);

  CompileOptions ref_opts;
  ref_opts.fuse = false;
  testing::use_backend(ref_opts, testing::kReference);
  for (const Graph* variant : {&g, &split, &steps}) {
    Expected<Executable> exe = session.compile(*variant, ref_opts);
    ASSERT_TRUE(exe) << exe.status().to_string();
    NamedArrays in{{"frame", random_array(DType::U8, {33, 45, 3}, 5, 0, 256)}};
    Expected<std::vector<Array>> want = fused->run(in);
    Expected<std::vector<Array>> got = exe->run(in);
    ASSERT_TRUE(want && got);
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6)) << print_graph(*variant);
  }
}

// Defect 5 (spec §5): a chain with a 13/5 nearest resize, a pad and a transpose is exactly its
// steps (never a 2x resize), folded as a prologue into a lone unary op and run natively.
TEST(RegionPrologue, Defect5ChainsKeepEveryStepInsideAPrologue) {
  Graph g = parse_one(R"(
func @odd(%frame: u8[5,7,3]) -> f32[3,15,13] {
  %0 = pad %frame {pads = [1, 0, 0, 1, 0, 0], mode = "edge"} : u8[7,7,3]
  %1 = resize %0 {sizes = [15, 13, 3], mode = "nearest", coordinate = "half_pixel", nearest_mode = "round_prefer_ceil"} : u8[15,13,3]
  %2 = transpose %1 {perm = [2, 0, 1]} : u8[3,15,13]
  %3 = cast %2 {to = f32} : f32[3,15,13]
  %4 = sqrt %3 : f32[3,15,13]
  return %4
}
)");
  Graph fused = expect_matches_reference(g, std::nullopt, {5, 7, 3});
  ASSERT_EQ(count_prologues(fused), 1u) << print_graph(fused);
  std::string text = print_graph(fused);
  EXPECT_NE(text.find("resize"), std::string::npos);
  EXPECT_NE(text.find("sizes = [15, 13, 3]"), std::string::npos) << text;
  EXPECT_NE(text.find("transpose"), std::string::npos) << text;
}

// A lone binary op reading a crop/cast/resize chain (a per-channel scale, the transform as operand
// 1) becomes a one-step region with the chain as its prologue, run natively: one kernel, equal
// to the reference.
TEST(RegionPrologue, LoneBinaryOpTakesTheChainAsItsPrologue) {
  Graph g = parse_one(R"(
func @lone_binary(%frame: u8[33,45,3]) -> f32[16,20,3] {
  %0 = slice %frame {starts = [2, 3], ends = [30, 43], axes = [0, 1]} : u8[28,40,3]
  %1 = cast %0 {to = f32} : f32[28,40,3]
  %2 = resize %1 {sizes = [16, 20, 3], mode = "linear"} : f32[16,20,3]
  %s = constant {value = dense<f32[3]: [0.5, 2.0, -1.5]>} : f32[3]
  %3 = mul %s, %2 : f32[16,20,3]
  return %3
}
)");
  Graph fused = expect_matches_reference(g, std::nullopt, {33, 45, 3});
  ASSERT_EQ(count_prologues(fused), 1u) << print_graph(fused);
  EXPECT_EQ(testing::count_op(fused, Op::TransformRegion), 0u) << print_graph(fused);
  EXPECT_EQ(testing::count_op(fused, Op::Mul), 0u) << print_graph(fused);
}

// A malformed prologue is a clear error naming the node, never a crash.
TEST(RegionPrologue, MalformedPrologueIsAnError) {
  Expected<Module> m = parse_module(R"(
func @bad(%x: f32[4,4]) -> f32[4,4] {
  %y = elementwise_region %x {name = "r", prologue_input = 0} : f32[4,4] (%a: f32[]) {
    %0 = relu %a : f32[]
    return %0
  }
  return %y
}
)");
  ASSERT_FALSE(m);
  const std::string message = m.status().message();
  EXPECT_NE(message.find("%y = elementwise_region"), std::string::npos) << message;
  EXPECT_NE(message.find("transform_region over parameter 0"), std::string::npos) << message;
}

}  // namespace
}  // namespace fusebox
