// Reads a program for the CLI: .fbir text, or an ONNX model when the ONNX component is built.
#pragma once

#include <set>
#include <string>

#include "fusebox/status.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace fusebox::cli {

// For an ONNX model, `given` holds the values the user gave for graph inputs (by fusebox name):
// an input whose value fixes shapes (a Reshape shape, Resize sizes, TopK k, ...) is imported as
// that constant, so the graph is specialised to it and no longer has the input; its name is
// added to *specialised. An input needed that way but not given is an error saying so.
Expected<Module> load_program(const std::string& path, const NamedArrays& given = {},
                              std::set<std::string>* specialised = nullptr);
// The function named `func`, or the first one when `func` is empty.
Expected<Graph> pick_function(const Module& m, const std::string& func);

}  // namespace fusebox::cli
