#include "ir/array.h"

#include <cstdint>
#include <cstdlib>
#include <new>

#include "ir/block_pool.h"
#include "ir/check.h"
#include "ir/size.h"

namespace fusebox {
namespace {

// The bytes of an array of at most kSmallArrayBytes, aligned by hand inside the block.
constexpr size_t kSmallArrayBytes = 64;
struct SmallArrayBlock {
  uint8_t bytes[kSmallArrayBytes + kArrayAlignment - 1];
};

}  // namespace

int64_t product(std::span<const int64_t> dims) {
  // Shapes from user input are checked (ir/size.h) before any array takes them.
  std::optional<int64_t> n = checked_num_elements(dims);
  FUSEBOX_CHECK(n) << "array shape " << check_size(dims).message();
  return *n;
}

std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

Array::Array(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) FUSEBOX_CHECK(d >= 0) << "negative dim in array shape";
  numel_ = product(shape_);
  // Always allocate at least one byte so raw() of an empty array is a valid pointer.
  const size_t bytes = std::max<size_t>(nbytes(), 1);
  if (bytes <= kSmallArrayBytes) {
    // One pooled block holds the control block and the bytes (ir/block_pool.h): the lazy API
    // makes a scalar per op, which took two mallocs.
    auto block = std::allocate_shared<SmallArrayBlock>(PoolAllocator<SmallArrayBlock>());
    const auto start = reinterpret_cast<uintptr_t>(block->bytes);
    uint8_t* p = block->bytes + (kArrayAlignment - start % kArrayAlignment) % kArrayAlignment;
    buffer_ = std::shared_ptr<uint8_t[]>(std::move(block), p);
    return;
  }
  buffer_ = std::shared_ptr<uint8_t[]>(allocate_array_bytes(bytes), free_array_bytes);
}

// A plain malloc of kArrayAlignment more bytes, aligned by hand, with the distance back to the
// malloc'd start in the byte before the buffer. glibc serves aligned requests (aligned new,
// memalign) on a slow path that skips its per-thread cache: the lazy API allocates a scalar per
// op, and that path was a visible part of a 100-op chain's cache-hit run.
uint8_t* allocate_array_bytes(size_t bytes) {
  if (bytes > SIZE_MAX - kArrayAlignment) throw std::bad_alloc();
  auto* raw = static_cast<uint8_t*>(std::malloc(bytes + kArrayAlignment));
  if (!raw) throw std::bad_alloc();
  const size_t back = kArrayAlignment - reinterpret_cast<uintptr_t>(raw) % kArrayAlignment;  // 1..64
  uint8_t* p = raw + back;
  p[-1] = static_cast<uint8_t>(back);
  return p;
}

void free_array_bytes(uint8_t* p) {
  if (p) std::free(p - p[-1]);
}

namespace {
// Float to integer: truncation toward zero, NaN to 0, saturating at the int64 range (so no
// conversion is undefined behaviour); the narrowing to the element type then wraps.
int64_t double_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return static_cast<int64_t>(v);
}
}  // namespace

Array Array::adopt(DType dtype, std::vector<int64_t> shape, std::shared_ptr<uint8_t[]> buffer) {
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.numel_ = product(a.shape_);
  a.buffer_ = std::move(buffer);
  return a;
}

Array Array::view(DType dtype, std::vector<int64_t> shape, void* data) {
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.numel_ = product(a.shape_);
  // Aliasing constructor with an empty owner: no control block, no ownership.
  a.buffer_ = std::shared_ptr<uint8_t[]>(std::shared_ptr<uint8_t[]>(), static_cast<uint8_t*>(data));
  return a;
}

double Array::get_f64(int64_t i) const {
  switch (dtype_) {
    case DType::F32: return data<float>()[i];
    case DType::F16: return f16_to_f32(data<uint16_t>()[i]);
    case DType::BF16: return bf16_to_f32(data<uint16_t>()[i]);
    case DType::F64: return data<double>()[i];
    case DType::I8: return data<int8_t>()[i];
    case DType::U8: return data<uint8_t>()[i];
    case DType::I32: return data<int32_t>()[i];
    case DType::I64: return double(data<int64_t>()[i]);
    case DType::Bool: return data<bool>()[i] ? 1.0 : 0.0;
    case DType::I16: return data<int16_t>()[i];
    case DType::U16: return data<uint16_t>()[i];
    case DType::U32: return data<uint32_t>()[i];
    case DType::U64: return double(data<uint64_t>()[i]);
  }
  return 0;
}

void Array::set_f64(int64_t i, double v) {
  switch (dtype_) {
    case DType::F32: data<float>()[i] = float(v); return;
    case DType::F16: data<uint16_t>()[i] = f32_to_f16(float(v)); return;
    case DType::BF16: data<uint16_t>()[i] = f32_to_bf16(float(v)); return;
    case DType::F64: data<double>()[i] = v; return;
    case DType::I8: data<int8_t>()[i] = int8_t(double_to_i64(v)); return;
    case DType::U8: data<uint8_t>()[i] = uint8_t(double_to_i64(v)); return;
    case DType::I32: data<int32_t>()[i] = int32_t(double_to_i64(v)); return;
    case DType::I64: data<int64_t>()[i] = double_to_i64(v); return;
    case DType::Bool: data<bool>()[i] = v != 0.0; return;
    case DType::I16: data<int16_t>()[i] = int16_t(double_to_i64(v)); return;
    case DType::U16: data<uint16_t>()[i] = uint16_t(double_to_i64(v)); return;
    case DType::U32: data<uint32_t>()[i] = uint32_t(double_to_i64(v)); return;
    // 2^63 and above do not fit int64: converted directly (below 2^64; above saturates).
    case DType::U64:
      data<uint64_t>()[i] = v >= 18446744073709551616.0 ? ~uint64_t(0)
                            : v >= 9223372036854775808.0 ? uint64_t(v)
                                                         : uint64_t(double_to_i64(v));
      return;
  }
}

int64_t Array::get_i64(int64_t i) const {
  switch (dtype_) {
    case DType::I8: return data<int8_t>()[i];
    case DType::U8: return data<uint8_t>()[i];
    case DType::I32: return data<int32_t>()[i];
    case DType::I64: return data<int64_t>()[i];
    case DType::Bool: return data<bool>()[i] ? 1 : 0;
    case DType::I16: return data<int16_t>()[i];
    case DType::U16: return data<uint16_t>()[i];
    case DType::U32: return data<uint32_t>()[i];
    case DType::U64: return int64_t(data<uint64_t>()[i]);  // 2^63 and above wrap, as in a cast
    default: return int64_t(get_f64(i));
  }
}

void Array::set_i64(int64_t i, int64_t v) {
  switch (dtype_) {
    case DType::I8: data<int8_t>()[i] = int8_t(v); return;
    case DType::U8: data<uint8_t>()[i] = uint8_t(v); return;
    case DType::I32: data<int32_t>()[i] = int32_t(v); return;
    case DType::I64: data<int64_t>()[i] = v; return;
    case DType::Bool: data<bool>()[i] = v != 0; return;
    case DType::I16: data<int16_t>()[i] = int16_t(v); return;
    case DType::U16: data<uint16_t>()[i] = uint16_t(v); return;
    case DType::U32: data<uint32_t>()[i] = uint32_t(v); return;
    case DType::U64: data<uint64_t>()[i] = uint64_t(v); return;
    default: set_f64(i, double(v)); return;
  }
}

Array Array::clone() const {
  Array out(dtype_, shape_);
  if (nbytes()) std::memcpy(out.raw(), raw(), nbytes());
  return out;
}

Array Array::reshaped(std::vector<int64_t> shape) const {
  FUSEBOX_CHECK(product(shape) == numel_) << "reshaped: element count changes";
  Array out = *this;
  out.shape_ = std::move(shape);
  return out;
}

Array Array::part(int64_t offset, std::vector<int64_t> shape) const {
  const int64_t n = product(shape);
  FUSEBOX_CHECK(offset >= 0 && n >= 0 && offset + n <= numel_) << "part: elements out of range";
  Array out = *this;
  out.shape_ = std::move(shape);
  out.numel_ = n;
  // Aliasing constructor: owns what this array owns, points into it.
  if (buffer_) out.buffer_ = std::shared_ptr<uint8_t[]>(buffer_, buffer_.get() + offset * dtype_size(dtype_));
  return out;
}

void Array::fill_bytes(uint8_t byte) {
  if (nbytes()) std::memset(raw(), byte, nbytes());
}

bool Array::same_data(const Array& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  return nbytes() == 0 || std::memcmp(raw(), other.raw(), nbytes()) == 0;
}

std::string Array::type_string() const {
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (size_t i = 0; i < shape_.size(); ++i) s += (i ? "," : "") + std::to_string(shape_[i]);
  return s + "]";
}

}  // namespace fusebox
