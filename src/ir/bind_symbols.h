// Sizes known only from data: what a bind_symbols node binds (ops.def, docs/ir-syntax.md
// "Run-time sizes").
//
//   %r = bind_symbols %x, %v {symbols = [R0, R1]} : f32[N,12]    binds R0 = v[0], R1 = v[1]
//   %y = reshape %r {shape = [R0, R1]} : f32[R0,R1]              (only after the bind)
//   %c = bind_symbols %m, %m {symbols = [K], rule = "count_nonzero"}   binds K = nnz(m)
//   %i = nonzero %c {count = [K]} : i64[2,K]
//
// The runtime reads v when the node runs and infers the shapes of the nodes after it with the
// new bindings; everything before it is planned once per input sizes, as in any graph.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"

namespace fusebox {

// The value of each of the node's symbols, in order, by its rule from `values` and the sizes of
// its operand x (`x_dims`). Errors name the symbol and the value: a count that does not match, a
// negative size, a reshape target that does not fit x.
Expected<std::vector<int64_t>> symbol_values(const Node& bind, const Array& values,
                                             std::span<const int64_t> x_dims);

// Adds the node's bindings (`values` from symbol_values); a symbol already bound to another value
// is an error naming both.
Status bind_symbol_values(const Node& bind, std::span<const int64_t> values, SymbolBindings& bindings);

bool has_bind_symbols(const Graph& g);

// Whether element i of `a` counts as non-zero for rule count_nonzero and the nonzero op: NaN
// does, -0 does not.
bool nonzero_at(const Array& a, int64_t i);
int64_t count_nonzero(const Array& a);
// The i64[max(rank, 1), count_nonzero(a)] coordinates of a's non-zero elements, one column each
// in row-major order (a scalar reads as [1]): what the nonzero op gives.
Array nonzero_coordinates(const Array& a);
// The same into `out`, a [max(rank, 1), columns] i64 buffer, in one pass: the first `columns`
// coordinates are written; returns how many non-zero elements there are (the kernel's check).
int64_t write_nonzero_coordinates(const Array& a, int64_t* out, int64_t columns);

}  // namespace fusebox
