// Result types of every op from its operand types and attributes. The same functions serve the
// builder and verifier (symbolic shapes: unknown sizes become `?`) and the runtime (concrete
// shapes: symbols in attributes are replaced through the bindings of the current call).
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

using SymbolBindings = std::map<std::string, int64_t, std::less<>>;

// Errors name the op and what is wrong with which operand or attribute; they do not name the
// node (callers add "%3 = add ...: " context).
Expected<std::vector<TensorType>> infer_result_types(const Node& node,
                                                     std::span<const TensorType> inputs,
                                                     const SymbolBindings* bindings = nullptr);

// ONNX slice semantics on one axis of size `dim`: the first index read and how many are read.
struct SliceRange {
  int64_t start;
  int64_t count;
};
SliceRange normalize_slice(int64_t dim, int64_t start, int64_t end, int64_t step);

// Replaces bound symbols by their values.
Shape bind_shape(const Shape& s, const SymbolBindings& bindings);

}  // namespace fusebox
