// The verifier: a graph is well formed when values are defined once before use (SSA, acyclic by
// construction), every node has the operand count, attributes and result types its op demands,
// every symbol is bound by an input shape, and every output is defined. Passes run it after
// every step in tests and debug builds.
#pragma once

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

Status verify(const Graph& g);
Status verify(const Module& m);

// Checks a node's attributes against its op's schema: unknown names, wrong types, values
// outside a str(a|b) choice, missing required attributes.
Status verify_attrs(const Node& n);

// True when `declared` is at least as specific as `inferred` allows: same dtype and rank, and
// each dim equal or inferred unknown (`?`).
bool type_refines(const TensorType& declared, const TensorType& inferred);

}  // namespace fusebox
