// Freezing: graph inputs whose values are known when the graph is compiled (a model's weights)
// become constants, so that canonicalize can fold what depends only on them — batch norm into
// the conv weights, a Gemm's alpha into its matrix, transposed weights — once, instead of on
// every run. The frozen inputs leave the input list; the others keep their order and names,
// outputs keep their positions.
#pragma once

#include <map>
#include <string>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox {

// Errors: a name that is not an input of `g`, or a value whose dtype or shape differs from the
// input's declared type (which must be static: a symbol is bound per run, not per compile).
Expected<Graph> freeze_inputs(const Graph& g, const std::map<std::string, Array, std::less<>>& values);

}  // namespace fusebox
