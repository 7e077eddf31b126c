#include "backends/cuda/prelude.h"

namespace fusebox::cuda {

std::string_view prelude_source() {
  static constexpr std::string_view kSource = R"CUDA(
typedef signed char i8; typedef unsigned char u8; typedef short i16; typedef unsigned short u16;
typedef int i32; typedef unsigned int u32; typedef long long i64; typedef unsigned long long u64;

template <typename S, int V> struct alignas(sizeof(S) * V) Pack { S v[V]; };

// ---- f16 and bf16 storage <-> float (round to nearest even; NaN stays a quiet NaN with its
// payload's top bits, as fusebox::f32_to_f16 keeps them) --------------------------------------
__device__ __forceinline__ float fb_f16_load(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 fb_f16_store(float f) {
  const u32 u = __float_as_uint(f), abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return u16(((u >> 16) & 0x8000u) | 0x7c00u | 0x200u | ((abs >> 13) & 0x3ffu));
  u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
__device__ __forceinline__ float fb_bf16_load(u16 h) { return __uint_as_float(u32(h) << 16); }
__device__ __forceinline__ u16 fb_bf16_store(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return u16((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return u16(u >> 16);
}
// A float rounded to f16 / bf16 precision, kept as a float (values of those dtypes between steps).
__device__ __forceinline__ float fb_f16_round(float f) { return fb_f16_load(fb_f16_store(f)); }
__device__ __forceinline__ float fb_bf16_round(float f) { return fb_bf16_load(fb_bf16_store(f)); }

// ---- casts -----------------------------------------------------------------------------------
// Float to integer: truncation toward zero, NaN to 0, saturating at the int64 range; narrower
// integers then wrap (as fusebox's f64_to_i64 and a narrowing static_cast).
__device__ __forceinline__ i64 fb_f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return 9223372036854775807ll;
  if (v <= -9.2233720368547758e18) return (-9223372036854775807ll - 1);
  return (i64)v;
}
// Rounds to float with round-to-odd, so a second rounding to f16/bf16 is the correct one.
__device__ __forceinline__ float fb_f64_to_f32_odd(double v) {
  float f = (float)v;
  if (v != v || (double)f == v || isinf(v)) return f;
  if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f);
  return __uint_as_float(__float_as_uint(f) | 1u);
}
// An integer rounded to nearest even with `bits` significant bits (exact in float, then in f16
// or bf16: one rounding in all).
__device__ __forceinline__ float fb_int_to_float_bits(i64 v, int bits) {
  const bool neg = v < 0;
  u64 u = neg ? u64(0) - u64(v) : u64(v);
  int top = 63;
  while (top > 0 && !((u >> top) & 1u)) --top;
  double r;
  if (top < bits) {
    r = (double)u;
  } else {
    const int shift = top - bits + 1;
    u64 keep = u >> shift;
    const u64 rem = u & ((u64(1) << shift) - 1), half = u64(1) << (shift - 1);
    if (rem > half || (rem == half && (keep & 1u))) ++keep;
    r = ldexp((double)keep, shift);
  }
  return (float)(neg ? -r : r);
}

// ---- unary steps -----------------------------------------------------------------------------
template <typename T> struct fb_unsigned;
template <> struct fb_unsigned<i8> { typedef u8 type; };
template <> struct fb_unsigned<u8> { typedef u8 type; };
template <> struct fb_unsigned<i16> { typedef u16 type; };
template <> struct fb_unsigned<u16> { typedef u16 type; };
template <> struct fb_unsigned<i32> { typedef u32 type; };
template <> struct fb_unsigned<u32> { typedef u32 type; };
template <> struct fb_unsigned<i64> { typedef u64 type; };
template <> struct fb_unsigned<u64> { typedef u64 type; };

__device__ __forceinline__ float fb_exp(float x) { return expf(x); }
__device__ __forceinline__ double fb_exp(double x) { return exp(x); }
__device__ __forceinline__ float fb_log(float x) { return logf(x); }
__device__ __forceinline__ double fb_log(double x) { return log(x); }
__device__ __forceinline__ float fb_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double fb_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float fb_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double fb_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float fb_erf(float x) { return erff(x); }
__device__ __forceinline__ double fb_erf(double x) { return erf(x); }
__device__ __forceinline__ float fb_sin(float x) { return sinf(x); }
__device__ __forceinline__ double fb_sin(double x) { return sin(x); }
__device__ __forceinline__ float fb_cos(float x) { return cosf(x); }
__device__ __forceinline__ double fb_cos(double x) { return cos(x); }
__device__ __forceinline__ float fb_tan(float x) { return tanf(x); }
__device__ __forceinline__ double fb_tan(double x) { return tan(x); }
__device__ __forceinline__ float fb_asin(float x) { return asinf(x); }
__device__ __forceinline__ double fb_asin(double x) { return asin(x); }
__device__ __forceinline__ float fb_acos(float x) { return acosf(x); }
__device__ __forceinline__ double fb_acos(double x) { return acos(x); }
__device__ __forceinline__ float fb_atan(float x) { return atanf(x); }
__device__ __forceinline__ double fb_atan(double x) { return atan(x); }
__device__ __forceinline__ float fb_sinh(float x) { return sinhf(x); }
__device__ __forceinline__ double fb_sinh(double x) { return sinh(x); }
__device__ __forceinline__ float fb_cosh(float x) { return coshf(x); }
__device__ __forceinline__ double fb_cosh(double x) { return cosh(x); }
__device__ __forceinline__ float fb_asinh(float x) { return asinhf(x); }
__device__ __forceinline__ double fb_asinh(double x) { return asinh(x); }
__device__ __forceinline__ float fb_acosh(float x) { return acoshf(x); }
__device__ __forceinline__ double fb_acosh(double x) { return acosh(x); }
__device__ __forceinline__ float fb_atanh(float x) { return atanhf(x); }
__device__ __forceinline__ double fb_atanh(double x) { return atanh(x); }
__device__ __forceinline__ float fb_floor(float x) { return floorf(x); }
__device__ __forceinline__ double fb_floor(double x) { return floor(x); }
__device__ __forceinline__ float fb_ceil(float x) { return ceilf(x); }
__device__ __forceinline__ double fb_ceil(double x) { return ceil(x); }
__device__ __forceinline__ float fb_fabs(float x) { return fabsf(x); }
__device__ __forceinline__ double fb_fabs(double x) { return fabs(x); }
__device__ __forceinline__ float fb_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double fb_pow(double x, double y) { return pow(x, y); }
__device__ __forceinline__ float fb_fmod(float x, float y) { return fmodf(x, y); }
__device__ __forceinline__ double fb_fmod(double x, double y) { return fmod(x, y); }
__device__ __forceinline__ float fb_copysign(float x, float y) { return copysignf(x, y); }
__device__ __forceinline__ double fb_copysign(double x, double y) { return copysign(x, y); }

template <typename C> __device__ __forceinline__ C fb_neg_f(C x) { return -x; }
template <typename T> __device__ __forceinline__ T fb_neg_i(T x) {
  typedef typename fb_unsigned<T>::type U;
  return T(U(U(0) - U(x)));
}
template <typename T> __device__ __forceinline__ T fb_abs_i(T x) { return T(-1) < T(0) && x < T(0) ? fb_neg_i(x) : x; }
template <typename C> __device__ __forceinline__ C fb_rsqrt(C x) { return C(1) / fb_sqrt(x); }
template <typename C> __device__ __forceinline__ C fb_reciprocal(C x) { return C(1) / x; }
template <typename C> __device__ __forceinline__ C fb_sigmoid(C x) {
  if (x >= C(0)) return C(1) / (C(1) + fb_exp(-x));
  const C e = fb_exp(x);
  return e / (C(1) + e);
}
template <typename C> __device__ __forceinline__ C fb_relu_f(C x) { return x != x ? x : (x > C(0) ? x : C(0)); }
template <typename T> __device__ __forceinline__ T fb_relu_i(T x) { return x > T(0) ? x : T(0); }
template <typename C> __device__ __forceinline__ C fb_gelu(C x) {
  return C(0.5) * x * (C(1) + fb_erf(x / C(1.41421356237309504880)));
}
template <typename C> __device__ __forceinline__ C fb_gelu_tanh(C x) {
  const C k = C(0.79788456080286535588);  // sqrt(2 / pi)
  return C(0.5) * x * (C(1) + fb_tanh(k * (x + C(0.044715) * x * x * x)));
}
template <typename C> __device__ __forceinline__ C fb_silu(C x) { return x * fb_sigmoid(x); }
template <typename C> __device__ __forceinline__ C fb_hardswish(C x) {
  C t = x + C(3);
  t = t < C(0) ? C(0) : t;
  t = t > C(6) ? C(6) : t;
  return x * t / C(6);
}
template <typename C> __device__ __forceinline__ C fb_round(C x) {
  const C f = fb_floor(x), diff = x - f;
  C r;
  if (diff < C(0.5)) r = f;
  else if (diff > C(0.5)) r = f + C(1);
  else r = fb_fmod(f, C(2)) == C(0) ? f : f + C(1);
  return r == C(0) ? fb_copysign(C(0), x) : r;
}

// ---- binary steps ----------------------------------------------------------------------------
template <typename T> __device__ __forceinline__ T fb_add_i(T x, T y) { typedef typename fb_unsigned<T>::type U; return T(U(U(x) + U(y))); }
template <typename T> __device__ __forceinline__ T fb_sub_i(T x, T y) { typedef typename fb_unsigned<T>::type U; return T(U(U(x) - U(y))); }
template <typename T> __device__ __forceinline__ T fb_mul_i(T x, T y) {
  typedef typename fb_unsigned<T>::type U;
  return T(u64(U(x)) * u64(U(y)));
}
template <typename T> __device__ __forceinline__ T fb_div_i(T x, T y) {
  if (y == T(0)) return T(0);
  if (T(-1) < T(0) && y == T(-1)) return fb_sub_i(T(0), x);
  return T(x / y);
}
template <typename T> __device__ __forceinline__ T fb_mod_i(T x, T y) {
  if (y == T(0)) return T(0);
  if (T(-1) < T(0)) {
    if (y == T(-1)) return T(0);
    T r = T(x % y);
    if (r != T(0) && ((r < T(0)) != (y < T(0)))) r = T(r + y);
    return r;
  }
  return T(x % y);
}
template <typename T> __device__ __forceinline__ T fb_fmod_i(T x, T y) {
  if (y == T(0)) return T(0);
  if (T(-1) < T(0) && y == T(-1)) return T(0);
  return T(x % y);
}
template <typename C> __device__ __forceinline__ C fb_mod_f(C x, C y) {
  C r = fb_fmod(x, y);
  if (r != C(0)) {
    if ((r < C(0)) != (y < C(0))) r += y;
  } else {
    r = fb_copysign(C(0), y);
  }
  return r;
}
template <typename T> __device__ __forceinline__ T fb_pow_i(T base, T e) {
  if (T(-1) < T(0) && e < T(0)) {
    if (base == T(1)) return T(1);
    if (base == T(-1)) return (e & T(1)) ? T(-1) : T(1);
    return T(0);
  }
  u64 result = 1, b = u64(i64(base)), k = u64(i64(e));
  while (k) {
    if (k & 1u) result *= b;
    b *= b;
    k >>= 1;
  }
  return T(result);
}
template <typename C> __device__ __forceinline__ C fb_max_f(C x, C y) { if (x != x) return x; if (y != y) return y; return x < y ? y : x; }
template <typename C> __device__ __forceinline__ C fb_min_f(C x, C y) { if (x != x) return x; if (y != y) return y; return y < x ? y : x; }
template <typename T> __device__ __forceinline__ T fb_max_i(T x, T y) { return x < y ? y : x; }
template <typename T> __device__ __forceinline__ T fb_min_i(T x, T y) { return y < x ? y : x; }
template <typename T> __device__ __forceinline__ T fb_shl(T x, T s) { return s >= T(8 * sizeof(T)) ? T(0) : T(x << s); }
template <typename T> __device__ __forceinline__ T fb_shr(T x, T s) { return s >= T(8 * sizeof(T)) ? T(0) : T(x >> s); }

// ---- block reductions (blockDim.x a multiple of 32): every thread gets the same result, the
// warps' partials combined in warp order ---------------------------------------------------------
struct FbAdd { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct FbMul { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a * b; } };
struct FbMax { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return fb_max_f(a, b); } };
struct FbMin { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return fb_min_f(a, b); } };

template <typename T, typename F> __device__ __forceinline__ T fb_block_reduce(T v, F f) {
  __shared__ T partial[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warps = blockDim.x >> 5;
  if (warps == 1) return v;
  __syncthreads();  // the previous reduction's readers are done
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  T t = partial[0];
  for (int w = 1; w < warps; ++w) t = f(t, partial[w]);
  return t;
}
)CUDA";
  return kSource;
}

std::string float_storage_defines(DType dtype) {
  switch (dtype) {
    case DType::F16:
      return "typedef u16 fb_t;\n#define FB_LOAD(s) fb_f16_load(s)\n#define FB_STORE(f) fb_f16_store(f)\n"
             "#define FB_ROUND(f) fb_f16_round(f)\n";
    case DType::BF16:
      return "typedef u16 fb_t;\n#define FB_LOAD(s) fb_bf16_load(s)\n#define FB_STORE(f) fb_bf16_store(f)\n"
             "#define FB_ROUND(f) fb_bf16_round(f)\n";
    default: return "typedef float fb_t;\n#define FB_LOAD(s) (s)\n#define FB_STORE(f) (f)\n#define FB_ROUND(f) (f)\n";
  }
}

}  // namespace fusebox::cuda
