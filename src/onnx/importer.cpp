// The model-level part of ONNX import: parse, check the opset, declare inputs and initializers,
// convert every node in order, return the outputs.
//
//   ModelProto ─> opset check ─> initializers (constants) ─> inputs (symbols for dynamic dims)
//             ─> for each node: converter(ctx, node) ─> refuse unread attributes/inputs,
//                                                       undefined outputs
//             ─> outputs (identity where a name must be kept) ─> verify
// If, Loop and Scan convert their bodies' nodes through the same node conversion, in a scope of
// the context (ImportContext::convert_node, convert_control.cpp).
#include "onnx/importer.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "onnx/converters.h"

namespace fusebox {

namespace onnx_import {

const ConverterTable& converters() {
  static const ConverterTable table = [] {
    ConverterTable t;
    add_elementwise_converters(t);
    add_nn_converters(t);
    add_resize_converters(t);
    add_shape_converters(t);
    add_tensor_converters(t);
    add_decomposed_converters(t);
    add_decomposed_tensor_converters(t);
    add_indexing_converters(t);
    add_decomposed_nn_converters(t);
    add_einsum_converters(t);
    add_window_converters(t);
    add_quantize_converters(t);
    add_spatial_converters(t);
    add_recurrent_converters(t);
    add_training_converters(t);
    add_signal_converters(t);
    add_topk_converters(t);
    add_tfidf_converters(t);
    add_data_dependent_converters(t);
    add_control_converters(t);
    add_sequence_converters(t);
    return t;
  }();
  return table;
}

std::string converter_key(std::string_view domain, std::string_view op_type) {
  if (domain.empty() || domain == "ai.onnx") return std::string(op_type);
  return std::string(domain) + ":" + std::string(op_type);
}

namespace {

// Opset 7 is the oldest whose op semantics every converter follows: from 7 on, element-wise ops
// broadcast like numpy without a `broadcast` attribute, and every converted op's versions 7 and 8
// differ from version 9 only in the types they allow or in attributes the converters read or
// refuse (Upsample-7's `scales`, BatchNormalization-7's `spatial`). Models of opsets 1 to 6 are
// imported when every node is one of the ops below, whose versions before 7 compute what version
// 7 computes (they differ only in the legacy `consumed_inputs` attribute, which is ignored, and in
// the types they allow). 21 is the newest checked against the converters (an attribute or input
// added later is refused by the unread-attribute check, but a semantic change without one would
// not be, so newer opsets are refused outright).
constexpr int64_t kMinOpset = 7;
constexpr int64_t kOldestOpset = 1;
constexpr int64_t kMaxOpset = 21;

// The opsets a model imports: the default domain's (0 when the model imports none, which is
// valid for a model made only of training ops) and the training domain's (0 when absent).
struct Opsets {
  int64_t onnx = 0;
  int64_t training = 0;
};

Expected<Opsets> read_opsets(const onnx::ModelProto& m) {
  Opsets o;
  for (const auto& imp : m.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx") {
      if (imp.version() < kOldestOpset) {
        return Status::unimplemented("opset " + std::to_string(imp.version()) + " is older than the oldest supported (" +
                                     std::to_string(kOldestOpset) + ")");
      }
      if (imp.version() > kMaxOpset) {
        return Status::unimplemented("opset " + std::to_string(imp.version()) + " is newer than the newest supported (" +
                                     std::to_string(kMaxOpset) + ")");
      }
      o.onnx = imp.version();
    } else if (imp.domain() == kTrainingDomain) {
      // Version 1 is the only one ONNX has defined.
      if (imp.version() != 1) {
        return Status::unimplemented("opset " + std::to_string(imp.version()) + " of domain '" + imp.domain() +
                                     "' is not supported (only version 1)");
      }
      o.training = imp.version();
    }
  }
  if (o.onnx == 0 && o.training == 0) return Status::invalid("the model imports no opset of the default ONNX domain");
  return o;
}

// The ops whose versions before opset 7 mean what version 7 means (see kMinOpset).
bool same_meaning_before_opset7(std::string_view op_type) {
  static const std::set<std::string, std::less<>> ops = {
      "Abs", "ArgMax", "ArgMin", "AveragePool", "Ceil", "Clip", "Conv", "Elu", "Exp", "Floor",
      "GlobalAveragePool", "GlobalMaxPool", "HardSigmoid", "Identity", "InstanceNormalization",
      "LeakyRelu", "Log", "LogSoftmax", "MatMul", "MaxPool", "Neg", "Not", "Reciprocal", "ReduceL1",
      "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
      "ReduceProd", "ReduceSum", "ReduceSumSquare", "Relu", "Selu", "Sigmoid", "Softmax", "Softplus",
      "Softsign", "Sqrt", "Tanh", "Transpose"};
  return ops.contains(op_type);
}

struct Request {
  const OnnxInputValues& values;
  const OnnxInputLayouts& layouts;
  std::string* needs_value;
  OnnxImportReport* report;  // may be null
};

// A declared tensor type; dynamic dims become symbols. `what` names it in messages.
Expected<TensorType> declared_tensor_type(ImportContext& ctx, const onnx::TypeProto::Tensor& tt,
                                          const std::string& name, const std::string& what) {
  std::optional<DType> dtype = dtype_from_onnx(tt.elem_type());
  if (!dtype) {
    return Status::unimplemented(what + " has element type " + onnx_type_name(tt.elem_type()) +
                                 ", which fusebox does not support");
  }
  if (!tt.has_shape()) return Status::unimplemented(what + " has no shape (fusebox needs its rank)");
  Shape shape;
  for (int i = 0; i < tt.shape().dim_size(); ++i) {
    const auto& d = tt.shape().dim(i);
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) return Status::invalid(what + " has a negative dim");
      shape.push_back(Dim(d.dim_value()));
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      shape.push_back(Dim::symbol(ctx.symbol(d.dim_param())));
    } else {
      // An unnamed dynamic dim: a symbol of its own, named after the input and position.
      shape.push_back(Dim::symbol(ctx.symbol(name + "_dim" + std::to_string(i))));
    }
  }
  return TensorType{*dtype, std::move(shape)};
}

bool is_structured(const onnx::TypeProto& t) { return t.has_sequence_type() || t.has_optional_type(); }

// The input's declared type; dynamic dims become symbols.
Expected<TensorType> declared_type(ImportContext& ctx, const onnx::ValueInfoProto& vi) {
  const std::string& name = vi.name();
  if (name.empty()) return Status::invalid("a graph input has no name");
  if (!vi.type().has_tensor_type())
    return Status::unimplemented("graph input '" + name + "' is not a tensor");
  return declared_tensor_type(ctx, vi.type().tensor_type(), name, "graph input '" + name + "'");
}

// `given` fits `declared`: the same dtype and rank, and the declared static dims.
bool fits(const TensorType& given, const TensorType& declared) {
  bool ok = given.dtype == declared.dtype && given.rank() == declared.rank();
  for (size_t k = 0; ok && k < declared.shape.size(); ++k) {
    if (declared.shape[k].is_static()) ok = given.shape[k] == declared.shape[k];
  }
  return ok;
}

Status declare_input(ImportContext& ctx, const onnx::ValueInfoProto& vi) {
  FUSEBOX_ASSIGN_OR_RETURN(TensorType t, declared_type(ctx, vi));
  return ctx.add_input(vi.name(), t.dtype, std::move(t.shape));
}

// A sequence (of tensors) of `layout`'s elements, each a graph input checked against `elem`.
Expected<OnnxValue> sequence_input(ImportContext& ctx, const onnx::ValueInfoProto& vi,
                                   const onnx::TypeProto& elem, const OnnxInputLayout& layout) {
  const std::string& name = vi.name();
  if (!elem.has_tensor_type()) {
    return Status::unimplemented("graph input '" + name +
                                 "' is a sequence of sequences, maps or optionals; fusebox "
                                 "supports sequences of tensors");
  }
  OnnxValue seq;
  seq.kind = OnnxValue::Kind::Sequence;
  seq.origin = "graph input '" + name + "'";
  for (size_t k = 0; k < layout.elements.size(); ++k) {
    const std::string what = "element " + std::to_string(k) + " of graph input '" + name + "'";
    // A sequence's elements may differ in shape: only a declared static dim binds them, and a
    // sequence declared without element shape takes any.
    const TensorType& given = layout.elements[k];
    TensorType declared{given.dtype, given.shape};
    if (elem.tensor_type().has_shape() || !dtype_from_onnx(elem.tensor_type().elem_type())) {
      FUSEBOX_ASSIGN_OR_RETURN(declared, declared_tensor_type(ctx, elem.tensor_type(), name, what));
    } else {
      declared.dtype = *dtype_from_onnx(elem.tensor_type().elem_type());
    }
    if (!fits(given, declared)) {
      return Status::invalid(what + ": the given element is " + given.to_string() + ", the model declares " +
                             declared.to_string());
    }
    FUSEBOX_ASSIGN_OR_RETURN(ValueId v,
                             ctx.add_element_input(onnx_element_name(name, k), given.dtype, given.shape));
    seq.elements.push_back(OnnxValue{v, nullptr, std::nullopt, what, {}});
  }
  return seq;
}

const char* kind_name(OnnxValueKind k) {
  switch (k) {
    case OnnxValueKind::Tensor:
      return "a tensor";
    case OnnxValueKind::Sequence:
      return "a sequence";
    case OnnxValueKind::None:
      return "none";
  }
  return "a value";
}

// A sequence or optional graph input as the layout given for it.
Status declare_structured_input(ImportContext& ctx, const onnx::ValueInfoProto& vi, const Request& req) {
  const std::string& name = vi.name();
  const bool optional = vi.type().has_optional_type();
  const char* declared = optional ? "an optional" : "a sequence";
  auto it = req.layouts.find(name);
  if (it == req.layouts.end()) {
    // Only a caller that can give layouts (OnnxImportReport) is told which input needs one.
    if (req.report) {
      req.report->needs_value = name;
      req.report->needs_layout = true;
    }
    return Status::invalid(
        "graph input '" + name + "' is " + declared +
        ": fusebox needs its layout (whether it holds a value, its elements' types); give it as " + declared +
        " value (OnnxExecutable::run_values)");
  }
  const OnnxInputLayout& layout = it->second;
  const onnx::TypeProto& content = optional ? vi.type().optional_type().elem_type() : vi.type();
  const OnnxValueKind want = content.has_sequence_type() ? OnnxValueKind::Sequence : OnnxValueKind::Tensor;
  if (layout.kind != want && !(optional && layout.kind == OnnxValueKind::None)) {
    return Status::invalid("graph input '" + name + "' is " + declared +
                           (optional ? std::string(" of ") + kind_name(want) : "") + "; " +
                           kind_name(layout.kind) + " was given for it");
  }
  OnnxValue v;
  if (layout.kind == OnnxValueKind::Sequence) {
    FUSEBOX_ASSIGN_OR_RETURN(v, sequence_input(ctx, vi, content.sequence_type().elem_type(), layout));
  } else if (layout.kind == OnnxValueKind::Tensor) {
    if (!content.has_tensor_type()) {
      return Status::unimplemented("graph input '" + name +
                                   "' is an optional of a map or an optional; fusebox "
                                   "supports optionals of tensors and of sequences of tensors");
    }
    if (layout.elements.size() != 1)
      return Status::invalid("graph input '" + name + "': a tensor layout holds one type");
    const std::string what = "graph input '" + name + "'";
    FUSEBOX_ASSIGN_OR_RETURN(TensorType t, declared_tensor_type(ctx, content.tensor_type(), name, what));
    const TensorType& given = layout.elements[0];
    if (!fits(given, t)) {
      return Status::invalid(what + ": the given value is " + given.to_string() + ", the model declares " +
                             t.to_string());
    }
    FUSEBOX_ASSIGN_OR_RETURN(ValueId id,
                             ctx.add_element_input(onnx_element_name(name, 0), given.dtype, given.shape));
    v = OnnxValue{id, nullptr, std::nullopt, what, {}};
  }
  if (optional) {
    OnnxValue opt;
    opt.kind = OnnxValue::Kind::Optional;
    opt.origin = "graph input '" + name + "'";
    if (layout.kind != OnnxValueKind::None) opt.elements.push_back(std::move(v));
    v = std::move(opt);
  }
  ctx.bind(name, std::move(v));
  return Status::ok();
}

// A given value stands for the input only where it is what the model declares.
Status declare_given_input(ImportContext& ctx, const onnx::ValueInfoProto& vi, const Array& value) {
  FUSEBOX_ASSIGN_OR_RETURN(TensorType declared, declared_type(ctx, vi));
  if (!fits(TensorType{value.dtype(), make_shape(value.shape())}, declared)) {
    return Status::invalid("graph input '" + vi.name() + "': the given value is " + value.type_string() +
                           ", the model declares " + declared.to_string());
  }
  ctx.add_given_input(vi.name(), value);
  return Status::ok();
}

Status convert_node(ImportContext& ctx, const Opsets& opsets, const onnx::NodeProto& proto, int index) {
  OnnxNode n(proto, index);
  const bool default_domain = proto.domain().empty() || proto.domain() == "ai.onnx";
  if (!default_domain && proto.domain() != kTrainingDomain) {
    return n.error("ops of domain '" + proto.domain() + "' are not supported");
  }
  if (default_domain ? opsets.onnx == 0 : opsets.training == 0) {
    return n.error(default_domain ? std::string("the model imports no opset of the default ONNX domain")
                                  : "the model imports no opset of domain '" + proto.domain() + "'");
  }
  const ConverterTable& table = converters();
  auto it = table.find(converter_key(proto.domain(), proto.op_type()));
  if (it == table.end()) return n.error("op type '" + proto.op_type() + "' is not supported (docs/onnx.md lists the supported ops)");
  if (default_domain && ctx.opset() < kMinOpset) {
    if (!same_meaning_before_opset7(proto.op_type())) {
      return n.error("at opset " + std::to_string(ctx.opset()) + ", older than " + std::to_string(kMinOpset) +
                     ", only ops whose meaning did not change since are imported (docs/onnx.md lists them)");
    }
    n.accept_attr("consumed_inputs");  // legacy (opsets 1-5): in-place hints with no effect on values
  }
  for (int i = 0; i < proto.output_size(); ++i) {
    if (!proto.output(i).empty() && ctx.defined_here(proto.output(i))) {
      return n.error("output '" + proto.output(i) + "' is already defined");
    }
  }
  Status s = it->second(ctx, n);
  if (!n.status().is_ok()) return n.status();
  FUSEBOX_RETURN_IF_ERROR(s);
  FUSEBOX_RETURN_IF_ERROR(ctx.builder_status(n));
  FUSEBOX_RETURN_IF_ERROR(n.check_consumed());
  for (int i = 0; i < proto.output_size(); ++i) {
    if (!proto.output(i).empty() && !ctx.defined(proto.output(i))) {
      return n.error("output " + std::to_string(i) + " ('" + proto.output(i) + "') is not supported");
    }
  }
  return Status::ok();
}

// Gives an initializer's data back to the allocator once it is an Array: the parsed model and
// the graph's constants would otherwise hold every weight twice at the import's peak.
void release_tensor_data(onnx::TensorProto& t) {
  std::string().swap(*t.mutable_raw_data());
  google::protobuf::RepeatedField<float>().Swap(t.mutable_float_data());
  google::protobuf::RepeatedField<double>().Swap(t.mutable_double_data());
  google::protobuf::RepeatedField<int32_t>().Swap(t.mutable_int32_data());
  google::protobuf::RepeatedField<int64_t>().Swap(t.mutable_int64_data());
}

// `m`'s initializers are emptied as they become constants.
Expected<Graph> import_model(onnx::ModelProto& m, const std::string& name, const ExternalDataDir& external,
                             const Request& req) {
  FUSEBOX_ASSIGN_OR_RETURN(Opsets opsets, read_opsets(m));
  if (!m.has_graph()) return Status::invalid("the model has no graph");
  const onnx::GraphProto& g = m.graph();
  if (g.sparse_initializer_size() > 0) return Status::unimplemented("sparse initializers are not supported");
  std::string graph_name = g.name().empty() ? std::filesystem::path(name).stem().string() : g.name();
  ImportContext ctx(graph_name, opsets.onnx, external);
  ctx.set_node_converter([opsets](ImportContext& c, const onnx::NodeProto& p, int i) {
    return convert_node(c, opsets, p, i);
  });
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.name().empty()) return Status::invalid("an initializer has no name");
    std::string what = "initializer '" + t.name() + "'";
    FUSEBOX_ASSIGN_OR_RETURN(Array a, tensor_to_array(t, what, external));
    ctx.add_constant(t.name(), std::move(a), what);
    release_tensor_data(t);
  }
  for (const onnx::ValueInfoProto& vi : g.input()) {
    if (ctx.defined(vi.name())) continue;  // an initializer listed as input (IR < 4): a constant
    auto given = req.values.find(vi.name());
    if (is_structured(vi.type())) {
      if (given != req.values.end()) {
        return Status::invalid("graph input '" + vi.name() +
                               "' is a sequence or an optional; a tensor was given for it");
      }
      FUSEBOX_RETURN_IF_ERROR(declare_structured_input(ctx, vi, req));
      continue;
    }
    FUSEBOX_RETURN_IF_ERROR(given == req.values.end() ? declare_input(ctx, vi)
                                                      : declare_given_input(ctx, vi, given->second));
  }
  auto check_declared = [&](const std::string& input, bool structured) -> Status {
    for (const onnx::ValueInfoProto& vi : g.input()) {
      if (vi.name() != input) continue;
      if (structured && !is_structured(vi.type())) {
        return Status::invalid("a sequence or optional is given for graph input '" + input +
                               "', which is a tensor");
      }
      return Status::ok();
    }
    return Status::not_found("a value is given for '" + input + "', which is not a graph input");
  };
  for (const auto& entry : req.values) FUSEBOX_RETURN_IF_ERROR(check_declared(entry.first, false));
  for (const auto& entry : req.layouts) FUSEBOX_RETURN_IF_ERROR(check_declared(entry.first, true));
  for (int i = 0; i < g.node_size(); ++i) {
    Status s = convert_node(ctx, opsets, g.node(i), i);
    if (!s.is_ok() && req.needs_value) *req.needs_value = ctx.needs_value();
    FUSEBOX_RETURN_IF_ERROR(s);
  }
  if (g.output_size() == 0) return Status::invalid("the graph has no outputs");
  size_t tensors = 0;
  for (const onnx::ValueInfoProto& vo : g.output()) {
    OnnxOutputLayout layout;
    FUSEBOX_RETURN_IF_ERROR(ctx.add_output(vo.name(), &layout));
    if (req.report) req.report->outputs.push_back(layout);
    tensors += layout.count;
  }
  if (tensors == 0) {
    return Status::unimplemented(
        "every graph output is an optional holding nothing or an empty sequence; a "
        "fusebox graph returns at least one tensor");
  }
  return ctx.build();
}

Expected<Graph> import_parsed(onnx::ModelProto& m, const std::string& name, const ExternalDataDir& external,
                              const Request& req) {
  try {
    return import_model(m, name, external, req);
  } catch (const std::exception& e) {
    // Nothing below should throw; a bad_alloc from a corrupt size still must not crash.
    return Status::internal(std::string("import failed: ") + e.what());
  }
}

Expected<Graph> import_bytes(std::string_view bytes, const std::string& name, const ExternalDataDir& external,
                             const Request& req) {
  if (req.needs_value) req.needs_value->clear();
  if (req.report) *req.report = {};
  if (bytes.size() > size_t(INT_MAX)) return Status::unimplemented("models over 2 GiB are not supported");
  onnx::ModelProto m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::invalid("not a valid ONNX model (the protobuf does not parse)");
  }
  return import_parsed(m, name, external, req);
}

Expected<Graph> import_file(const std::string& path, const Request& req) {
  if (req.needs_value) req.needs_value->clear();
  std::error_code ec;
  std::ifstream f(path, std::ios::binary);
  if (!f || std::filesystem::is_directory(path, ec))
    return Status::not_found(path + ": cannot open the ONNX file");
  // protobuf parses at most 2 GiB; stop there rather than read /dev/zero until memory runs out.
  constexpr size_t kMaxModelBytes = size_t(INT_MAX);
  std::string dir = std::filesystem::path(path).parent_path().string();
  const ExternalDataDir external{dir.empty() ? "." : dir};
  if (std::filesystem::is_regular_file(path, ec)) {
    // A file of known size is parsed from the stream: no copy of its bytes beside the parsed model.
    const auto size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxModelBytes) {
      return Status::invalid(
          path + ": larger than the 2 GiB an ONNX file can hold (weights over that go in external data)");
    }
    if (!ec) {
      if (req.report) *req.report = {};
      onnx::ModelProto m;
      if (!m.ParseFromIstream(&f)) {
        if (f.bad()) return Status::invalid(path + ": cannot read the ONNX file");
        return Status::invalid("not a valid ONNX model (the protobuf does not parse)").with_context(path);
      }
      Expected<Graph> g = import_parsed(m, path, external, req);
      if (!g) return g.status().with_context(path);
      return g;
    }
  }
  std::string bytes;
  char chunk[1 << 16];
  while (f.read(chunk, sizeof chunk) || f.gcount() > 0) {
    bytes.append(chunk, static_cast<size_t>(f.gcount()));
    if (bytes.size() > kMaxModelBytes) {
      return Status::invalid(
          path + ": larger than the 2 GiB an ONNX file can hold (weights over that go in external data)");
    }
  }
  if (f.bad()) return Status::invalid(path + ": cannot read the ONNX file");
  Expected<Graph> g = import_bytes(bytes, path, external, req);
  if (!g) return g.status().with_context(path);
  return g;
}

}  // namespace
}  // namespace onnx_import

Expected<Graph> import_onnx_bytes(std::string_view bytes, std::string_view name) {
  return import_onnx_bytes(bytes, name, {}, nullptr);
}

Expected<Graph> import_onnx_bytes(std::string_view bytes, std::string_view name, const OnnxInputValues& values,
                                  std::string* needs_value) {
  Expected<Graph> g =
      onnx_import::import_bytes(bytes, std::string(name), {}, {values, {}, needs_value, nullptr});
  if (!g) return g.status().with_context(std::string(name));
  return g;
}

Expected<Graph> import_onnx_bytes(std::string_view bytes, std::string_view name,
                                  const OnnxInputValues& values, const OnnxInputLayouts& layouts,
                                  OnnxImportReport* report) {
  Expected<Graph> g = onnx_import::import_bytes(
      bytes, std::string(name), {}, {values, layouts, report ? &report->needs_value : nullptr, report});
  if (!g) return g.status().with_context(std::string(name));
  return g;
}

std::string onnx_value_name(std::string_view onnx_name) {
  return onnx_import::sanitize_name(std::string(onnx_name));
}

std::string onnx_element_name(std::string_view onnx_name, size_t k) {
  return onnx_import::sanitize_name(std::string(onnx_name) + "_" + std::to_string(k));
}

Expected<Graph> import_onnx_file(const std::string& path) { return import_onnx_file(path, {}, nullptr); }

Expected<Graph> import_onnx_file(const std::string& path, const OnnxInputValues& values, std::string* needs_value) {
  return onnx_import::import_file(path, {values, {}, needs_value, nullptr});
}

Expected<Graph> import_onnx_file(const std::string& path, const OnnxInputValues& values,
                                 const OnnxInputLayouts& layouts, OnnxImportReport* report) {
  return onnx_import::import_file(path, {values, layouts, report ? &report->needs_value : nullptr, report});
}

}  // namespace fusebox
