// Array: a dense, row-major, host-memory tensor value (the data of constants, inputs and
// outputs). Copying an Array shares its buffer; clone() copies the data.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace fusebox {

// Array buffers start on a cache line (64 bytes), so vector loops may use aligned and
// non-temporal stores on them. Every owning buffer comes from these two functions.
inline constexpr size_t kArrayAlignment = 64;
uint8_t* allocate_array_bytes(size_t bytes);
void free_array_bytes(uint8_t* p);

class Array {
 public:
  Array() = default;
  // Uninitialised storage of the given type and shape.
  Array(DType dtype, std::vector<int64_t> shape);

  // Takes a buffer of at least nbytes (e.g. from a pool whose deleter takes it back).
  static Array adopt(DType dtype, std::vector<int64_t> shape, std::shared_ptr<uint8_t[]> buffer);
  // A view of memory owned elsewhere (the caller keeps it alive and sized).
  static Array view(DType dtype, std::vector<int64_t> shape, void* data);

  template <typename T>
  static Array from_vector(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
    Array a(dtype, std::move(shape));
    for (size_t i = 0; i < values.size() && i < size_t(a.numel()); ++i) a.set_f64(i, double(values[i]));
    return a;
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * size_t(dtype_size(dtype_)); }
  bool empty_storage() const { return !buffer_; }

  void* raw() { return buffer_ ? buffer_.get() : nullptr; }
  const void* raw() const { return buffer_ ? buffer_.get() : nullptr; }
  template <typename T>
  T* data() { return static_cast<T*>(raw()); }
  template <typename T>
  const T* data() const { return static_cast<const T*>(raw()); }

  // Element access through double (exact for every dtype but i64 beyond 2^53, where get_i64
  // is exact). f16/bf16 convert through f32.
  double get_f64(int64_t i) const;
  void set_f64(int64_t i, double v);
  int64_t get_i64(int64_t i) const;
  void set_i64(int64_t i, int64_t v);

  Array clone() const;
  // Same data viewed with another shape of equal element count.
  Array reshaped(std::vector<int64_t> shape) const;
  // Elements [offset, offset + product(shape)) of this array viewed with `shape`: shares the
  // buffer and keeps it alive.
  Array part(int64_t offset, std::vector<int64_t> shape) const;
  // Fills every byte with `byte` (tests poison outputs with 0xFF: NaN for floats).
  void fill_bytes(uint8_t byte);
  bool same_data(const Array& other) const;  // dtype, shape and bytes equal

  std::string type_string() const;  // "f32[2,3]"

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::shared_ptr<uint8_t[]> buffer_;
};

int64_t product(std::span<const int64_t> dims);
// Row-major strides of a shape, in elements.
std::vector<int64_t> contiguous_strides(std::span<const int64_t> shape);

}  // namespace fusebox
