// matmul, fused_matmul_bias_act and fused_matmul_residual on the CUDA backend (cuBLASLt)
// against the CPU reference.
//
// Without a GPU: cuBLASLt loads (or says that libcublasLt is missing), the CUDA claim accepts
// and refuses what it should with its reason, fusion for the cuda target turns
// matmul + add + relu / gelu_tanh (+ a residual add) into the fused ops the claim accepts, and
// the plain kernel (the sizes cuBLASLt refuses) compiles with NVRTC. With a GPU: random
// products of several shapes (odd sizes, batched, a broadcast right operand, 1-D operands) and
// the fused epilogues run on the device and match the reference, through cuBLASLt wherever it
// must have an algorithm (f32, and f16/bf16 rows of whole 16-byte groups, no dimension of 1),
// and through the plain kernel when it is forced; what the claim refuses runs on the CPU and
// matches too.
//
// Tolerances: the reference sums in double in ascending k and rounds once; cuBLASLt sums in f32
// in its own blocked order (perhaps split over k), so results differ by rounding errors that
// grow like sqrt(K) ulps of the partial sums (inputs in [-1, 1]). f32: rtol 1e-4, atol 1e-5 per
// sqrt(K); rtol 1e-3 through the GELU epilogue, whose tanh may be the hardware approximation
// (about 2^-11 relative). f16/bf16: the result's own rounding (one ulp: 2^-10 / 2^-7 relative) dominates, and
// the unfused reference also rounds the product before adding the bias, an error of half an ulp
// of the product, which a cancelling bias leaves standing: atol one ulp per sqrt(K).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/matmul_fallback.h"
#include "backends/cuda/matmul_kernel.h"
#include "backends/cuda/nvrtc.h"
#include "fusion/fuse.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

constexpr DType kMatmulDTypes[] = {DType::F32, DType::F16, DType::BF16};

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance(DType d, int64_t k, bool gelu = false) {
  const double growth = std::sqrt(double(std::max<int64_t>(k, 1)));
  switch (d) {
    case DType::F32: return {gelu ? 1e-3 : 1e-4, 1e-5 * growth};
    case DType::F16: return {2e-3, 1e-3 * growth};
    default: return {1.6e-2, 8e-3 * growth};
  }
}

Attrs act(const std::string& name) { return {{"act", name}}; }

// y = matmul(a, b) with inputs "a" and "b".
Expected<Graph> matmul_graph(DType d, const Shape& a, const Shape& b) {
  GraphBuilder g("matmul");
  g.output(g.op(Op::MatMul, {g.input("a", d, a), g.input("b", d, b)}));
  return g.build();
}

// y = activation(matmul(a, w) + bias): the unfused form fusion turns into the fused op.
// `activation` is none, relu, gelu_tanh or gelu (erf).
Expected<Graph> matmul_bias_act_graph(DType d, const Shape& a, const Shape& w, const Shape& bias, const std::string& activation) {
  GraphBuilder g("matmul_bias_act");
  ValueId t = g.op(Op::MatMul, {g.input("a", d, a), g.input("w", d, w)});
  t = g.op(Op::Add, {t, g.input("bias", d, bias)});
  if (activation == "relu") t = g.op(Op::Relu, {t});
  if (activation == "gelu_tanh") t = g.op(Op::Gelu, {t}, {{"approximate", std::string("tanh")}});
  if (activation == "gelu") t = g.op(Op::Gelu, {t});
  g.output(t);
  return g.build();
}

// y = activation(matmul(a, w) + bias + r): what fusion turns into fused_matmul_residual.
// `activation` is none, relu, gelu_tanh or gelu (erf).
Expected<Graph> matmul_residual_graph(DType d, const Shape& a, const Shape& w, const Shape& bias, const Shape& r,
                                      const std::string& activation) {
  GraphBuilder g("matmul_residual");
  ValueId t = g.op(Op::MatMul, {g.input("a", d, a), g.input("w", d, w)});
  t = g.op(Op::Add, {t, g.input("bias", d, bias)});
  t = g.op(Op::Add, {t, g.input("r", d, r)});
  if (activation == "relu") t = g.op(Op::Relu, {t});
  if (activation == "gelu_tanh") t = g.op(Op::Gelu, {t}, {{"approximate", std::string("tanh")}});
  if (activation == "gelu") t = g.op(Op::Gelu, {t});
  g.output(t);
  return g.build();
}

// fused_matmul_residual a, w, r[, bias] written directly.
Expected<Graph> residual_graph(DType d, const Shape& a, const Shape& w, const Shape& r, std::optional<Shape> bias,
                               const std::string& activation) {
  GraphBuilder g("residual");
  std::vector<ValueId> in = {g.input("a", d, a), g.input("w", d, w), g.input("r", d, r)};
  if (bias) in.push_back(g.input("bias", d, *bias));
  g.output(g.op(Op::FusedMatmulResidual, in, act(activation)));
  return g.build();
}

// The fused op written directly: a, w[, bias] with act.
Expected<Graph> fused_graph(DType d, const Shape& a, const Shape& w, std::optional<Shape> bias, const std::string& activation) {
  GraphBuilder g("fused");
  std::vector<ValueId> in = {g.input("a", d, a), g.input("w", d, w)};
  if (bias) in.push_back(g.input("bias", d, *bias));
  g.output(g.op(Op::FusedMatmulBiasAct, in, act(activation)));
  return g.build();
}

using testing::backend_of;
using testing::find_node;

Claim claim_of(const Expected<Graph>& g, Op op) {
  EXPECT_TRUE(g) << g.status().message();
  if (!g) return Claim::refuse("no graph");
  const Node* n = find_node(*g, op);
  EXPECT_NE(n, nullptr);
  return n ? cuda::claim_matmul(*g, *n) : Claim::refuse("no node");
}


Shape shape_of(std::vector<int64_t> dims) { return make_shape(dims); }

TEST(CudaMatmul, CublasLtLoadsOrNamesTheLibrary) {
  Expected<const cuda::CublasLt*> lt = cuda::cublaslt();
  // A toolkit that ships the library must load it (no GPU is needed to load it).
  bool shipped = false;
  for (std::string dir : {std::string("/usr/local/cuda/lib64"), std::string(std::getenv("CUDA_HOME") ? std::getenv("CUDA_HOME") : "") + "/lib64"}) {
    shipped = shipped || std::filesystem::exists(dir + "/libcublasLt.so.13") || std::filesystem::exists(dir + "/libcublasLt.so.12");
  }
  if (!lt) {
    EXPECT_FALSE(shipped) << lt.status().message();
    EXPECT_NE(lt.status().message().find("libcublasLt"), std::string::npos) << lt.status().message();
    // Then the CUDA backend refuses every matmul, saying why.
    Claim c = claim_of(matmul_graph(DType::F32, shape_of({4, 3}), shape_of({3, 2})), Op::MatMul);
    EXPECT_FALSE(c);
    EXPECT_NE(c.reason.find("libcublasLt"), std::string::npos) << c.reason;
    return;
  }
  const std::string version = (*lt)->version();
  EXPECT_GE(std::stoi(version), 12) << version;
  EXPECT_EQ((*lt)->status_text(CUBLAS_STATUS_NOT_SUPPORTED).rfind("CUBLAS_STATUS_NOT_SUPPORTED: ", 0), 0u)
      << (*lt)->status_text(CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST(CudaMatmul, ClaimAcceptsWhatCublasLtComputesExactly) {
  if (Expected<const cuda::CublasLt*> lt = cuda::cublaslt(); !lt) GTEST_SKIP() << lt.status().message();
  const Shape batch_a = {Dim::symbol("B"), 33, 17}, batch_b = {Dim::symbol("B"), 17, 9};
  for (DType d : kMatmulDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    EXPECT_TRUE(claim_of(matmul_graph(d, shape_of({7, 13}), shape_of({13, 5})), Op::MatMul).yes);
    EXPECT_TRUE(claim_of(matmul_graph(d, batch_a, batch_b), Op::MatMul).yes);                  // equal batch dims
    EXPECT_TRUE(claim_of(matmul_graph(d, batch_a, shape_of({17, 9})), Op::MatMul).yes);        // broadcast right
    EXPECT_TRUE(claim_of(matmul_graph(d, batch_a, shape_of({1, 17, 9})), Op::MatMul).yes);     // batch dims of 1
    EXPECT_TRUE(claim_of(matmul_graph(d, shape_of({13}), shape_of({13, 5})), Op::MatMul).yes); // 1-D left
    EXPECT_TRUE(claim_of(matmul_graph(d, batch_a, shape_of({17})), Op::MatMul).yes);           // 1-D right
    EXPECT_TRUE(claim_of(matmul_graph(d, shape_of({5, 0}), shape_of({0, 3})), Op::MatMul).yes);  // K = 0
    EXPECT_TRUE(claim_of(fused_graph(d, shape_of({5, 0}), shape_of({0, 3}), shape_of({3}), "relu"), Op::FusedMatmulBiasAct).yes);
    for (const char* a : {"none", "relu", "gelu_tanh"}) {
      EXPECT_TRUE(claim_of(fused_graph(d, batch_a, shape_of({17, 9}), shape_of({9}), a), Op::FusedMatmulBiasAct).yes) << a;
      EXPECT_TRUE(claim_of(fused_graph(d, shape_of({7, 13}), shape_of({13, 5}), shape_of({1, 5}), a), Op::FusedMatmulBiasAct).yes) << a;
      EXPECT_TRUE(claim_of(fused_graph(d, batch_a, batch_b, std::nullopt, a), Op::FusedMatmulBiasAct).yes) << a;
      const Shape y = {Dim::symbol("B"), 33, 9};
      EXPECT_TRUE(claim_of(residual_graph(d, batch_a, shape_of({17, 9}), y, shape_of({9}), a), Op::FusedMatmulResidual).yes) << a;
      EXPECT_TRUE(claim_of(residual_graph(d, batch_a, batch_b, y, std::nullopt, a), Op::FusedMatmulResidual).yes) << a;
    }
  }
}

TEST(CudaMatmul, ClaimRefusesWithTheReason) {
  if (Expected<const cuda::CublasLt*> lt = cuda::cublaslt(); !lt) GTEST_SKIP() << lt.status().message();
  auto expect_refused = [](const Expected<Graph>& g, Op op, const std::string& why) {
    Claim c = claim_of(g, op);
    EXPECT_FALSE(c) << why;
    EXPECT_NE(c.reason.find(why), std::string::npos) << c.reason;
  };
  for (DType d : {DType::F64, DType::I32, DType::I8}) {
    expect_refused(matmul_graph(d, shape_of({7, 13}), shape_of({13, 5})), Op::MatMul, "runs f32, f16 and bf16");
  }
  // A broadcast left operand, a partial broadcast, batch dims of different ranks.
  expect_refused(matmul_graph(DType::F32, shape_of({33, 17}), shape_of({3, 17, 9})), Op::MatMul, "batch dims [] against [3]");
  expect_refused(matmul_graph(DType::F32, shape_of({2, 1, 33, 17}), shape_of({1, 3, 17, 9})), Op::MatMul, "batch dims [2,1] against [1,3]");
  expect_refused(matmul_graph(DType::F32, shape_of({2, 3, 33, 17}), shape_of({3, 17, 9})), Op::MatMul, "batch dims [2,3] against [3]");
  // Epilogues cuBLASLt does not compute as the fused op defines them.
  const Shape a = shape_of({7, 13}), w = shape_of({13, 5}), bias = shape_of({5});
  expect_refused(fused_graph(DType::F32, a, w, bias, "gelu"), Op::FusedMatmulBiasAct, "tanh approximation");
  for (const char* other : {"sigmoid", "tanh", "silu", "hardswish"}) {
    expect_refused(fused_graph(DType::F32, a, w, bias, other), Op::FusedMatmulBiasAct, std::string("no ") + other + " epilogue");
  }
  {
    GraphBuilder g("leaky");
    g.output(g.op(Op::FusedMatmulBiasAct, {g.input("a", DType::F32, a), g.input("w", DType::F32, w)},
                  {{"act", std::string("leaky_relu")}, {"act_alpha", 0.1}}));
    expect_refused(g.build(), Op::FusedMatmulBiasAct, "act_alpha");
  }
  // A bias that is not one value per column.
  expect_refused(fused_graph(DType::F32, a, w, shape_of({1}), "relu"), Op::FusedMatmulBiasAct, "one value per column");
  expect_refused(fused_graph(DType::F32, a, w, shape_of({}), "none"), Op::FusedMatmulBiasAct, "one value per column");
  // A residual whose size is not known to be the result's, and erf GELU after a residual.
  expect_refused(residual_graph(DType::F32, a, w, {Dim::symbol("R"), 5}, bias, "relu"), Op::FusedMatmulResidual,
                 "cuBLASLt reads it as C");
  expect_refused(residual_graph(DType::F32, a, w, shape_of({7, 5}), bias, "gelu"), Op::FusedMatmulResidual, "tanh approximation");
  // A 1-D right operand puts the last axis along the rows.
  expect_refused(fused_graph(DType::F32, a, shape_of({13}), std::nullopt, "relu"), Op::FusedMatmulBiasAct, "1-D right operand");
}

TEST(CudaMatmul, FusionForCudaProducesTheFusedOpTheClaimAccepts) {
  if (Expected<const cuda::CublasLt*> lt = cuda::cublaslt(); !lt) GTEST_SKIP() << lt.status().message();
  for (DType d : kMatmulDTypes) {
    for (const char* activation : {"relu", "gelu_tanh", "gelu"}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + activation);
      Expected<Graph> g = matmul_bias_act_graph(d, shape_of({3, 33, 17}), shape_of({17, 9}), shape_of({9}), activation);
      ASSERT_TRUE(g) << g.status().message();
      Expected<Graph> fused = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run(*g);
      ASSERT_TRUE(fused) << fused.status().message();
      EXPECT_EQ(testing::count_op(*fused, Op::FusedMatmulBiasAct), 1u) << print_graph(*fused);
      EXPECT_EQ(testing::count_op(*fused, Op::MatMul), 0u);
      Claim c = claim_of(*fused, Op::FusedMatmulBiasAct);
      // erf GELU is fused for the target but runs on the CPU: cuBLASLt's GELU is the tanh form.
      EXPECT_EQ(c.yes, std::string(activation) != "gelu") << c.reason;
      // With a residual add: fused_matmul_residual.
      g = matmul_residual_graph(d, shape_of({3, 33, 17}), shape_of({17, 9}), shape_of({9}), shape_of({3, 33, 9}), activation);
      ASSERT_TRUE(g) << g.status().message();
      fused = Fuse(FusionTarget::Cuda, claim_table_of(FusionTarget::Cuda)).run(*g);
      ASSERT_TRUE(fused) << fused.status().message();
      EXPECT_EQ(testing::count_op(*fused, Op::FusedMatmulResidual), 1u) << print_graph(*fused);
      EXPECT_EQ(testing::count_op(*fused, Op::MatMul), 0u);
      c = claim_of(*fused, Op::FusedMatmulResidual);
      EXPECT_EQ(c.yes, std::string(activation) != "gelu") << c.reason << "\n" << print_graph(*fused);
    }
  }
}

TEST(CudaMatmul, PlainKernelCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  for (DType d : kMatmulDTypes) {
    for (EpilogueAct a : {EpilogueAct::None, EpilogueAct::Relu, EpilogueAct::GeluTanh}) {
      for (int terms = 0; terms < 4; ++terms) {
        const bool bias = terms & 1, residual = terms & 2;
        const std::string name = "matmul_" + std::string(dtype_name(d)) + "_" + std::string(epilogue_act_name(a)) +
                                 (bias ? "_bias" : "") + (residual ? "_residual" : "") + ".cu";
        Expected<std::string> cubin = cuda::compile_cubin(cuda::matmul_fallback_source(d, a, bias, residual), name, 90);
        ASSERT_TRUE(cubin) << name << ": " << cubin.status().message();
        EXPECT_GT(cubin->size(), 1000u);
      }
    }
  }
}

// ---- on the device -------------------------------------------------------------------------

// Compiles `g` for the reference (unfused) and for the cuda target, checks where `op` runs,
// then runs both twice on random inputs (two seeds: a second run must not see the first's
// results) and compares with `tol`. `on_cublaslt`: both runs must have gone through cuBLASLt
// (not the plain kernel).
void expect_device_matches_reference(const Graph& g, Op op, const std::string& expected_backend, Tolerance tol,
                                     const std::map<std::string, std::vector<int64_t>>& shapes, bool on_cublaslt = false) {
  const cuda::MatmulRuns before = cuda::matmul_runs();
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  const Executable* want_exe = &exes->reference;
  const Executable* got_exe = &exes->plan;
  EXPECT_EQ(backend_of(*got_exe, op), expected_backend) << got_exe->placement().summary();
  for (uint64_t seed : {1u, 2u}) {
    NamedArrays in;
    uint64_t k = 0;
    for (const auto& [name, shape] : shapes) in[name] = testing::random_array(g.type(g.inputs()[0]).dtype, shape, seed * 100 + k++, -1.0, 1.0);
    Expected<std::vector<Array>> want = want_exe->run(in), got = got_exe->run(in);
    ASSERT_TRUE(want) << want.status().message();
    ASSERT_TRUE(got) << got.status().message();
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], tol.rtol, tol.atol)) << "seed " << seed;
  }
  if (on_cublaslt) {
    EXPECT_EQ(cuda::matmul_runs().cublaslt - before.cublaslt, 2u) << "cuBLASLt had no algorithm";
  }
}

TEST(CudaMatmul, RandomProductsMatchTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  struct Case {
    std::vector<int64_t> a, b;
  };
  const Case cases[] = {
      {{1, 1}, {1, 1}},           {{7, 13}, {13, 5}},         {{64, 64}, {64, 64}},   {{129, 257}, {257, 65}},
      {{3, 33, 17}, {3, 17, 9}},  {{3, 33, 17}, {17, 9}},     {{2, 3, 5, 7}, {2, 3, 7, 4}},
      {{2, 3, 5, 7}, {1, 1, 7, 4}}, {{13}, {13, 5}},          {{3, 33, 17}, {17}},    {{1, 300}, {300, 1}},
  };
  for (DType d : kMatmulDTypes) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + shape_to_string(make_shape(c.a)) + " x " + shape_to_string(make_shape(c.b)));
      Expected<Graph> g = matmul_graph(d, make_shape(c.a), make_shape(c.b));
      ASSERT_TRUE(g) << g.status().message();
      const cuda::MatmulRuns before = cuda::matmul_runs();
      expect_device_matches_reference(*g, Op::MatMul, "cuda", tolerance(d, c.a.back()), {{"a", c.a}, {"b", c.b}});
      const cuda::MatmulRuns after = cuda::matmul_runs();
      EXPECT_EQ(after.cublaslt + after.fallback - before.cublaslt - before.fallback, 2u);
      // cuBLASLt must run the plain cases: f32, or rows of whole 16-byte groups, and no
      // dimension of 1 (the plain kernel is for what its heuristic refuses). For the others, say
      // which way ran.
      const bool degenerate = c.a.size() == 1 || c.b.size() == 1 || std::find(c.a.begin(), c.a.end(), 1) != c.a.end() ||
                              std::find(c.b.begin(), c.b.end(), 1) != c.b.end();
      const bool aligned = d == DType::F32 || (c.a.back() % 8 == 0 && c.b.back() % 8 == 0);
      if (!degenerate && aligned) {
        EXPECT_EQ(after.cublaslt - before.cublaslt, 2u) << "cuBLASLt had no algorithm";
      }
      if (after.fallback != before.fallback) {
        std::cout << "  ran on the plain kernel: " << dtype_name(d) << " " << shape_to_string(make_shape(c.a)) << " x "
                  << shape_to_string(make_shape(c.b)) << "\n";
      }
    }
  }
}

// The plain kernel (what runs where cuBLASLt's heuristic has no algorithm, and K = 0), forced
// for every product by FUSEBOX_CUDA_MATMUL_PLAIN, on the same cases as cuBLASLt.
TEST(CudaMatmul, PlainKernelMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  ::setenv("FUSEBOX_CUDA_MATMUL_PLAIN", "1", 1);
  const cuda::MatmulRuns before = cuda::matmul_runs();
  for (DType d : kMatmulDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    Expected<Graph> g = matmul_graph(d, shape_of({129, 257}), shape_of({257, 65}));
    ASSERT_TRUE(g) << g.status().message();
    expect_device_matches_reference(*g, Op::MatMul, "cuda", tolerance(d, 257), {{"a", {129, 257}}, {"b", {257, 65}}});
    g = matmul_graph(d, shape_of({2, 3, 5, 7}), shape_of({2, 3, 7, 4}));
    ASSERT_TRUE(g) << g.status().message();
    expect_device_matches_reference(*g, Op::MatMul, "cuda", tolerance(d, 7), {{"a", {2, 3, 5, 7}}, {"b", {2, 3, 7, 4}}});
    for (const char* activation : {"none", "relu", "gelu_tanh"}) {
      g = fused_graph(d, shape_of({3, 33, 17}), shape_of({17, 9}), shape_of({9}), activation);
      ASSERT_TRUE(g) << g.status().message();
      expect_device_matches_reference(*g, Op::FusedMatmulBiasAct, "cuda", tolerance(d, 17),
                                      {{"a", {3, 33, 17}}, {"bias", {9}}, {"w", {17, 9}}});
    }
    g = residual_graph(d, shape_of({3, 33, 17}), shape_of({3, 17, 9}), shape_of({3, 33, 9}), shape_of({9}), "relu");
    ASSERT_TRUE(g) << g.status().message();
    expect_device_matches_reference(*g, Op::FusedMatmulResidual, "cuda", tolerance(d, 17),
                                    {{"a", {3, 33, 17}}, {"bias", {9}}, {"r", {3, 33, 9}}, {"w", {3, 17, 9}}});
  }
  ::unsetenv("FUSEBOX_CUDA_MATMUL_PLAIN");
  const cuda::MatmulRuns after = cuda::matmul_runs();
  EXPECT_EQ(after.cublaslt, before.cublaslt);
  EXPECT_EQ(after.fallback - before.fallback, 3u * 6u * 2u);
}

// An empty contraction: zeros, then the epilogue (act(bias)).
TEST(CudaMatmul, EmptyContractionMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (DType d : kMatmulDTypes) {
    SCOPED_TRACE(std::string(dtype_name(d)));
    Expected<Graph> g = matmul_graph(d, shape_of({5, 0}), shape_of({0, 3}));
    ASSERT_TRUE(g) << g.status().message();
    expect_device_matches_reference(*g, Op::MatMul, "cuda", tolerance(d, 1), {{"a", {5, 0}}, {"b", {0, 3}}});
    for (const char* activation : {"relu", "gelu_tanh"}) {
      g = fused_graph(d, shape_of({5, 0}), shape_of({0, 3}), shape_of({3}), activation);
      ASSERT_TRUE(g) << g.status().message();
      expect_device_matches_reference(*g, Op::FusedMatmulBiasAct, "cuda", tolerance(d, 1, true),
                                      {{"a", {5, 0}}, {"bias", {3}}, {"w", {0, 3}}});
    }
  }
}

// One executable, several sizes (symbolic batch and rows): each run builds its descriptors and
// finds (or reuses) the algorithm for its sizes.
TEST(CudaMatmul, OneExecutableRunsNewSizes) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  Expected<Graph> g = fused_graph(DType::F32, {Dim::symbol("B"), Dim::symbol("M"), 24}, {Dim::symbol("B"), 24, 10}, shape_of({10}), "relu");
  ASSERT_TRUE(g) << g.status().message();
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(*g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  const Executable* want_exe = &exes->reference;
  const Executable* got_exe = &exes->plan;
  EXPECT_EQ(backend_of(*got_exe, Op::FusedMatmulBiasAct), "cuda") << got_exe->placement().summary();
  uint64_t seed = 0;
  for (int64_t m : {31, 1, 100, 31}) {
    for (int64_t batch : {4, 1}) {
      SCOPED_TRACE("B " + std::to_string(batch) + " M " + std::to_string(m));
      NamedArrays in = {{"a", testing::random_array(DType::F32, {batch, m, 24}, ++seed, -1, 1)},
                        {"w", testing::random_array(DType::F32, {batch, 24, 10}, ++seed, -1, 1)},
                        {"bias", testing::random_array(DType::F32, {10}, ++seed, -1, 1)}};
      Expected<std::vector<Array>> want = want_exe->run(in), got = got_exe->run(in);
      ASSERT_TRUE(want && got) << got.status().message();
      const Tolerance tol = tolerance(DType::F32, 24);
      EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], tol.rtol, tol.atol));
    }
  }
}

TEST(CudaMatmul, FusedBiasActivationsFromFusionMatchTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  struct Case {
    std::vector<int64_t> a, w, bias;
  };
  const Case cases[] = {{{7, 13}, {13, 5}, {5}}, {{129, 257}, {257, 65}, {65}}, {{3, 33, 17}, {17, 9}, {1, 9}}};
  for (DType d : kMatmulDTypes) {
    for (const char* activation : {"relu", "gelu_tanh"}) {
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " " + activation + " " + shape_to_string(make_shape(c.a)));
        Expected<Graph> g = matmul_bias_act_graph(d, make_shape(c.a), make_shape(c.w), make_shape(c.bias), activation);
        ASSERT_TRUE(g) << g.status().message();
        // The fused op is what runs: the executable's graph has it and no matmul.
        Session session;
        CompileOptions dev;
        dev.target = FusionTarget::Cuda;
        Expected<Executable> exe = session.compile(*g, dev);
        ASSERT_TRUE(exe) << exe.status().message();
        EXPECT_EQ(testing::count_op(exe->graph(), Op::FusedMatmulBiasAct), 1u);
        EXPECT_EQ(testing::count_op(exe->graph(), Op::MatMul), 0u);
        EXPECT_EQ(exe->placement().summary().find("cpu"), std::string::npos) << exe->placement().summary();
        const bool gelu = std::string(activation) == "gelu_tanh";
        expect_device_matches_reference(*g, Op::FusedMatmulBiasAct, "cuda", tolerance(d, c.a.back(), gelu),
                                        {{"a", c.a}, {"bias", c.bias}, {"w", c.w}}, d == DType::F32);
      }
    }
  }
}

TEST(CudaMatmul, FusedOpWrittenDirectlyMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (DType d : kMatmulDTypes) {
    for (const char* activation : {"none", "relu", "gelu_tanh"}) {
      const bool gelu = std::string(activation) == "gelu_tanh";
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + activation);
      // With a bias, batched with equal batch dims (the bias repeats in every product).
      Expected<Graph> g = fused_graph(d, shape_of({3, 33, 17}), shape_of({3, 17, 9}), shape_of({9}), activation);
      ASSERT_TRUE(g) << g.status().message();
      expect_device_matches_reference(*g, Op::FusedMatmulBiasAct, "cuda", tolerance(d, 17, gelu),
                                      {{"a", {3, 33, 17}}, {"bias", {9}}, {"w", {3, 17, 9}}}, d == DType::F32);
      // Without a bias.
      g = fused_graph(d, shape_of({65, 31}), shape_of({31, 47}), std::nullopt, activation);
      ASSERT_TRUE(g) << g.status().message();
      expect_device_matches_reference(*g, Op::FusedMatmulBiasAct, "cuda", tolerance(d, 31, gelu),
                                      {{"a", {65, 31}}, {"w", {31, 47}}}, d == DType::F32);
    }
  }
}

// matmul + bias + residual (+ activation), fused for the target into fused_matmul_residual: the
// residual is cuBLASLt's C with beta 1.
TEST(CudaMatmul, FusedResidualMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (DType d : kMatmulDTypes) {
    for (const char* activation : {"none", "relu", "gelu_tanh"}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + activation);
      const bool gelu = std::string(activation) == "gelu_tanh";
      Expected<Graph> g =
          matmul_residual_graph(d, shape_of({3, 33, 64}), shape_of({64, 48}), shape_of({48}), shape_of({3, 33, 48}), activation);
      ASSERT_TRUE(g) << g.status().message();
      expect_device_matches_reference(*g, Op::FusedMatmulResidual, "cuda", tolerance(d, 64, gelu),
                                      {{"a", {3, 33, 64}}, {"bias", {48}}, {"r", {3, 33, 48}}, {"w", {64, 48}}}, true);
      // Without a bias, batched with equal batch dims.
      g = residual_graph(d, shape_of({2, 31, 17}), shape_of({2, 17, 9}), shape_of({2, 31, 9}), std::nullopt, activation);
      ASSERT_TRUE(g) << g.status().message();
      expect_device_matches_reference(*g, Op::FusedMatmulResidual, "cuda", tolerance(d, 17, gelu),
                                      {{"a", {2, 31, 17}}, {"r", {2, 31, 9}}, {"w", {2, 17, 9}}}, d == DType::F32);
    }
  }
}

TEST(CudaMatmul, RefusedProductsRunOnTheCpuAndMatch) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  // erf GELU: fused for the target, run by the CPU.
  Expected<Graph> g = matmul_bias_act_graph(DType::F32, shape_of({7, 13}), shape_of({13, 5}), shape_of({5}), "gelu");
  ASSERT_TRUE(g) << g.status().message();
  expect_device_matches_reference(*g, Op::FusedMatmulBiasAct, "cpu", tolerance(DType::F32, 13), {{"a", {7, 13}}, {"bias", {5}}, {"w", {13, 5}}});
  // f64, and a broadcast left operand.
  g = matmul_graph(DType::F64, shape_of({7, 13}), shape_of({13, 5}));
  ASSERT_TRUE(g) << g.status().message();
  expect_device_matches_reference(*g, Op::MatMul, "cpu", {1e-12, 1e-12}, {{"a", {7, 13}}, {"b", {13, 5}}});
  g = matmul_graph(DType::F32, shape_of({33, 17}), shape_of({3, 17, 9}));
  ASSERT_TRUE(g) << g.status().message();
  expect_device_matches_reference(*g, Op::MatMul, "cpu", tolerance(DType::F32, 17), {{"a", {33, 17}}, {"b", {3, 17, 9}}});
}


// CompileOptions::cuda.allow_tf32: an f32 product of K = 1024 runs on TF32 tensor cores, whose
// 10-bit mantissa products leave relative errors near 1e-3 of the result's scale (so it is
// measurably not the exact path: more than 1e-5), and within 1e-2; without the option the same
// product stays within the exact path's 1e-5.
TEST(CudaMatmul, Tf32OnlyWhenAllowed) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  Expected<Graph> g = matmul_graph(DType::F32, make_shape({256, 1024}), make_shape({1024, 256}));
  ASSERT_TRUE(g) << g.status().message();
  NamedArrays in{{"a", testing::random_array(DType::F32, {256, 1024}, 7, -1.0, 1.0)},
                 {"b", testing::random_array(DType::F32, {1024, 256}, 8, -1.0, 1.0)}};
  double error[2] = {0, 0};
  for (bool tf32 : {false, true}) {
    CompileOptions dev;
    dev.target = FusionTarget::Cuda;
    dev.cuda.allow_tf32 = tf32;
    Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(*g, dev);
    ASSERT_TRUE(exes) << exes.status().message();
    Expected<std::vector<Array>> want = exes->reference.run(in), got = exes->plan.run(in);
    ASSERT_TRUE(want && got);
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < (*want)[0].numel(); ++i) scale = std::max(scale, std::abs((*want)[0].get_f64(i)));
    for (int64_t i = 0; i < (*want)[0].numel(); ++i) worst = std::max(worst, std::abs((*got)[0].get_f64(i) - (*want)[0].get_f64(i)));
    error[tf32] = worst / scale;
  }
  std::cout << "  relative error, exact f32: " << error[0] << ", tf32: " << error[1] << "\n";
  EXPECT_LT(error[0], 1e-5);
  EXPECT_GT(error[1], 1e-5) << "the product did not run on TF32 tensor cores";
  EXPECT_LT(error[1], 1e-2);
}

}  // namespace
}  // namespace fusebox
