// Float transcendental functions written as straight-line arithmetic so that loops calling them
// vectorise (no calls, no branches; selects instead). Accuracy: relative error below 2e-7 over
// the ranges where the result is a normal float (checked against <cmath> in
// tests/unit/simd_math_test.cpp); outside them the results saturate like <cmath> does, except
// that results below the smallest normal float flush to 0.
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

// exp(x): x = n*ln2 + r with |r| <= ln2/2, exp(r) by its Taylor series to degree 7 (truncation
// error below 1e-8 relative on that interval), times 2^n built in the exponent bits.
inline float exp(float x) {
  constexpr float kLn2Hi = 0.693145752f;    // ln 2 split so n*kLn2Hi is exact for |n| < 2^11
  constexpr float kLn2Lo = 1.42860677e-06f;
  constexpr float kLog2e = 1.44269504f;
  float xc = x < -87.3365f ? -87.3365f : x;  // below: the result is not a normal float
  xc = xc > 88.7228f ? 88.7228f : xc;
  float n = simd::round_even(xc * kLog2e);
  float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t e = static_cast<int32_t>(n) + 127;
  float scale = std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
  float y = p * scale;
  y = x > 88.7228f ? __builtin_inff() : y;
  y = x < -87.3365f ? 0.0f : y;
  return x != x ? x : y;
}

// tanh(x): an odd Taylor polynomial near 0 (where 1 - 2/(e^2x + 1) would cancel), the
// exponential form elsewhere, 1 beyond |x| = 9 (tanh rounds to 1 there).
inline float tanh(float x) {
  float ax = x < 0 ? -x : x;
  float x2 = x * x;
  // Coefficients of the Maclaurin series of tanh (odd terms up to x^15).
  float p = 929569.0f / 638512875.0f * -1.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  float small = x + x * x2 * p;
  float e = simd::exp(2.0f * (ax > 9.0f ? 9.0f : ax));
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = x < 0 ? -big : big;
  float y = ax < 0.4f ? small : big;
  return x != x ? x : y;
}

// 1 / (1 + e^-x), written with exp of a non-positive argument on both sides.
inline float sigmoid(float x) {
  float e = simd::exp(x < 0 ? x : -x);
  float pos = 1.0f / (1.0f + e);
  float neg = e / (1.0f + e);
  return x < 0 ? neg : pos;
}

}  // namespace fusebox::cpu::simd
