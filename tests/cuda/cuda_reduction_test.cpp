// reduction_region on the GPU (reduction_codegen.h, reduction_kernel.h) against the CPU reference.
// Without NVRTC everything skips; without a GPU only the code generation and claim tests run:
// the source of every tested body compiles for sm_90 at one and two row dims, and the claim
// refuses what the kernel does not run with a reason. With a GPU, every body runs on f32, f16,
// bf16 and f64 over rows of 1, 7, 1000 and 4097 elements, one to many rows, on random operands (never
// zero), the kernel run directly on outputs poisoned with each of testing::kPoisonBytes, and must
// match the reference backend's kernel of the same node.
// Tolerances (relative and absolute): f32 1e-5 (the steps are the reference's f32 operations;
// sums in double in another order, transcendental functions within 2 ulp), f16 2e-3 and bf16
// 1.6e-2 (one ulp of the dtype: a value on a rounding boundary may round the other way), f64
// 1e-12 (sums in another order; CUDA's and the C library's double functions differ in the last
// bits).
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>

#include "backends/cpu/reference/reference.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/reduction_kernel.h"
#include "backends/registry/registry.h"
#include "fusion/pipeline.h"
#include "ir/parser.h"
#include "ir/shape_inference.h"
#include "runtime/session.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64};

double tolerance(DType d) {
  switch (d) {
    case DType::F16: return 2e-3;
    case DType::BF16: return 1.6e-2;
    case DType::F64: return 1e-12;
    default: return 1e-5;
  }
}

struct BodyCase {
  std::string name;
  std::string text;  // one function holding one reduction_region; `D[` is the dtype
};

// Symbols: N rows, D the row length (H, W: a row of two axes, H*W elements).
std::vector<BodyCase> body_cases() {
  return {
      {"softmax", R"(func @f(%x: D[N,D]) -> D[N,D] {
  %y = reduction_region %x {name = "softmax", row_axes = 1} : D[N,D] (%a: D[N,D]) {
    %0 = reduce_max %a {axes = [-1], keepdims = true} : D[N,1]
    %1 = sub %a, %0 : D[N,D]
    %2 = exp %1 : D[N,D]
    %3 = reduce_sum %2 {axes = [-1], keepdims = true} : D[N,1]
    %4 = div %2, %3 : D[N,D]
    return %4
  }
  return %y
})"},
      {"layer_norm [D] weight and bias", R"(func @f(%x: D[N,D], %g: D[D], %b: D[D]) -> D[N,D] {
  %y = reduction_region %x, %g, %b {name = "layer_norm", row_axes = 1} : D[N,D] (%a: D[N,D], %w: D[D], %c: D[D]) {
    %0 = reduce_mean %a {axes = [-1], keepdims = true} : D[N,1]
    %1 = sub %a, %0 : D[N,D]
    %2 = mul %1, %1 : D[N,D]
    %3 = reduce_mean %2 {axes = [-1], keepdims = true} : D[N,1]
    %4 = constant {value = dense<D[]: [1e-05]>} : D[]
    %5 = add %3, %4 : D[N,1]
    %6 = rsqrt %5 : D[N,1]
    %7 = mul %1, %6 : D[N,D]
    %8 = mul %7, %w : D[N,D]
    %9 = add %8, %c : D[N,D]
    return %9
  }
  return %y
})"},
      {"rms_norm [D] weight", R"(func @f(%x: D[N,D], %g: D[D]) -> D[N,D] {
  %y = reduction_region %x, %g {name = "rms_norm", row_axes = 1} : D[N,D] (%a: D[N,D], %w: D[D]) {
    %0 = mul %a, %a : D[N,D]
    %1 = reduce_mean %0 {axes = [-1], keepdims = true} : D[N,1]
    %2 = constant {value = dense<D[]: [1e-06]>} : D[]
    %3 = add %1, %2 : D[N,1]
    %4 = rsqrt %3 : D[N,1]
    %5 = mul %a, %4 : D[N,D]
    %6 = mul %5, %w : D[N,D]
    return %6
  }
  return %y
})"},
      // Results of every kind: row-shaped, keepdims, without keepdims; max, min, sum, prod.
      {"log-sum-exp, range and product: four results", R"(func @f(%x: D[N,D]) -> (D[N,D], D[N,1], D[N], D[N]) {
  %r:4 = reduction_region %x {name = "multi", row_axes = 1} : D[N,D], D[N,1], D[N], D[N] (%a: D[N,D]) {
    %0 = reduce_max %a {axes = [-1], keepdims = true} : D[N,1]
    %1 = sub %a, %0 : D[N,D]
    %2 = exp %1 : D[N,D]
    %3 = reduce_sum %2 {axes = [-1], keepdims = true} : D[N,1]
    %4 = log %3 : D[N,1]
    %5 = add %4, %0 : D[N,1]
    %6 = sub %a, %5 : D[N,D]
    %7 = reduce_min %a {axes = [-1]} : D[N]
    %8 = constant {value = dense<D[]: [0.001]>} : D[]
    %9 = mul %a, %8 : D[N,D]
    %10 = constant {value = dense<D[]: [1.0]>} : D[]
    %11 = add %9, %10 : D[N,D]
    %12 = reduce_prod %11 {axes = [-1]} : D[N]
    return %6, %5, %7, %12
  }
  return %r#0, %r#1, %r#2, %r#3
})"},
      // A row of two axes; %c broadcasts along one of them (strided row reads), %k is per row.
      {"row_axes = 2, [H,1] and [N,1,1] operands", R"(func @f(%x: D[N,H,W], %c: D[H,1], %k: D[N,1,1]) -> (D[N,H,W], D[N,1,1]) {
  %r:2 = reduction_region %x, %c, %k {name = "center", row_axes = 2} : D[N,H,W], D[N,1,1] (%a: D[N,H,W], %s: D[H,1], %t: D[N,1,1]) {
    %0 = mul %a, %s : D[N,H,W]
    %1 = reduce_mean %0 {axes = [1, 2], keepdims = true} : D[N,1,1]
    %2 = sub %0, %1 : D[N,H,W]
    %3 = add %2, %t : D[N,H,W]
    %4 = sigmoid %1 : D[N,1,1]
    return %3, %4
  }
  return %r#0, %r#1
})"},
      {"row dot without keepdims", R"(func @f(%a: D[N,D], %b: D[N,D]) -> D[N] {
  %s = reduction_region %a, %b {name = "dot", row_axes = 1} : D[N] (%x: D[N,D], %y: D[N,D]) {
    %0 = mul %x, %y : D[N,D]
    %1 = reduce_sum %0 {axes = [-1]} : D[N]
    return %1
  }
  return %s
})"},
      // Rows of one element by type: every value is one per row, the reductions are the value.
      {"static rows of one element", R"(func @f(%x: D[N,1]) -> D[N,1] {
  %y = reduction_region %x {name = "one", row_axes = 1} : D[N,1] (%a: D[N,1]) {
    %0 = reduce_max %a {axes = [-1], keepdims = true} : D[N,1]
    %1 = sub %a, %0 : D[N,1]
    %2 = exp %1 : D[N,1]
    %3 = reduce_sum %2 {axes = [-1], keepdims = true} : D[N,1]
    %4 = div %2, %3 : D[N,1]
    return %4
  }
  return %y
})"},
  };
}

// The text with every `D[` that starts a type (not the end of a name) written as dtype d.
std::string with_dtype(const std::string& s, DType d) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool starts = i == 0 || !(std::isalnum(static_cast<unsigned char>(s[i - 1])) || s[i - 1] == '_');
    if (starts && s.compare(i, 2, "D[") == 0) {
      out += std::string(dtype_name(d)) + "[";
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The graph of a case and its reduction_region node.
struct Region {
  Graph g;
  const Node* node = nullptr;
};
Region region_of(const BodyCase& c, DType d) {
  Region r{testing::parse_or_fail(with_dtype(c.text, d))};
  r.node = testing::find_node(r.g, Op::ReductionRegion);
  return r;
}

TEST(CudaReductionCodegen, EveryTestedBodyCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  for (const BodyCase& c : body_cases()) {
    for (DType d : kDTypes) {
      Region r = region_of(c, d);
      ASSERT_NE(r.node, nullptr) << c.name;
      Expected<std::shared_ptr<const cuda::ReductionPlan>> plan = cuda::plan_reduction(r.node->body, r.node->attr_i64("row_axes"));
      ASSERT_TRUE(plan) << c.name << ": " << plan.status().message();
      // Two row dims only where the row has two axes (a third never merges from these bodies).
      for (int dims : {1, 2}) {
        Expected<std::string> source = cuda::reduction_source(**plan, dims);
        ASSERT_TRUE(source) << c.name << ": " << source.status().message();
        Expected<std::string> cubin = cuda::compile_cubin(*source, "reduction.cu", 90);
        ASSERT_TRUE(cubin) << c.name << " " << dtype_name(d) << " dims " << dims << ": " << cubin.status().message() << "\n"
                           << *source;
      }
    }
  }
}

// Passes follow the dependence between reductions: a softmax is max, then sum, then the write;
// a layer norm mean, then variance; a dot product one pass and no row-shaped result.
TEST(CudaReductionCodegen, PassesFollowTheReductions) {
  const std::vector<BodyCase> cases = body_cases();
  auto plan_of = [&](size_t k) {
    Region r = region_of(cases[k], DType::F32);
    Expected<std::shared_ptr<const cuda::ReductionPlan>> p = cuda::plan_reduction(r.node->body, r.node->attr_i64("row_axes"));
    EXPECT_TRUE(p) << p.status().message();
    return *p;
  };
  EXPECT_EQ(plan_of(0)->passes, 2);
  EXPECT_EQ(plan_of(1)->passes, 2);
  EXPECT_EQ(plan_of(2)->passes, 1);
  std::shared_ptr<const cuda::ReductionPlan> multi = plan_of(3);
  EXPECT_EQ(multi->passes, 2);
  EXPECT_EQ(multi->reductions[0].size(), 3u) << "max, min and prod read only x: one pass";
  std::shared_ptr<const cuda::ReductionPlan> dot = plan_of(5);
  EXPECT_EQ(dot->passes, 1);
  EXPECT_TRUE(dot->targets[1].empty()) << "no row-shaped result: no write pass";
  std::shared_ptr<const cuda::ReductionPlan> one = plan_of(6);
  EXPECT_EQ(one->passes, 0) << "a reduction of one element is that element";
  EXPECT_TRUE(one->targets[0].empty());
}

TEST(CudaReductionClaims, RefusalsSayWhy) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  for (const BodyCase& c : body_cases()) {
    Region r = region_of(c, DType::F32);
    Claim yes = cuda::claim_reduction_region(r.g, *r.node);
    EXPECT_TRUE(yes.yes) << c.name << ": " << yes.reason;
  }
  Graph ints = testing::parse_or_fail(R"(func @f(%x: i32[N,D]) -> i32[N,D] {
  %y = reduction_region %x {name = "ints", row_axes = 1} : i32[N,D] (%a: i32[N,D]) {
    %0 = reduce_sum %a {axes = [-1], keepdims = true} : i32[N,1]
    %1 = sub %a, %0 : i32[N,D]
    return %1
  }
  return %y
})");
  Claim no = cuda::claim_reduction_region(ints, *testing::find_node(ints, Op::ReductionRegion));
  EXPECT_FALSE(no.yes);
  EXPECT_NE(no.reason.find("reduce_sum on i32"), std::string::npos) << no.reason;
  Expected<Module> returned = parse_module(R"(func @f(%x: f32[N,D]) -> (f32[N,D], f32[N,1]) {
  %r:2 = reduction_region %x {name = "passes_x", row_axes = 1} : f32[N,D], f32[N,1] (%a: f32[N,D]) {
    %0 = reduce_sum %a {axes = [-1], keepdims = true} : f32[N,1]
    return %a, %0
  }
  return %r#0, %r#1
})");
  if (!returned) GTEST_SKIP() << "a body returning its operand does not verify: " << returned.status().message();
  const Graph& g = returned->functions[0];
  Claim no_copy = cuda::claim_reduction_region(g, *testing::find_node(g, Op::ReductionRegion));
  EXPECT_FALSE(no_copy.yes);
  EXPECT_NE(no_copy.reason.find("returns an operand"), std::string::npos) << no_copy.reason;
}

// The launch argument (FbRows) of the two-axis row: x [2,5,7], c [5,1] (repeats along W, so the
// row keeps two dims), k [2,1,1] (one value per row); with H = 1 the row is one dim.
TEST(CudaReductionClaims, LaunchArgumentsFollowTheOperands) {
  Region r = region_of(body_cases()[4], DType::F32);
  Expected<std::shared_ptr<const cuda::ReductionPlan>> plan = cuda::plan_reduction(r.node->body, 2);
  ASSERT_TRUE(plan) << plan.status().message();
  auto views = [](std::vector<std::vector<int64_t>> shapes) {
    std::vector<BufferView> v;
    for (auto& s : shapes) v.push_back(BufferView{nullptr, DType::F32, s, {}, {}});
    return v;
  };
  std::vector<BufferView> two = views({{2, 5, 7}, {5, 1}, {2, 1, 1}});
  Expected<cuda::ReductionLaunch> l = cuda::plan_reduction_launch(**plan, two);
  ASSERT_TRUE(l) << l.status().message();
  EXPECT_EQ(l->rows, 2);
  EXPECT_EQ(l->n, 35);
  EXPECT_EQ(l->row_dims, 2);
  EXPECT_EQ(l->threads, 64u) << "35 elements: two warps";
  const std::vector<int64_t> want = {2, 35, 1,                 // rows, n, leading dims
                                     2, 1, 1, 1, 1, 1, 1, 1,   // leading dims, padded
                                     35, 0, 0, 0, 0, 0, 0, 0,  // x's leading strides
                                     0, 0, 0, 0, 0, 0, 0, 0,   // c's
                                     1, 0, 0, 0, 0, 0, 0, 0,   // k's
                                     5, 7,                     // row dims
                                     7, 1, 1, 0, 0, 0};        // row strides of x, c, k
  EXPECT_EQ(l->args, want);
  std::vector<BufferView> one = views({{3, 1, 300}, {1, 1}, {3, 1, 1}});
  l = cuda::plan_reduction_launch(**plan, one);
  ASSERT_TRUE(l) << l.status().message();
  EXPECT_EQ(l->row_dims, 1);
  EXPECT_EQ(l->threads, unsigned(cuda::kReductionThreads));
  const std::vector<int64_t> row_part(l->args.end() - 4, l->args.end());
  EXPECT_EQ(row_part, (std::vector<int64_t>{300, 1, 0, 0})) << "row dim, then the strides of x, c, k";
}

// A log-softmax at temperature 2 and a row dot product with a [D] weight, in primitives.
constexpr const char* kWrittenOut = R"(func @f(%x: f32[N,D], %w: f32[D]) -> (f32[N,D], f32[N]) {
  %m = reduce_max %x {axes = [-1], keepdims = true} : f32[N,1]
  %nm = neg %m : f32[N,1]
  %d = add %x, %nm : f32[N,D]
  %half = constant {value = dense<f32[]: [0.5]>} : f32[]
  %t = mul %d, %half : f32[N,D]
  %e = exp %t : f32[N,D]
  %s = reduce_sum %e {axes = [-1], keepdims = true} : f32[N,1]
  %l = log %s : f32[N,1]
  %y = sub %t, %l : f32[N,D]
  %p = mul %x, %w : f32[N,D]
  %dot = reduce_sum %p {axes = [-1]} : f32[N]
  return %y, %dot
})";

// The cuda target's fusion makes reduction_regions of written-out forms, and the backend claims
// every one of them (claims generate the source, no GPU needed).
TEST(CudaReductionClaims, TheCudaPipelineMakesRegionsTheBackendClaims) {
  Graph g = testing::parse_or_fail(kWrittenOut);
  PassContext ctx;
  ctx.target = FusionTarget::Cuda;
  ctx.claims = &claim_table_of(FusionTarget::Cuda);
  ctx.options = FusionOptions::for_target(FusionTarget::Cuda);
  PipelineHooks hooks;
  hooks.verify_each = true;
  ASSERT_TRUE(run_pipeline(g, {"canonicalize", "fuse-reduction-regions"}, ctx, hooks).is_ok());
  ASSERT_GE(testing::count_op(g, Op::ReductionRegion), 1u);
  for (const Node& n : g.nodes()) {
    if (n.op != Op::ReductionRegion) continue;
    Claim c = cuda::claim_reduction_region(g, n);
    EXPECT_TRUE(c.yes) << c.reason;
  }
}

// Random operands in [-3, 3) away from zero (scales and weights too) at these symbol sizes.
std::vector<Array> operands(const Node& n, const Graph& g, const std::map<std::string, int64_t>& sizes, uint64_t seed) {
  std::vector<Array> in;
  for (ValueId v : n.inputs) {
    const TensorType& t = g.type(v);
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape) shape.push_back(d.is_static() ? d.value() : sizes.at(d.symbol_name()));
    Array a = testing::random_array(t.dtype, shape, seed++, -3.0, 3.0);
    for (int64_t i = 0; i < a.numel(); ++i)
      if (std::fabs(a.get_f64(i)) < 1e-2) a.set_f64(i, 0.5);
    in.push_back(a);
  }
  return in;
}

// Runs the node's CUDA kernel directly on device buffers, outputs poisoned with each byte of
// kPoisonBytes, and expects every result to match the reference kernel's.
void expect_matches_reference(const Backend& dev, const Graph& g, const Node& n, const std::vector<Array>& in,
                              const std::string& what) {
  Expected<std::shared_ptr<const Kernel>> kernel = dev.compile(g, n);
  ASSERT_TRUE(kernel) << what << ": " << kernel.status().message();
  std::vector<TensorType> in_types;
  for (const Array& a : in) in_types.push_back(TensorType{a.dtype(), make_shape(a.shape())});
  Expected<std::vector<TensorType>> types = infer_result_types(n, in_types);
  ASSERT_TRUE(types) << types.status().message();
  std::vector<Array> want;
  for (const TensorType& t : *types) want.emplace_back(t.dtype, static_dims(t.shape));
  ASSERT_TRUE(cpu::run_reference(n, in, want).is_ok()) << what;
  std::vector<Buffer> in_buf, out_buf;
  for (const Array& a : in) {
    Expected<Buffer> b = dev.allocate(a.dtype(), a.shape());
    ASSERT_TRUE(b) << b.status().message();
    ASSERT_TRUE(dev.copy_from_host(dev.stream(), host_view(a), b->view()).is_ok());
    in_buf.push_back(*b);
  }
  for (uint8_t poison : testing::kPoisonBytes) {
    std::vector<Array> got;
    std::vector<BufferView> in_views, out_views;
    out_buf.clear();
    for (const Array& w : want) {
      got.emplace_back(w.dtype(), w.shape());
      got.back().fill_bytes(poison);
      Expected<Buffer> b = dev.allocate(w.dtype(), w.shape());
      ASSERT_TRUE(b) << b.status().message();
      ASSERT_TRUE(dev.copy_from_host(dev.stream(), host_view(got.back()), b->view()).is_ok());
      out_buf.push_back(*b);
      out_views.push_back(b->view());
    }
    for (const Buffer& b : in_buf) in_views.push_back(b.view());
    Status ran = (*kernel)->run(dev.stream(), in_views, out_views);
    ASSERT_TRUE(ran.is_ok()) << what << ": " << ran.message();
    for (size_t k = 0; k < got.size(); ++k) ASSERT_TRUE(dev.copy_to_host(dev.stream(), out_buf[k].view(), host_view(got[k])).is_ok());
    ASSERT_TRUE(dev.stream().sync().is_ok()) << what;
    for (size_t k = 0; k < got.size(); ++k) {
      const double tol = tolerance(want[k].dtype());
      EXPECT_TRUE(testing::arrays_close(got[k], want[k], tol, tol)) << what << " result " << k << " poison " << int(poison);
    }
  }
}

TEST(CudaReductionKernels, EveryBodyMatchesTheReferenceOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  Expected<std::shared_ptr<Backend>> dev = cuda::make_cuda_backend(0);
  ASSERT_TRUE(dev) << dev.status().message();
  uint64_t seed = 1;
  for (const BodyCase& c : body_cases()) {
    for (DType d : kDTypes) {
      Region r = region_of(c, d);
      ASSERT_NE(r.node, nullptr) << c.name;
      for (int64_t n : {1, 7, 1000, 4097}) {
        for (int64_t rows : {int64_t(1), int64_t(5), n <= 7 ? int64_t(3001) : int64_t(37)}) {
          // A row of two axes: H*W = n with H = 1 (n = 1, 7), else a split that is not a power of two.
          const int64_t h = n == 1000 ? 8 : n == 4097 ? 17 : 1;
          const std::map<std::string, int64_t> sizes = {{"N", rows}, {"D", n}, {"H", h}, {"W", n / h + (n % h ? 1 : 0)}};
          const std::string what = c.name + " " + std::string(dtype_name(d)) + " rows " + std::to_string(rows) + " n " + std::to_string(n);
          expect_matches_reference(**dev, r.g, *r.node, operands(*r.node, r.g, sizes, seed += 7), what);
        }
      }
    }
  }
}

// NaN and infinities as the reference: a NaN row is NaN, -inf entries of a softmax row are
// zeros, a +inf or an all -inf row gives the reference's NaN; max/min/sum/prod of such rows.
TEST(CudaReductionKernels, NanAndInfinityRowsMatchTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  Expected<std::shared_ptr<Backend>> dev = cuda::make_cuda_backend(0);
  ASSERT_TRUE(dev) << dev.status().message();
  const std::vector<BodyCase> cases = body_cases();
  for (size_t k : {size_t(0), size_t(1), size_t(3)}) {
    Region r = region_of(cases[k], DType::F32);
    for (int64_t n : {int64_t(7), int64_t(1000), int64_t(4097)}) {
      std::vector<Array> in = operands(*r.node, r.g, {{"N", 5}, {"D", n}}, 3);
      float* p = in[0].data<float>();
      const float inf = std::numeric_limits<float>::infinity();
      p[0 * n + n / 2] = std::numeric_limits<float>::quiet_NaN();  // row 0: NaN
      p[1 * n + 3] = -inf;                                            // row 1: one -inf
      p[2 * n + n - 1] = inf;                                         // row 2: one +inf
      for (int64_t j = 0; j < n; ++j) p[3 * n + j] = -inf;            // row 3: all -inf
      expect_matches_reference(**dev, r.g, *r.node, in, cases[k].name + " with NaN and inf, n " + std::to_string(n));
    }
  }
}

// Written-out forms through Session with the cuda target: the pipeline makes a reduction_region,
// the placement puts it on the GPU, and the results match the unfused reference; then as a
// device_io plan recorded as a CUDA graph and replayed.
TEST(CudaReductionKernels, FusedGraphsRunTheRegionOnTheGpu) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const Graph g = testing::parse_or_fail(kWrittenOut);
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  dev.verify_each_pass = true;
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  ASSERT_GE(testing::count_op(exes->plan.graph(), Op::ReductionRegion), 1u);
  EXPECT_EQ(testing::backend_of(exes->plan, Op::ReductionRegion), "cuda") << exes->plan.placement().summary();
  uint64_t seed = 50;
  for (int64_t n : {1, 7, 1000, 4097}) {
    for (int64_t rows : {1, 3, 300}) {
      const NamedArrays in = {{"x", testing::random_array(DType::F32, {rows, n}, ++seed, -3.0, 3.0)},
                              {"w", testing::random_array(DType::F32, {n}, ++seed, 0.5, 1.5)}};
      Expected<std::vector<Array>> want = exes->reference.run(in), got = exes->plan.run(in);
      ASSERT_TRUE(want && got) << got.status().message();
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_TRUE(testing::arrays_close((*got)[k], (*want)[k], 1e-5, 1e-5)) << "result " << k << " [" << rows << "," << n << "]";
      }
    }
  }
  // device_io: run 1 runs the kernels, run 2 records, runs 3.. replay; new contents every run.
  dev.device_io = true;
  Session session;
  Expected<Executable> exe = session.compile(g, dev);
  ASSERT_TRUE(exe) << exe.status().message();
  Expected<std::shared_ptr<Backend>> cuda = make_backend("cuda");
  ASSERT_TRUE(cuda) << cuda.status().message();
  const Backend& d = **cuda;
  std::vector<Buffer> bufs;
  for (std::vector<int64_t> shape : {std::vector<int64_t>{33, 1000}, std::vector<int64_t>{1000}}) {
    Expected<Buffer> b = d.allocate(DType::F32, shape);
    ASSERT_TRUE(b);
    bufs.push_back(*b);
  }
  for (int run = 0; run < 4; ++run) {
    const std::vector<Array> host = {testing::random_array(DType::F32, {33, 1000}, 70 + uint64_t(run), -3.0, 3.0),
                                     testing::random_array(DType::F32, {1000}, 80 + uint64_t(run), 0.5, 1.5)};
    for (size_t k = 0; k < 2; ++k) ASSERT_TRUE(d.copy_from_host(d.stream(), host_view(host[k]), bufs[k].view()).is_ok());
    Expected<std::vector<Buffer>> out = exe->run_buffers(bufs);
    ASSERT_TRUE(out) << out.status().message();
    ASSERT_TRUE(exe->sync().is_ok());
    Expected<std::vector<Array>> want = exes->reference.run(host);
    ASSERT_TRUE(want);
    for (size_t k = 0; k < 2; ++k) {
      Array got((*out)[k].view().dtype, (*out)[k].view().shape);
      ASSERT_TRUE(d.copy_to_host(d.stream(), (*out)[k].view(), host_view(got)).is_ok());
      ASSERT_TRUE(d.stream().sync().is_ok());
      EXPECT_TRUE(testing::arrays_close(got, (*want)[k], 1e-5, 1e-5)) << "device_io run " << run << " result " << k;
    }
  }
  if (exe->graph().nodes().size() > 0 && exe->placement().summary().find("cpu") == std::string::npos) {
    EXPECT_GE(exe->stats().recordings, 1u) << "every kernel on the GPU: the plan is recorded";
  }
}

}  // namespace
}  // namespace fusebox
