// Sequences and optionals resolved at import: fusebox's IR holds tensors only, so a sequence is
// the list of its tensor values and an optional is none or one value (OnnxValue's kinds in
// import_context.h). The ops below edit those lists; only the tensors they hold become graph
// values, and only where a tensor op reads them.
//
//   SequenceConstruct, SequenceEmpty     a list of the inputs / an empty list
//   SequenceAt, SequenceInsert,          an element, or the list edited, at a position known at
//   SequenceErase                        import (negative counts from the back)
//   SequenceLength                       a constant: the list's length
//   SplitToSequence                      slices of the input along an axis of static size
//   ConcatFromSequence                   one concat of the elements (new_axis: a stack)
//   SequenceMap                          the body once per element, like Loop's unrolling
//   Optional, OptionalHasElement,        none or the value; a constant bool; the value
//   OptionalGetElement
//
// A position computed from a graph input stops the import naming that input (require_constant),
// so OnnxExecutable imports again with its value. String elements never get here: fusebox has no
// string dtype, and graph inputs and constants of strings are refused where they are declared.
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// A sequence holding `elements`; it is computed from whatever its elements are.
OnnxValue sequence_of(std::vector<OnnxValue> elements, std::string origin) {
  OnnxValue s;
  s.kind = OnnxValue::Kind::Sequence;
  s.origin = std::move(origin);
  for (const OnnxValue& e : elements)
    s.value_of_inputs.insert(e.value_of_inputs.begin(), e.value_of_inputs.end());
  s.elements = std::move(elements);
  return s;
}

OnnxValue optional_of(std::optional<OnnxValue> content, std::string origin) {
  OnnxValue o;
  o.kind = OnnxValue::Kind::Optional;
  o.origin = std::move(origin);
  if (content) o.elements.push_back(std::move(*content));
  return o;
}

// Input i, which must be of `kind` (a tensor is kept as it is: a constant stays a constant).
Expected<OnnxValue> input_of_kind(ImportContext& ctx, OnnxNode& n, int i, OnnxValue::Kind kind) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, ctx.any_input(n, i));
  if (v.kind == kind) return v;
  return n.error("input " + std::to_string(i) + " '" + n.proto_input(i) + "' is " + v.describe_kind() +
                 "; this input takes " + (kind == OnnxValue::Kind::Tensor ? "a tensor" : "a sequence"));
}

Expected<OnnxValue> sequence_input(ImportContext& ctx, OnnxNode& n, int i) {
  return input_of_kind(ctx, n, i, OnnxValue::Kind::Sequence);
}

Expected<OnnxValue> tensor_input(ImportContext& ctx, OnnxNode& n, int i) {
  return input_of_kind(ctx, n, i, OnnxValue::Kind::Tensor);
}

// The dtype of a tensor value.
DType dtype_of(ImportContext& ctx, const OnnxValue& v) {
  if (v.id != kNoValue) return ctx.type(v.id).dtype;
  if (v.constant) return v.constant->dtype();
  return v.ints->dtype;
}

// Every element has the dtype of the first (ONNX's sequences hold one element type).
Status check_element_dtype(ImportContext& ctx, OnnxNode& n, const std::vector<OnnxValue>& elements,
                           const OnnxValue& added, const std::string& what) {
  if (elements.empty()) return Status::ok();
  DType want = dtype_of(ctx, elements[0]), got = dtype_of(ctx, added);
  if (want == got) return Status::ok();
  return n.error(what + " is " + std::string(dtype_name(got)) + ", the sequence holds " +
                 std::string(dtype_name(want)));
}

// Input i as a position into a sequence of `size` elements, normalised: [-size, size - 1], or
// [-size, size] when `end_ok` (an insert may append).
Expected<int64_t> position(ImportContext& ctx, OnnxNode& n, int i, int64_t size, bool end_ok) {
  FUSEBOX_ASSIGN_OR_RETURN(Array p, ctx.require_constant(n, i, "the position"));
  if (p.numel() != 1 || !is_integer(p.dtype())) {
    return n.error("the position (input " + std::to_string(i) + " '" + n.proto_input(i) +
                   "') must be one integer, got " + p.type_string());
  }
  int64_t pos = p.get_i64(0);
  const int64_t last = end_ok ? size : size - 1;
  if (pos < -size || pos > last) {
    return n.error("the position " + std::to_string(pos) + " is outside [" + std::to_string(-size) + ", " +
                   std::to_string(last) + "] for a sequence of " + std::to_string(size) + " tensors");
  }
  return pos < 0 ? pos + size : pos;
}

Status convert_sequence_construct(ImportContext& ctx, OnnxNode& n) {
  if (n.num_inputs() < 1) return n.error("SequenceConstruct takes at least one input");
  std::vector<OnnxValue> elements;
  for (int i = 0; i < n.num_inputs(); ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, tensor_input(ctx, n, i));
    FUSEBOX_RETURN_IF_ERROR(check_element_dtype(ctx, n, elements, v, "input " + std::to_string(i)));
    elements.push_back(std::move(v));
  }
  return ctx.set_output_value(n, 0, sequence_of(std::move(elements), n.describe()));
}

Status convert_sequence_empty(ImportContext& ctx, OnnxNode& n) {
  int64_t dtype = n.attr_int("dtype", onnx::TensorProto::FLOAT);
  if (!dtype_from_onnx(int32_t(dtype))) {
    return n.error("attribute 'dtype' is " + onnx_type_name(int32_t(dtype)) +
                   ", which fusebox does not support");
  }
  return ctx.set_output_value(n, 0, sequence_of({}, n.describe()));
}

Status convert_sequence_at(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue s, sequence_input(ctx, n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(int64_t pos, position(ctx, n, 1, int64_t(s.elements.size()), false));
  return ctx.set_output_value(n, 0, s.elements[size_t(pos)]);
}

Status convert_sequence_insert(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue s, sequence_input(ctx, n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue t, tensor_input(ctx, n, 1));
  FUSEBOX_RETURN_IF_ERROR(check_element_dtype(ctx, n, s.elements, t, "the inserted tensor"));
  int64_t pos = int64_t(s.elements.size());
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(pos, position(ctx, n, 2, pos, true));
  }
  std::vector<OnnxValue> elements = std::move(s.elements);
  elements.insert(elements.begin() + pos, std::move(t));
  return ctx.set_output_value(n, 0, sequence_of(std::move(elements), n.describe()));
}

Status convert_sequence_erase(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue s, sequence_input(ctx, n, 0));
  if (s.elements.empty()) return n.error("the sequence is empty; there is nothing to erase");
  int64_t pos = int64_t(s.elements.size()) - 1;
  if (n.has_input(1)) {
    FUSEBOX_ASSIGN_OR_RETURN(pos, position(ctx, n, 1, int64_t(s.elements.size()), false));
  }
  std::vector<OnnxValue> elements = std::move(s.elements);
  elements.erase(elements.begin() + pos);
  return ctx.set_output_value(n, 0, sequence_of(std::move(elements), n.describe()));
}

Status convert_sequence_length(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue s, sequence_input(ctx, n, 0));
  Array len(DType::I64, {});
  len.set_i64(0, int64_t(s.elements.size()));
  return ctx.set_output_constant(n, 0, std::move(len));
}

// Slice [begin, begin + size) of x along axis, that axis dropped when `squeeze`.
Expected<ValueId> slice_along(ImportContext& ctx, OnnxNode& n, ValueId x, int axis, int64_t begin,
                              int64_t size, bool squeeze) {
  ValueId s = ctx.emit(Op::Slice, {x},
                       {{"starts", std::vector<int64_t>{begin}},
                        {"ends", std::vector<int64_t>{begin + size}},
                        {"axes", std::vector<int64_t>{axis}}});
  if (s == kNoValue) return ctx.builder_status(n);
  if (!squeeze) return s;
  Shape rest = ctx.type(s).shape;
  rest.erase(rest.begin() + axis);
  return ctx.reshape(n, s, rest);
}

// The chunk sizes of SplitToSequence: `split` absent gives 1s, a scalar chunks of that size (the
// last may be smaller), a vector the sizes themselves.
Expected<std::vector<int64_t>> split_sizes(ImportContext& ctx, OnnxNode& n, int64_t dim, bool* squeeze) {
  std::vector<int64_t> sizes;
  if (!n.has_input(1)) {
    sizes.assign(size_t(dim), 1);
    return sizes;
  }
  *squeeze = false;  // keepdims applies only when split is absent
  FUSEBOX_ASSIGN_OR_RETURN(Array split, ctx.require_constant(n, 1, "split"));
  if (!is_integer(split.dtype()) || split.rank() > 1) {
    return n.error("split (input 1) must be an integer scalar or vector, got " + split.type_string());
  }
  if (split.rank() == 0) {
    int64_t chunk = split.get_i64(0);
    if (chunk <= 0) return n.error("split = " + std::to_string(chunk) + " must be positive");
    for (int64_t at = 0; at < dim; at += chunk) sizes.push_back(std::min(chunk, dim - at));
    return sizes;
  }
  int64_t total = 0;
  for (int64_t k = 0; k < split.numel(); ++k) {
    int64_t s = split.get_i64(k);
    if (s < 0) return n.error("split[" + std::to_string(k) + "] = " + std::to_string(s) + " is negative");
    sizes.push_back(s);
    total += s;
  }
  if (total != dim) {
    return n.error("split sums to " + std::to_string(total) + ", but the axis has size " +
                   std::to_string(dim));
  }
  return sizes;
}

Status convert_split_to_sequence(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType t = ctx.type(x);
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, n.attr_int("axis", 0), t.rank(), "axis"));
  bool squeeze = n.attr_int("keepdims", 1) == 0;
  const Dim& d = t.shape[size_t(axis)];
  if (!d.is_static()) {
    return n.error("the size of axis " + std::to_string(axis) + " of input 0 '" + n.proto_input(0) +
                   "' is not static (" + t.to_string() + "); the sequence's length must be known at import");
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, split_sizes(ctx, n, d.value(), &squeeze));
  std::vector<OnnxValue> elements;
  int64_t begin = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId e, slice_along(ctx, n, x, axis, begin, sizes[k], squeeze));
    begin += sizes[k];
    elements.push_back(
        OnnxValue{e, nullptr, std::nullopt, "element " + std::to_string(k) + " of " + n.describe(), {}});
  }
  return ctx.set_output_value(n, 0, sequence_of(std::move(elements), n.describe()));
}

Status convert_concat_from_sequence(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue s, sequence_input(ctx, n, 0));
  std::optional<int64_t> axis_attr = n.attr_int("axis");
  if (!axis_attr) return n.error("attribute 'axis' is missing");
  const bool new_axis = n.attr_int("new_axis", 0) != 0;
  if (s.elements.empty()) return n.error("the sequence is empty; fusebox cannot give the result its shape");
  std::vector<ValueId> parts;
  for (size_t k = 0; k < s.elements.size(); ++k) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId v, as_value(ctx, n, s.elements[k], "element " + std::to_string(k)));
    parts.push_back(v);
  }
  const int rank = ctx.type(parts[0]).rank();
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, *axis_attr, new_axis ? rank + 1 : rank, "axis"));
  if (new_axis) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId y, stack(ctx, n, std::move(parts), axis));
    return ctx.set_output(n, 0, y);
  }
  ValueId y =
      parts.size() == 1 ? parts[0] : ctx.emit(Op::Concat, std::move(parts), {{"axis", int64_t(axis)}});
  return ctx.set_output(n, 0, y);
}

// SequenceMap: the body once per element of the input sequence; each additional input is a
// sequence of the same length (its element goes with each iteration) or a tensor (given to every
// iteration). Each body output collects into an output sequence.
Status convert_sequence_map(ImportContext& ctx, OnnxNode& n) {
  const onnx::GraphProto* body = n.attr_graph("body");
  if (!n.status().is_ok()) return n.status();
  if (!body) return n.error("attribute 'body' is missing");
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue first, sequence_input(ctx, n, 0));
  const size_t length = first.elements.size();
  std::vector<OnnxValue> inputs = {first};
  for (int i = 1; i < n.num_inputs(); ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, ctx.any_input(n, i));
    if (v.kind == OnnxValue::Kind::Optional) {
      return n.error("input " + std::to_string(i) + " '" + n.proto_input(i) + "' is " + v.describe_kind() +
                     "; SequenceMap takes sequences and tensors");
    }
    if (v.kind == OnnxValue::Kind::Sequence && v.elements.size() != length) {
      return n.error("input " + std::to_string(i) + " '" + n.proto_input(i) + "' is " + v.describe_kind() +
                     ", input 0 a sequence of " + std::to_string(length));
    }
    inputs.push_back(std::move(v));
  }
  if (body->output_size() != n.num_outputs()) {
    return n.error("the body has " + std::to_string(body->output_size()) + " outputs, the node " +
                   std::to_string(n.num_outputs()));
  }
  std::vector<std::vector<OnnxValue>> outputs(size_t(n.num_outputs()));
  for (size_t t = 0; t < length; ++t) {
    std::vector<OnnxValue> args;
    for (const OnnxValue& v : inputs) args.push_back(v.kind == OnnxValue::Kind::Sequence ? v.elements[t] : v);
    const std::string where = "element " + std::to_string(t);
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<OnnxValue> out, import_body(ctx, n, *body, args, where));
    for (size_t k = 0; k < out.size(); ++k) {
      if (!out[k].is_tensor()) {
        return n.error("the body's output '" + body->output(int(k)).name() + "' is " +
                       out[k].describe_kind() + " (" + where +
                       "); each element of an output sequence is a tensor");
      }
      outputs[k].push_back(std::move(out[k]));
    }
  }
  for (int k = 0; k < n.num_outputs(); ++k) {
    FUSEBOX_RETURN_IF_ERROR(
        ctx.set_output_value(n, k, sequence_of(std::move(outputs[size_t(k)]), n.describe())));
  }
  return Status::ok();
}

Status convert_optional(ImportContext& ctx, OnnxNode& n) {
  // `type` only types an empty optional; an optional holding nothing carries no type here.
  n.accept_attr("type");
  if (!n.has_input(0)) {
    if (!n.has_attr("type")) return n.error("an Optional without input needs attribute 'type'");
    return ctx.set_output_value(n, 0, optional_of(std::nullopt, n.describe()));
  }
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, ctx.any_input(n, 0));
  if (v.kind == OnnxValue::Kind::Optional)
    return n.error("input 0 is an optional; an optional holds a tensor or a sequence");
  return ctx.set_output_value(n, 0, optional_of(std::move(v), n.describe()));
}

Status convert_optional_has_element(ImportContext& ctx, OnnxNode& n) {
  bool has = false;
  if (n.has_input(0)) {
    FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, ctx.any_input(n, 0));
    // From opset 18 a tensor or a sequence may be given: it holds itself.
    has = v.kind != OnnxValue::Kind::Optional || !v.elements.empty();
  }
  Array r(DType::Bool, {});
  r.data<bool>()[0] = has;
  return ctx.set_output_constant(n, 0, std::move(r));
}

Status convert_optional_get_element(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, ctx.any_input(n, 0));
  if (v.kind != OnnxValue::Kind::Optional) return ctx.set_output_value(n, 0, std::move(v));
  if (v.elements.empty()) {
    return n.error("input 0 '" + n.proto_input(0) + "' (from " + v.origin +
                   ") holds nothing; there is no element to get");
  }
  return ctx.set_output_value(n, 0, std::move(v.elements[0]));
}

}  // namespace

void add_sequence_converters(ConverterTable& table) {
  table["SequenceConstruct"] = convert_sequence_construct;
  table["SequenceEmpty"] = convert_sequence_empty;
  table["SequenceAt"] = convert_sequence_at;
  table["SequenceInsert"] = convert_sequence_insert;
  table["SequenceErase"] = convert_sequence_erase;
  table["SequenceLength"] = convert_sequence_length;
  table["SplitToSequence"] = convert_split_to_sequence;
  table["ConcatFromSequence"] = convert_concat_from_sequence;
  table["SequenceMap"] = convert_sequence_map;
  table["Optional"] = convert_optional;
  table["OptionalHasElement"] = convert_optional_has_element;
  table["OptionalGetElement"] = convert_optional_get_element;
}

}  // namespace fusebox::onnx_import
