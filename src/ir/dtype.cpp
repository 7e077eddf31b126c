#include "ir/dtype.h"

#include <cstring>

namespace fusebox {

std::string_view dtype_name(DType t) {
  switch (t) {
#define FUSEBOX_DTYPE_NAME(name, kw, ctype, size) \
  case DType::name:                               \
    return kw;
    FUSEBOX_DTYPES(FUSEBOX_DTYPE_NAME)
#undef FUSEBOX_DTYPE_NAME
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
#define FUSEBOX_DTYPE_PARSE(n, kw, ctype, size) \
  if (name == kw) return DType::n;
  FUSEBOX_DTYPES(FUSEBOX_DTYPE_PARSE)
#undef FUSEBOX_DTYPE_PARSE
  return std::nullopt;
}

int dtype_size(DType t) {
  switch (t) {
#define FUSEBOX_DTYPE_SIZE(name, kw, ctype, size) \
  case DType::name:                               \
    return size;
    FUSEBOX_DTYPES(FUSEBOX_DTYPE_SIZE)
#undef FUSEBOX_DTYPE_SIZE
  }
  return 0;
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F64;
}
bool is_integer(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64 || t == DType::U8 ||
         t == DType::U16 || t == DType::U32 || t == DType::U64;
}
bool is_signed(DType t) {
  return is_float(t) || t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}

static uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
static float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp == 0) {
    if (man == 0) return float_of(sign);
    // Subnormal: value = man * 2^-24.
    float v = float(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t u = bits_of(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan (keep nan quiet)
    return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u));
  }
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value / 2^-24, rounded to nearest even.
    float v = float_of(abs) * 16777216.0f;  // exact scaling by 2^24
    uint32_t m = uint32_t(v);
    float rem = v - float(m);
    if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  uint32_t exp = (abs >> 23) - 112u;
  uint32_t man = abs & 0x7fffffu;
  uint32_t h = (exp << 10) | (man >> 13);
  uint32_t rest = man & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent: fine
  return uint16_t(sign | h);
}

float bf16_to_f32(uint16_t h) { return float_of(uint32_t(h) << 16); }

uint16_t f32_to_bf16(float f) {
  uint32_t u = bits_of(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet nan
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return uint16_t(u >> 16);
}

}  // namespace fusebox
