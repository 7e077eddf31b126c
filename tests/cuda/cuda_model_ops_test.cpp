// The last ops real CNNs placed on the CPU, on the CUDA backend: lone resize, slice, transpose,
// flip and pad (one-step transform regions), batch_norm (one NVRTC kernel) and conv_transpose2d
// (cuDNN's backward-data convolution).
//
// Without NVRTC everything skips; without a GPU the code generation and claim tests run: every
// generated source compiles for sm_90, the claims take what the detector's FPN has (run-time
// sizes) and refuse the rest with a reason. With a GPU, each op runs on random inputs of odd
// sizes, placed on cuda (checked), against the reference backend unfused, and once more as a
// kernel alone on results poisoned with NaN bytes (0xFF) and finite ones (0x5A). Tolerances:
//   nearest resize, slice, transpose,    0: the transform plan picks the reference's source
//   flip, pad                            element (resize_index.h) and copies it
//   linear resize                        |got - want| <= tol + tol * |want|, tol 1e-6 for f32 and
//                                        1e-3 (one f16 ulp) for f16, 0 for u8: the plan sums the
//                                        taps in double in the reference's order and rounds once
//                                        as it does, so the results should agree bit for bit;
//                                        the slack admits one rounding step, not a wrong tap
//   batch_norm                           0: the reference's double steps, IEEE sqrt and division,
//                                        no contraction, one rounding
//   conv_transpose2d                     |got - want| <= rel * max(1, max |want|) with rel 2e-5
//                                        for f32 (f32 sums in cuDNN's order, the bias added after
//                                        the rounding, against a double sum rounded once) and
//                                        4e-3 for f16 (f16 result and bias roundings, 2^-10 each)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/cuda/batch_norm_kernel.h"
#include "backends/cuda/conv_transpose_kernel.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cudnn.h"  // empty without FUSEBOX_HAVE_CUDNN
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/transform_codegen.h"
#include "backends/cuda/transform_step_kernel.h"
#include "backends/transform_plan.h"
#include "ir/transform_region.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

std::string dims(const std::vector<int64_t>& s) { return "[" + shape_to_string(make_shape(s)) + "]"; }

// One node `op_text` ("resize %x {...}") over %x of type `in`, typed `out`.
std::string one_step(const std::string& in, const std::string& op_text, const std::string& out) {
  return "func @f(%x: " + in + ") -> " + out + " {\n  %0 = " + op_text + " : " + out + "\n  return %0\n}";
}

// ---- code generation (NVRTC, no GPU) --------------------------------------------------------

TEST(CudaModelOpsCodegen, BatchNormCompilesForEveryDtype) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Expected<std::string> cubin = cuda::compile_cubin(cuda::batch_norm_source(d), "batch_norm_" + std::string(dtype_name(d)) + ".cu", 90);
    ASSERT_TRUE(cubin) << dtype_name(d) << ": " << cubin.status().message();
    EXPECT_GT(cubin->size(), 1000u) << dtype_name(d);
  }
}

// The standalone transform kernel of a lone step, as the backend makes it for these sizes.
Expected<std::string> step_kernel_source(const std::string& text) {
  const Graph g = testing::parse_or_fail(text);
  if (g.nodes().empty()) return Status::invalid("no graph");
  const Node region = transform_region_of(g, TransformChain{{0}, "step"});
  std::string why;
  std::shared_ptr<const TransformPlan> plan = plan_transform_region(region, &why);
  if (!plan) return Status::unimplemented(why);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const cuda::DeviceTransform> t, cuda::make_device_transform(nullptr, *plan, "fb_tf"));
  return cuda::transform_kernel_source(*t);
}

const char* const kCoordinates[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"};
const char* const kNearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

TEST(CudaModelOpsCodegen, LoneTransformStepsCompile) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  std::vector<std::string> steps;
  for (const char* dt : {"f32", "f16", "bf16", "u8"}) {
    const std::string t = dt;
    for (const char* c : kCoordinates) {
      steps.push_back(one_step(t + "[2,3,7,9]", "resize %x {sizes = [2, 3, 11, 5], mode = \"linear\", coordinate = \"" + std::string(c) + "\"}",
                               t + "[2,3,11,5]"));
      for (const char* m : kNearestModes) {
        steps.push_back(one_step(t + "[2,3,7,9]",
                                 "resize %x {sizes = [2, 3, 4, 20], coordinate = \"" + std::string(c) + "\", nearest_mode = \"" + m + "\"}",
                                 t + "[2,3,4,20]"));
      }
    }
    steps.push_back(one_step(t + "[5,6,7]", "slice %x {starts = [1, 6], ends = [4, 0], axes = [0, 2], steps = [2, -2]}", t + "[2,6,3]"));
    steps.push_back(one_step(t + "[5,6,7]", "transpose %x {perm = [2, 0, 1]}", t + "[7,5,6]"));
    steps.push_back(one_step(t + "[5,6,7]", "flip %x {axes = [0, 2]}", t + "[5,6,7]"));
    for (const char* mode : {"constant", "reflect", "edge"}) {
      steps.push_back(one_step(t + "[5,6,7]", "pad %x {pads = [1, 0, 2, 2, 3, 1], mode = \"" + std::string(mode) + "\", value = 3.0}", t + "[8,9,10]"));
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    Expected<std::string> source = step_kernel_source(steps[i]);
    ASSERT_TRUE(source) << steps[i] << ": " << source.status().message();
    Expected<std::string> cubin = cuda::compile_cubin(*source, "step_" + std::to_string(i) + ".cu", 90);
    ASSERT_TRUE(cubin) << steps[i] << ": " << cubin.status().message();
    EXPECT_GT(cubin->size(), 1000u) << steps[i];
  }
}

// ---- claims (no GPU) ------------------------------------------------------------------------

::testing::AssertionResult refused_with(const Claim& c, const std::string& words) {
  if (c.yes) return ::testing::AssertionFailure() << "accepted";
  if (c.reason.find(words) == std::string::npos) return ::testing::AssertionFailure() << "reason: " << c.reason;
  return ::testing::AssertionSuccess();
}

Claim first_claim(const std::string& text) {
  const Graph g = testing::parse_or_fail(text);
  if (g.nodes().empty()) return Claim::refuse("no graph");
  const Node& n = g.nodes()[0];
  if (n.op == Op::BatchNorm) return cuda::claim_batch_norm(g, n);
  if (n.op == Op::ConvTranspose2d) return cuda::claim_conv_transpose(g, n);
  return cuda::claim_transform_step(g, n);
}

// The detector's FPN nodes, with its run-time sizes, are claimed; what the kernels cannot run is
// refused with the reason.
TEST(CudaModelOpsClaims, TheDetectorsNodesAreClaimedAndRefusalsSayWhy) {
  Claim upsample = first_claim(one_step(
      "f32[N,96,H,W]", "resize %x {scales = [1.0, 1.0, 2.0, 2.0], mode = \"nearest\", coordinate = \"asymmetric\", nearest_mode = \"floor\"}",
      "f32[N,96,?,?]"));
  EXPECT_TRUE(upsample.yes) << upsample.reason;
  EXPECT_TRUE(first_claim(one_step("f16[3,5,7]", "transpose %x {perm = [1, 2, 0]}", "f16[5,7,3]")).yes);
  EXPECT_TRUE(refused_with(first_claim(one_step("f32[1,1,4,4]", "resize %x {sizes = [1, 1, 8, 8], mode = \"cubic\"}", "f32[1,1,8,8]")),
                           "cubic"));
  EXPECT_TRUE(refused_with(first_claim(one_step("f32[4,0]", "pad %x {pads = [1, 1, 1, 1]}", "f32[6,2]")), "empty axis"));

  Claim bn = first_claim(
      "func @f(%x: f32[N,24,H,W], %s: f32[24], %b: f32[24], %m: f32[24], %v: f32[24]) -> f32[N,24,H,W] {\n"
      "  %0 = batch_norm %x, %s, %b, %m, %v {eps = 1e-05} : f32[N,24,H,W]\n  return %0\n}");
  EXPECT_TRUE(bn.yes) << bn.reason;

#ifdef FUSEBOX_HAVE_CUDNN
  if (Expected<const cuda::Cudnn*> dnn = cuda::cudnn(); !dnn) GTEST_SKIP() << "conv_transpose2d claims: " << dnn.status().message();
#else
  GTEST_SKIP() << "conv_transpose2d claims: this build has no cuDNN headers";
#endif
  Claim up = first_claim(
      "func @f(%x: f32[N,24,H,W], %w: f32[24,24,2,2]) -> f32[N,24,?,?] {\n"
      "  %0 = conv_transpose2d %x, %w {stride = [2, 2], pad = [0, 0, 0, 0], dilation = [1, 1], groups = 1, output_padding = [0, 0]} : f32[N,24,?,?]\n"
      "  return %0\n}");
  EXPECT_TRUE(up.yes) << up.reason;
  // Bottom pad larger than the top one by more than output_padding: cuDNN's symmetric pad gives
  // another size.
  EXPECT_TRUE(refused_with(first_claim("func @f(%x: f32[1,4,5,5], %w: f32[4,2,3,3]) -> f32[1,2,5,7] {\n"
                                       "  %0 = conv_transpose2d %x, %w {pad = [0, 0, 2, 0]} : f32[1,2,5,7]\n  return %0\n}"),
                           "pads both sides alike"));
  EXPECT_TRUE(refused_with(first_claim("func @f(%x: bf16[1,4,5,5], %w: bf16[4,2,3,3]) -> bf16[1,2,7,7] {\n"
                                       "  %0 = conv_transpose2d %x, %w : bf16[1,2,7,7]\n  return %0\n}"),
                           "f32 and f16"));
}

// ---- device runs against the reference ------------------------------------------------------

// How close a result must be: element-wise within tol + tol * |want| (0: bit for bit), or with
// `to_scale` within tol * max(1, max |want|) (testing::close_to_scale).
struct Tolerance {
  double tol = 0;
  bool to_scale = false;
};

// `g` compiled unfused for the cuda target: its `op` node must be placed on cuda, and the result
// for `inputs` must match the reference's within `t`. Then the op's kernel alone on poisoned
// results.
void expect_on_cuda(const Graph& g, Op op, const std::vector<Array>& inputs, const Attrs& attrs, Tolerance t, const std::string& what) {
  CompileOptions o;
  o.target = FusionTarget::Cuda;
  o.fuse = false;
  Expected<testing::OracleAndPlan> c = testing::compile_against_reference(g, o);
  ASSERT_TRUE(c) << what << ": " << c.status().message();
  EXPECT_EQ(testing::backend_of(c->plan, op), "cuda") << what;
  Expected<std::vector<Array>> want = c->reference.run(inputs);
  Expected<std::vector<Array>> got = c->plan.run(inputs);
  ASSERT_TRUE(want) << what << ": " << want.status().message();
  ASSERT_TRUE(got) << what << ": " << got.status().message();
  auto close = [&](const Array& a, const Array& b) {
    return t.to_scale ? testing::close_to_scale(a, b, t.tol) : testing::arrays_close(a, b, t.tol, t.tol);
  };
  EXPECT_TRUE(close((*got)[0], (*want)[0])) << what;
  for (uint8_t poison : {uint8_t(0xFF), uint8_t(0x5A)}) {
    Expected<Array> alone = testing::run_one_kernel("cuda", op, inputs, attrs, (*want)[0], poison);
    ASSERT_TRUE(alone) << what << ": " << alone.status().message();
    EXPECT_TRUE(close(*alone, (*want)[0])) << what << " (kernel alone, poison " << int(poison) << ")";
  }
}

// A lone step over x of `in`, typed `out`, on random values.
void expect_step(DType d, const std::vector<int64_t>& in, Op op, const Attrs& attrs, const std::vector<int64_t>& out, uint64_t seed,
                 const std::string& what, Tolerance t = {}) {
  const Array x = d == DType::U8 ? testing::random_array(d, in, seed, 0, 256) : testing::random_array(d, in, seed, -3.0, 3.0);
  const Graph g = testing::one_node(op, {x}, attrs, TensorType{d, make_shape(out)});
  expect_on_cuda(g, op, {x}, attrs, t, what + " " + std::string(dtype_name(d)) + dims(in) + " -> " + dims(out));
}

TEST(CudaModelOpsDevice, ResizeMatchesTheReferenceAtOddScalesUpAndDown) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<int64_t> in{2, 3, 7, 9};
  const std::vector<std::vector<int64_t>> outs = {{2, 3, 11, 5}, {2, 3, 4, 20}, {2, 3, 21, 27}, {2, 3, 1, 9}};
  uint64_t seed = 1;
  for (DType d : {DType::F32, DType::F16}) {
    for (const std::vector<int64_t>& out : outs) {
      for (const char* c : kCoordinates) {
        Attrs linear{{"sizes", make_shape(out)}, {"mode", std::string("linear")}, {"coordinate", std::string(c)}};
        expect_step(d, in, Op::Resize, linear, out, ++seed, std::string("linear ") + c, {d == DType::F32 ? 1e-6 : 1e-3});
        for (const char* m : kNearestModes) {
          Attrs nearest{{"sizes", make_shape(out)}, {"coordinate", std::string(c)}, {"nearest_mode", std::string(m)}};
          expect_step(d, in, Op::Resize, nearest, out, ++seed, std::string("nearest ") + c + " " + m);
        }
      }
    }
  }
  // u8 linear rounds half away from zero and saturates, as the plan's store does.
  expect_step(DType::U8, in, Op::Resize, {{"sizes", make_shape(outs[0])}, {"mode", std::string("linear")}}, outs[0], 99, "linear");
}

// The detector's upsampling: scales of 2, 4 and 8 with run-time sizes, planned at the first run
// of each size.
TEST(CudaModelOpsDevice, ScaledResizeWithRunTimeSizesMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (double scale : {2.0, 4.0, 8.0}) {
    const std::string sc = std::to_string(int(scale)) + ".0";
    const Graph g = testing::parse_or_fail(one_step(
        "f32[N,5,H,W]",
        "resize %x {scales = [1.0, 1.0, " + sc + ", " + sc + "], mode = \"nearest\", coordinate = \"asymmetric\", nearest_mode = \"floor\"}",
        "f32[N,5,?,?]"));
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{1, 5, 7, 9}, std::vector<int64_t>{2, 5, 3, 4}}) {
      const Array x = testing::random_array(DType::F32, shape, uint64_t(scale) * 7 + uint64_t(shape[2]), -3.0, 3.0);
      expect_on_cuda(g, Op::Resize, {x}, g.nodes()[0].attrs, {}, "resize x" + sc + " " + dims(shape));
    }
  }
}

TEST(CudaModelOpsDevice, SliceTransposeFlipAndPadMatchTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<int64_t> in{5, 6, 7};
  uint64_t seed = 300;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::U8}) {
    expect_step(d, in, Op::Slice,
                {{"starts", std::vector<int64_t>{1, 6}}, {"ends", std::vector<int64_t>{4, 0}}, {"axes", std::vector<int64_t>{0, 2}},
                 {"steps", std::vector<int64_t>{2, -2}}},
                {2, 6, 3}, ++seed, "slice");
    expect_step(d, in, Op::Transpose, {{"perm", std::vector<int64_t>{2, 0, 1}}}, {7, 5, 6}, ++seed, "transpose");
    expect_step(d, in, Op::Flip, {{"axes", std::vector<int64_t>{0, 2}}}, in, ++seed, "flip");
    for (const char* mode : {"constant", "reflect", "edge"}) {
      expect_step(d, in, Op::Pad, {{"pads", std::vector<int64_t>{1, 0, 2, 2, 3, 1}}, {"mode", std::string(mode)}, {"value", 3.0}}, {8, 9, 10},
                  ++seed, std::string("pad ") + mode);
    }
  }
}

TEST(CudaModelOpsDevice, BatchNormMatchesTheReferenceBitForBit) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<std::vector<int64_t>> shapes = {{2, 7, 5, 3}, {1, 13, 17}, {3, 5}, {2, 3, 4, 5, 6}};
  uint64_t seed = 700;
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    for (const std::vector<int64_t>& shape : shapes) {
      const std::vector<int64_t> c{shape[1]};
      const std::vector<Array> in = {testing::random_array(d, shape, ++seed, -3.0, 3.0), testing::random_array(d, c, ++seed, 0.5, 2.0),
                                     testing::random_array(d, c, ++seed, -1.0, 1.0), testing::random_array(d, c, ++seed, -0.5, 0.5),
                                     testing::random_array(d, c, ++seed, 0.1, 3.0)};
      const Attrs attrs{{"eps", 1e-3}};
      const Graph g = testing::one_node(Op::BatchNorm, in, attrs, TensorType{d, make_shape(shape)});
      expect_on_cuda(g, Op::BatchNorm, in, attrs, {}, "batch_norm " + std::string(dtype_name(d)) + dims(shape));
    }
  }
}

struct TransposeCase {
  std::vector<int64_t> x, w, stride, pad, output_padding, dilation;
  int64_t groups;
  bool bias;
};

TEST(CudaModelOpsDevice, ConvTransposeMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<TransposeCase> cases = {
      {{2, 24, 5, 7}, {24, 24, 2, 2}, {2, 2}, {0, 0, 0, 0}, {0, 0}, {1, 1}, 1, false},  // the detector's
      {{1, 6, 5, 4}, {6, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 1, true},
      {{2, 6, 4, 5}, {6, 2, 3, 3}, {2, 3}, {1, 0, 1, 0}, {1, 2}, {1, 1}, 3, true},       // groups
      {{1, 4, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {0, 0}, {2, 2}, 4, false},      // depthwise, dilated
      {{1, 3, 5, 5}, {3, 5, 4, 4}, {2, 2}, {2, 1, 1, 1}, {0, 1}, {1, 1}, 1, true},       // asymmetric pads
  };
  uint64_t seed = 900;
  for (DType d : {DType::F32, DType::F16}) {
    for (const TransposeCase& c : cases) {
      std::vector<int64_t> y{c.x[0], c.w[1] * c.groups, 0, 0};
      for (size_t a = 0; a < 2; ++a) {
        y[2 + a] = (c.x[2 + a] - 1) * c.stride[a] - c.pad[a] - c.pad[a + 2] + c.dilation[a] * (c.w[2 + a] - 1) + c.output_padding[a] + 1;
      }
      std::vector<Array> in = {testing::random_array(d, c.x, ++seed, -1.0, 1.0), testing::random_array(d, c.w, ++seed, -1.0, 1.0)};
      if (c.bias) in.push_back(testing::random_array(d, {y[1]}, ++seed, -1.0, 1.0));
      const Attrs attrs{{"stride", c.stride}, {"pad", c.pad}, {"dilation", c.dilation}, {"groups", c.groups}, {"output_padding", c.output_padding}};
      const Graph g = testing::one_node(Op::ConvTranspose2d, in, attrs, TensorType{d, make_shape(y)});
      expect_on_cuda(g, Op::ConvTranspose2d, in, attrs, {d == DType::F32 ? 2e-5 : 4e-3, true},
                     "conv_transpose2d " + std::string(dtype_name(d)) + dims(c.x) + " * " + dims(c.w) + " -> " + dims(y));
    }
  }
}

}  // namespace
}  // namespace fusebox
