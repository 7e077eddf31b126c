// The CUDA C++ of the attention kernel (attention_kernel.h draws the algorithm): the prelude, a
// few #defines naming the variant, then one body shared by every variant.
//
//   shared memory   qs [BQ][DMAX]     the block's queries (zero past the head dim)
//                   ks [BK][DMAX+1]   a tile of keys; the odd pitch keeps lane j's reads of
//                                     row j in distinct banks
//                   vs [BK][DMAX]     the tile's values; lanes read consecutive columns
//   registers       per query of the warp: running max m, running sum l, DMAX/32 columns of
//                   the accumulator
#include <sstream>

#include "backends/cuda/attention_kernel.h"
#include "backends/cuda/prelude.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr std::string_view kBody = R"CUDA(
#define FB_BQ (FB_WARPS * FB_QW)
#define FB_XS (FB_DMAX / 32)

__device__ __forceinline__ float fb_warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float fb_warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

extern "C" __global__ void __launch_bounds__(FB_WARPS * 32) fb_attention(
    const fb_t* __restrict__ q, const fb_t* __restrict__ k, const fb_t* __restrict__ v,
    const fb_t* __restrict__ mask, fb_t* __restrict__ out, const FbAttention a) {
  __shared__ float qs[FB_BQ][FB_DMAX];
  __shared__ float ks[FB_BK][FB_DMAX + 1];
  __shared__ float vs[FB_BK][FB_DMAX];
  const FbAttentionBlock w = fb_attention_block(a, FB_BQ, q, k, v, mask, out);
  const i64 i0 = w.i0;
  const fb_t *qb = w.q, *kb = w.k, *vb = w.v, *mb = w.m;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int d = int(a.d);
  const float scale = float(a.scale);
  const i64 shift = a.tk - a.tq;  // causal: query i sees key j when j <= i + shift

  for (int e = threadIdx.x; e < FB_BQ * FB_DMAX; e += blockDim.x) {
    const int r = e / FB_DMAX, x = e % FB_DMAX;
    qs[r][x] = i0 + r < a.tq && x < d ? FB_LOAD(qb[(i0 + r) * a.q[2] + x]) : 0.0f;
  }
  // Keys past the last one the block's last query sees are never loaded.
  i64 kend = a.tk;
  if (a.causal) kend = min(kend, min(i0 + FB_BQ, a.tq) + shift);

  float m[FB_QW], l[FB_QW], acc[FB_QW][FB_XS];
#pragma unroll
  for (int r = 0; r < FB_QW; ++r) {
    m[r] = fb_neg_inf();
    l[r] = 0.0f;
#pragma unroll
    for (int t = 0; t < FB_XS; ++t) acc[r][t] = 0.0f;
  }

  for (i64 j0 = 0; j0 < kend; j0 += FB_BK) {
    __syncthreads();  // the previous tile is consumed (and, the first time, the queries stored)
    for (int e = threadIdx.x; e < FB_BK * FB_DMAX; e += blockDim.x) {
      const int j = e / FB_DMAX, x = e % FB_DMAX;
      const bool in = j0 + j < a.tk && x < d;
      ks[j][x] = in ? FB_LOAD(kb[(j0 + j) * a.k[2] + x]) : 0.0f;
      vs[j][x] = in ? FB_LOAD(vb[(j0 + j) * a.v[2] + x]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < FB_QW; ++r) {
      const int row = warp * FB_QW + r;
      const i64 i = i0 + row;
      if (i >= a.tq) break;  // the same for the whole warp
      // Lane j scores key j0 + j: q·k, then · scale and + mask as the unfused steps order them.
      const i64 j = j0 + lane;
      float s = fb_neg_inf();
      if (lane < FB_BK && j < a.tk && (!a.causal || j <= i + shift)) {
        float dot = 0.0f;
#pragma unroll 16
        for (int x = 0; x < FB_DMAX; ++x) dot += qs[row][x] * ks[lane][x];
        s = dot * scale;
        if (mb) s += FB_LOAD(mb[i * a.m[2] + j * a.m[3]]);
      }
      const float m_new = fmaxf(m[r], fb_warp_max(s));
      if (m_new == fb_neg_inf()) continue;  // no key seen yet: nothing to add, nothing to rescale
      const float p = expf(s - m_new);      // 0 for an excluded key
      const float rescale = expf(m[r] - m_new);
      l[r] = l[r] * rescale + fb_warp_sum(p);
#pragma unroll
      for (int t = 0; t < FB_XS; ++t) acc[r][t] *= rescale;
#pragma unroll 4
      for (int jj = 0; jj < FB_BK; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
        for (int t = 0; t < FB_XS; ++t) acc[r][t] += pj * vs[jj][lane + 32 * t];
      }
      m[r] = m_new;
    }
  }

  fb_t* ob = w.o;
#pragma unroll
  for (int r = 0; r < FB_QW; ++r) {
    const i64 i = i0 + warp * FB_QW + r;
    if (i >= a.tq) break;
#pragma unroll
    for (int t = 0; t < FB_XS; ++t) {
      const int x = lane + 32 * t;
      if (x < d) ob[i * a.o[2] + x] = FB_STORE(a.tk == 0 ? 0.0f : acc[r][t] / l[r]);
    }
  }
}
)CUDA";

}  // namespace

std::string AttentionVariant::key() const {
  return std::string(dtype_name(dtype)) + "/d" + std::to_string(max_head_dim) + (mma ? "/mma" : "");
}

std::string attention_source_head(const AttentionVariant& v) {
  std::ostringstream os;
  os << prelude_source();
  os << "\n// ---- attention kernel " << v.key() << "\n";
  os << "#define FB_DMAX " << v.max_head_dim << "\n";
  os << "#define FB_BK " << v.keys_per_tile() << "\n";
  os << "#define FB_WARPS " << kAttentionWarps << "\n";
  os << float_storage_defines(v.dtype);
  os << R"CUDA(
// attention_kernel.h's AttentionArgs, field for field.
struct FbAttention {
  i64 batch, heads, tq, tk, d;
  i64 q[3], k[3], v[3], o[3];
  i64 m[4];
  i64 causal;
  double scale;
};

__device__ __forceinline__ float fb_neg_inf() { return __int_as_float(0xff800000); }

// The work of block blockIdx.x for tiles of `bq` queries: its first query and the operands and
// result of its (batch, head). The blocks of one (batch, head) are adjacent (they share its keys
// in L2).
struct FbAttentionBlock {
  i64 i0;
  const fb_t *q, *k, *v, *m;  // m: null without a mask
  fb_t* o;
};
__device__ __forceinline__ FbAttentionBlock fb_attention_block(const FbAttention& a, int bq, const fb_t* q, const fb_t* k,
                                                               const fb_t* v, const fb_t* mask, fb_t* out) {
  const i64 qtiles = (a.tq + bq - 1) / bq;
  const i64 bh = i64(blockIdx.x) / qtiles;
  const i64 b = bh / a.heads, h = bh % a.heads;
  FbAttentionBlock w;
  w.i0 = (i64(blockIdx.x) % qtiles) * bq;
  w.q = q + b * a.q[0] + h * a.q[1];
  w.k = k + b * a.k[0] + h * a.k[1];
  w.v = v + b * a.v[0] + h * a.v[1];
  w.m = mask ? mask + b * a.m[0] + h * a.m[1] : mask;
  w.o = out + b * a.o[0] + h * a.o[1];
  return w;
}
)CUDA";
  return os.str();
}

std::string attention_source(const AttentionVariant& v) {
  if (v.mma) return attention_mma_source(v);
  FUSEBOX_CHECK(v.dtype == DType::F32 || v.dtype == DType::F16 || v.dtype == DType::BF16) << "attention kernel dtype";
  FUSEBOX_CHECK(v.max_head_dim == 64 || v.max_head_dim == 128 || v.max_head_dim == 256) << "attention head-dim bucket";
  std::ostringstream os;
  os << attention_source_head(v);
  os << "#define FB_QW " << v.queries_per_warp() << "\n";
  os << kBody;
  return os.str();
}

std::vector<AttentionVariant> all_attention_variants() {
  std::vector<AttentionVariant> all;
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    for (int dim : {64, 128, 256}) all.push_back({d, dim});
  }
  for (DType d : {DType::F16, DType::BF16}) {
    for (int dim : {64, 128}) all.push_back({d, dim, true});
  }
  return all;
}

}  // namespace fusebox::cuda
