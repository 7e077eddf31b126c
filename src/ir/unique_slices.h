// The unique slices of a tensor along an axis, as ONNX's Unique defines them, shared by the
// importer, which folds a Unique whose input it knows, and the reference kernel of unique_select,
// which finds them as the plan runs (ops.def, docs/ir-syntax.md).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/array.h"

namespace fusebox {

struct UniqueResult {
  std::vector<int64_t> first;    // per unique slice, in output order: its first occurrence
  std::vector<int64_t> inverse;  // per input slice: its unique slice's position
  std::vector<int64_t> counts;   // per unique slice: how many input slices equal it
};

// The slices of x along `axis` (0 <= axis < rank) compared element by element in row-major order:
// numbers in their order (-0 equals 0), NaN equal to NaN and above every number, integers exactly.
// sorted: unique slices in ascending lexicographic order; else in order of first occurrence.
UniqueResult unique_slices(const Array& x, int axis, bool sorted);

}  // namespace fusebox
