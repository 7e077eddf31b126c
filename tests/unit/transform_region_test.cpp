// The native transform_region kernel (backends/cpu/transform_kernel.h) against the region's
// reference kernel (its steps run one by one): random u8 and f32 images, random crops including
// ones touching the border and 1-pixel crops, every resize coordinate and nearest mode, pads of
// every mode before and after an interpolation, flips, strided slices, views at either end.
// Results must agree byte for byte (the kernel is exact by construction: no tolerance); the
// native output is poisoned with several byte patterns before each run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "backends/cpu/preprocess_rows.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/transform_kernel.h"
#include "backends/registry/registry.h"
#include "fusebox/session.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/shape_inference.h"
#include "ir/transform_region.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::kPoisonBytes;
using testing::random_array;
using I64s = std::vector<int64_t>;

struct Step {
  Op op;
  Attrs attrs;
};

// A transform_region over `src` whose body is `steps`.
Node region_of(const TensorType& src, const std::vector<Step>& steps) {
  auto body = std::make_shared<Graph>("t");
  ValueId v = body->add_input("x", src);
  for (const Step& s : steps) {
    Node probe{s.op, {v}, {}, s.attrs, nullptr, {}};
    auto types = infer_result_types(probe, std::vector<TensorType>{body->type(v)});
    EXPECT_TRUE(types) << types.status().message();
    v = body->add_node(s.op, {v}, *types, s.attrs)[0];
  }
  body->add_output(v);
  return Node{Op::TransformRegion, {0}, {1}, {{"name", std::string("t")}}, body, {}};
}

TensorType type_of(const Array& a) { return TensorType{a.dtype(), make_shape(a.shape())}; }

std::vector<int64_t> dims(const Shape& s) {
  std::vector<int64_t> out;
  for (const Dim& d : s) out.push_back(d.value());
  return out;
}

// Native equals reference, byte for byte, under every poison pattern.
::testing::AssertionResult native_matches(const Node& region, const Array& x) {
  const Graph& body = *region.body;
  const TensorType& t = body.type(body.outputs()[0]);
  Array expected(t.dtype, dims(t.shape));
  std::vector<Array> in{x};
  std::vector<Array> ref_out{expected};
  Status s = cpu::run_reference(region, in, ref_out);
  if (!s.is_ok()) return ::testing::AssertionFailure() << "reference: " << s.message();
  std::string why;
  auto plan = plan_transform_region(region, &why);
  if (!plan) return ::testing::AssertionFailure() << "no plan: " << why;
  for (uint8_t poison : kPoisonBytes) {
    Array got(t.dtype, dims(t.shape));
    if (got.nbytes()) std::memset(got.raw(), poison, got.nbytes());
    Status r = cpu::run_transform_plan(*plan, x, got);
    if (!r.is_ok()) return ::testing::AssertionFailure() << "native: " << r.message();
    if (got.nbytes() != ref_out[0].nbytes() || std::memcmp(got.raw(), ref_out[0].raw(), got.nbytes()) != 0) {
      for (int64_t i = 0; i < got.numel(); ++i) {
        if (got.get_f64(i) != ref_out[0].get_f64(i)) {
          return ::testing::AssertionFailure() << "element " << i << ": native " << got.get_f64(i)
                                               << " vs reference " << ref_out[0].get_f64(i) << " (poison "
                                               << int(poison) << ")";
        }
      }
      return ::testing::AssertionFailure() << "bytes differ";
    }
  }
  return ::testing::AssertionSuccess();
}

Step slice(I64s starts, I64s ends, I64s axes, I64s steps = {}) {
  Attrs a{{"starts", starts}, {"ends", ends}, {"axes", axes}};
  if (!steps.empty()) a.set("steps", steps);
  return {Op::Slice, a};
}
Step resize(I64s sizes, std::string mode, std::string coord, std::string nearest = "round_prefer_floor") {
  return {Op::Resize, Attrs{{"sizes", make_shape(sizes)}, {"mode", mode}, {"coordinate", coord}, {"nearest_mode", nearest}}};
}
Step cast(DType to) { return {Op::Cast, Attrs{{"to", to}}}; }
Step transpose(I64s perm) { return {Op::Transpose, Attrs{{"perm", perm}}}; }
Step reshape(I64s shape) { return {Op::Reshape, Attrs{{"shape", make_shape(shape)}}}; }
Step flip(I64s axes) { return {Op::Flip, Attrs{{"axes", axes}}}; }
Step pad(I64s pads, std::string mode, double value = 0.0) {
  return {Op::Pad, Attrs{{"pads", pads}, {"mode", mode}, {"value", value}}};
}

const char* kCoords[] = {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"};
const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

// The image pipeline's chain: crop -> u8 to f32 -> bilinear -> HWC to CHW -> add a batch axis.
TEST(TransformRegion, CropResizeTransposeMatchesReference) {
  std::mt19937 rng(7);
  const int64_t H = 37, W = 53;
  for (DType dt : {DType::U8, DType::F32}) {
    Array frame = random_array(dt, {H, W, 3}, 11, 0, 256);
    for (int trial = 0; trial < 24; ++trial) {
      // Every fourth crop is one pixel; others touch the border now and then.
      int64_t h = trial % 4 == 0 ? 1 : 1 + int64_t(rng() % H), w = trial % 4 == 0 ? 1 : 1 + int64_t(rng() % W);
      int64_t y = trial % 3 == 0 ? H - h : int64_t(rng() % (H - h + 1));
      int64_t x = trial % 5 == 0 ? 0 : int64_t(rng() % (W - w + 1));
      int64_t oh = 1 + int64_t(rng() % 19), ow = 1 + int64_t(rng() % 23);
      std::vector<Step> steps{slice({y, x}, {y + h, x + w}, {0, 1})};
      if (dt == DType::U8 && trial % 2 == 0) steps.push_back(cast(DType::F32));
      steps.push_back(resize({oh, ow, 3}, trial % 3 == 1 ? "nearest" : "linear", kCoords[trial % 4], kNearest[(trial / 4) % 4]));
      steps.push_back(transpose({2, 0, 1}));
      steps.push_back(reshape({1, 3, oh, ow}));
      Node region = region_of(type_of(frame), steps);
      EXPECT_TRUE(native_matches(region, frame)) << "trial " << trial << " crop " << y << "," << x << " " << h << "x" << w;
    }
  }
}

// HWC results (channels last, as the benchmark's resize before its normalise): the kernel then
// combines the row and column taps once per pixel.
TEST(TransformRegion, ChannelsLastInterpolation) {
  Array frame = random_array(DType::U8, {29, 41, 3}, 4, 0, 256);
  for (const char* coord : kCoords) {
    for (I64s size : {I64s{13, 17, 3}, I64s{1, 1, 3}, I64s{29, 60, 3}, I64s{64, 7, 3}}) {
      Node n = region_of(type_of(frame), {slice({3, 0}, {29, 33}, {0, 1}), cast(DType::F32), resize(size, "linear", coord)});
      EXPECT_TRUE(native_matches(n, frame)) << coord;
      Node padded = region_of(type_of(frame), {pad({2, 1, 0, 0, 3, 0}, "constant", 77), resize(size, "linear", coord),
                                               pad({1, 0, 0, 0, 2, 0}, "constant", 5)});
      EXPECT_TRUE(native_matches(padded, frame)) << coord;
    }
  }
}

TEST(TransformRegion, EveryCoordinateAndNearestMode) {
  Array img = random_array(DType::F32, {2, 9, 14}, 3, -5, 5);
  for (const char* coord : kCoords) {
    for (const char* nearest : kNearest) {
      for (I64s size : {I64s{2, 20, 5}, I64s{2, 4, 31}, I64s{2, 1, 1}, I64s{2, 9, 14}}) {
        Node n = region_of(type_of(img), {flip({1}), resize(size, "nearest", coord, nearest)});
        EXPECT_TRUE(native_matches(n, img)) << coord << " " << nearest;
      }
      Node l = region_of(type_of(img), {resize({2, 17, 6}, "linear", coord), transpose({0, 2, 1})});
      EXPECT_TRUE(native_matches(l, img)) << coord;
    }
  }
}

TEST(TransformRegion, PadsAroundAnInterpolation) {
  Array img = random_array(DType::U8, {11, 7, 3}, 5, 0, 256);
  for (const char* mode : {"constant", "edge", "reflect"}) {
    // A pad before the interpolation mixes its constant into the taps; one after it replaces
    // whole elements; a crop of a padded image reads both.
    Node before = region_of(type_of(img), {pad({2, 3, 0, 1, 4, 0}, mode, 17), cast(DType::F32),
                                         resize({9, 16, 3}, "linear", "half_pixel")});
    EXPECT_TRUE(native_matches(before, img)) << mode;
    Node after = region_of(type_of(img), {cast(DType::F32), resize({5, 9, 3}, "linear", "align_corners"),
                                        pad({1, 2, 0, 3, 1, 0}, mode, -2.5), flip({0, 1})});
    EXPECT_TRUE(native_matches(after, img)) << mode;
    Node both = region_of(type_of(img), {pad({1, 1, 0, 1, 1, 0}, "constant", 9), pad({2, 0, 0, 0, 3, 0}, mode, 200),
                                       slice({-1, 0}, {-100, 100}, {0, 1}, {-2, 3}), transpose({1, 0, 2})});
    EXPECT_TRUE(native_matches(both, img)) << mode;
    Node crop = region_of(type_of(img), {pad({0, 5, 0, 1, 6, 0}, mode), slice({3, 4}, {12, 12}, {0, 1}),
                                         resize({4, 4, 3}, "nearest", "asymmetric")});
    EXPECT_TRUE(native_matches(crop, img)) << mode;
  }
}

TEST(TransformRegion, UnitAxisViewsAndCopies) {
  Array img = random_array(DType::F32, {1, 6, 10}, 9);
  // A reshape inside the chain that only drops and adds unit axes; a plain crop is row copies.
  Node n = region_of(type_of(img), {reshape({6, 10}), slice({1}, {9}, {1}), reshape({6, 1, 8}),
                                  pad({0, 1, 0, 0, 2, 0}, "constant", 3), flip({1}), transpose({1, 0, 2})});
  EXPECT_TRUE(native_matches(n, img));
  Node copy = region_of(type_of(img), {slice({2, 3}, {5, 9}, {1, 2}), reshape({3, 6})});
  EXPECT_TRUE(native_matches(copy, img));
  Array bytes = random_array(DType::U8, {4, 5, 6}, 2, 0, 256);
  Node widen = region_of(type_of(bytes), {transpose({2, 0, 1}), cast(DType::I32), flip({0}), cast(DType::F64)});
  EXPECT_TRUE(native_matches(widen, bytes));
}

// A lone step the CPU backend compiles (no region around it) runs through a one-step transform
// plan: its kernel is the transform kernel and its results are the reference kernel's, byte for
// byte, under every poison pattern; at a size the plan does not cover it falls back.
TEST(TransformRegion, LoneStepsRunAsOneStepRegions) {
  std::shared_ptr<Backend> cpu_backend = *make_backend("cpu");
  const Array img = random_array(DType::F32, {2, 9, 14}, 21, -5, 5);
  const Array bytes = random_array(DType::U8, {2, 3, 31, 4}, 22, 0, 256);
  const std::vector<std::pair<Array, Step>> steps = {
      {img, resize({2, 20, 5}, "nearest", "asymmetric", "floor")},
      {img, resize({2, 17, 29}, "linear", "half_pixel")},
      {bytes, resize({2, 3, 62, 8}, "nearest", "half_pixel")},
      {img, transpose({2, 0, 1})},
      {bytes, transpose({0, 2, 3, 1})},
      {img, slice({1, 2}, {8, 13}, {1, 2}, {2, 3})},
      {img, pad({0, 1, 2, 1, 3, 0}, "reflect")},
      {bytes, pad({0, 0, 1, 2, 0, 0, 3, 1}, "edge")},
      {img, pad({1, 0, 0, 0, 2, 2}, "constant", -7.5)},
      {img, flip({0, 2})}};
  for (const auto& [x, step] : steps) {
    const std::string what = std::string(op_keyword(step.op)) + " of " + type_of(x).to_string();
    const Graph g = testing::one_node(step.op, {type_of(x)}, step.attrs);
    Expected<std::shared_ptr<const Kernel>> k = cpu_backend->compile(g, g.nodes()[0]);
    ASSERT_TRUE(k) << what << ": " << k.status().to_string();
    EXPECT_EQ((*k)->kind(), "transform") << what;
    const TensorType& t = g.type(g.outputs()[0]);
    const Array like(t.dtype, dims(t.shape));
    for (uint8_t poison : kPoisonBytes) {
      Expected<Array> got = testing::run_one_kernel("cpu", step.op, {x}, step.attrs, like, poison);
      Expected<Array> want = testing::run_one_kernel("reference", step.op, {x}, step.attrs, like, poison);
      ASSERT_TRUE(got && want) << what;
      ASSERT_EQ(got->nbytes(), want->nbytes()) << what;
      EXPECT_EQ(std::memcmp(got->raw(), want->raw(), got->nbytes()), 0) << what << ", poison " << int(poison);
    }
  }
}

// Bilinear rows from u8 (the prologue and batch kernels' path) sum in f32 where the weights
// allow it exactly (RowTables::f32_weights: rows' and columns' bits after the binary point 16 or
// fewer together), else in double; either way each row equals the reference byte for byte.
TEST(TransformRegion, BilinearRowsSumInF32OnlyWhereExact) {
  struct Case {
    I64s in, out;
    const char* coord;
    bool f32;
  };
  const Case cases[] = {
      {{24, 32, 3}, {12, 16, 3}, "half_pixel", true},       // 1/2: weights 1/2
      {{6, 8, 3}, {12, 16, 3}, "half_pixel", true},         // 2x: 1/4, 3/4 (and 1, 0 at the border)
      {{9, 12, 3}, {12, 16, 3}, "half_pixel", true},        // 4/3: eighths
      {{9, 2, 3}, {512, 256, 3}, "asymmetric", true},       // rows 9/512, columns 1/128: 16 bits
      {{9, 3, 3}, {512, 256, 3}, "asymmetric", false},      // columns 3/256: 17 bits
      {{7, 9, 3}, {12, 16, 3}, "half_pixel", false},        // sevenths
      {{24, 32, 3}, {12, 16, 3}, "align_corners", false}};  // 23/11
  for (const Case& c : cases) {
    const std::string what = type_of(Array(DType::U8, c.in)).to_string() + " -> " + std::to_string(c.out[0]) +
                             "x" + std::to_string(c.out[1]) + " " + c.coord;
    const Array frame = random_array(DType::U8, c.in, 31, 0, 256);
    const Node region = region_of(type_of(frame), {cast(DType::F32), resize(c.out, "linear", c.coord)});
    std::shared_ptr<const TransformPlan> plan = plan_transform_region(region);
    ASSERT_NE(plan, nullptr) << what;
    std::string why;
    std::optional<cpu::RowTables> rows = cpu::row_tables(*plan, &why);
    ASSERT_TRUE(rows) << what << ": " << why;
    ASSERT_TRUE(rows->own_loops) << what;
    EXPECT_EQ(rows->f32_weights, c.f32) << what;
    const std::vector<Array> in{frame};
    std::vector<Array> ref_out{Array(DType::F32, c.out)};
    ASSERT_TRUE(cpu::run_reference(region, in, ref_out).is_ok()) << what;
    for (uint8_t poison : kPoisonBytes) {
      Array got(DType::F32, c.out);
      got.fill_bytes(poison);
      ASSERT_TRUE(cpu::fill_rows(*plan, *rows, frame, got.raw(), 0, rows->rows).is_ok()) << what;
      EXPECT_EQ(std::memcmp(got.raw(), ref_out[0].raw(), got.nbytes()), 0)
          << what << ", poison " << int(poison);
    }
  }
}

// A letterbox: bilinear from u8, then a constant border padded on. The pads come after the
// resize, so the row loops compute each row and write the border over it (rows wholly in the
// border are the constant); in HWC and as CHW rows, at a scale whose sums are f32-exact and one
// that needs double. A pad before the resize puts the constant inside the sums: the rows then
// leave it to the plan's loops. Every row equals the reference byte for byte.
TEST(TransformRegion, LetterboxRowsWriteTheBorderOverTheInterpolation) {
  struct Case {
    const char* what;
    std::vector<Step> steps;
    I64s out;
    bool own_loops;
  };
  const I64s in{45, 71, 3};
  const Case cases[] = {
      {"halving, border after",
       {cast(DType::F32), resize({22, 35, 3}, "linear", "half_pixel"),
        pad({5, 0, 0, 4, 1, 0}, "constant", 114)},
       {31, 36, 3},
       true},
      {"sevenths, border after",
       {cast(DType::F32), resize({31, 40, 3}, "linear", "half_pixel"),
        pad({0, 9, 0, 0, 7, 0}, "constant", 114)},
       {31, 56, 3},
       true},
      {"border after, CHW",
       {cast(DType::F32), resize({31, 40, 3}, "linear", "half_pixel"),
        pad({3, 9, 0, 2, 7, 0}, "constant", 0.5), transpose({2, 0, 1})},
       {3, 36, 56},
       true},
      {"border before the resize",
       {pad({2, 3, 0, 1, 4, 0}, "constant", 9), cast(DType::F32),
        resize({31, 40, 3}, "linear", "half_pixel")},
       {31, 40, 3},
       false},
  };
  for (const Case& c : cases) {
    const Array frame = random_array(DType::U8, in, 37, 0, 256);
    const Node region = region_of(type_of(frame), c.steps);
    std::shared_ptr<const TransformPlan> plan = plan_transform_region(region);
    ASSERT_NE(plan, nullptr) << c.what;
    std::optional<cpu::RowTables> rows = cpu::row_tables(*plan, nullptr, /*merge_rows=*/true);
    ASSERT_TRUE(rows) << c.what;
    EXPECT_EQ(rows->own_loops, c.own_loops) << c.what;
    const std::vector<Array> in_arrays{frame};
    std::vector<Array> ref_out{Array(DType::F32, c.out)};
    ASSERT_TRUE(cpu::run_reference(region, in_arrays, ref_out).is_ok()) << c.what;
    for (uint8_t poison : kPoisonBytes) {
      Array got(DType::F32, c.out);
      got.fill_bytes(poison);
      ASSERT_TRUE(cpu::fill_rows(*plan, *rows, frame, got.raw(), 0, rows->rows).is_ok()) << c.what;
      EXPECT_EQ(std::memcmp(got.raw(), ref_out[0].raw(), got.nbytes()), 0)
          << c.what << ", poison " << int(poison);
    }
  }
}

TEST(TransformRegion, ChainsThePlanDoesNotCoverSayWhy) {
  Array img = random_array(DType::F32, {4, 6}, 1);
  std::string why;
  Node two = region_of(type_of(img), {resize({8, 12}, "linear", "half_pixel"), resize({3, 5}, "linear", "half_pixel")});
  EXPECT_EQ(plan_transform_region(two, &why), nullptr);
  EXPECT_NE(why.find("two linear resizes"), std::string::npos) << why;
  Node merge = region_of(type_of(img), {flip({0}), reshape({24}), slice({3}, {20}, {0})});
  EXPECT_EQ(plan_transform_region(merge, &why), nullptr);
  EXPECT_NE(why.find("merges or splits"), std::string::npos) << why;
}

// Through the whole pipeline on the CPU: the chains become transform regions that the backend
// keeps and runs natively, and the program equals the reference backend running it unfused
// (f32 1e-6 relative: the normalising element-wise region may contract mul+sub differently).
TEST(TransformRegion, PipelineKeepsRegionsAndMatchesTheReference) {
  const char* text = R"(
func @pre(%frame: u8[61,83,3]) -> (f32[1,3,20,24], f32[1,3,20,24]) {
  %m = constant {value = dense<f32[1,1,3]: [123.675, 116.28, 103.53]>} : f32[1,1,3]
  %s = constant {value = dense<f32[1,1,3]: [0.017124753, 0.017507004, 0.017429193]>} : f32[1,1,3]
  %0 = slice %frame {starts = [0, 7], ends = [61, 60], axes = [0, 1]} : u8[61,53,3]
  %1 = cast %0 {to = f32} : f32[61,53,3]
  %2 = resize %1 {sizes = [20, 24, 3], mode = "linear"} : f32[20,24,3]
  %3 = sub %2, %m : f32[20,24,3]
  %4 = mul %3, %s : f32[20,24,3]
  %5 = transpose %4 {perm = [2, 0, 1]} : f32[3,20,24]
  %6 = reshape %5 {shape = [1, 3, 20, 24]} : f32[1,3,20,24]
  %7 = flip %frame {axes = [1]} : u8[61,83,3]
  %8 = pad %7 {pads = [3, 0, 0, 2, 5, 0], mode = "reflect"} : u8[66,88,3]
  %9 = resize %8 {sizes = [20, 24, 3], mode = "nearest", coordinate = "asymmetric"} : u8[20,24,3]
  %10 = transpose %9 {perm = [2, 0, 1]} : u8[3,20,24]
  %11 = reshape %10 {shape = [1, 3, 20, 24]} : u8[1,3,20,24]
  %12 = cast %11 {to = f32} : f32[1,3,20,24]
  return %6, %12
}
)";
  Expected<Module> m = parse_module(text);
  ASSERT_TRUE(m) << m.status().to_string();
  const Graph& g = m->functions[0];
  Session session;
  CompileOptions ref_opts;
  ref_opts.fuse = false;
  testing::use_backend(ref_opts, testing::kReference);
  CompileOptions fused_opts;
  fused_opts.verify_each_pass = true;
  Expected<Executable> ref = session.compile(g, ref_opts);
  Expected<Executable> fused = session.compile(g, fused_opts);
  ASSERT_TRUE(ref && fused) << fused.status().to_string();
  // The crop chain reads only the normalising region, so it folds into it as a prologue
  // (fuse-region-prologue), and the transpose after the region joins it (hoist-transposes): the
  // region writes CHW, its reshape is a view; the other chain stays a transform region.
  EXPECT_EQ(testing::count_op(fused->graph(), Op::TransformRegion), 1u) << print_graph(fused->graph());
  EXPECT_EQ(testing::count_op(fused->graph(), Op::Transpose), 0u) << print_graph(fused->graph());
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::vector<Array> in{random_array(DType::U8, {61, 83, 3}, seed, 0, 256)};
    Expected<std::vector<Array>> want = ref->run(in);
    Expected<std::vector<Array>> got = fused->run(in);
    ASSERT_TRUE(want && got) << got.status().to_string();
    ASSERT_EQ(got->size(), 2u);
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6));
    EXPECT_TRUE((*got)[1].same_data((*want)[1]));
  }
}

}  // namespace
}  // namespace fusebox
