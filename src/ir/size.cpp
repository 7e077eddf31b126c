#include "ir/size.h"

namespace fusebox {

namespace {

bool is_size(int64_t v) { return v >= 0 && v <= kMaxSize; }

std::string dims_text(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

std::optional<int64_t> size_add(int64_t a, int64_t b) {
  if (!is_size(a) || !is_size(b) || a + b > kMaxSize) return std::nullopt;
  return a + b;
}

std::optional<int64_t> size_mul(int64_t a, int64_t b) {
  if (!is_size(a) || !is_size(b)) return std::nullopt;
  if (a != 0 && b > kMaxSize / a) return std::nullopt;
  return a * b;
}

std::optional<int64_t> checked_num_elements(std::span<const int64_t> dims) {
  int64_t nonzero = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d == 0) {
      empty = true;
      continue;
    }
    std::optional<int64_t> n = size_mul(nonzero, d);
    if (!n) return std::nullopt;
    nonzero = *n;
  }
  return empty ? 0 : nonzero;
}

namespace {

// Why dims cannot be one tensor's shape (" has a dim of ..."); empty when they can.
std::string size_problem(std::span<const int64_t> dims) {
  if (checked_num_elements(dims)) return "";
  std::string why = " has more than 2^48 elements";
  for (int64_t d : dims) {
    if (!is_size(d)) {
      why = " has a dim of " + std::to_string(d);
      break;
    }
  }
  return why + " (the limit is 2^48 elements per dim and per tensor)";
}

}  // namespace

Status check_size(std::span<const int64_t> dims) {
  std::string why = size_problem(dims);
  if (why.empty()) return Status::ok();
  return Status::invalid(dims_text(dims) + why);
}

Status check_size(const Shape& shape) {
  std::vector<int64_t> dims;
  for (const Dim& d : shape)
    if (d.is_static()) dims.push_back(d.value());
  std::string why = size_problem(dims);
  if (why.empty()) return Status::ok();
  return Status::invalid("[" + shape_to_string(shape) + "]" + why);
}

}  // namespace fusebox
