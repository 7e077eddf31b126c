// Transform regions and region prologues on the GPU (pre-processing programs from
// include/fusebox/preprocess.h): every crop/resize/pad/flip/transpose/normalise variant compiled
// for the cuda target must run its fused kernels on the device and equal the reference backend
// (the transform's arithmetic is the CPU plan's, in double: within 1e-6). The sources also
// compile with NVRTC where there is no GPU.
#include <gtest/gtest.h>

#include "backends/cuda/batch_kernel.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/region_codegen.h"
#include "backends/cuda/transform_codegen.h"
#include "backends/transform_plan.h"
#include "fusebox/preprocess.h"
#include "ir/region_prologue.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

struct Case {
  const char* name;
  PreprocessSpec spec;
  std::vector<CropRect> crops;
};

std::vector<Case> cases() {
  auto spec = [](Interpolation interp, const char* coord, bool bgr, bool nhwc, bool letterbox) {
    PreprocessSpec s;
    s.height = 37;
    s.width = 53;
    s.interp = interp;
    s.coordinate = coord;
    s.bgr = bgr;
    s.nhwc = nhwc;
    s.letterbox = letterbox;
    s.pad_value = 114;
    s.mean = {123.675, 116.28, 103.53};
    s.stddev = {58.395, 57.12, 57.375};
    return s;
  };
  const std::vector<CropRect> one = {{13, 7, 71, 45}};
  return {
      {"bilinear_half_pixel", spec(Interpolation::Bilinear, "half_pixel", false, false, false), one},
      {"bilinear_align_corners_bgr", spec(Interpolation::Bilinear, "align_corners", true, false, false), one},
      {"bilinear_pytorch_nhwc", spec(Interpolation::Bilinear, "pytorch_half_pixel", false, true, false), one},
      {"bilinear_asymmetric_letterbox", spec(Interpolation::Bilinear, "asymmetric", false, false, true), one},
      {"nearest_half_pixel", spec(Interpolation::Nearest, "half_pixel", false, false, false), one},
      {"nearest_letterbox_bgr_nhwc", spec(Interpolation::Nearest, "align_corners", true, true, true), one},
      {"whole_frame_downscale", spec(Interpolation::Bilinear, "half_pixel", false, false, false), {{0, 0, 97, 61}}},
      // Several crops of one frame: one batch region (one launch for every crop).
      {"batch_bilinear_chw", spec(Interpolation::Bilinear, "half_pixel", false, false, false), {{13, 7, 71, 45}, {0, 0, 40, 30}, {50, 20, 47, 41}}},
      {"batch_nearest_nhwc_bgr", spec(Interpolation::Nearest, "half_pixel", true, true, false), {{1, 2, 30, 30}, {60, 25, 37, 36}}},
      {"batch_letterbox", spec(Interpolation::Bilinear, "align_corners", false, false, true), {{13, 7, 71, 45}, {0, 0, 97, 61}}},
  };
}

const ImageType kFrame{{61, 97, 3}, DType::U8};

// Every kernel node of the plan runs on the target (constants live on the host).
::testing::AssertionResult all_on_target(const Executable& exe) {
  const Graph& g = exe.graph();
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].op == Op::Constant) continue;
    if (exe.placement().node_backend[i] != 0) {
      return ::testing::AssertionFailure() << op_keyword(g.nodes()[i].op) << " ran on "
                                           << exe.placement().backends[size_t(exe.placement().node_backend[i])]->name();
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(CudaTransform, PrologueAndTransformSourcesCompileWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  size_t compiled = 0;
  for (const Case& c : cases()) {
    Expected<Graph> g = build_preprocess_graph(kFrame, c.crops, c.spec);
    ASSERT_TRUE(g) << g.status().message();
    Session session;
    CompileOptions o;
    o.target = FusionTarget::Cuda;
    o.backend = "reference";
    Expected<Executable> exe = session.compile(*g, o);
    ASSERT_TRUE(exe) << exe.status().message();
    for (const Node& n : exe->graph().nodes()) {
      if (n.op != Op::ElementwiseRegion || n.attr_i64("prologue_input") < 0) continue;
      Expected<PrologueParts> parts = split_prologue(n);
      ASSERT_TRUE(parts) << parts.status().message();
      std::shared_ptr<const TransformPlan> plan = plan_transform_region(parts->transform);
      ASSERT_TRUE(plan) << c.name;
      Expected<std::shared_ptr<const cuda::DeviceTransform>> t = cuda::make_device_transform(nullptr, *plan, "fb_pro");
      ASSERT_TRUE(t) << t.status().message();
      cuda::RegionPrologue pro{parts->input, t->get()};
      for (cuda::RegionVariant v : {cuda::RegionVariant{0, 0, 4, 2, false}, cuda::RegionVariant{3, 0, 1, 1, false}}) {
        Expected<std::string> source = cuda::region_source(*parts->region.body, v, &pro);
        ASSERT_TRUE(source) << source.status().message();
        Expected<std::string> cubin = cuda::compile_cubin(*source, std::string(c.name) + ".cu", 90);
        ASSERT_TRUE(cubin) << c.name << ": " << cubin.status().message();
        ++compiled;
      }
      Expected<std::string> alone = cuda::compile_cubin(cuda::transform_kernel_source(**t), "transform.cu", 90);
      ASSERT_TRUE(alone) << c.name << ": " << alone.status().message();
    }
    for (const Node& n : exe->graph().nodes()) {
      if (n.op != Op::BatchElementwiseRegion) continue;
      Expected<std::string> source = cuda::batch_kernel_source(n);
      ASSERT_TRUE(source) << c.name << ": " << source.status().message();
      Expected<std::string> cubin = cuda::compile_cubin(*source, std::string(c.name) + ".cu", 90);
      ASSERT_TRUE(cubin) << c.name << ": " << cubin.status().message();
      compiled += 2;
    }
  }
  EXPECT_GE(compiled, 2 * cases().size());
}

// Each program on the device, fused (one prologue region per crop) and with prologues off
// (a transform_region and a region), against the reference.
TEST(CudaTransform, PreprocessProgramsMatchTheReferenceOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (const Case& c : cases()) {
    Expected<Graph> g = build_preprocess_graph(kFrame, c.crops, c.spec);
    ASSERT_TRUE(g) << g.status().message();
    Session session;
    CompileOptions ref;
    ref.fuse = false;
    ref.backend = "reference";
    Expected<Executable> want_exe = session.compile(*g, ref);
    ASSERT_TRUE(want_exe);
    for (bool prologue : {true, false}) {
      CompileOptions o;
      o.target = FusionTarget::Cuda;
      FusionOptions f = FusionOptions::for_target(FusionTarget::Cuda);
      f.fuse_region_prologue = prologue;
      o.fusion = f;
      Expected<Executable> exe = session.compile(*g, o);
      ASSERT_TRUE(exe) << exe.status().message();
      EXPECT_TRUE(all_on_target(*exe)) << c.name << (prologue ? " (prologue)" : " (transform + region)") << "\n"
                                       << print_graph(exe->graph());
      if (c.crops.size() == 1) {
        EXPECT_EQ(testing::count_op(exe->graph(), Op::TransformRegion) == 0, prologue) << c.name;
      }
      // Letterboxed crops of different aspect ratios pad differently: their bodies differ, so they
      // stay separate regions and a concat (on the device too).
      if (c.crops.size() > 1 && prologue && !c.spec.letterbox) {
        EXPECT_EQ(testing::count_op(exe->graph(), Op::BatchElementwiseRegion), 1u) << c.name;
      }
      for (uint64_t seed : {1, 2}) {
        const Array frame = testing::random_array(DType::U8, kFrame.shape, seed, 0, 256);
        Expected<std::vector<Array>> want = want_exe->run(std::vector<Array>{frame});
        Expected<std::vector<Array>> got = exe->run(std::vector<Array>{frame});
        ASSERT_TRUE(want && got) << got.status().message();
        EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6)) << c.name << (prologue ? " (prologue)" : "");
      }
    }
  }
}

// A lone index-only step read by an element-wise region or a lone element-wise op (no chain:
// fuse-region-prologue wraps the one step as a transform, spec §4.3; the lone op becomes a
// one-step region) runs as one prologue kernel on the device, equal to the reference.
TEST(CudaTransform, LoneStepsFoldIntoTheRegionOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const char* programs[] = {
      R"(func @transpose(%img: u8[45,71,3], %m: f32[3,1,1]) -> f32[3,45,71] {
  %t = transpose %img {perm = [2, 0, 1]} : u8[3,45,71]
  %c = cast %t {to = f32} : f32[3,45,71]
  %y = sub %c, %m : f32[3,45,71]
  return %y
})",
      R"(func @resize(%x: f32[1,3,17,23], %b: f32[1,3,1,1]) -> f32[1,3,37,53] {
  %r = resize %x {sizes = [1, 3, 37, 53], mode = "linear", coordinate = "half_pixel"} : f32[1,3,37,53]
  %a = add %r, %b : f32[1,3,37,53]
  %y = relu %a : f32[1,3,37,53]
  return %y
})",
      R"(func @flip(%x: f32[5,33,7], %s: f32[7]) -> f32[5,33,7] {
  %f = flip %x {axes = [1]} : f32[5,33,7]
  %m = mul %f, %s : f32[5,33,7]
  %y = relu %m : f32[5,33,7]
  return %y
})",
      R"(func @pad(%x: f32[6,9,10]) -> f32[6,12,16] {
  %p = pad %x {pads = [0, 1, 3, 0, 2, 3], mode = "reflect"} : f32[6,12,16]
  %y = tanh %p : f32[6,12,16]
  return %y
})",
      R"(func @slice(%x: f32[40,30], %b: f32[15]) -> f32[18,15] {
  %s = slice %x {starts = [3, 1], ends = [39, 30], axes = [0, 1], steps = [2, 2]} : f32[18,15]
  %y = add %s, %b : f32[18,15]
  return %y
})",
  };
  for (const char* text : programs) {
    const Graph g = testing::parse_or_fail(text);
    CompileOptions o;
    o.target = FusionTarget::Cuda;
    Expected<testing::OracleAndPlan> both = testing::compile_against_reference(g, o);
    ASSERT_TRUE(both) << both.status().message() << "\n" << text;
    const Graph& fused = both->plan.graph();
    const Node* region = testing::find_node(fused, Op::ElementwiseRegion);
    ASSERT_NE(region, nullptr) << print_graph(fused);
    EXPECT_GE(region->attr_i64("prologue_input"), 0) << print_graph(fused);
    EXPECT_EQ(testing::count_op(fused, Op::TransformRegion), 0u) << print_graph(fused);
    EXPECT_TRUE(all_on_target(both->plan)) << print_graph(fused);
    for (uint64_t seed : {3, 4}) {
      std::vector<Array> in;
      for (ValueId v : g.inputs()) {
        const TensorType& t = g.value(v).type;
        const bool u8 = t.dtype == DType::U8;
        in.push_back(testing::random_array(t.dtype, static_dims(t.shape), seed + in.size(), u8 ? 0 : -2,
                                           u8 ? 256 : 2));
      }
      Expected<std::vector<Array>> want = both->reference.run(in);
      Expected<std::vector<Array>> got = both->plan.run(in);
      ASSERT_TRUE(want && got) << (got ? want.status() : got.status()).message();
      EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-6, 1e-6)) << print_graph(fused);
    }
  }
}

}  // namespace
}  // namespace fusebox
