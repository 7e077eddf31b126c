// Reads a program for the CLI: .fbir text, or an ONNX model when the ONNX component is built.
#pragma once

#include <string>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox::cli {

Expected<Module> load_program(const std::string& path);
// The function named `func`, or the first one when `func` is empty.
Expected<Graph> pick_function(const Module& m, const std::string& func);

}  // namespace fusebox::cli
