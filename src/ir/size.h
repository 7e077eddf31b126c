// Sizes: the one limit on dims and element counts, and the checked arithmetic that keeps them.
//
// A dim, an element count and an index are int64_t. Every dim and every tensor's element count
// is at most kMaxSize = 2^48: a byte count (x 8) and the sum or product of a few sizes then stay
// far from int64 overflow, so code past the checks may use plain arithmetic. A zero-element
// tensor is held to the same limit through its non-zero dims: [0, 2^61] is refused as [2^61, 0]
// is, since kernels still loop over the other dims.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "fusebox/status.h"
#include "ir/shape.h"

namespace fusebox {

inline constexpr int64_t kMaxSize = int64_t(1) << 48;

// a + b and a * b of sizes: nullopt when an operand is outside [0, kMaxSize] or the result is
// above kMaxSize.
std::optional<int64_t> size_add(int64_t a, int64_t b);
std::optional<int64_t> size_mul(int64_t a, int64_t b);

// Element count of the dims of one tensor; nullopt when a dim is outside [0, kMaxSize] or the
// product of the non-zero dims is above kMaxSize.
std::optional<int64_t> checked_num_elements(std::span<const int64_t> dims);

// The same test with a message: "[2305843009213693952,0] has a dim of 2305843009213693952 (the
// limit is 2^48 per dim and per tensor)". The Shape form checks the static dims (symbols are
// checked once bound).
Status check_size(std::span<const int64_t> dims);
Status check_size(const Shape& shape);

}  // namespace fusebox
