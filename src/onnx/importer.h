// ONNX import: an ONNX model (opset 7 and newer, default domain) becomes one verified
// fusebox::Graph. The optional component fusebox_onnx builds only when libonnx-dev and protobuf
// are found; its consumers see the compile definition FUSEBOX_HAVE_ONNX.
//
//   Expected<Graph> g = import_onnx_file("model.onnx");
//   Executable exe = *Session().compile(*g);
//   exe.run({{"x", image}});            // names: the ONNX input names, see below
//
// What the importer does (docs/onnx.md has the full table):
// - initializers and Constant nodes become `constant` nodes (weights stay Array attributes) on
//   first use; graph inputs that are also initializers are constants, not inputs;
// - dynamic dims (dim_param or no dim at all) become symbols, bound at run time, so one import
//   runs at every batch and image size;
// - Shape-driven subgraphs (Shape -> Gather -> Unsqueeze -> Concat -> Reshape and friends) are
//   folded at import: their values are known up to those symbols;
// - every other node maps to fusebox ops with the same semantics, or the import fails naming the
//   op type, the node and the attribute or input it cannot honour. Nothing is approximated.
//
// Names: inputs, outputs and node results keep their ONNX names with every character outside
// [A-Za-z0-9_] replaced by '_' (a leading digit gets a 'v' prefix, clashes a numeric suffix).
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox {

// Reads and imports a model file. Tensors stored as external data are read from files next to
// the model.
Expected<Graph> import_onnx_file(const std::string& path);

// Imports a serialized ModelProto; `name` names the model in messages and becomes the graph name
// when the model's graph has none. External data is refused (there is no directory to read).
Expected<Graph> import_onnx_bytes(std::string_view bytes, std::string_view name);

// Values of graph inputs that fix shapes at import time (a Reshape shape, Slice starts, Resize
// sizes, TopK k, ...), by ONNX input name. Each given input becomes a constant, so the graph is
// specialised to these values and no longer has that input. A value must have the dtype, rank
// and static dims the model declares.
using OnnxInputValues = std::map<std::string, Array, std::less<>>;

// Imports with some graph inputs' values given. When the import fails because a node needs, at
// import time, a value computed from a graph input that was not given, *needs_value (when not
// null) is set to that input's ONNX name: importing again with its value may succeed
// (src/onnx_run/onnx_executable.h does so per run). Otherwise it is left empty.
Expected<Graph> import_onnx_file(const std::string& path, const OnnxInputValues& values,
                                 std::string* needs_value = nullptr);
Expected<Graph> import_onnx_bytes(std::string_view bytes, std::string_view name, const OnnxInputValues& values,
                                  std::string* needs_value = nullptr);

// The name an ONNX input or output gets in the imported graph (see "Names" above; clashes aside).
std::string onnx_value_name(std::string_view onnx_name);

}  // namespace fusebox
