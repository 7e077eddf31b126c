// Shapes: a list of dims, each a number, a named symbol bound at run time (N, H), or an
// anonymous dynamic dim (printed `?`, produced by inference when a size depends on symbols in a
// way the IR does not name, e.g. a convolution over a symbolic height).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace fusebox {

class Dim {
 public:
  Dim() = default;
  Dim(int64_t value) : value_(value) {}  // NOLINT: numbers are dims
  static Dim symbol(std::string name) {
    Dim d;
    d.value_ = -1;
    d.symbol_ = std::move(name);
    return d;
  }
  static Dim dynamic() {
    Dim d;
    d.value_ = -1;
    return d;
  }

  bool is_static() const { return value_ >= 0; }
  bool is_symbol() const { return !symbol_.empty(); }
  bool is_dynamic() const { return value_ < 0 && symbol_.empty(); }
  int64_t value() const { return value_; }  // -1 when not static
  const std::string& symbol_name() const { return symbol_; }
  std::string to_string() const;

  friend bool operator==(const Dim& a, const Dim& b) {
    return a.value_ == b.value_ && a.symbol_ == b.symbol_;
  }

 private:
  int64_t value_ = 0;
  std::string symbol_;
};

using Shape = std::vector<Dim>;

std::string shape_to_string(const Shape& s);  // "4,N,?" (no brackets)
bool is_static(const Shape& s);
// Product of static dims; nullopt when any dim is not static.
std::optional<int64_t> num_elements(const Shape& s);
Shape make_shape(const std::vector<int64_t>& dims);
// Concrete dims of a fully static shape (FUSEBOX_CHECKs that it is).
std::vector<int64_t> static_dims(const Shape& s);

// Numpy broadcasting of two shapes (align from the right, 1 stretches). Two different symbols,
// or a symbol against a number other than 1, broadcast to the non-1 side when it is known and are
// checked again at run time with concrete sizes. Returns nullopt (and sets *why) on a mismatch.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* why);

// Normalises an axis in [-rank, rank) to [0, rank); nullopt when out of range.
std::optional<int> normalize_axis(int64_t axis, int rank);

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  int rank() const { return static_cast<int>(shape.size()); }
  std::string to_string() const;  // "f32[N,512]"
  friend bool operator==(const TensorType& a, const TensorType& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
};

}  // namespace fusebox
