// A graph's structure as one number: what a compiled plan depends on, never the sizes.
//
// Hashed: ops, attributes (their values), dtypes, ranks, the broadcast pattern of every value
// (per dim: static 1, static other, or the n-th distinct symbol), region bodies, the wiring
// (which value feeds which operand, by definition order) and the outputs. Not hashed: sizes
// (static or symbolic), symbol and value names, source locations. So a new batch size or a
// renamed value hashes equal, and an op, attribute, dtype, rank or a 1 that becomes a non-1
// does not. Plan caches key on the hash and confirm a hit with `identical`.
#pragma once

#include <cstdint>

#include "ir/graph.h"

namespace fusebox {

uint64_t structural_hash(const Graph& g);

// Exact equality: the same function in every detail (names, sizes, attribute values, constant
// data, source locations), so a cached plan for `a` is a correct plan for `b`.
bool identical(const Graph& a, const Graph& b);

}  // namespace fusebox
