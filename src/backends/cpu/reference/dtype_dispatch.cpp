#include "backends/cpu/reference/dtype_dispatch.h"

#include <cmath>
#include <cstring>

namespace fusebox::cpu {

std::vector<int64_t> int8_values(const Array& a) {
  FUSEBOX_CHECK(a.dtype() == DType::U8 || a.dtype() == DType::I8) << "8-bit integer operands expected";
  std::vector<int64_t> v(static_cast<size_t>(a.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = a.dtype() == DType::U8 ? int64_t(a.data<uint8_t>()[i]) : int64_t(a.data<int8_t>()[i]);
  }
  return v;
}

std::vector<int64_t> broadcast_strides(std::span<const int64_t> in, std::span<const int64_t> out) {
  FUSEBOX_CHECK(in.size() <= out.size()) << "broadcast operand has higher rank than the result";
  std::vector<int64_t> in_strides = contiguous_strides(in);
  std::vector<int64_t> strides(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    FUSEBOX_CHECK(in[i] == out[lead + i] || in[i] == 1) << "operand does not broadcast to result";
    strides[lead + i] = in[i] == 1 ? 0 : in_strides[i];
  }
  return strides;
}

int64_t f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}

float f64_to_f32_odd(double v) {
  float f = static_cast<float>(v);
  if (v != v || double(f) == v || std::isinf(v)) return f;
  // Inexact: step back toward zero (truncation), then set the last bit as a sticky bit.
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

MultiIndex::MultiIndex(std::span<const int64_t> shape, std::vector<std::vector<int64_t>> strides)
    : shape_(shape.begin(), shape.end()),
      strides_(std::move(strides)),
      index_(shape.size(), 0),
      offsets_(strides_.size(), 0) {
  for (int64_t d : shape_)
    if (d == 0) done_ = true;
}

void MultiIndex::next() {
  for (size_t d = shape_.size(); d-- > 0;) {
    if (++index_[d] < shape_[d]) {
      for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += strides_[k][d];
      return;
    }
    for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] -= strides_[k][d] * (index_[d] - 1);
    index_[d] = 0;
  }
  done_ = true;
}

}  // namespace fusebox::cpu
