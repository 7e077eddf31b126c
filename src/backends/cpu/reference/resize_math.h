// How resize rounds interpolated values into integer dtypes, for the reference kernel and the CPU
// transform loops; the index arithmetic itself is shared by every backend (backends/resize_index.h).
#pragma once

#include <cmath>
#include <limits>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/resize_index.h"

namespace fusebox::cpu {

// Integers round half away from zero and saturate (a u8 image stays in 0..255); floats round
// once from double.
template <DType D>
typename DTypeTraits<D>::Storage store_double(double v) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  if constexpr (D == DType::F32 || D == DType::F64 || D == DType::F16 || D == DType::BF16) {
    return T::store(static_cast<typename T::Compute>(v));
  } else if constexpr (D == DType::Bool) {
    return v != 0;
  } else {
    v = std::round(v);
    if (!(v == v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<S>::min())) return std::numeric_limits<S>::min();
    if (v >= static_cast<double>(std::numeric_limits<S>::max())) return std::numeric_limits<S>::max();
    return static_cast<S>(v);
  }
}

}  // namespace fusebox::cpu
