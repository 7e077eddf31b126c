#include "ir/shape.h"

#include "ir/check.h"
#include "ir/size.h"

namespace fusebox {

std::string Dim::to_string() const {
  if (is_static()) return std::to_string(value_);
  if (is_symbol()) return symbol_;
  return "?";
}

std::string shape_to_string(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += s[i].to_string();
  }
  return out;
}

bool is_static(const Shape& s) {
  for (const Dim& d : s)
    if (!d.is_static()) return false;
  return true;
}

// nullopt also over the size limit (ir/size.h), so no caller sees a wrapped count.
std::optional<int64_t> num_elements(const Shape& s) {
  std::vector<int64_t> dims;
  for (const Dim& d : s) {
    if (!d.is_static()) return std::nullopt;
    dims.push_back(d.value());
  }
  return checked_num_elements(dims);
}

Shape make_shape(const std::vector<int64_t>& dims) { return Shape(dims.begin(), dims.end()); }

std::vector<int64_t> static_dims(const Shape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) {
    FUSEBOX_CHECK(d.is_static()) << "shape [" << shape_to_string(s) << "] is not static";
    out.push_back(d.value());
  }
  return out;
}

std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b, std::string* why) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim one(1);
    const Dim& da = i < rank - a.size() ? one : a[i - (rank - a.size())];
    const Dim& db = i < rank - b.size() ? one : b[i - (rank - b.size())];
    if (da == db || db == one) {
      out[i] = da;
    } else if (da == one) {
      out[i] = db;
    } else if (da.is_static() && db.is_static()) {
      if (why) {
        *why = "cannot broadcast [" + shape_to_string(a) + "] with [" + shape_to_string(b) +
               "]: dim " + std::to_string(i) + " is " + da.to_string() + " vs " + db.to_string();
      }
      return std::nullopt;
    } else if (da.is_static()) {
      out[i] = da;  // symbol must equal (or be 1): checked with concrete sizes at run time
    } else if (db.is_static()) {
      out[i] = db;
    } else {
      out[i] = Dim::dynamic();
    }
  }
  return out;
}

std::optional<int> normalize_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::string TensorType::to_string() const {
  return std::string(dtype_name(dtype)) + "[" + shape_to_string(shape) + "]";
}

}  // namespace fusebox
