// The CUDA C++ of the row kernels (row_kernel.h): the prelude, a few #defines naming the
// variant, then one body shared by every variant.
//
//   block of T threads per row (T = 32..256, grid-stride over rows)
//   chunk c = V consecutive elements, one V-wide access; thread t owns chunks t, t + T, ...
//
//   registers (n <= T * 32):  load once -> reduce -> reduce -> write from registers
//   streamed  (longer rows):  pass 1 statistics -> block reduce -> pass 2 reload and write
//
// Accuracy against the reference (double throughout, one rounding):
// - softmax: max, then sum of e^(x - max) over the row in float (no cancellation: every term is
//   positive), e^(x - max) times 1 / sum (the row's one division: a rounding more than a
//   division per element, far below the float sum's own error); log_softmax (x - max) - log(sum). A streamed row keeps a
//   running (max, sum) and rescales the sum when the max grows.
// - layer norm in registers: two passes (mean, then the squared deviations around it), each
//   thread's float partial sum added across the block in double; streamed: deviations from the
//   row's first value summed per chunk in float and over the row in double, so the variance
//   follows the row's spread, not its mean.
//   (v - mean) * (1 / sqrt(var / n + eps)), the reciprocal square root in double, rounded once.
// - NaN anywhere in a row makes the row NaN, infinities give the reference's NaN and zeros.
#include <sstream>

#include "backends/cuda/prelude.h"
#include "backends/cuda/row_kernel.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr std::string_view kBody = R"CUDA(
#define FB_CHUNKS (FB_ITEMS / FB_V)
typedef Pack<fb_t, FB_V> fb_pack;

__device__ __forceinline__ float fb_neg_inf() { return __int_as_float(0xff800000); }

// ---- loads and stores of V consecutive elements ------------------------------------------------
__device__ __forceinline__ void fb_load(const fb_t* p, i64 at, float* v) {
  const fb_pack q = *reinterpret_cast<const fb_pack*>(p + at);
#pragma unroll
  for (int j = 0; j < FB_V; ++j) v[j] = FB_LOAD(q.v[j]);
}
__device__ __forceinline__ void fb_store(fb_t* p, i64 at, const float* v) {
  fb_pack q;
#pragma unroll
  for (int j = 0; j < FB_V; ++j) q.v[j] = FB_STORE(v[j]);
  *reinterpret_cast<fb_pack*>(p + at) = q;
}
// An operand read with element stride 0 (one value for the row) or 1.
__device__ __forceinline__ void fb_load_strided(const fb_t* p, i64 stride, i64 at, float* v) {
  if (stride == 0) {
    const float s = FB_LOAD(p[0]);
#pragma unroll
    for (int j = 0; j < FB_V; ++j) v[j] = s;
  } else {
    fb_load(p, at, v);
  }
}

struct FbRow {
  const fb_t* x; const fb_t* r; const fb_t* bias; const fb_t* scale; const fb_t* shift;
  fb_t* y; fb_t* sum;
  i64 base;       // the row's first element
  i64 bias_base;  // the row's first bias element
  i64 bias_stride, scale_stride, shift_stride;
};

// The row's values at [col, col + V): x, or the residual sum rounded after each add (stored
// when it is a result and `keep` is set).
__device__ __forceinline__ void fb_values(const FbRow& a, i64 col, float* v, bool keep) {
  fb_load(a.x, a.base + col, v);
#if FB_RESIDUAL
  float t[FB_V];
  fb_load(a.r, a.base + col, t);
#pragma unroll
  for (int j = 0; j < FB_V; ++j) v[j] = FB_ROUND(v[j] + t[j]);
  if (a.bias) {
    fb_load_strided(a.bias + a.bias_base, a.bias_stride, col, t);
#pragma unroll
    for (int j = 0; j < FB_V; ++j) v[j] = FB_ROUND(v[j] + t[j]);
  }
  if (keep && a.sum) fb_store(a.sum, a.base + col, v);
#endif
}

// Writes normalised values times the scale plus the shift.
__device__ __forceinline__ void fb_write_norm(const FbRow& a, i64 col, float* v) {
  float t[FB_V];
  if (a.scale) {
    fb_load_strided(a.scale, a.scale_stride, col, t);
#pragma unroll
    for (int j = 0; j < FB_V; ++j) v[j] = v[j] * t[j];
  }
  if (a.shift) {
    fb_load_strided(a.shift, a.shift_stride, col, t);
#pragma unroll
    for (int j = 0; j < FB_V; ++j) v[j] = v[j] + t[j];
  }
  fb_store(a.y, a.base + col, v);
}

// softmax's running state: the max so far and the sum of e^(x - max).
struct FbSoftmax { float m, s; };
__device__ __forceinline__ FbSoftmax fb_softmax_merge(FbSoftmax a, FbSoftmax b) {
  if (a.m != a.m) return a;
  if (b.m != b.m) return b;
  const float m = a.m < b.m ? b.m : a.m;
  if (m == fb_neg_inf()) return {m, a.s + b.s};
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
__device__ __forceinline__ FbSoftmax fb_block_softmax(FbSoftmax v) {
  __shared__ FbSoftmax partial[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    FbSoftmax other = {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = fb_softmax_merge(v, other);
  }
  const int warps = blockDim.x >> 5;
  if (warps == 1) return v;
  __syncthreads();
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  FbSoftmax t = partial[0];
  for (int w = 1; w < warps; ++w) t = fb_softmax_merge(t, partial[w]);
  return t;
}

#if FB_OP == FB_SOFTMAX || FB_OP == FB_LOG_SOFTMAX
// ---- softmax, log_softmax ----------------------------------------------------------------------
// Writes the results of raw values v given the row's max m and sum s.
__device__ __forceinline__ void fb_finish(const FbRow& a, i64 col, float* v, float m, float s) {
#if FB_OP == FB_LOG_SOFTMAX
  const float log_s = logf(s);
#pragma unroll
  for (int j = 0; j < FB_V; ++j) v[j] = (v[j] - m) - log_s;
#else
  const float inv_s = 1.f / s;
#pragma unroll
  for (int j = 0; j < FB_V; ++j) v[j] = expf(v[j] - m) * inv_s;
#endif
  fb_store(a.y, a.base + col, v);
}

__device__ __forceinline__ void fb_row_registers(const FbRow& a, int chunks) {
  float v[FB_ITEMS];
  float m = fb_neg_inf();
#pragma unroll
  for (int k = 0; k < FB_CHUNKS; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < chunks) {
      fb_values(a, i64(c) * FB_V, &v[k * FB_V], true);
#pragma unroll
      for (int j = 0; j < FB_V; ++j) m = fb_max_f(m, v[k * FB_V + j]);
    }
  }
  m = fb_block_reduce(m, FbMax());
  // v becomes x - m (log_softmax) or e^(x - m) (softmax).
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < FB_CHUNKS; ++k) {
    if (threadIdx.x + k * blockDim.x < chunks) {
#pragma unroll
      for (int j = 0; j < FB_V; ++j) {
        const float d = v[k * FB_V + j] - m, e = expf(d);
        s += e;
        v[k * FB_V + j] = FB_OP == FB_LOG_SOFTMAX ? d : e;
      }
    }
  }
  s = fb_block_reduce(s, FbAdd());
  const float log_s = FB_OP == FB_LOG_SOFTMAX ? logf(s) : 0.f, inv_s = 1.f / s;
#pragma unroll
  for (int k = 0; k < FB_CHUNKS; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < chunks) {
      float* w = &v[k * FB_V];
#pragma unroll
      for (int j = 0; j < FB_V; ++j) w[j] = FB_OP == FB_LOG_SOFTMAX ? w[j] - log_s : w[j] * inv_s;
      fb_store(a.y, a.base + i64(c) * FB_V, w);
    }
  }
}

__device__ __forceinline__ void fb_row_streamed(const FbRow& a, int chunks) {
  FbSoftmax st = {fb_neg_inf(), 0.f};
  float v[FB_V];
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    fb_values(a, i64(c) * FB_V, v, true);
#pragma unroll
    for (int j = 0; j < FB_V; ++j) {
      const float x = v[j];
      if (st.m != st.m || x == fb_neg_inf()) continue;  // NaN sticks; -inf adds e^-inf = 0
      if (x != x) st.m = x;
      else if (x > st.m) { st.s = st.s * expf(st.m - x) + 1.f; st.m = x; }
      else st.s += expf(x - st.m);
    }
  }
  st = fb_block_softmax(st);
  // A row whose max is NaN or +inf is NaN in the reference (inf - inf in its sum).
  if (st.m != st.m || st.m == -fb_neg_inf()) st.s = __int_as_float(0x7fc00000);
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    fb_values(a, i64(c) * FB_V, v, false);
    fb_finish(a, i64(c) * FB_V, v, st.m, st.s);
  }
}

#else
// ---- layer_norm, rms_norm ----------------------------------------------------------------------
#define FB_RMS (FB_OP == FB_RMS_NORM)

// inv_denom: 1 / sqrt(var + eps), formed in double and rounded once.
__device__ __forceinline__ void fb_normalise(const FbRow& a, i64 col, float* v, float mean, float inv_denom) {
#pragma unroll
  for (int j = 0; j < FB_V; ++j) v[j] = (v[j] - mean) * inv_denom;
  fb_write_norm(a, col, v);
}

__device__ __forceinline__ void fb_row_registers(const FbRow& a, int chunks, i64 n, double eps) {
  float v[FB_ITEMS];
  float part = 0.f;
#pragma unroll
  for (int k = 0; k < FB_CHUNKS; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < chunks) {
      fb_values(a, i64(c) * FB_V, &v[k * FB_V], true);
#if !FB_RMS
#pragma unroll
      for (int j = 0; j < FB_V; ++j) part += v[k * FB_V + j];
#endif
    }
  }
  float mean = 0.f;
#if !FB_RMS
  mean = float(fb_block_reduce(double(part), FbAdd()) / double(n));
#endif
  part = 0.f;
#pragma unroll
  for (int k = 0; k < FB_CHUNKS; ++k) {
    if (threadIdx.x + k * blockDim.x < chunks) {
#pragma unroll
      for (int j = 0; j < FB_V; ++j) {
        const float d = v[k * FB_V + j] - mean;
        part += d * d;
      }
    }
  }
  const double squares = fb_block_reduce(double(part), FbAdd());
  const float inv_denom = float(1.0 / sqrt(squares / double(n) + eps));
#pragma unroll
  for (int k = 0; k < FB_CHUNKS; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < chunks) fb_normalise(a, i64(c) * FB_V, &v[k * FB_V], mean, inv_denom);
  }
}

__device__ __forceinline__ void fb_row_streamed(const FbRow& a, int chunks, i64 n, double eps) {
  float v[FB_V];
  float origin = 0.f;  // layer norm: deviations are summed from the row's first value
#if !FB_RMS
  fb_values(a, 0, v, false);
  origin = v[0];
#endif
  double s1 = 0, s2 = 0;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    fb_values(a, i64(c) * FB_V, v, true);
    float c1 = 0.f, c2 = 0.f;  // one chunk's sums in float, the row's in double
#pragma unroll
    for (int j = 0; j < FB_V; ++j) {
      const float d = v[j] - origin;
      c1 += d;
      c2 += d * d;
    }
    s1 += double(c1);
    s2 += double(c2);
  }
  s2 = fb_block_reduce(s2, FbAdd());
  double mean = 0, var = s2 / double(n);
#if !FB_RMS
  s1 = fb_block_reduce(s1, FbAdd());
  const double shift = s1 / double(n);
  mean = double(origin) + shift;
  var = var - shift * shift;
  if (var < 0) var = 0;
#endif
  const float m = float(mean), inv_denom = float(1.0 / sqrt(var + eps));
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    fb_values(a, i64(c) * FB_V, v, false);
    fb_normalise(a, i64(c) * FB_V, v, m, inv_denom);
  }
}
#endif

extern "C" __global__ void __launch_bounds__(FB_THREADS) fb_row(
    const fb_t* __restrict__ x, const fb_t* __restrict__ r, const fb_t* __restrict__ bias,
    const fb_t* __restrict__ scale, const fb_t* __restrict__ shift, fb_t* __restrict__ y, fb_t* __restrict__ sum,
    i64 rows, i64 n, i64 bias_row_stride, i64 bias_stride, i64 scale_stride, i64 shift_stride, double eps) {
  const int chunks = int(n / FB_V);
  const bool in_registers = chunks <= int(blockDim.x) * FB_CHUNKS;
  FbRow a = {x, r, bias, scale, shift, y, sum, 0, 0, bias_stride, scale_stride, shift_stride};
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    a.base = row * n;
    a.bias_base = row * bias_row_stride;
#if FB_OP == FB_SOFTMAX || FB_OP == FB_LOG_SOFTMAX
    if (in_registers) fb_row_registers(a, chunks);
    else fb_row_streamed(a, chunks);
#else
    if (in_registers) fb_row_registers(a, chunks, n, eps);
    else fb_row_streamed(a, chunks, n, eps);
#endif
  }
}
)CUDA";

const char* op_define(RowOp op) {
  switch (op) {
    case RowOp::Softmax: return "FB_SOFTMAX";
    case RowOp::LogSoftmax: return "FB_LOG_SOFTMAX";
    case RowOp::LayerNorm: return "FB_LAYER_NORM";
    case RowOp::RmsNorm: return "FB_RMS_NORM";
  }
  return "";
}

}  // namespace

std::string RowVariant::key() const {
  return std::string(op_define(op)) + "/" + std::string(dtype_name(dtype)) + (residual ? "/residual" : "") + "/v" +
         std::to_string(vector) + "/i" + std::to_string(items);
}

std::string row_source(const RowVariant& v) {
  FUSEBOX_CHECK(v.dtype == DType::F32 || v.dtype == DType::F16 || v.dtype == DType::BF16) << "row kernel dtype";
  FUSEBOX_CHECK(!v.residual || v.op == RowOp::LayerNorm || v.op == RowOp::RmsNorm) << "a residual softmax";
  std::ostringstream os;
  os << prelude_source();
  os << "\n// ---- row kernel " << v.key() << "\n";
  os << "#define FB_SOFTMAX 0\n#define FB_LOG_SOFTMAX 1\n#define FB_LAYER_NORM 2\n#define FB_RMS_NORM 3\n";
  os << "#define FB_OP " << op_define(v.op) << "\n";
  os << "#define FB_RESIDUAL " << (v.residual ? 1 : 0) << "\n";
  os << "#define FB_V " << v.vector << "\n";
  os << "#define FB_ITEMS " << v.items << "\n";
  os << "#define FB_THREADS " << row_threads(v.op) << "\n";
  os << float_storage_defines(v.dtype);
  os << kBody;
  return os.str();
}

std::vector<RowVariant> all_row_variants() {
  std::vector<RowVariant> all;
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    for (int vector : {1, 16 / dtype_size(d)}) {
      for (RowOp op : {RowOp::Softmax, RowOp::LogSoftmax, RowOp::LayerNorm, RowOp::RmsNorm}) {
        // Every register budget for the 16-byte f32 variants; the largest for the others.
        for (int items : kRowItemChoices) {
          if (items != kRowItems && (d != DType::F32 || vector == 1)) continue;
          all.push_back({op, d, false, vector, items});
          if (op == RowOp::LayerNorm || op == RowOp::RmsNorm) all.push_back({op, d, true, vector, items});
        }
      }
    }
  }
  return all;
}

}  // namespace fusebox::cuda
