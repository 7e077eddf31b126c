// Element types of tensors, with their sizes, names and the f16/bf16 conversions.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fusebox {

// The order is part of the text format only through the names below.
#define FUSEBOX_DTYPES(X)      \
  X(F32, "f32", float, 4)      \
  X(F16, "f16", uint16_t, 2)   \
  X(BF16, "bf16", uint16_t, 2) \
  X(F64, "f64", double, 8)     \
  X(I8, "i8", int8_t, 1)       \
  X(U8, "u8", uint8_t, 1)      \
  X(I32, "i32", int32_t, 4)    \
  X(I64, "i64", int64_t, 8)    \
  X(Bool, "bool", bool, 1)     \
  X(I16, "i16", int16_t, 2)    \
  X(U16, "u16", uint16_t, 2)   \
  X(U32, "u32", uint32_t, 4)   \
  X(U64, "u64", uint64_t, 8)

enum class DType : uint8_t {
#define FUSEBOX_DTYPE_ENUM(name, kw, ctype, size) name,
  FUSEBOX_DTYPES(FUSEBOX_DTYPE_ENUM)
#undef FUSEBOX_DTYPE_ENUM
};

inline constexpr int kNumDTypes = 13;

std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view name);
int dtype_size(DType t);
bool is_float(DType t);     // f32 f16 bf16 f64
bool is_integer(DType t);   // i8 i16 i32 i64 u8 u16 u32 u64
bool is_signed(DType t);    // floats and i8 i16 i32 i64

// IEEE binary16 and bfloat16 <-> f32, rounding to nearest even; NaN and infinities preserved.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

}  // namespace fusebox
