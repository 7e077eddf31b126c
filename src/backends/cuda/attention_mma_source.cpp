// The CUDA C++ of the tensor-core attention kernel for f16 and bf16 (attention_kernel.h says
// when it runs): the head both sources share (attention_source.cpp), the mma type, then one body.
//
//   block       64 queries of one (batch, head); warp w owns queries 16w .. 16w + 15
//   shared      ks, vs [2][BK][DMAX + 8]   two stages of key and value rows in the dtype, filled
//                                          with cp.async (16 bytes a copy; zeros past Tk and past
//                                          the head dim); while one stage is read the next tile
//                                          is copied into the other. The 8-value pad puts the 8
//                                          rows one ldmatrix phase reads in distinct banks.
//   registers   the warp's queries as A fragments (read once), a 16 x BK score tile and the
//               16 x DMAX output accumulator as C fragments, the running max and sum of the
//               thread's two rows (g and g + 8)
//
// Fragments of mma.sync.aligned.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and t = lane % 4; each 32-bit register holds two 16-bit values, the lower first:
//   A 16x16 (row)  a[0] = (g, 2t .. 2t+1)  a[1] = (g+8, 2t ..)  a[2] = (g, 2t+8 ..)  a[3] = (g+8, 2t+8 ..)
//   B 16x8  (col)  b[0] = rows 2t, 2t+1 of column g          b[1] = rows 2t+8, 2t+9 of column g
//   C 16x8         c[0], c[1] = (g, 2t), (g, 2t+1)           c[2], c[3] = (g+8, 2t), (g+8, 2t+1)
// S = Q·Kᵀ: B is Kᵀ, so its column g is key row g and b[0] two adjacent values of that row
// (ldmatrix, one 8x8 matrix per 8 keys x 8 dims). O += P·V: B is V, b[0] the values of one column
// in two adjacent key rows (ldmatrix .trans). The C fragments of score columns 16kk .. 16kk+7
// and 16kk+8 .. 16kk+15 are, register for register, the A fragment of P's columns 16kk .. 16kk+15
// (rounded to the dtype).
//
// ldmatrix .x4: lane L gives the address of row L % 8 of matrix L / 8 and gets register i from
// matrix i: (row g, columns 2t, 2t+1), or with .trans (rows 2t, 2t+1, column g).
//   K tile, keys n0 .., dims k0 ..:   matrix (mi) = keys n0 + 8·(mi / 2), dims k0 + 8·(mi % 2)
//                                     -> b[0], b[1] of keys n0 .. n0+7, then of keys n0+8 .. n0+15
//   V tile, keys k0 .., dims n0 ..:   matrix (mi) = keys k0 + 8·(mi % 2), dims n0 + 8·(mi / 2)
//                                     -> b[0], b[1] of dims n0 .. n0+7, then of dims n0+8 .. n0+15
#include <sstream>

#include "backends/cuda/attention_kernel.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr std::string_view kMmaBody = R"CUDA(
#define FB_BQ (FB_WARPS * 16)
#define FB_PITCH (FB_DMAX + 8)
#define FB_CHUNKS (FB_DMAX / 8)  // 16-byte copies per row
#define FB_LOG2E 1.4426950408889634f

__device__ __forceinline__ u32 fb_shared_address(const void* p) {
  u32 a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
// 16 bytes from global to shared memory, or 16 zero bytes (src unread) when !valid.
__device__ __forceinline__ void fb_cp_async16(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void fb_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Every group but the last committed one has landed (for this thread's copies).
__device__ __forceinline__ void fb_cp_async_wait_1() { asm volatile("cp.async.wait_group 1;" ::: "memory"); }
__device__ __forceinline__ void fb_cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

__device__ __forceinline__ void fb_ldmatrix_x4(u32* r, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
__device__ __forceinline__ void fb_ldmatrix_x4_trans(u32* r, u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
// c (16x8, f32) += a (16x16) · b (16x8), the fragments drawn above.
__device__ __forceinline__ void fb_mma(float* c, const u32* a, u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32." FB_MMA_TYPE "." FB_MMA_TYPE ".f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// 2^x (the MUFU unit's approximation, relative error about 2^-22; results below 2^-126 are 0).
__device__ __forceinline__ float fb_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Two floats rounded to the dtype (to nearest even) in one register, `lo` in the lower half:
// cvt's first source goes to the upper half.
__device__ __forceinline__ u32 fb_pack2(float lo, float hi) {
  u32 r;
  asm("cvt.rn." FB_MMA_TYPE "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

extern "C" __global__ void __launch_bounds__(FB_WARPS * 32) fb_attention(
    const fb_t* __restrict__ q, const fb_t* __restrict__ k, const fb_t* __restrict__ v,
    const fb_t* __restrict__ mask, fb_t* __restrict__ out, const FbAttention a) {
  static_assert(FB_BK % 16 == 0 && FB_DMAX % 16 == 0, "whole mma tiles");
  static_assert(FB_BK * FB_CHUNKS % (FB_WARPS * 32) == 0, "whole copy rounds");
  __shared__ __align__(16) fb_t ks[2][FB_BK][FB_PITCH];
  __shared__ __align__(16) fb_t vs[2][FB_BK][FB_PITCH];
  const FbAttentionBlock blk = fb_attention_block(a, FB_BQ, q, k, v, mask, out);
  const i64 i0 = blk.i0;
  const fb_t *qb = blk.q, *kb = blk.k, *vb = blk.v, *mb = blk.m;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int g = lane / 4, t = lane % 4;
  const int d = int(a.d);
  const float scale = float(a.scale);
  const i64 shift = a.tk - a.tq;  // causal: query i sees key j when j <= i + shift
  const i64 w0 = i0 + warp * 16;  // the warp's first query
  const i64 rows[2] = {w0 + g, w0 + g + 8};  // the queries of this thread's C rows
  // Their mask rows (null: no mask, or a row past Tq).
  const fb_t* mrow[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) mrow[r] = mb && rows[r] < a.tq ? mb + rows[r] * a.m[2] : nullptr;

  // The warp's queries as A fragments: a[2·half + r] holds row g + 8r, columns x + 8·half.
  u32 qa[FB_DMAX / 16][4];
#pragma unroll
  for (int kk = 0; kk < FB_DMAX / 16; ++kk) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int x = kk * 16 + 8 * half + 2 * t;  // x + 1 < d too: d is a multiple of 8
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        qa[kk][2 * half + r] =
            rows[r] < a.tq && x < d ? *reinterpret_cast<const u32*>(qb + rows[r] * a.q[2] + x) : 0u;
      }
    }
  }

  // Keys past the last one the block's last query sees are never loaded.
  i64 kend = a.tk;
  if (a.causal) kend = min(kend, min(i0 + FB_BQ, a.tq) + shift);
  const i64 tiles = kend > 0 ? (kend + FB_BK - 1) / FB_BK : 0;
  // Shared addresses: stage st of ks starts at ks0 + st * FB_STAGE bytes, of vs at vs0 + ...
  const u32 ks0 = fb_shared_address(&ks[0][0][0]), vs0 = fb_shared_address(&vs[0][0][0]);
#define FB_STAGE (FB_BK * FB_PITCH * 2)
  // Thread copy e of a tile: row `c / FB_CHUNKS`, 8 columns from `(c % FB_CHUNKS) * 8`, with c =
  // threadIdx.x + e * FB_WARPS * 32 (consecutive threads copy consecutive 16 bytes of a row).
  const auto load_tile = [&](i64 j0, int stage) {
#pragma unroll
    for (int e = 0; e < FB_BK * FB_CHUNKS / (FB_WARPS * 32); ++e) {
      const int c = int(threadIdx.x) + e * FB_WARPS * 32;
      const int r = c / FB_CHUNKS, x = (c % FB_CHUNKS) * 8;
      const i64 j = j0 + r;
      const bool in = j < a.tk && x < d;
      const u32 at = u32(stage * FB_STAGE + (r * FB_PITCH + x) * 2);
      fb_cp_async16(ks0 + at, in ? kb + j * a.k[2] + x : kb, in);
      fb_cp_async16(vs0 + at, in ? vb + j * a.v[2] + x : vb, in);
    }
  };
  // This lane's ldmatrix row addresses (bytes from a stage's start; the header draws them) for
  // keys 0 .. 15, dims 0 .. 15: a K tile without .trans, a V tile with it.
  const u32 k_lane = u32(((lane & 7) + (lane >> 4) * 8) * FB_PITCH + ((lane >> 3) & 1) * 8) * 2;
  const u32 v_lane = u32(((lane & 7) + ((lane >> 3) & 1) * 8) * FB_PITCH + (lane >> 4) * 8) * 2;

  float o[FB_DMAX / 8][4];
#pragma unroll
  for (int n = 0; n < FB_DMAX / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {fb_neg_inf(), fb_neg_inf()}, l[2] = {0.0f, 0.0f};  // l: this thread's columns only
  const bool active = w0 < a.tq;  // the same for the whole warp, as everything the tiles branch on
  const i64 wlast = min(w0 + 15, a.tq - 1);

  if (tiles > 0) load_tile(0, 0);
  fb_cp_async_commit();
  for (i64 tile = 0; tile < tiles; ++tile) {
    const int stage = int(tile & 1);
    const i64 j0 = tile * FB_BK;
    // The other stage was last read in the previous round, which ended with a barrier.
    if (tile + 1 < tiles) load_tile(j0 + FB_BK, stage ^ 1);
    fb_cp_async_commit();
    fb_cp_async_wait_1();
    __syncthreads();  // every thread's copies of this tile have landed
    // A tile whose keys the warp's queries all come before adds nothing: skipped.
    if (active && (!a.causal || j0 <= wlast + shift)) {
      float s[FB_BK / 8][4];
#pragma unroll
      for (int n = 0; n < FB_BK / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < FB_DMAX / 16; ++kk) {
        if (kk * 16 >= d) break;  // zero columns of the bucket
#pragma unroll
        for (int nn = 0; nn < FB_BK / 16; ++nn) {
          u32 bk[4];
          fb_ldmatrix_x4(bk, ks0 + stage * FB_STAGE + k_lane + (nn * 16 * FB_PITCH + kk * 16) * 2);
          fb_mma(s[2 * nn], qa[kk], bk[0], bk[1]);
          fb_mma(s[2 * nn + 1], qa[kk], bk[2], bk[3]);
        }
      }
      // q·k · scale + mask as the unfused steps order them; -inf past Tk and for keys the causal
      // rule hides: row r sees the tile's keys before seen[r]. s[n][e] is row rows[e / 2], key
      // j0 + c with c = 8n + 2t + e % 2.
      int seen[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const i64 end = a.causal ? min(a.tk, rows[r] + shift + 1) : a.tk;
        seen[r] = int(max(i64(0), min(end - j0, i64(FB_BK))));
      }
      float mx[2] = {fb_neg_inf(), fb_neg_inf()};
#pragma unroll
      for (int n = 0; n < FB_BK / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = e >> 1, c = n * 8 + 2 * t + (e & 1);
          float x = fb_neg_inf();
          if (c < seen[r]) {
            x = s[n][e] * scale;
            if (mrow[r]) x += FB_LOAD(mrow[r][(j0 + c) * a.m[3]]);
          }
          s[n][e] = x;
          mx[r] = fmaxf(mx[r], x);
        }
      }
      // The four threads of a row (lanes 4g .. 4g+3) agree on its max; a row that has seen no
      // key yet (max -inf) subtracts 0, so its weights are e^-inf = 0 and nothing is added.
      // e^(x - base) is 2^(x·log2 e - base·log2 e): one fma and ex2 (FB_LOG2E).
      float base[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float m_new = fmaxf(m[r], mx[r]);
        base[r] = m_new == fb_neg_inf() ? 0.0f : m_new * FB_LOG2E;
        const float rescale = fb_ex2(fmaf(m[r], FB_LOG2E, -base[r]));
        l[r] *= rescale;
#pragma unroll
        for (int n = 0; n < FB_DMAX / 8; ++n) {
          o[n][2 * r] *= rescale;
          o[n][2 * r + 1] *= rescale;
        }
        m[r] = m_new;
      }
#pragma unroll
      for (int n = 0; n < FB_BK / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[n][e] = fb_ex2(fmaf(s[n][e], FB_LOG2E, -base[e >> 1]));
          l[e >> 1] += s[n][e];
        }
      }
      // O += P·V over the tile's keys, 16 at a time.
#pragma unroll
      for (int kk = 0; kk < FB_BK / 16; ++kk) {
        const u32 pa[4] = {fb_pack2(s[2 * kk][0], s[2 * kk][1]), fb_pack2(s[2 * kk][2], s[2 * kk][3]),
                           fb_pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), fb_pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dn = 0; dn < FB_DMAX / 16; ++dn) {
          if (dn * 16 >= d) break;
          u32 bv[4];
          fb_ldmatrix_x4_trans(bv, vs0 + stage * FB_STAGE + v_lane + (kk * 16 * FB_PITCH + dn * 16) * 2);
          fb_mma(o[2 * dn], pa, bv[0], bv[1]);
          fb_mma(o[2 * dn + 1], pa, bv[2], bv[3]);
        }
      }
    }
    __syncthreads();  // the stage is read by every warp before the next round refills it
  }
  fb_cp_async_wait_all();

  // out = accumulator / sum: 0 / 0 = NaN for a query that saw no key; zeros when Tk = 0.
  fb_t* ob = blk.o;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const i64 i = rows[r];
    if (i >= a.tq) continue;
#pragma unroll
    for (int n = 0; n < FB_DMAX / 8; ++n) {
      const int x = n * 8 + 2 * t;
      if (x >= d) break;
      const float y0 = a.tk == 0 ? 0.0f : o[n][2 * r] / sum, y1 = a.tk == 0 ? 0.0f : o[n][2 * r + 1] / sum;
      *reinterpret_cast<u32*>(ob + i * a.o[2] + x) = u32(FB_STORE(y0)) | (u32(FB_STORE(y1)) << 16);
    }
  }
}
)CUDA";

}  // namespace

std::string attention_mma_source(const AttentionVariant& v) {
  FUSEBOX_CHECK(v.mma && (v.dtype == DType::F16 || v.dtype == DType::BF16)) << "tensor-core attention dtype";
  FUSEBOX_CHECK(v.max_head_dim == 64 || v.max_head_dim == 128) << "tensor-core attention head-dim bucket";
  std::ostringstream os;
  os << attention_source_head(v);
  os << "#define FB_MMA_TYPE \"" << (v.dtype == DType::F16 ? "f16" : "bf16") << "\"\n";
  os << kMmaBody;
  return os.str();
}

}  // namespace fusebox::cuda
