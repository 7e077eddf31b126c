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
#include <vector>

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

// Sequences and optionals (docs/onnx.md, "Sequences and optionals"). fusebox's graphs hold
// tensors only, so the import is specialised on the layout of every graph input that is a
// sequence or an optional: element k of such an input becomes the graph input
// onnx_element_name(name, k) of the element's type. A graph output that is a sequence or an
// optional becomes its elements' graph outputs, in order.
//
// What a sequence or optional holds at one run: a tensor (an optional holding one), a sequence
// (a sequence input, or an optional holding one) or nothing (an optional holding nothing).
enum class OnnxValueKind : uint8_t { Tensor, Sequence, None };

struct OnnxInputLayout {
  OnnxValueKind kind = OnnxValueKind::Sequence;
  std::vector<TensorType> elements;  // a sequence's elements; a tensor: one; none: none
};
using OnnxInputLayouts = std::map<std::string, OnnxInputLayout, std::less<>>;

// One ONNX graph output as graph outputs: a tensor is one, a sequence `count` consecutive ones,
// an optional holding nothing none (an optional holding a value is that value).
struct OnnxOutputLayout {
  OnnxValueKind kind = OnnxValueKind::Tensor;
  size_t count = 1;
};

// The graph input name of element k of a sequence or optional graph input.
std::string onnx_element_name(std::string_view onnx_name, size_t k);

// What an import found besides the graph.
struct OnnxImportReport {
  // As *needs_value above; needs_layout: the input is a sequence or optional whose layout was not
  // given (importing again with it may succeed).
  std::string needs_value;
  bool needs_layout = false;
  std::vector<OnnxOutputLayout> outputs;  // every ONNX graph output's layout, in order
};

// Imports with values and with the layouts of sequence and optional inputs (both by ONNX name).
Expected<Graph> import_onnx_file(const std::string& path, const OnnxInputValues& values,
                                 const OnnxInputLayouts& layouts, OnnxImportReport* report);
Expected<Graph> import_onnx_bytes(std::string_view bytes, std::string_view name,
                                  const OnnxInputValues& values, const OnnxInputLayouts& layouts,
                                  OnnxImportReport* report);

}  // namespace fusebox
