// Float transcendental functions written as straight-line arithmetic so that loops calling them
// vectorise (no calls, no branches; selects instead). They are the tile interpreter's versions;
// generated code (region_jit.cpp) uses the same reductions and polynomials with fused
// multiply-adds. Accuracy: relative error below 4e-7 over the ranges where the result is a
// normal float (checked against <cmath> in tests/unit/region_codegen_test.cpp); outside them the
// results saturate like <cmath> does, except that results below the smallest normal float flush
// to 0.
#pragma once

#include <bit>
#include <cstdint>

namespace fusebox::cpu::simd {

// Round half to even without a libm call (GCC does not vectorise __builtin_roundevenf): adding
// and subtracting 2^23 leaves the nearest integer, ties to even, for |x| < 2^23; larger floats are
// integers already. The sign is put back so -0.3 rounds to -0 as numpy does.
inline float round_even(float x) {
  uint32_t bits = std::bit_cast<uint32_t>(x);
  float ax = std::bit_cast<float>(bits & 0x7fffffffu);
  // A select by bit mask: GCC (trapping math) will not turn a ?: around an FP add into a blend.
  uint32_t rounded = std::bit_cast<uint32_t>((ax + 8388608.0f) - 8388608.0f);
  uint32_t small = 0u - static_cast<uint32_t>(ax < 8388608.0f);  // NaN: false, keeps x
  uint32_t r = (rounded & small) | (std::bit_cast<uint32_t>(ax) & ~small);
  return std::bit_cast<float>(r | (bits & 0x80000000u));
}

inline constexpr float kLn2Hi = 0.693145752f;  // ln 2 split so n*kLn2Hi is exact for |n| < 2^11
inline constexpr float kLn2Lo = 1.42860677e-06f;
inline constexpr float kLog2e = 1.44269504f;

// 2^n for an integer n in the normal exponent range [-126, 127], built in the exponent bits.
inline float pow2i(int32_t n) { return std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23); }

// e^r - 1 for |r| <= ln2/2 as r + r^2 * P(r), exact for tiny r. P is the degree-4 polynomial
// interpolating (e^r - 1 - r) / r^2 at the 5 Chebyshev nodes of [-ln2/2, ln2/2] (fitted in long
// double, rounded to float): relative error of e^r - 1 below 9e-8 with fused multiply-adds,
// 1.5 ulp; Taylor terms would need degree 5 for the same.
inline constexpr float kExpm1P[] = {0.5f, 1.666657776e-01f, 4.166655615e-02f, 8.363173343e-03f, 1.392617589e-03f};
inline float expm1_reduced(float r) {
  float p = kExpm1P[4];
  p = p * r + kExpm1P[3];
  p = p * r + kExpm1P[2];
  p = p * r + kExpm1P[1];
  p = p * r + kExpm1P[0];
  return r + (r * r) * p;
}

// exp(x): x = n*ln2 + r with |r| <= ln2/2, e^r = 1 + expm1_reduced(r), times 2^n in two halves
// (n reaches 128 just below the overflow threshold, where 2^n alone is not a float).
inline float exp(float x) {
  float xc = x < -87.3365f ? -87.3365f : x;  // below: the result is not a normal float
  xc = xc > 88.7228f ? 88.7228f : xc;
  xc = x != x ? 0.0f : xc;
  float n = simd::round_even(xc * kLog2e);
  float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  int32_t ni = static_cast<int32_t>(n), half = ni >> 1;
  float y = ((1.0f + expm1_reduced(r)) * pow2i(half)) * pow2i(ni - half);
  y = x > 88.7228f ? __builtin_inff() : y;
  y = x < -87.3365f ? 0.0f : y;
  return x != x ? x : y;
}

// tanh|x| = m / (m + 2) with m = e^(2|x|) - 1 computed without cancellation near 0; beyond
// |x| = 10 tanh rounds to 1 (at 9 it still rounds to 1 - 2^-24).
inline float tanh(float x) {
  float ax = x < 0 ? -x : x;
  float y = 2.0f * (ax > 10.0f ? 10.0f : ax);
  y = x != x ? 0.0f : y;
  float n = simd::round_even(y * kLog2e);
  float r = (y - n * kLn2Hi) - n * kLn2Lo;
  float s = pow2i(static_cast<int32_t>(n));
  float m = (s - 1.0f) + s * expm1_reduced(r);
  float t = m / (m + 2.0f);
  t = std::bit_cast<float>(std::bit_cast<uint32_t>(t) | (std::bit_cast<uint32_t>(x) & 0x80000000u));
  return x != x ? x : t;
}

// 1 / (1 + e^-x), written with exp of a non-positive argument on both sides.
inline float sigmoid(float x) {
  float e = simd::exp(x < 0 ? x : -x);
  float pos = 1.0f / (1.0f + e);
  float neg = e / (1.0f + e);
  return x < 0 ? neg : pos;
}

}  // namespace fusebox::cpu::simd
