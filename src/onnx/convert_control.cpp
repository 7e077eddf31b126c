// Control flow resolved at import: fusebox's IR has no region that branches or loops, so If,
// Loop and Scan are specialised on the values that drive them and their bodies are imported
// inline (docs/onnx.md, "Control flow").
//
//   If     cond known ─> the chosen branch's nodes converted in the outer graph
//   Loop   M and cond known ─> the body once per iteration, with the iteration number, the
//          condition and the carried values bound; the body's condition output must be known
//          after each iteration; scan outputs stacked along a new axis 0
//   Scan   static sequence length ─> the body once per element, the scan inputs sliced along
//          their axes (and directions), scan outputs stacked along theirs; opset 8's batch axis
//          unrolled too
//
// A driving value computed from a graph input stops the import naming that input (require_*),
// so OnnxExecutable imports again with its value: one plan per distinct driving value.
// A body's names live in a scope of the context: they shadow outer names only inside the body,
// and each iteration defines them afresh (fusebox names are made unique by the context).
#include <algorithm>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// Loops unroll into the graph, so their length is bounded.
constexpr int64_t kMaxIterations = 1024;

OnnxValue graph_value(ValueId v, std::string origin, std::set<std::string> from) {
  return OnnxValue{v, nullptr, std::nullopt, std::move(origin), std::move(from)};
}

OnnxValue constant_value(Array a, std::string origin) {
  OnnxValue v;
  v.constant = std::make_shared<const Array>(std::move(a));
  v.origin = std::move(origin);
  return v;
}

// The value's data when it is known at import time (a tensor's only).
const Array* known(OnnxValue& v) {
  if (!v.constant && v.ints && v.ints->all_numbers())
    v.constant = std::make_shared<const Array>(v.ints->to_array());
  return v.constant.get();
}

// A condition (a one-element tensor) as a bool.
Expected<bool> as_bool(OnnxNode& n, const Array& a, const std::string& what) {
  if (a.numel() != 1) return n.error(what + " must hold one value, got " + a.type_string());
  return a.dtype() == DType::Bool ? a.data<bool>()[0] : a.get_f64(0) != 0;
}

// What input i stands for (a copy, marked read).
Expected<OnnxValue> input_value(ImportContext& ctx, OnnxNode& n, int i) {
  const OnnxValue* v = ctx.find(n.input(i));
  if (!v) return n.error("input " + std::to_string(i) + " '" + n.proto_input(i) + "' is not defined");
  return *v;
}

Expected<const onnx::GraphProto*> graph_attr(OnnxNode& n, const std::string& name) {
  const onnx::GraphProto* g = n.attr_graph(name);
  if (!n.status().is_ok()) return n.status();
  if (!g) return n.error("attribute '" + name + "' is missing");
  return g;
}

Status check_count(OnnxNode& n, const std::string& what, int got, int want) {
  if (got == want) return Status::ok();
  return n.error(what + ": " + std::to_string(got) + ", expected " + std::to_string(want));
}

// Element `index` of `axis` of v, that axis dropped.
Expected<ValueId> element(ImportContext& ctx, OnnxNode& n, ValueId v, int64_t axis, int64_t index) {
  ValueId s = ctx.emit(Op::Slice, {v},
                       {{"starts", std::vector<int64_t>{index}},
                        {"ends", std::vector<int64_t>{index + 1}},
                        {"axes", std::vector<int64_t>{axis}}});
  if (s == kNoValue) return ctx.builder_status(n);
  Shape rest = ctx.type(s).shape;
  rest.erase(rest.begin() + axis);
  return ctx.reshape(n, s, rest);
}

// Values of one scan output (a body output per iteration) stacked along `axis` (of the result,
// negative counting from its end), in reverse iteration order when `reverse`.
Expected<ValueId> stack_scan_output(ImportContext& ctx, OnnxNode& n, std::vector<OnnxValue>& per_iteration,
                                    int64_t axis, bool reverse, const std::string& what) {
  if (per_iteration.empty()) {
    return n.error(
        what + " has no iterations to stack; fusebox cannot give a scan output of zero iterations its shape");
  }
  std::vector<ValueId> values;
  for (OnnxValue& v : per_iteration) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId id, as_value(ctx, n, v, what));
    values.push_back(id);
  }
  if (reverse) std::reverse(values.begin(), values.end());
  FUSEBOX_ASSIGN_OR_RETURN(int a,
                           normalize_onnx_axis(n, axis, ctx.type(values[0]).rank() + 1, what + "'s axis"));
  return stack(ctx, n, std::move(values), a);
}

// ---- If ----

Status convert_if(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(const onnx::GraphProto* then_branch, graph_attr(n, "then_branch"));
  FUSEBOX_ASSIGN_OR_RETURN(const onnx::GraphProto* else_branch, graph_attr(n, "else_branch"));
  FUSEBOX_ASSIGN_OR_RETURN(Array c, ctx.require_constant(n, 0, "the condition"));
  FUSEBOX_ASSIGN_OR_RETURN(bool cond, as_bool(n, c, "the condition"));
  const onnx::GraphProto& branch = cond ? *then_branch : *else_branch;
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<OnnxValue> outputs,
                           import_body(ctx, n, branch, {}, cond ? "then_branch" : "else_branch"));
  FUSEBOX_RETURN_IF_ERROR(check_count(n, "the branch's outputs", int(outputs.size()), n.num_outputs()));
  for (int i = 0; i < n.num_outputs(); ++i) {
    if (n.has_output(i)) ctx.bind(n.output(i), std::move(outputs[size_t(i)]));
  }
  return Status::ok();
}

// ---- Loop ----

Status convert_loop(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(const onnx::GraphProto* body, graph_attr(n, "body"));
  if (n.num_inputs() < 2)
    return n.error("Loop takes at least 2 inputs (M, cond), got " + std::to_string(n.num_inputs()));
  const int carried = n.num_inputs() - 2;
  const int scans = n.num_outputs() - carried;
  if (scans < 0) {
    return n.error("the node has " + std::to_string(n.num_outputs()) + " outputs, fewer than its " +
                   std::to_string(carried) + " loop-carried values");
  }
  FUSEBOX_RETURN_IF_ERROR(check_count(n, "the body's outputs (cond, carried values, scan outputs)",
                                      body->output_size(), 1 + carried + scans));
  std::optional<int64_t> trip;
  if (n.has_input(0)) {
    FUSEBOX_ASSIGN_OR_RETURN(Array m, ctx.require_constant(n, 0, "the trip count M"));
    if (m.numel() != 1 || !is_integer(m.dtype()))
      return n.error("the trip count M must be one integer, got " + m.type_string());
    trip = m.get_i64(0);
    if (*trip > kMaxIterations) {
      return n.error("the trip count M = " + std::to_string(*trip) + " is above the " +
                     std::to_string(kMaxIterations) +
                     " iterations fusebox unrolls (loops are unrolled at import)");
    }
  }
  bool cond = true;
  if (n.has_input(1)) {
    FUSEBOX_ASSIGN_OR_RETURN(Array c, ctx.require_constant(n, 1, "the initial condition"));
    FUSEBOX_ASSIGN_OR_RETURN(cond, as_bool(n, c, "the initial condition"));
  }
  std::vector<OnnxValue> state;
  for (int k = 0; k < carried; ++k) {
    if (!n.has_input(2 + k)) return n.error("loop-carried input " + std::to_string(2 + k) + " is missing");
    FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, input_value(ctx, n, 2 + k));
    state.push_back(std::move(v));
  }
  std::vector<std::vector<OnnxValue>> scanned(static_cast<size_t>(scans));
  for (int64_t i = 0; cond && (!trip || i < *trip); ++i) {
    if (i == kMaxIterations) {
      return n.error("the loop runs more than " + std::to_string(kMaxIterations) +
                     " iterations (no trip count, and the condition stays true), the most fusebox unrolls");
    }
    const std::string where = "iteration " + std::to_string(i);
    Array iter(DType::I64, {});
    iter.set_i64(0, i);
    Array c(DType::Bool, {});
    c.data<bool>()[0] = true;
    std::vector<OnnxValue> inputs = {
        constant_value(std::move(iter), "the iteration number of " + n.describe()),
        constant_value(std::move(c), "the condition of " + n.describe())};
    inputs.insert(inputs.end(), state.begin(), state.end());
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<OnnxValue> out, import_body(ctx, n, *body, inputs, where));
    const Array* next = known(out[0]);
    if (!next) {
      ctx.note_needed(out[0]);
      return n.error("the body's condition output '" + body->output(0).name() + "' (from " + out[0].origin +
                     ", " + where + ") must be known at import time: fusebox unrolls loops at import");
    }
    FUSEBOX_ASSIGN_OR_RETURN(cond, as_bool(n, *next, "the body's condition output"));
    state.assign(out.begin() + 1, out.begin() + 1 + carried);
    for (int k = 0; k < scans; ++k) scanned[size_t(k)].push_back(std::move(out[size_t(1 + carried + k)]));
  }
  for (int k = 0; k < carried; ++k) {
    if (n.has_output(k)) ctx.bind(n.output(k), std::move(state[size_t(k)]));
  }
  for (int k = 0; k < scans; ++k) {
    if (!n.has_output(carried + k)) continue;
    FUSEBOX_ASSIGN_OR_RETURN(ValueId y, stack_scan_output(ctx, n, scanned[size_t(k)], 0, false,
                                                          "scan output " + std::to_string(carried + k)));
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, carried + k, y));
  }
  return Status::ok();
}

// ---- Scan ----

// One per-axis attribute of Scan (scan_input_axes, ...): `count` entries, zeros when absent.
Expected<std::vector<int64_t>> per_scan_attr(OnnxNode& n, const std::string& name, int count) {
  std::optional<std::vector<int64_t>> v = n.attr_ints(name);
  if (!v) return std::vector<int64_t>(size_t(count), 0);
  if (int(v->size()) != count) {
    return n.error("attribute '" + name + "' has " + std::to_string(v->size()) + " entries, expected " +
                   std::to_string(count));
  }
  for (int64_t d : *v) {
    if (name.find("directions") != std::string::npos && d != 0 && d != 1) {
      return n.error("attribute '" + name + "' holds " + std::to_string(d) + "; directions are 0 or 1");
    }
  }
  return *v;
}

struct ScanSpec {
  const onnx::GraphProto* body = nullptr;
  int states = 0, scan_inputs = 0, scan_outputs = 0;
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};

struct ScanResult {
  std::vector<OnnxValue> states;
  std::vector<std::vector<OnnxValue>> scanned;  // per scan output, per iteration
};

// The body over `length` elements of the scan inputs (their axes normalised in spec).
Expected<ScanResult> unroll_scan(ImportContext& ctx, OnnxNode& n, const ScanSpec& spec,
                                 std::vector<OnnxValue> states, const std::vector<OnnxValue>& xs,
                                 int64_t length, const std::string& where) {
  ScanResult r{std::move(states), std::vector<std::vector<OnnxValue>>(size_t(spec.scan_outputs))};
  for (int64_t t = 0; t < length; ++t) {
    std::vector<OnnxValue> inputs = r.states;
    for (int k = 0; k < spec.scan_inputs; ++k) {
      OnnxValue x = xs[size_t(k)];
      FUSEBOX_ASSIGN_OR_RETURN(ValueId id, as_value(ctx, n, x, "scan input " + std::to_string(k)));
      int64_t index = spec.input_directions[size_t(k)] ? length - 1 - t : t;
      FUSEBOX_ASSIGN_OR_RETURN(ValueId e, element(ctx, n, id, spec.input_axes[size_t(k)], index));
      inputs.push_back(graph_value(
          e,
          "element " + std::to_string(index) + " of scan input " + std::to_string(k) + " of " + n.describe(),
          x.value_of_inputs));
    }
    FUSEBOX_ASSIGN_OR_RETURN(
        std::vector<OnnxValue> out,
        import_body(ctx, n, *spec.body, inputs, where + "iteration " + std::to_string(t)));
    r.states.assign(out.begin(), out.begin() + spec.states);
    for (int k = 0; k < spec.scan_outputs; ++k)
      r.scanned[size_t(k)].push_back(std::move(out[size_t(spec.states + k)]));
  }
  return r;
}

// The sequence length: the scan inputs' static size along their axes, the same for all.
Expected<int64_t> sequence_length(ImportContext& ctx, OnnxNode& n, const ScanSpec& spec,
                                  std::vector<OnnxValue>& xs, int first_input) {
  int64_t length = -1;
  for (int k = 0; k < spec.scan_inputs; ++k) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId id, as_value(ctx, n, xs[size_t(k)], "scan input " + std::to_string(k)));
    const Dim& d = ctx.type(id).shape[size_t(spec.input_axes[size_t(k)])];
    if (!d.is_static()) {
      return n.error("the sequence length of scan input " + std::to_string(first_input + k) + " '" +
                     n.proto_input(first_input + k) + "' is not static (" + ctx.type(id).to_string() +
                     "); fusebox unrolls Scan at import");
    }
    if (length >= 0 && d.value() != length) {
      return n.error("scan input " + std::to_string(first_input + k) + " has sequence length " +
                     std::to_string(d.value()) + ", an earlier one " + std::to_string(length));
    }
    length = d.value();
  }
  return length;
}

Status convert_scan(ImportContext& ctx, OnnxNode& n) {
  const bool batched = ctx.opset() < 9;  // Scan-8: a batch axis 0 and sequence_lens
  ScanSpec spec;
  FUSEBOX_ASSIGN_OR_RETURN(spec.body, graph_attr(n, "body"));
  std::optional<int64_t> num_scan_inputs = n.attr_int("num_scan_inputs");
  if (!num_scan_inputs) return n.error("attribute 'num_scan_inputs' is missing");
  const int first = batched ? 1 : 0;
  spec.scan_inputs = int(*num_scan_inputs);
  spec.states = n.num_inputs() - first - spec.scan_inputs;
  spec.scan_outputs = n.num_outputs() - spec.states;
  if (spec.scan_inputs < 1 || spec.states < 0 || spec.scan_outputs < 0) {
    return n.error("num_scan_inputs = " + std::to_string(*num_scan_inputs) + " does not fit the node's " +
                   std::to_string(n.num_inputs()) + " inputs and " + std::to_string(n.num_outputs()) +
                   " outputs");
  }
  FUSEBOX_RETURN_IF_ERROR(check_count(n, "the body's outputs (states, scan outputs)",
                                      spec.body->output_size(), spec.states + spec.scan_outputs));
  if (batched) {
    FUSEBOX_ASSIGN_OR_RETURN(spec.input_directions, per_scan_attr(n, "directions", spec.scan_inputs));
  } else {
    FUSEBOX_ASSIGN_OR_RETURN(spec.input_axes, per_scan_attr(n, "scan_input_axes", spec.scan_inputs));
    FUSEBOX_ASSIGN_OR_RETURN(spec.input_directions,
                             per_scan_attr(n, "scan_input_directions", spec.scan_inputs));
    FUSEBOX_ASSIGN_OR_RETURN(spec.output_axes, per_scan_attr(n, "scan_output_axes", spec.scan_outputs));
    FUSEBOX_ASSIGN_OR_RETURN(spec.output_directions,
                             per_scan_attr(n, "scan_output_directions", spec.scan_outputs));
  }
  std::vector<OnnxValue> states, xs;
  for (int i = first; i < n.num_inputs(); ++i) {
    if (!n.has_input(i)) return n.error("input " + std::to_string(i) + " is missing");
    FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, input_value(ctx, n, i));
    (i < first + spec.states ? states : xs).push_back(std::move(v));
  }
  if (batched) spec.input_axes.assign(size_t(spec.scan_inputs), 1);
  for (int k = 0; k < spec.scan_inputs; ++k) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId id, as_value(ctx, n, xs[size_t(k)], "scan input " + std::to_string(k)));
    FUSEBOX_ASSIGN_OR_RETURN(
        int axis, normalize_onnx_axis(n, spec.input_axes[size_t(k)], ctx.type(id).rank(),
                                      "scan input " + std::to_string(first + spec.states + k) + "'s axis"));
    spec.input_axes[size_t(k)] = axis;
  }
  FUSEBOX_ASSIGN_OR_RETURN(int64_t length, sequence_length(ctx, n, spec, xs, first + spec.states));
  if (length > kMaxIterations) {
    return n.error("the sequence length " + std::to_string(length) + " is above the " +
                   std::to_string(kMaxIterations) + " iterations fusebox unrolls");
  }
  if (!batched) {
    FUSEBOX_ASSIGN_OR_RETURN(ScanResult r, unroll_scan(ctx, n, spec, std::move(states), xs, length, ""));
    for (int k = 0; k < spec.states; ++k) {
      if (n.has_output(k)) ctx.bind(n.output(k), std::move(r.states[size_t(k)]));
    }
    for (int k = 0; k < spec.scan_outputs; ++k) {
      if (!n.has_output(spec.states + k)) continue;
      FUSEBOX_ASSIGN_OR_RETURN(ValueId y,
                               stack_scan_output(ctx, n, r.scanned[size_t(k)], spec.output_axes[size_t(k)],
                                                 spec.output_directions[size_t(k)] != 0,
                                                 "scan output " + std::to_string(spec.states + k)));
      FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, spec.states + k, y));
    }
    return Status::ok();
  }
  // Scan-8: every batch element scans on its own; states and scan outputs stack along axis 0.
  if (n.has_input(0)) {
    FUSEBOX_ASSIGN_OR_RETURN(Array lens, ctx.require_constant(n, 0, "sequence_lens"));
    for (int64_t b = 0; b < lens.numel(); ++b) {
      if (lens.get_i64(b) != length) {
        return n.error("sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens.get_i64(b)) +
                       " differs from the sequence length " + std::to_string(length) +
                       "; only full-length sequences are supported");
      }
    }
  }
  for (int k = 0; k < spec.scan_inputs; ++k) --spec.input_axes[size_t(k)];  // per batch element
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x0, as_value(ctx, n, xs[0], "scan input 0"));
  const Dim batch = ctx.type(x0).shape[0];
  if (!batch.is_static()) {
    return n.error("the batch size of scan input " + std::to_string(first + spec.states) + " '" +
                   n.proto_input(first + spec.states) + "' is not static; fusebox unrolls Scan at import");
  }
  std::vector<std::vector<ValueId>> final_states(size_t(spec.states)), outputs(size_t(spec.scan_outputs));
  for (int64_t b = 0; b < batch.value(); ++b) {
    auto pick = [&](std::vector<OnnxValue>& values,
                    const std::string& what) -> Expected<std::vector<OnnxValue>> {
      std::vector<OnnxValue> picked;
      for (size_t k = 0; k < values.size(); ++k) {
        FUSEBOX_ASSIGN_OR_RETURN(ValueId id, as_value(ctx, n, values[k], what + " " + std::to_string(k)));
        FUSEBOX_ASSIGN_OR_RETURN(ValueId e, element(ctx, n, id, 0, b));
        picked.push_back(graph_value(
            e, "batch " + std::to_string(b) + " of " + what + " " + std::to_string(k) + " of " + n.describe(),
            values[k].value_of_inputs));
      }
      return picked;
    };
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<OnnxValue> bs, pick(states, "state"));
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<OnnxValue> bx, pick(xs, "scan input"));
    FUSEBOX_ASSIGN_OR_RETURN(ScanResult r, unroll_scan(ctx, n, spec, std::move(bs), bx, length,
                                                       "batch " + std::to_string(b) + ", "));
    for (int k = 0; k < spec.states; ++k) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId s,
                               as_value(ctx, n, r.states[size_t(k)], "state " + std::to_string(k)));
      final_states[size_t(k)].push_back(s);
    }
    for (int k = 0; k < spec.scan_outputs; ++k) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId y,
                               stack_scan_output(ctx, n, r.scanned[size_t(k)], 0, false,
                                                 "scan output " + std::to_string(spec.states + k)));
      outputs[size_t(k)].push_back(y);
    }
  }
  for (int k = 0; k < spec.states; ++k) {
    if (!n.has_output(k)) continue;
    FUSEBOX_ASSIGN_OR_RETURN(ValueId y, stack(ctx, n, final_states[size_t(k)], 0));
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, k, y));
  }
  for (int k = 0; k < spec.scan_outputs; ++k) {
    if (!n.has_output(spec.states + k)) continue;
    FUSEBOX_ASSIGN_OR_RETURN(ValueId y, stack(ctx, n, outputs[size_t(k)], 0));
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, spec.states + k, y));
  }
  return Status::ok();
}

}  // namespace

Expected<ValueId> as_value(ImportContext& ctx, OnnxNode& n, OnnxValue& v, const std::string& what) {
  if (!v.is_tensor())
    return n.error(what + " (from " + v.origin + ") is " + v.describe_kind() + ", not a tensor");
  if (v.id != kNoValue) return v.id;
  const Array* a = known(v);
  if (!a) {
    return n.error(what + " (from " + v.origin + ") holds sizes known only at run time " +
                   v.ints->to_string() + "; fusebox cannot use it as a tensor");
  }
  v.id = ctx.builder().constant(*a);
  if (v.id == kNoValue) return ctx.builder_status(n);
  return v.id;
}

Expected<std::vector<OnnxValue>> import_body(ImportContext& ctx, OnnxNode& n, const onnx::GraphProto& body,
                                             const std::vector<OnnxValue>& inputs, const std::string& where) {
  const std::string context = n.describe() + " (" + where + ")";
  if (body.input_size() != int(inputs.size())) {
    return n.error("the body '" + body.name() + "' has " + std::to_string(body.input_size()) +
                   " inputs, the op gives it " + std::to_string(inputs.size()));
  }
  if (body.sparse_initializer_size() > 0) return n.error("sparse initializers in a body are not supported");
  ctx.begin_scope();
  auto convert = [&]() -> Expected<std::vector<OnnxValue>> {
    for (const onnx::TensorProto& t : body.initializer()) {
      std::string what = "initializer '" + t.name() + "' of the body '" + body.name() + "'";
      Expected<Array> a = tensor_to_array(t, what, ctx.external());
      if (!a) return a.status().with_context(context);
      ctx.add_constant(t.name(), std::move(*a), what);
    }
    for (int i = 0; i < body.input_size(); ++i) ctx.bind(body.input(i).name(), inputs[size_t(i)]);
    for (int i = 0; i < body.node_size(); ++i) {
      Status s = ctx.convert_node(body.node(i), i);
      if (!s.is_ok()) return s.with_context(context);
    }
    std::vector<OnnxValue> outputs;
    for (const onnx::ValueInfoProto& o : body.output()) {
      const OnnxValue* v = ctx.find(o.name());
      if (!v)
        return n.error("the body's output '" + o.name() + "' is not produced by any of its nodes (" + where +
                       ")");
      outputs.push_back(*v);
    }
    return outputs;
  };
  Expected<std::vector<OnnxValue>> outputs = convert();
  ctx.end_scope();
  return outputs;
}

Expected<ValueId> stack(ImportContext& ctx, OnnxNode& n, std::vector<ValueId> values, int64_t axis) {
  std::vector<ValueId> parts;
  for (ValueId v : values) {
    Shape s = ctx.type(v).shape;
    s.insert(s.begin() + axis, Dim(1));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId r, ctx.reshape(n, v, s));
    parts.push_back(r);
  }
  ValueId r = parts.size() == 1 ? parts[0] : ctx.emit(Op::Concat, std::move(parts), {{"axis", axis}});
  if (r == kNoValue) return ctx.builder_status(n);
  return r;
}

void add_control_converters(ConverterTable& table) {
  table["If"] = convert_if;
  table["Loop"] = convert_loop;
  table["Scan"] = convert_scan;
}

}  // namespace fusebox::onnx_import
