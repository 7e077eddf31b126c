// Batched crops (fuse-batch-preprocess, ir/batch_region.h) end to end: N crops of one random u8
// frame, each resized, normalised, transposed to CHW and concatenated, compiled for the CPU under
// every option combination that changes the pipeline, against the reference backend running the
// program unfused; crops touching the border, 1-pixel crops and mixed crop sizes; a concat along
// an inner axis; the inverse (decompose-fusion-regions) and the refusals, defect 4 of spec §5
// (a permuted concat or items with different bodies are never merged).
#include <gtest/gtest.h>
#include <omp.h>

#include <string>

#include "fusebox/session.h"
#include "fusion/env.h"
#include "fusion/pass.h"
#include "fusion/pipeline.h"
#include "ir/batch_region.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::random_array;

struct Crop {
  int64_t y0, x0, h, w;
};

using testing::dims_text;

struct Program {
  int64_t H = 48, W = 64, out = 8;
  std::vector<Crop> crops;
  std::vector<size_t> order;   // concat operand order (empty: item order)
  bool chw = true;             // transpose/reshape each item to [1,3,out,out], concat on axis 0
  int64_t axis = 0;            // without chw: the concat axis of the [out,out,3] items
  std::string odd_mode;        // non-empty: the last item resizes with this mode (bodies differ)
};

// frame -> per crop: slice -> f32 -> resize -> (x - m) * s [-> CHW] -> concat
std::string program(const Program& p) {
  const int64_t o = p.out;
  std::string t = "func @batch(%frame: u8[" + dims_text({p.H, p.W, 3}) + "]) -> f32[";
  const int64_t n = int64_t(p.crops.size());
  t += p.chw ? dims_text({n, 3, o, o}) : p.axis == 0 ? dims_text({n * o, o, 3}) : dims_text({o, n * o, 3});
  t += "] {\n"
       "  %m = constant {value = dense<f32[1,1,3]: [123.675, 116.28, 103.53]>} : f32[1,1,3]\n"
       "  %s = constant {value = dense<f32[1,1,3]: [0.017124753, 0.017507004, 0.017429193]>} : f32[1,1,3]\n";
  std::vector<std::string> parts;
  for (size_t i = 0; i < p.crops.size(); ++i) {
    const Crop& c = p.crops[i];
    std::string v = "%c" + std::to_string(i) + "_";
    std::string mode = !p.odd_mode.empty() && i + 1 == p.crops.size() ? p.odd_mode : "linear";
    std::string resize = mode == "linear" ? R"(mode = "linear")" : R"(mode = "nearest", coordinate = "asymmetric", nearest_mode = "floor")";
    t += "  " + v + "0 = slice %frame {starts = [" + dims_text({c.y0, c.x0}) + "], ends = [" + dims_text({c.y0 + c.h, c.x0 + c.w}) +
         "], axes = [0, 1]} : u8[" + dims_text({c.h, c.w, 3}) + "]\n";
    t += "  " + v + "1 = cast " + v + "0 {to = f32} : f32[" + dims_text({c.h, c.w, 3}) + "]\n";
    t += "  " + v + "2 = resize " + v + "1 {sizes = [" + dims_text({o, o, 3}) + "], " + resize + "} : f32[" + dims_text({o, o, 3}) + "]\n";
    t += "  " + v + "3 = sub " + v + "2, %m : f32[" + dims_text({o, o, 3}) + "]\n";
    t += "  " + v + "4 = mul " + v + "3, %s : f32[" + dims_text({o, o, 3}) + "]\n";
    std::string last = v + "4";
    if (p.chw) {
      t += "  " + v + "5 = transpose " + v + "4 {perm = [2, 0, 1]} : f32[" + dims_text({3, o, o}) + "]\n";
      t += "  " + v + "6 = reshape " + v + "5 {shape = [" + dims_text({1, 3, o, o}) + "]} : f32[" + dims_text({1, 3, o, o}) + "]\n";
      last = v + "6";
    }
    parts.push_back(last);
  }
  std::string list;
  for (size_t i = 0; i < parts.size(); ++i) {
    list += (i ? ", " : "") + parts[p.order.empty() ? i : p.order[i]];
  }
  t += "  %y = concat " + list + " {axis = " + std::to_string(p.chw ? 0 : p.axis) + "} : f32[";
  t += p.chw ? dims_text({n, 3, o, o}) : p.axis == 0 ? dims_text({n * o, o, 3}) : dims_text({o, n * o, 3});
  t += "]\n  return %y\n}\n";
  return t;
}

Graph parse_one(const std::string& text) {
  Expected<Module> m = parse_module(text);
  EXPECT_TRUE(m) << m.status().to_string() << "\n" << text;
  return m ? m->functions[0] : Graph();
}

// Fused (these options) equals the reference backend running the program unfused, on several
// random frames; returns the fused graph.
Graph expect_matches_reference(const Graph& g, std::optional<FusionOptions> options, int64_t H, int64_t W) {
  return testing::expect_frame_program_matches_reference(g, std::move(options), {H, W, 3}, {31u, 32u});
}

size_t batches(const Graph& g) { return testing::count_op(g, Op::BatchElementwiseRegion); }

const std::vector<Crop> kMixed = {{0, 0, 24, 32}, {10, 20, 30, 30}, {47, 63, 1, 1}, {0, 40, 48, 24}, {5, 5, 8, 8}};

TEST(BatchPreprocess, MixedCropsBecomeOneKernelAndMatchTheReference) {
  Program p;
  p.crops = kMixed;  // inside, the whole height, a 1-pixel corner crop, the right border, no scaling
  Graph g = parse_one(program(p));
  Graph fused = expect_matches_reference(g, std::nullopt, p.H, p.W);
  EXPECT_EQ(batches(fused), 1u) << print_graph(fused);
  EXPECT_EQ(fused.nodes().size(), 3u) << print_graph(fused);  // two constants and the batch
}

TEST(BatchPreprocess, ConcatAlongAnInnerAxisMatchesTheReference) {
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Program p;
    p.crops = {{1, 1, 9, 7}, {0, 60, 48, 4}, {20, 0, 1, 64}};
    p.chw = false;
    p.axis = axis;
    p.out = 6;
    Graph fused = expect_matches_reference(parse_one(program(p)), std::nullopt, p.H, p.W);
    EXPECT_EQ(batches(fused), 1u) << print_graph(fused);
  }
}

// The CPU kernel runs items in parallel when there are at least as many as threads, otherwise one
// after the other with each item's row windows in parallel; both equal the reference, on items
// large enough to be cut into windows.
TEST(BatchPreprocess, ParallelAndWindowedItemsMatchTheReference) {
  const int threads = omp_get_max_threads();
  for (int t : {1, 16}) {
    SCOPED_TRACE(std::to_string(t) + " threads");
    omp_set_num_threads(t);
    Program p;
    p.H = 300;
    p.W = 400;
    p.out = 150;
    p.crops = {{0, 0, 300, 400}, {7, 13, 290, 380}, {299, 399, 1, 1}};
    Graph fused = expect_matches_reference(parse_one(program(p)), std::nullopt, p.H, p.W);
    EXPECT_EQ(batches(fused), 1u) << print_graph(fused);
  }
  omp_set_num_threads(threads);
}

// Every option that changes the pipeline; the batch forms only with fk_fusion and
// fuse_batch_preprocess on, without decompose_fusion_regions and with regions kept.
TEST(BatchPreprocess, EveryOptionCombinationMatchesTheReference) {
  Program p;
  p.crops = {{3, 5, 30, 41}, {0, 0, 48, 64}, {40, 60, 8, 4}};
  Graph g = parse_one(program(p));
  for (int bits = 0; bits < 32; ++bits) {
    FusionOptions o = FusionOptions::for_cpu();
    o.fk_fusion = bits & 1;
    o.fuse_batch_preprocess = bits & 2;
    o.decompose_fusion_regions = bits & 4;
    o.native_fk_regions = bits & 8;
    o.unfuse_elementwise_regions = bits & 16;
    SCOPED_TRACE("options " + to_string(o));
    Graph fused = expect_matches_reference(g, o, p.H, p.W);
    const bool batch = o.fk_fusion && o.fuse_batch_preprocess && !o.decompose_fusion_regions &&
                       !o.unfuse_elementwise_regions;
    EXPECT_EQ(batches(fused), batch ? 1u : 0u) << print_graph(fused);
  }
}

// The environment reaches the pipeline: FUSEBOX_FUSE_BATCH_PREPROCESS=0 and FUSEBOX_NO_FK_FUSION
// leave no batch, FUSEBOX_FUSE_BATCH_PREPROCESS=1 keeps it; the values are the same.
TEST(BatchPreprocess, EnvironmentOverridesMatchTheReference) {
  Program p;
  p.crops = {{3, 5, 30, 41}, {0, 0, 48, 64}};
  Graph g = parse_one(program(p));
  const std::tuple<const char*, const char*, size_t> cases[] = {{"FUSEBOX_FUSE_BATCH_PREPROCESS", "0", 0u},
                                                                {"FUSEBOX_FUSE_BATCH_PREPROCESS", "1", 1u},
                                                                {"FUSEBOX_NO_FK_FUSION", "1", 0u}};
  Session session;
  CompileOptions ref_opts;
  ref_opts.fuse = false;
  testing::use_backend(ref_opts, testing::kReference);
  Expected<Executable> ref = session.compile(g, ref_opts);
  ASSERT_TRUE(ref);
  NamedArrays in{{"frame", random_array(DType::U8, {p.H, p.W, 3}, 9, 0, 256)}};
  Expected<std::vector<Array>> want = ref->run(in);
  ASSERT_TRUE(want);
  for (const auto& [name, value, count] : cases) {
    SCOPED_TRACE(std::string(name) + "=" + value);
    CompileOptions opts;
    opts.merge_env = true;
    opts.env = map_env({{name, value}});
    opts.verify_each_pass = true;
    Expected<Executable> fused = session.compile(g, opts);
    ASSERT_TRUE(fused) << fused.status().to_string();
    EXPECT_EQ(batches(fused->graph()), count) << print_graph(fused->graph());
    Expected<std::vector<Array>> got = fused->run(in);
    ASSERT_TRUE(got);
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6));
  }
}

// decompose-fusion-regions gives the items and a concat back; the reference runs the batch node
// itself and its decomposition to the same values as the fused CPU kernel.
TEST(BatchPreprocess, DecomposeIsTheExactInverse) {
  Program p;
  p.crops = kMixed;
  Graph g = parse_one(program(p));
  Session session;
  CompileOptions opts;
  opts.verify_each_pass = true;
  Expected<Executable> fused = session.compile(g, opts);
  ASSERT_TRUE(fused) << fused.status().to_string();
  ASSERT_EQ(batches(fused->graph()), 1u);
  Graph steps = fused->graph();
  PassContext ctx;
  ASSERT_TRUE(run_pipeline(steps, {"decompose-fusion-regions", "unfuse-elementwise-regions"}, ctx).is_ok());
  ASSERT_TRUE(verify(steps).is_ok()) << print_graph(steps);
  EXPECT_EQ(batches(steps), 0u);
  EXPECT_EQ(testing::count_op(steps, Op::ElementwiseRegion), 0u);
  EXPECT_EQ(testing::count_op(steps, Op::Concat), 1u);
  EXPECT_EQ(testing::count_op(steps, Op::Slice), kMixed.size()) << print_graph(steps);
  CompileOptions ref_opts;
  ref_opts.fuse = false;
  testing::use_backend(ref_opts, testing::kReference);
  Graph batch = fused->graph();
  for (const Graph* variant : {&batch, &steps}) {
    Expected<Executable> exe = session.compile(*variant, ref_opts);
    ASSERT_TRUE(exe) << exe.status().to_string();
    NamedArrays in{{"frame", random_array(DType::U8, {p.H, p.W, 3}, 7, 0, 256)}};
    Expected<std::vector<Array>> want = fused->run(in);
    Expected<std::vector<Array>> got = exe->run(in);
    ASSERT_TRUE(want && got);
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6)) << print_graph(*variant);
  }
}

// Defect 4 (spec §5): a concat that lists the items out of order, or items whose bodies differ in
// one attribute, are not merged; the values stay those of the program.
TEST(BatchPreprocess, Defect4PermutedConcatAndDifferentBodiesAreRefused) {
  Program permuted;
  permuted.crops = {{0, 0, 24, 32}, {10, 20, 30, 30}, {5, 5, 8, 8}};
  permuted.order = {1, 0, 2};
  Program odd;
  odd.crops = permuted.crops;
  odd.odd_mode = "nearest";
  for (const Program* p : {&permuted, &odd}) {
    Graph fused = expect_matches_reference(parse_one(program(*p)), std::nullopt, p->H, p->W);
    EXPECT_EQ(batches(fused), 0u) << print_graph(fused);
  }
}

// A malformed table is a clear error, never a crash.
TEST(BatchPreprocess, MalformedTablesAreErrors) {
  Program p;
  p.crops = {{0, 0, 24, 32}, {10, 20, 30, 30}};
  Session session;
  Expected<Executable> fused = session.compile(parse_one(program(p)), CompileOptions{});
  ASSERT_TRUE(fused);
  Graph g = fused->graph();
  for (Node& n : g.mutable_nodes()) {
    if (n.op != Op::BatchElementwiseRegion) continue;
    n.attrs.set("offsets", std::vector<int64_t>{0, 2});
    EXPECT_NE(verify(g).to_string().find("offsets[1]"), std::string::npos) << verify(g).to_string();
    n.attrs.set("offsets", std::vector<int64_t>{0, 1});
    n.attrs.set("ends", std::vector<int64_t>{24});
    EXPECT_NE(verify(g).to_string().find("values per item"), std::string::npos) << verify(g).to_string();
  }
}

}  // namespace
}  // namespace fusebox
