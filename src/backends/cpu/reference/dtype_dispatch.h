// Helpers the reference kernels share: storage/compute types per dtype, a dtype switch that
// calls a templated lambda, and numpy-broadcast index mapping.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ir/array.h"
#include "ir/check.h"
#include "ir/dtype.h"

namespace fusebox::cpu {

// Storage is what the buffer holds; Compute is what arithmetic runs in (f16/bf16 -> float).
template <DType D> struct DTypeTraits;
template <> struct DTypeTraits<DType::F32> {
  using Storage = float; using Compute = float;
  static Compute load(Storage s) { return s; }
  static Storage store(Compute c) { return c; }
};
template <> struct DTypeTraits<DType::F64> {
  using Storage = double; using Compute = double;
  static Compute load(Storage s) { return s; }
  static Storage store(Compute c) { return c; }
};
template <> struct DTypeTraits<DType::F16> {
  using Storage = uint16_t; using Compute = float;
  static Compute load(Storage s) { return f16_to_f32(s); }
  static Storage store(Compute c) { return f32_to_f16(c); }
};
template <> struct DTypeTraits<DType::BF16> {
  using Storage = uint16_t; using Compute = float;
  static Compute load(Storage s) { return bf16_to_f32(s); }
  static Storage store(Compute c) { return f32_to_bf16(c); }
};
#define FUSEBOX_PLAIN_TRAITS(D, T)                   \
  template <> struct DTypeTraits<DType::D> {         \
    using Storage = T; using Compute = T;            \
    static Compute load(Storage s) { return s; }     \
    static Storage store(Compute c) { return c; }    \
  };
FUSEBOX_PLAIN_TRAITS(I8, int8_t)
FUSEBOX_PLAIN_TRAITS(U8, uint8_t)
FUSEBOX_PLAIN_TRAITS(I32, int32_t)
FUSEBOX_PLAIN_TRAITS(I64, int64_t)
FUSEBOX_PLAIN_TRAITS(Bool, bool)
FUSEBOX_PLAIN_TRAITS(I16, int16_t)
FUSEBOX_PLAIN_TRAITS(U16, uint16_t)
FUSEBOX_PLAIN_TRAITS(U32, uint32_t)
FUSEBOX_PLAIN_TRAITS(U64, uint64_t)
#undef FUSEBOX_PLAIN_TRAITS

template <DType D>
inline constexpr bool kIsFloatType =
    D == DType::F32 || D == DType::F64 || D == DType::F16 || D == DType::BF16;
template <DType D>
inline constexpr bool kIsIntType = D == DType::I8 || D == DType::U8 || D == DType::I32 || D == DType::I64 ||
                                   D == DType::I16 || D == DType::U16 || D == DType::U32 || D == DType::U64;

// Float to integer as Array::set_f64 does it: truncation toward zero, NaN to 0, saturating at
// the int64 range (no conversion is undefined behaviour); narrowing further then wraps.
int64_t f64_to_i64(double v);

// Rounds to float with round-to-odd: rounding that float again to f16 or bf16 (at least two bits
// shorter) then gives the correctly rounded value of the double, not a twice-rounded one.
float f64_to_f32_odd(double v);

// Stores a value computed in double with one rounding: f16/bf16 through f64_to_f32_odd,
// integers as f64_to_i64 then wrapped to the width, bool as v != 0.
template <DType D>
typename DTypeTraits<D>::Storage store_f64(double v) {
  using S = typename DTypeTraits<D>::Storage;
  if constexpr (D == DType::F64) return v;
  else if constexpr (D == DType::F32) return static_cast<float>(v);
  else if constexpr (D == DType::F16 || D == DType::BF16) return DTypeTraits<D>::store(f64_to_f32_odd(v));
  else if constexpr (D == DType::Bool) return v != 0.0;
  else return static_cast<S>(f64_to_i64(v));
}

// What a buffer of dtype D holds.
template <DType D>
using Storage = typename DTypeTraits<D>::Storage;

// Calls f.template operator()<D>() for the runtime dtype t:
//   visit_dtype(t, [&]<DType D>() { using T = DTypeTraits<D>; ... });
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::F32: return f.template operator()<DType::F32>();
    case DType::F16: return f.template operator()<DType::F16>();
    case DType::BF16: return f.template operator()<DType::BF16>();
    case DType::F64: return f.template operator()<DType::F64>();
    case DType::I8: return f.template operator()<DType::I8>();
    case DType::U8: return f.template operator()<DType::U8>();
    case DType::I32: return f.template operator()<DType::I32>();
    case DType::I64: return f.template operator()<DType::I64>();
    case DType::Bool: return f.template operator()<DType::Bool>();
    case DType::I16: return f.template operator()<DType::I16>();
    case DType::U16: return f.template operator()<DType::U16>();
    case DType::U32: return f.template operator()<DType::U32>();
    case DType::U64: return f.template operator()<DType::U64>();
  }
  FUSEBOX_CHECK(false) << "bad dtype";
  return f.template operator()<DType::F32>();
}

// The values of a u8 or i8 array as int64 (the integer contractions' operands).
std::vector<int64_t> int8_values(const Array& a);

// Strides (in elements) to read an operand of shape `in` broadcast to `out` (numpy rules):
// 0 on stretched and missing leading dims. Result has out.size() entries.
std::vector<int64_t> broadcast_strides(std::span<const int64_t> in, std::span<const int64_t> out);

// Walks a row-major index space, tracking the flat offsets of several operands with their own
// strides. Usage: for (MultiIndex it(shape, {s0, s1}); !it.done(); it.next()) use it.offset(k).
class MultiIndex {
 public:
  MultiIndex(std::span<const int64_t> shape, std::vector<std::vector<int64_t>> strides);
  bool done() const { return done_; }
  void next();
  int64_t offset(size_t operand) const { return offsets_[operand]; }
  const std::vector<int64_t>& index() const { return index_; }

 private:
  std::vector<int64_t> shape_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> index_;
  std::vector<int64_t> offsets_;
  bool done_ = false;
};

}  // namespace fusebox::cpu
