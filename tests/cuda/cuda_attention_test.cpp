// fused_attention and fused_swiglu on the CUDA backend against the CPU reference (their unfused
// primitives).
//
// Without a GPU: every attention source variant (the float source: f32, f16, bf16 x head dims up
// to 64, 128, 256; the tensor-core source: f16, bf16 x 64, 128) and the swiglu gate kernel of
// each dtype compile with NVRTC for sm_90; causality, the mask and merged or split heads are
// kernel arguments, so the launch plans are checked here instead (the strides each layout gets,
// which source runs, FUSEBOX_CUDA_ATTENTION and the lowering rule); a host model of the
// tensor-core source's fragment indexing checks its products; the claims accept what the kernels
// run and refuse the rest with a reason. With a GPU: each case runs the node's kernel directly on random operands (never
// zeros), its result buffer poisoned first with NaN bytes (0xFF) and with finite ones (0x5A), so
// an element the kernel does not write fails the comparison either way; a graph of both ops
// compiles for the cuda target, runs there (backend_of) and matches, also when recorded as a
// CUDA graph.
//
// Tolerances (|got - want| <= tol + tol·|want|), operands in [-2, 2) and scale 1/sqrt(D):
//   attention f32  2e-5   the reference rounds q·k, the scaled and masked scores, e^x / sum and
//                         the product separately, summing in its own order; the kernel sums
//                         blockwise and divides once at the end. Scores err by a few float ulps
//                         of their size (up to ~10), which e^x turns into relative errors of
//                         the weights of the same size: ~1e-6, well inside 2e-5.
//   attention f16  1e-2   the reference rounds the scores to f16 (2^-11 relative: ~5e-3 at
//                         scores near 10) and the probabilities and product (one ulp each);
//                         the kernel keeps them in float and rounds once.
//   attention bf16 8e-2   the same roundings with bf16's 2^-8: ~4e-2 at scores near 10.
//   The tensor-core source is held to the same: it also rounds the probabilities e^(s - max) to
//   the dtype before P·V (2^-11 or 2^-8 relative each, averaging out over the keys), and takes
//   e^x as ex2.approx (about 2^-22 relative).
//   swiglu         the cuBLASLt tolerances of cuda_matmul_test.cpp (per sqrt(K), k = 64 here)
//                  carried through silu·up: f32 1e-4, f16 1e-2, bf16 6e-2.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>

#include "backends/cuda/attention_kernel.h"
#include "backends/cuda/cublaslt.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/swiglu_kernel.h"
#include "backends/registry/registry.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

constexpr DType kDTypes[] = {DType::F32, DType::F16, DType::BF16};

double attention_tolerance(DType d) { return d == DType::F16 ? 1e-2 : d == DType::BF16 ? 8e-2 : 2e-5; }
double swiglu_tolerance(DType d) { return d == DType::F16 ? 1e-2 : d == DType::BF16 ? 6e-2 : 1e-4; }

TEST(CudaAttentionCodegen, EveryVariantCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  const std::vector<cuda::AttentionVariant> variants = cuda::all_attention_variants();
  EXPECT_EQ(variants.size(), 13u);  // float source: 3 dtypes x 3 buckets; tensor cores: f16, bf16 x 64, 128
  for (const cuda::AttentionVariant& v : variants) {
    // The tensor-core source runs from sm_80 (mma_attention_covers): its oldest target too.
    for (int arch : v.mma ? std::vector<int>{80, 90} : std::vector<int>{90}) {
      Expected<std::string> cubin = cuda::compile_cubin(cuda::attention_source(v), "attention_" + v.key() + ".cu", arch);
      ASSERT_TRUE(cubin) << v.key() << " sm_" << arch << ": " << cubin.status().message();
      EXPECT_GT(cubin->size(), 1000u) << v.key();
    }
  }
  for (DType d : kDTypes) {
    Expected<std::string> cubin = cuda::compile_cubin(cuda::swiglu_gate_source(d), "swiglu_gate.cu", 90);
    ASSERT_TRUE(cubin) << dtype_name(d) << ": " << cubin.status().message();
  }
}

Attrs attention_attrs(int64_t heads, int64_t head_dim, bool causal, bool merge_heads) {
  return {{"heads", heads}, {"head_dim", head_dim}, {"causal", causal},
          {"scale", 1.0 / std::sqrt(double(head_dim))}, {"merge_heads", merge_heads}};
}

using testing::one_node;

// `%a = fused_attention %q, %k, %v` over three operands of type `ty` (2 heads of `head_dim`).
Graph attention_graph(const std::string& ty, int64_t head_dim, bool causal) {
  return testing::parse_or_fail("func @a(%q: " + ty + ", %k: " + ty + ", %v: " + ty + ") -> " + ty + " {\n" +
                                "  %a = fused_attention %q, %k, %v {heads = 2, head_dim = " + std::to_string(head_dim) +
                                (causal ? ", causal = true" : "") + ", scale = 0.125} : " + ty + "\n  return %a\n}");
}

// `g` compiled for the cuda target as it is (no fusion passes), and for the reference backend.
Expected<testing::OracleAndPlan> compile_for_cuda(const Graph& g) {
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  dev.fuse = false;
  return testing::compile_against_reference(g, dev);
}

// The launch each layout gets: strides of merged [B,T,H*D] and split [B,H,T,D] operands, a
// broadcast mask or none, causality and the head-dim bucket, from host views (no GPU needed).
TEST(CudaAttentionClaims, LaunchesFollowTheLayouts) {
  const int64_t b = 2, h = 3, tq = 7, tk = 13, d = 40;
  const Array q(DType::F16, {b, tq, h * d}), k(DType::F16, {b, h, tk, d}), v(DType::F16, {b, tk, h * d});
  const Array mask(DType::F16, {h, 1, tk}), out(DType::F16, {b, h, tq, d});
  const Graph g = one_node(Op::FusedAttention, {q, k, v, mask}, attention_attrs(h, d, true, false),
                           TensorType{DType::F16, make_shape(out.shape())});
  const std::vector<BufferView> in = {host_view(q), host_view(k), host_view(v), host_view(mask)};
  Expected<cuda::AttentionLaunch> l = cuda::plan_attention_launch(g.nodes()[0], in, host_view(out));
  ASSERT_TRUE(l) << l.status().message();
  const int64_t q_strides[3] = {tq * h * d, d, h * d}, k_strides[3] = {h * tk * d, tk * d, d};
  const int64_t v_strides[3] = {tk * h * d, d, h * d};
  const int64_t o_strides[3] = {h * tq * d, tq * d, d}, m_strides[4] = {0, tk, 0, 1};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(l->args.q[i], q_strides[i]) << "q (heads merged) stride " << i;
    EXPECT_EQ(l->args.k[i], k_strides[i]) << "k (heads split) stride " << i;
    EXPECT_EQ(l->args.v[i], v_strides[i]) << "v (heads merged) stride " << i;
    EXPECT_EQ(l->args.out[i], o_strides[i]) << "result (heads split) stride " << i;
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(l->args.mask[i], m_strides[i]) << "mask stride " << i;
  EXPECT_EQ(l->args.causal, 1);
  EXPECT_EQ(l->args.tq, tq);
  EXPECT_EQ(l->args.tk, tk);
  EXPECT_EQ(l->variant.max_head_dim, 64);
  EXPECT_EQ(l->variant.dtype, DType::F16);
  EXPECT_EQ(l->blocks, unsigned(b * h * 1));  // 7 queries: one tile of 16 per (batch, head)
  EXPECT_EQ(l->mask, mask.raw());

  // No mask, not causal, a merged result; the head dim picks the source's bucket.
  for (const auto& [dim, bucket] : {std::pair{int64_t(8), 64}, std::pair{int64_t(80), 128}, std::pair{int64_t(200), 256}}) {
    const Array q4(DType::BF16, {b, h, tq, dim}), k3(DType::BF16, {b, tk, h * dim}), merged(DType::BF16, {b, tq, h * dim});
    const Graph plain = one_node(Op::FusedAttention, {q4, k3, k3}, attention_attrs(h, dim, false, true),
                                 TensorType{DType::BF16, make_shape(merged.shape())});
    const std::vector<BufferView> views = {host_view(q4), host_view(k3), host_view(k3)};
    Expected<cuda::AttentionLaunch> p = cuda::plan_attention_launch(plain.nodes()[0], views, host_view(merged));
    ASSERT_TRUE(p) << p.status().message();
    EXPECT_EQ(p->variant.max_head_dim, bucket) << "head_dim " << dim;
    EXPECT_EQ(p->args.causal, 0);
    EXPECT_EQ(p->mask, nullptr);
    EXPECT_EQ(p->args.q[1], tq * dim) << "q (heads split): a head is a [Tq, D] block";
    EXPECT_EQ(p->args.out[1], dim) << "result (heads merged): a head is D columns of each row";
    EXPECT_EQ(p->args.out[2], h * dim);
    EXPECT_EQ(p->blocks, unsigned(b * h * ((tq + p->variant.queries_per_block() - 1) / p->variant.queries_per_block())));
  }

  const Array wide_mask(DType::F16, {b, 1, tq, 5});
  const std::vector<BufferView> bad = {host_view(q), host_view(k), host_view(v), host_view(wide_mask)};
  Expected<cuda::AttentionLaunch> refused = cuda::plan_attention_launch(g.nodes()[0], bad, host_view(out));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("does not broadcast"), std::string::npos) << refused.status().message();
}

// Sets FUSEBOX_CUDA_ATTENTION for a scope (unset: `value` null) and restores what was there.
class ScopedAttentionChoice {
 public:
  explicit ScopedAttentionChoice(const char* value) {
    if (const char* old = std::getenv(kName)) old_ = old;
    value ? ::setenv(kName, value, 1) : ::unsetenv(kName);
  }
  ~ScopedAttentionChoice() { old_ ? ::setenv(kName, old_->c_str(), 1) : ::unsetenv(kName); }

 private:
  static constexpr const char* kName = "FUSEBOX_CUDA_ATTENTION";
  std::optional<std::string> old_;
};

// Which source each launch gets: the tensor-core one for f16/bf16 with head dims up to 128 (a
// multiple of 8), any query count, on sm_80 and later with 16-byte aligned buffers (auto and mma
// alike); the float one otherwise.
TEST(CudaAttentionClaims, TensorCoreSourceIsPlannedWhereItRuns) {
  using cuda::AttentionKernelChoice;
  const int64_t b = 2, h = 3;
  // The launch of q, k, v of [b, t, h * d] (k and v with tk rows) and a merged result.
  auto plan = [&](DType dt, int64_t tq, int64_t tk, int64_t d, AttentionKernelChoice choice, int arch,
                  size_t misalign = 0) -> cuda::AttentionLaunch {
    const Array q(dt, {b, tq, h * d}), kv(dt, {b, tk, h * d}), out(dt, {b, tq, h * d});
    const Graph g = one_node(Op::FusedAttention, {q, kv, kv}, attention_attrs(h, d, false, true),
                             TensorType{dt, make_shape(out.shape())});
    std::vector<BufferView> in = {host_view(q), host_view(kv), host_view(kv)};
    BufferView o = host_view(out);
    if (misalign) in[0].data = static_cast<char*>(in[0].data) + misalign;
    Expected<cuda::AttentionLaunch> l = cuda::plan_attention_launch(g.nodes()[0], in, o, choice, arch);
    EXPECT_TRUE(l) << l.status().message();
    return l ? *l : cuda::AttentionLaunch{};
  };
  const AttentionKernelChoice autos = AttentionKernelChoice::Auto, mma = AttentionKernelChoice::Mma,
                              simt = AttentionKernelChoice::Simt;
  cuda::AttentionLaunch l = plan(DType::F16, 100, 257, 64, autos, 90);
  EXPECT_TRUE(l.variant.mma);
  EXPECT_EQ(l.variant.max_head_dim, 64);
  EXPECT_EQ(l.variant.keys_per_tile(), 64);
  EXPECT_EQ(l.variant.key(), "f16/d64/mma");
  EXPECT_EQ(l.blocks, unsigned(b * h * 2));  // 100 queries: two tiles of 64
  EXPECT_EQ(l.threads, 128u);
  l = plan(DType::BF16, 17, 5, 128, autos, 80);
  EXPECT_TRUE(l.variant.mma);
  EXPECT_EQ(l.variant.max_head_dim, 128);
  EXPECT_EQ(l.variant.keys_per_tile(), 32);
  EXPECT_EQ(l.blocks, unsigned(b * h));
  l = plan(DType::F16, 40, 40, 72, autos, 90);
  EXPECT_TRUE(l.variant.mma && l.variant.max_head_dim == 128) << "head_dim 72: the 128 bucket, zero columns past 72";
  EXPECT_TRUE(plan(DType::F16, 1, 40, 64, mma, 90).variant.mma) << "choice mma: any query length";

  EXPECT_TRUE(plan(DType::F16, 1, 40, 64, autos, 90).variant.mma) << "one query (decoding): the tensor-core source too";
  EXPECT_EQ(plan(DType::F16, 16, 40, 64, autos, 90).blocks, unsigned(b * h));
  EXPECT_FALSE(plan(DType::F16, 16, 40, 64, simt, 90).variant.mma) << "simt: the float source";
  EXPECT_FALSE(plan(DType::F32, 100, 40, 64, autos, 90).variant.mma) << "f32";
  EXPECT_FALSE(plan(DType::F16, 100, 40, 36, autos, 90).variant.mma) << "head_dim 36: not a multiple of 8";
  EXPECT_FALSE(plan(DType::BF16, 100, 40, 200, mma, 90).variant.mma) << "head_dim 200";
  EXPECT_FALSE(plan(DType::F16, 100, 40, 64, autos, 75).variant.mma) << "sm_75: no cp.async";
  EXPECT_FALSE(plan(DType::F16, 100, 40, 64, simt, 90).variant.mma) << "choice simt";
  EXPECT_FALSE(plan(DType::F16, 100, 40, 64, mma, 90, 8).variant.mma) << "q 8 bytes past a 16-byte boundary";

  // Every variant's source says which it is.
  for (const cuda::AttentionVariant& v : cuda::all_attention_variants()) {
    EXPECT_EQ(cuda::attention_source(v).find("mma.sync") != std::string::npos, v.mma) << v.key();
  }
}

TEST(CudaAttentionClaims, ChoiceVariableAndLoweringRule) {
  using cuda::AttentionKernelChoice;
  {
    ScopedAttentionChoice unset(nullptr);
    Expected<AttentionKernelChoice> c = cuda::attention_kernel_choice();
    ASSERT_TRUE(c);
    EXPECT_EQ(*c, AttentionKernelChoice::Auto);
  }
  for (const auto& [text, want] : {std::pair{"auto", AttentionKernelChoice::Auto}, std::pair{"", AttentionKernelChoice::Auto},
                                   std::pair{"mma", AttentionKernelChoice::Mma}, std::pair{"simt", AttentionKernelChoice::Simt}}) {
    ScopedAttentionChoice set(text);
    Expected<AttentionKernelChoice> c = cuda::attention_kernel_choice();
    ASSERT_TRUE(c) << text;
    EXPECT_EQ(*c, want) << text;
  }
  {
    ScopedAttentionChoice bad("tensor");
    Expected<AttentionKernelChoice> c = cuda::attention_kernel_choice();
    ASSERT_FALSE(c);
    EXPECT_NE(c.status().message().find("FUSEBOX_CUDA_ATTENTION is 'tensor'"), std::string::npos) << c.status().message();
  }

  // The lowering keeps what a fused kernel runs faster than the unfused form.
  auto pays = [](const std::string& ty, int64_t head_dim, AttentionKernelChoice choice, int arch) {
    const Graph g = attention_graph(ty, head_dim, false);
    return cuda::attention_kernel_pays(g, g.nodes()[0], choice, arch);
  };
  EXPECT_TRUE(pays("f16[2,1024,128]", 64, AttentionKernelChoice::Auto, 90));
  EXPECT_TRUE(pays("bf16[2,T,256]", 128, AttentionKernelChoice::Auto, 90)) << "a run-time length";
  EXPECT_FALSE(pays("f16[2,1024,128]", 64, AttentionKernelChoice::Simt, 90));
  EXPECT_FALSE(pays("f16[2,1024,128]", 64, AttentionKernelChoice::Auto, 75));
  EXPECT_FALSE(pays("f32[2,1024,128]", 64, AttentionKernelChoice::Auto, 90));
  EXPECT_FALSE(pays("f16[2,40,400]", 200, AttentionKernelChoice::Auto, 90));
  EXPECT_TRUE(pays("f16[2,16,128]", 64, AttentionKernelChoice::Simt, 90)) << "16 queries: the float source pays";
  EXPECT_TRUE(pays("f32[2,16,128]", 64, AttentionKernelChoice::Auto, 90));
}

// A host model of one warp of the tensor-core source: ldmatrix and mma.sync m16n8k16 as the PTX
// ISA defines them (fragment tables in attention_mma_source.cpp), fed through the source's
// address and packing formulas (k_lane, v_lane, the query fragments, P's A fragment), must give
// the plain products S = Q·Kᵀ and O = P·V. Values are small integers (products exact).
namespace fragments {

constexpr int kD = 64, kBK = 64, kPitch = kD + 8;  // the 64 bucket's tile
using Regs = std::array<std::array<uint32_t, 4>, 32>;  // per lane, up to four 32-bit registers

uint32_t pack(int16_t lo, int16_t hi) { return uint32_t(uint16_t(lo)) | uint32_t(uint16_t(hi)) << 16; }
int16_t lo_of(uint32_t r) { return int16_t(uint16_t(r & 0xffff)); }
int16_t hi_of(uint32_t r) { return int16_t(uint16_t(r >> 16)); }

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane L names row L % 8 of matrix L / 8 (an
// element offset into `smem`); register i of lane L gets matrix i's (row L/4, cols 2(L%4), +1),
// or with .trans its (rows 2(L%4), +1, col L/4).
Regs ldmatrix_x4(const std::vector<int16_t>& smem, const std::array<int, 32>& row_at, bool trans) {
  Regs r{};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      auto at = [&](int row, int col) { return smem[size_t(row_at[size_t(8 * i + row)] + col)]; };
      r[size_t(lane)][size_t(i)] = trans ? pack(at(2 * t, g), at(2 * t + 1, g)) : pack(at(g, 2 * t), at(g, 2 * t + 1));
    }
  }
  return r;
}

// c (16x8) += a (16x16) · b (16x8) from the lanes' fragments: a[0..3] = (g, 2t), (g+8, 2t),
// (g, 2t+8), (g+8, 2t+8) pairs; b[0..1] = rows (2t, 2t+1), (2t+8, 2t+9) of column g; c[e] =
// (g + 8·(e/2), 2t + e%2).
void mma(std::array<std::array<double, 4>, 32>& c, const Regs& a, const Regs& b, int b0, int b1) {
  double A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const auto& ra = a[size_t(lane)];
    for (int half = 0; half < 2; ++half) {
      for (int r = 0; r < 2; ++r) {
        const uint32_t v = ra[size_t(2 * half + r)];
        A[g + 8 * r][2 * t + 8 * half] = lo_of(v);
        A[g + 8 * r][2 * t + 8 * half + 1] = hi_of(v);
      }
    }
    const uint32_t v0 = b[size_t(lane)][size_t(b0)], v1 = b[size_t(lane)][size_t(b1)];
    B[2 * t][g] = lo_of(v0);
    B[2 * t + 1][g] = hi_of(v0);
    B[2 * t + 8][g] = lo_of(v1);
    B[2 * t + 9][g] = hi_of(v1);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
      for (int x = 0; x < 16; ++x) c[size_t(lane)][size_t(e)] += A[row][x] * B[x][col];
    }
  }
}

}  // namespace fragments

TEST(CudaAttentionFragments, TheSourcesFragmentIndexingGivesThePlainProducts) {
  using namespace fragments;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-8, 8);
  // Q [16][kD] (a warp's rows), K and V tiles [kBK][kPitch] in "shared memory", P [16][kBK].
  std::vector<int16_t> q(16 * kD), ks(kBK * kPitch, 0), vs(kBK * kPitch, 0), p(16 * kBK);
  for (auto& x : q) x = int16_t(small(rng));
  for (auto& x : p) x = int16_t(small(rng));
  for (int j = 0; j < kBK; ++j) {
    for (int x = 0; x < kD; ++x) {
      ks[size_t(j * kPitch + x)] = int16_t(small(rng));
      vs[size_t(j * kPitch + x)] = int16_t(small(rng));
    }
  }
  // The query fragments: qa[kk][2·half + r] = row g + 8r, columns x, x + 1 with x = 16kk + 8half + 2t.
  std::array<Regs, kD / 16> qa{};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int kk = 0; kk < kD / 16; ++kk) {
      for (int half = 0; half < 2; ++half) {
        const int x = kk * 16 + 8 * half + 2 * t;
        for (int r = 0; r < 2; ++r) {
          const int row = g + 8 * r;
          qa[size_t(kk)][size_t(lane)][size_t(2 * half + r)] = pack(q[size_t(row * kD + x)], q[size_t(row * kD + x + 1)]);
        }
      }
    }
  }
  // The lanes' ldmatrix rows (in elements; the source's k_lane and v_lane are these times 2 bytes,
  // its tile offsets below too: the source must still say so).
  const std::string source = cuda::attention_mma_source({DType::F16, 64, true});
  for (const char* formula : {"((lane & 7) + (lane >> 4) * 8) * FB_PITCH + ((lane >> 3) & 1) * 8",
                              "((lane & 7) + ((lane >> 3) & 1) * 8) * FB_PITCH + (lane >> 4) * 8",
                              "k_lane + (nn * 16 * FB_PITCH + kk * 16) * 2", "v_lane + (kk * 16 * FB_PITCH + dn * 16) * 2",
                              "fb_mma(s[2 * nn], qa[kk], bk[0], bk[1])", "fb_mma(s[2 * nn + 1], qa[kk], bk[2], bk[3])",
                              "fb_mma(o[2 * dn], pa, bv[0], bv[1])", "fb_mma(o[2 * dn + 1], pa, bv[2], bv[3])",
                              "qa[kk][2 * half + r]", "const int x = kk * 16 + 8 * half + 2 * t;",
                              "fb_pack2(s[2 * kk][0], s[2 * kk][1]), fb_pack2(s[2 * kk][2], s[2 * kk][3])",
                              "fb_pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), fb_pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])"}) {
    EXPECT_NE(source.find(formula), std::string::npos) << "the source no longer has: " << formula;
  }
  std::array<int, 32> k_lane{}, v_lane{};
  for (int lane = 0; lane < 32; ++lane) {
    k_lane[size_t(lane)] = ((lane & 7) + (lane >> 4) * 8) * kPitch + ((lane >> 3) & 1) * 8;
    v_lane[size_t(lane)] = ((lane & 7) + ((lane >> 3) & 1) * 8) * kPitch + (lane >> 4) * 8;
  }
  auto shifted = [](const std::array<int, 32>& rows, int by) {
    std::array<int, 32> r = rows;
    for (int& x : r) x += by;
    return r;
  };

  // S = Q·Kᵀ: s[n][e] is row g + 8(e/2), key 8n + 2t + e%2.
  std::array<std::array<std::array<double, 4>, 32>, kBK / 8> s{};
  for (int kk = 0; kk < kD / 16; ++kk) {
    for (int nn = 0; nn < kBK / 16; ++nn) {
      const Regs bk = ldmatrix_x4(ks, shifted(k_lane, nn * 16 * kPitch + kk * 16), false);
      mma(s[size_t(2 * nn)], qa[size_t(kk)], bk, 0, 1);
      mma(s[size_t(2 * nn + 1)], qa[size_t(kk)], bk, 2, 3);
    }
  }
  // O = P·V with P's A fragments taken from C-fragment positions, as the source packs them.
  std::array<std::array<std::array<double, 4>, 32>, kD / 8> o{};
  auto p_at = [&](int lane, int n, int e) {  // P at the C position (n, e) of `lane`
    const int g = lane / 4, t = lane % 4;
    return p[size_t((g + 8 * (e / 2)) * kBK + 8 * n + 2 * t + e % 2)];
  };
  for (int kk = 0; kk < kBK / 16; ++kk) {
    Regs pa{};
    for (int lane = 0; lane < 32; ++lane) {
      pa[size_t(lane)] = {pack(p_at(lane, 2 * kk, 0), p_at(lane, 2 * kk, 1)), pack(p_at(lane, 2 * kk, 2), p_at(lane, 2 * kk, 3)),
                          pack(p_at(lane, 2 * kk + 1, 0), p_at(lane, 2 * kk + 1, 1)),
                          pack(p_at(lane, 2 * kk + 1, 2), p_at(lane, 2 * kk + 1, 3))};
    }
    for (int dn = 0; dn < kD / 16; ++dn) {
      const Regs bv = ldmatrix_x4(vs, shifted(v_lane, kk * 16 * kPitch + dn * 16), true);
      mma(o[size_t(2 * dn)], pa, bv, 0, 1);
      mma(o[size_t(2 * dn + 1)], pa, bv, 2, 3);
    }
  }

  int wrong_s = 0, wrong_o = 0;
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e / 2);
      for (int n = 0; n < kBK / 8; ++n) {
        const int key = 8 * n + 2 * t + e % 2;
        double want = 0;
        for (int x = 0; x < kD; ++x) want += double(q[size_t(row * kD + x)]) * ks[size_t(key * kPitch + x)];
        wrong_s += s[size_t(n)][size_t(lane)][size_t(e)] != want;
      }
      for (int n = 0; n < kD / 8; ++n) {
        const int col = 8 * n + 2 * t + e % 2;
        double want = 0;
        for (int j = 0; j < kBK; ++j) want += double(p[size_t(row * kBK + j)]) * vs[size_t(j * kPitch + col)];
        wrong_o += o[size_t(n)][size_t(lane)][size_t(e)] != want;
      }
    }
  }
  EXPECT_EQ(wrong_s, 0) << "of " << 16 * kBK << " scores";
  EXPECT_EQ(wrong_o, 0) << "of " << 16 * kD << " outputs";
}

TEST(CudaAttentionClaims, ClaimsAcceptWhatTheKernelsRunAndSayWhyNot) {
  // The claim of a fused_attention over q = k = v of [1, 4, heads * head_dim].
  auto claim = [](DType d, int64_t heads, int64_t head_dim) {
    const Array q(d, {1, 4, heads * head_dim});
    const Graph g = one_node(Op::FusedAttention, {q, q, q}, attention_attrs(heads, head_dim, false, true),
                             TensorType{d, make_shape(q.shape())});
    return cuda::claim_attention(g, g.nodes()[0]);
  };
  for (DType d : kDTypes) {
    const Claim c = claim(d, 2, 32);
    EXPECT_TRUE(c.yes) << dtype_name(d) << ": " << c.reason;
  }
  const Claim no_f64 = claim(DType::F64, 2, 32);
  EXPECT_FALSE(no_f64.yes);
  EXPECT_NE(no_f64.reason.find("fused_attention on f64"), std::string::npos) << no_f64.reason;
  const Claim no_big = claim(DType::F32, 1, 512);
  EXPECT_FALSE(no_big.yes);
  EXPECT_NE(no_big.reason.find("head_dim 512"), std::string::npos) << no_big.reason;

  // fused_swiglu takes cuBLASLt's answer for its product: a one-value bias is not one per column.
  const Array x(DType::F32, {5, 8}), w(DType::F32, {8, 12}), b1(DType::F32, {1}), b12(DType::F32, {12});
  const TensorType y{DType::F32, make_shape({5, 6})};
  const Graph one_bias = one_node(Op::FusedSwiglu, {x, w, b1}, {{"gate_first", true}}, y);
  const Claim no_bias = cuda::claim_swiglu(one_bias, one_bias.nodes()[0]);
  EXPECT_FALSE(no_bias.yes);
  EXPECT_NE(no_bias.reason.find("fused_swiglu's product"), std::string::npos) << no_bias.reason;
  const Graph bias = one_node(Op::FusedSwiglu, {x, w, b12}, {{"gate_first", false}}, y);
  const Claim yes = cuda::claim_swiglu(bias, bias.nodes()[0]);
  if (Expected<const cuda::CublasLt*> lt = cuda::cublaslt(); lt) {
    EXPECT_TRUE(yes.yes) << yes.reason;
  }
}

// Runs `op` over `in` with the CUDA backend's kernel directly, the result pre-filled with `poison`.
Expected<Array> run_on_cuda(Op op, const std::vector<Array>& in, const Attrs& attrs, const Array& like, uint8_t poison) {
  return testing::run_one_kernel("cuda", op, in, attrs, like, poison);
}

// The device result of `op` for both poisons against the reference's, within `tol`.
void expect_matches_reference(Op op, const std::vector<Array>& in, const Attrs& attrs, double tol, const std::string& what) {
  const Array want = testing::run_op1(op, in, attrs);
  ASSERT_GT(want.numel(), 0) << what;
  for (uint8_t poison : {uint8_t(0xFF), uint8_t(0x5A)}) {
    Expected<Array> got = run_on_cuda(op, in, attrs, want, poison);
    ASSERT_TRUE(got) << what << ": " << got.status().message();
    EXPECT_TRUE(testing::arrays_close(*got, want, tol, tol)) << what << " (poison " << int(poison) << ")";
  }
}

struct AttentionCase {
  std::string name;
  int64_t batch, heads, tq, tk, d;
  bool causal = false, merge = true, split_inputs = false;
  std::vector<int64_t> mask;  // empty: no mask
  bool neg_inf_rows = false;  // mask rows 1 and 4 all -inf, some entries -inf elsewhere
};

std::vector<AttentionCase> attention_cases() {
  return {
      {"one query, one key", 1, 1, 1, 1, 64},
      {"decode: one query, 77 keys", 2, 4, 1, 77, 64, true},
      {"odd sizes d=40", 2, 3, 7, 13, 40},
      {"odd sizes d=64 causal Tq<Tk", 2, 3, 7, 13, 64, true},
      {"odd sizes d=80 causal Tq>Tk (first rows see no key)", 1, 2, 13, 7, 80, true},
      {"d=80 heads split in and out", 2, 3, 7, 13, 80, false, false, true},
      {"d=128 long", 1, 2, 150, 300, 128, true},
      {"d=256", 1, 2, 33, 40, 256},
      {"d=8 many heads, split inputs, merged result", 3, 8, 20, 20, 8, true, true, true},
      {"mask [Tq,Tk]", 2, 3, 7, 13, 40, false, true, false, {7, 13}},
      {"mask [B,1,Tq,Tk] causal", 2, 3, 7, 13, 64, true, true, false, {2, 1, 7, 13}},
      {"mask [B,H,1,Tk] (padding)", 2, 3, 9, 13, 80, false, false, true, {2, 3, 1, 13}},
      {"mask with -inf rows", 2, 3, 7, 13, 40, false, true, false, {7, 13}, true},
      {"mask [1,H,Tq,Tk] with -inf rows, causal", 1, 4, 9, 9, 64, true, true, false, {1, 4, 9, 9}, true},
  };
}

std::vector<Array> attention_operands(const AttentionCase& c, DType d, uint64_t seed) {
  auto qkv = [&](int64_t t, uint64_t s) {
    return c.split_inputs ? testing::random_array(d, {c.batch, c.heads, t, c.d}, s)
                          : testing::random_array(d, {c.batch, t, c.heads * c.d}, s);
  };
  std::vector<Array> in = {qkv(c.tq, seed), qkv(c.tk, seed + 1), qkv(c.tk, seed + 2)};
  if (c.mask.empty()) return in;
  Array m = testing::random_array(d, c.mask, seed + 3, -1.0, 1.0);
  if (c.neg_inf_rows) {
    const int64_t cols = c.mask.back(), rows = m.numel() / cols;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < cols; ++j) {
        if (r % 9 == 1 || r % 9 == 4 || (r + j) % 5 == 0) m.set_f64(r * cols + j, -std::numeric_limits<double>::infinity());
      }
    }
  }
  in.push_back(std::move(m));
  return in;
}

TEST(CudaAttention, EveryCaseMatchesTheReferenceOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  uint64_t seed = 1;
  for (const AttentionCase& c : attention_cases()) {
    for (DType d : kDTypes) {
      const std::vector<Array> in = attention_operands(c, d, seed += 10);
      expect_matches_reference(Op::FusedAttention, in, attention_attrs(c.heads, c.d, c.causal, c.merge), attention_tolerance(d),
                               c.name + " " + std::string(dtype_name(d)));
    }
  }
}

// Sizes that are no multiple of the tensor-core source's tiles (64 queries, 64 or 32 keys), head
// dims of both buckets and below them, the mask shapes, causality, both layouts.
std::vector<AttentionCase> mma_attention_cases() {
  return {
      {"one query d=64", 2, 3, 1, 77, 64},
      {"Tq=17 Tk=100 d=64 causal", 2, 3, 17, 100, 64, true},
      {"Tq=100 Tk=17 d=128 causal (first rows see no key)", 1, 2, 100, 17, 128, true},
      {"Tq=257 Tk=257 d=128 causal, heads split in and out", 1, 2, 257, 257, 128, true, false, true},
      {"Tq=100 Tk=257 d=64 split inputs, merged result, mask [B,1,Tq,Tk]", 2, 2, 100, 257, 64, false, true, true, {2, 1, 100, 257}},
      {"Tq=17 Tk=100 d=40 mask [Tq,Tk] with -inf rows", 1, 3, 17, 100, 40, false, true, false, {17, 100}, true},
      {"Tq=33 Tk=65 d=72 mask [B,H,1,Tk] (padding)", 2, 2, 33, 65, 72, false, false, true, {2, 2, 1, 65}},
      {"Tq=65 Tk=65 d=128 mask [1,H,Tq,Tk] with -inf rows, causal", 1, 4, 65, 65, 128, true, true, false, {1, 4, 65, 65}, true},
      {"Tq=100 Tk=1 d=64", 1, 2, 100, 1, 64},
      {"Tq=64 Tk=1000 d=64", 1, 2, 64, 1000, 64},
      {"Tq=130 Tk=300 d=8 causal", 2, 2, 130, 300, 8, true},
      {"Tq=17 no keys (zeros)", 1, 2, 17, 0, 64},
  };
}

// The tensor-core source (chosen by default wherever it covers the node, at every query length)
// against the reference, f16 and bf16, at the float
// source's tolerances: it also rounds the probabilities to the dtype before the second product,
// one rounding of weights the reference rounds too.
TEST(CudaAttention, TensorCoreSourceMatchesTheReferenceOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (const char* choice : {"mma", "auto"}) {
    ScopedAttentionChoice set(choice);
    uint64_t seed = 900;
    for (const AttentionCase& c : mma_attention_cases()) {
      for (DType d : {DType::F16, DType::BF16}) {
        const std::vector<Array> in = attention_operands(c, d, seed += 10);
        expect_matches_reference(Op::FusedAttention, in, attention_attrs(c.heads, c.d, c.causal, c.merge),
                                 attention_tolerance(d), c.name + " " + std::string(dtype_name(d)) + " (" + choice + ")");
      }
    }
  }
}

// f16 attention of any length stays one fused_attention (the tensor-core source) and matches the
// reference; with FUSEBOX_CUDA_ATTENTION=simt a long one is lowered to the unfused form again.
TEST(CudaAttention, HalfAttentionStaysOneKernelAtAnyLength) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (const char* choice : {"auto", "simt"}) {
    ScopedAttentionChoice set(choice);
    for (const char* t : {"200", "T"}) {
      SCOPED_TRACE(std::string(choice) + " " + t);
      // Lowering needs static lengths for the causal mask: with simt, a run-time length is not causal.
      const bool causal = std::string(choice) == "auto" || std::string(t) != "T";
      Expected<testing::OracleAndPlan> exes = compile_for_cuda(attention_graph(std::string("f16[2,") + t + ",128]", 64, causal));
      ASSERT_TRUE(exes) << exes.status().message();
      const bool fused = std::string(choice) == "auto";
      EXPECT_EQ(testing::backend_of(exes->plan, Op::FusedAttention), fused ? "cuda" : "absent");
      const int64_t tq = std::string(t) == "T" ? 333 : 200;
      std::vector<Array> in;
      for (int i = 0; i < 3; ++i) in.push_back(testing::random_array(DType::F16, {2, tq, 128}, 180 + uint64_t(i)));
      Expected<std::vector<Array>> want = exes->reference.run(in), got = exes->plan.run(in);
      ASSERT_TRUE(want && got);
      EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], attention_tolerance(DType::F16), attention_tolerance(DType::F16)));
    }
  }
}

TEST(CudaSwiglu, EachGateHalfWithAndWithoutBiasMatchesTheReferenceOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  uint64_t seed = 500;
  for (DType d : kDTypes) {
    for (bool gate_first : {true, false}) {
      for (bool bias : {false, true}) {
        for (const std::vector<int64_t>& x_shape : {std::vector<int64_t>{37, 64}, std::vector<int64_t>{2, 5, 64}}) {
          std::vector<Array> in = {testing::random_array(d, x_shape, seed += 10, -1.0, 1.0),
                                   testing::random_array(d, {64, 2 * 24}, seed + 1, -1.0, 1.0)};
          if (bias) in.push_back(testing::random_array(d, {2 * 24}, seed + 2, -1.0, 1.0));
          const std::string what = std::string(dtype_name(d)) + (gate_first ? " gate first" : " gate second") +
                                   (bias ? " with bias" : " no bias") + " rank " + std::to_string(x_shape.size());
          expect_matches_reference(Op::FusedSwiglu, in, {{"gate_first", gate_first}}, swiglu_tolerance(d), what);
        }
      }
    }
  }
}

// Long or run-time query lengths: the backend's lowering gives the unfused form (cuBLASLt
// products, the row softmax), which runs on the GPU and matches the reference; a short one stays
// one fused_attention.
TEST(CudaAttention, LongQueriesAreLoweredToTheUnfusedForm) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (const char* t : {"40", "T", "16"}) {
    SCOPED_TRACE(t);
    Expected<testing::OracleAndPlan> exes = compile_for_cuda(attention_graph(std::string("f32[2,") + t + ",128]", 64, false));
    ASSERT_TRUE(exes) << exes.status().message();
    const bool fused = std::string(t) == "16";
    EXPECT_EQ(testing::backend_of(exes->plan, Op::FusedAttention), fused ? "cuda" : "absent");
    if (!fused) {
      EXPECT_EQ(testing::backend_of(exes->plan, Op::Softmax), "cuda");
    }
    const int64_t tq = std::string(t) == "T" ? 33 : std::atoi(t);
    std::vector<Array> in;
    for (int i = 0; i < 3; ++i) in.push_back(testing::random_array(DType::F32, {2, tq, 128}, 80 + uint64_t(i), -1.0, 1.0));
    Expected<std::vector<Array>> want = exes->reference.run(in), got = exes->plan.run(in);
    ASSERT_TRUE(want && got);
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-4, 1e-4));
  }
}

// An attention block's two fused ops, compiled for the cuda target: both run there and match
// the unfused reference, run by run and when the plan is recorded and replayed as a CUDA graph.
TEST(CudaAttention, FusedBlockCompilesForCudaAndRunsThere) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const Graph g = testing::parse_or_fail(
      "func @block(%q: f32[B,9,128], %k: f32[B,9,128], %v: f32[B,9,128], %w: f32[128,96], %b: f32[96]) -> f32[B,9,48] {\n"
      "  %a = fused_attention %q, %k, %v {heads = 2, head_dim = 64, causal = true, scale = 0.125} : f32[B,9,128]\n"
      "  %y = fused_swiglu %a, %w, %b {gate_first = false} : f32[B,9,48]\n"
      "  return %y\n}");
  ASSERT_EQ(g.nodes().size(), 2u);
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  dev.fuse = false;  // the graph is already fused: two kernels, a plan worth recording
  dev.device_io = true;
  Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(g, dev);
  ASSERT_TRUE(exes) << exes.status().message();
  EXPECT_EQ(testing::backend_of(exes->plan, Op::FusedAttention), "cuda");
  EXPECT_EQ(testing::backend_of(exes->plan, Op::FusedSwiglu), "cuda");
  Expected<std::shared_ptr<Backend>> cuda = make_backend("cuda");
  ASSERT_TRUE(cuda) << cuda.status().message();
  const Backend& device = **cuda;
  std::vector<Buffer> buffers;
  for (ValueId v : g.inputs()) {
    std::vector<int64_t> shape;
    for (const Dim& dim : g.type(v).shape) shape.push_back(dim.is_static() ? dim.value() : dim.symbol_name() == "B" ? 2 : 37);
    Expected<Buffer> b = device.allocate(DType::F32, shape);
    ASSERT_TRUE(b) << b.status().message();
    buffers.push_back(std::move(*b));
  }
  for (int run = 0; run < 4; ++run) {  // run 2 is recorded and replayed, runs 3 and 4 replay it
    std::vector<Array> host;
    for (const Buffer& b : buffers) {
      host.push_back(testing::random_array(DType::F32, b.view().shape, 70 + uint64_t(run * 10 + host.size()), -1.0, 1.0));
      ASSERT_TRUE(device.copy_from_host(device.stream(), host_view(host.back()), b.view()).is_ok());
    }
    Expected<std::vector<Buffer>> out = exes->plan.run_buffers(buffers);
    ASSERT_TRUE(out) << out.status().message();
    Array got(DType::F32, (*out)[0].view().shape);
    ASSERT_TRUE(device.copy_to_host(device.stream(), (*out)[0].view(), host_view(got)).is_ok());
    ASSERT_TRUE(exes->plan.sync().is_ok());
    Expected<std::vector<Array>> want = exes->reference.run(host);
    ASSERT_TRUE(want) << want.status().message();
    EXPECT_TRUE(testing::arrays_close(got, (*want)[0], 1e-4, 1e-4)) << "run " << run;
  }
  EXPECT_EQ(exes->plan.stats().recordings, 1u);
  EXPECT_EQ(exes->plan.stats().replays, 3u);  // the recording run replays too
}

}  // namespace
}  // namespace fusebox
