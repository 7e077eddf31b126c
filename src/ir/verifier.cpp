#include "ir/verifier.h"

#include <algorithm>
#include <set>

#include "ir/batch_region.h"
#include "ir/outline.h"
#include "ir/reduction_region.h"
#include "ir/region_prologue.h"
#include "ir/shape_inference.h"
#include "ir/size.h"
#include "ir/transform_region.h"

namespace fusebox {

bool type_refines(const TensorType& declared, const TensorType& inferred) {
  if (declared.dtype != inferred.dtype || declared.rank() != inferred.rank()) return false;
  for (size_t i = 0; i < declared.shape.size(); ++i) {
    const Dim& d = declared.shape[i];
    const Dim& in = inferred.shape[i];
    if (!(d == in) && !in.is_dynamic() && !d.is_dynamic()) return false;
  }
  return true;
}

Status verify_attrs(const Node& n) {
  const OpInfo& info = n.info();
  for (const auto& [name, value] : n.attrs.entries()) {
    const AttrSpec* spec = info.find_attr(name);
    if (!spec) {
      std::string known;
      for (const AttrSpec& a : info.attrs) known += (known.empty() ? "" : ", ") + a.name;
      return Status::invalid(std::string(info.keyword) + ": unknown attribute '" + name + "'" +
                             (known.empty() ? " (it takes none)" : " (it takes: " + known + ")"));
    }
    if (attr_type_of(value) != spec->type) {
      return Status::invalid(std::string(info.keyword) + ": attribute '" + name + "' must be " +
                             std::string(attr_type_name(spec->type)) + ", got " +
                             std::string(attr_type_name(attr_type_of(value))));
    }
    if (!spec->choices.empty()) {
      const std::string& s = std::get<std::string>(value);
      if (std::find(spec->choices.begin(), spec->choices.end(), s) == spec->choices.end()) {
        std::string allowed;
        for (const std::string& c : spec->choices) allowed += (allowed.empty() ? "" : ", ") + c;
        return Status::invalid(std::string(info.keyword) + ": attribute '" + name + "' is \"" + s +
                               "\", expected one of " + allowed);
      }
    }
    if (spec->type == AttrType::Array && !std::get<std::shared_ptr<const Array>>(value)) {
      return Status::invalid(std::string(info.keyword) + ": attribute '" + name + "' is empty");
    }
  }
  for (const AttrSpec& spec : info.attrs) {
    if (spec.required && !n.attrs.has(spec.name)) {
      return Status::invalid(std::string(info.keyword) + ": missing required attribute '" + spec.name + "'");
    }
  }
  return Status::ok();
}

namespace {

// `where` builds the error's prefix only on failure: a node's description includes its graph's
// name, which for a large region body is long enough that building it per step is quadratic.
template <typename Where>
Status check_symbols_bound(const Shape& s, const std::set<std::string>& bound, const Where& where) {
  for (const Dim& d : s) {
    if (d.is_symbol() && !bound.count(d.symbol_name())) {
      return Status::invalid(where() + ": symbol '" + d.symbol_name() +
                             "' is not bound by any input shape or earlier bind_symbols");
    }
  }
  return Status::ok();
}

}  // namespace

// A region body: a graph over rank-0 values whose every step is itself a valid node.
Status verify_body(const Graph& body, const std::string& where) {
  Status s = verify(body);
  if (!s.is_ok()) return s.with_context(where + ": body");
  for (size_t v = 0; v < body.num_values(); ++v) {
    const TensorType& t = body.type(static_cast<ValueId>(v));
    if (t.rank() != 0) {
      return Status::invalid(where + ": body value has type " + t.to_string() + "; body values are scalars");
    }
  }
  std::vector<std::string> names = value_display_names(body);
  for (const Node& n : body.nodes()) {
    if (n.body) return Status::invalid(where + ": regions do not nest");
    // The region executors run each step once per element; a step that reorders or combines
    // elements (reduce_sum with no axes, transpose with no perm) type-checks on scalars but has
    // no per-element form. The same test that mark-elementwise-regions uses decides.
    if (n.op == Op::Constant || is_region_step(body, n)) continue;
    return Status::invalid(where + ": body: " + describe_node(body, n, names) + ": " +
                           std::string(n.info().keyword) + " is not an element-wise step (its kind is " +
                           std::string(op_kind_name(op_kind(n.op))) +
                           "); a region body holds element-wise and broadcast steps and scalar constants");
  }
  return Status::ok();
}

// A reduction_region body: whole tensors, the rules of ir/reduction_region.h.
Status verify_reduction_body(const Graph& body, int64_t row_axes, const std::string& where) {
  Status s = verify(body);
  if (!s.is_ok()) return s.with_context(where + ": body");
  s = check_reduction_body(body, row_axes);
  if (!s.is_ok()) return s.with_context(where);
  return Status::ok();
}

// A transform_region body: whole tensors, every node an index-only step (ir/transform_region.h).
Status verify_transform_body(const Graph& body, const std::string& where) {
  Status s = verify(body);
  if (!s.is_ok()) return s.with_context(where + ": body");
  if (body.inputs().size() != 1 || body.outputs().size() != 1) {
    return Status::invalid(where + ": body must take one value and return one value");
  }
  std::vector<std::string> names = value_display_names(body);
  for (const Node& n : body.nodes()) {
    std::string why;
    if (is_transform_step(body, n, &why)) continue;
    return Status::invalid(where + ": body: " + describe_node(body, n, names) + ": not a transform step (" +
                           why + "); a transform_region body holds slice, transpose, flip, pad, resize, "
                           "reshape and value-preserving casts");
  }
  return Status::ok();
}

Status verify(const Graph& g) {
  std::vector<std::string> names = value_display_names(g);
  std::string fn = "@" + g.name();
  std::vector<bool> defined(g.num_values(), false);
  std::set<std::string> input_names;
  std::set<std::string> bound;
  for (ValueId v : g.inputs()) {
    if (!g.valid(v)) return Status::internal(fn + ": input refers to an unknown value");
    const std::string& name = g.value(v).name;
    if (name.empty()) return Status::invalid(fn + ": every input needs a name");
    if (!input_names.insert(name).second) return Status::invalid(fn + ": input %" + name + " declared twice");
    if (defined[static_cast<size_t>(v)]) return Status::invalid(fn + ": input %" + name + " listed twice");
    defined[static_cast<size_t>(v)] = true;
    Status size = check_size(g.type(v).shape);
    if (!size.is_ok()) return size.with_context(fn + ": input %" + name);
    for (const Dim& d : g.type(v).shape)
      if (d.is_symbol()) bound.insert(d.symbol_name());
  }
  for (const Node& n : g.nodes()) {
    auto where = [&] { return fn + ": " + describe_node(g, n, names); };
    std::vector<TensorType> in_types;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ValueId v = n.inputs[i];
      if (!g.valid(v)) return Status::invalid(where() + ": operand " + std::to_string(i) + " is not a value");
      if (!defined[static_cast<size_t>(v)]) {
        return Status::invalid(where() + ": operand %" + names[static_cast<size_t>(v)] +
                               " is used before it is defined");
      }
      in_types.push_back(g.type(v));
    }
    const OpInfo& info = n.info();
    if (info.num_outputs >= 0 && static_cast<int>(n.outputs.size()) != info.num_outputs) {
      return Status::invalid(where() + ": has " + std::to_string(n.outputs.size()) + " results, " +
                             std::string(info.keyword) + " defines " + std::to_string(info.num_outputs));
    }
    Status attrs = verify_attrs(n);
    if (!attrs.is_ok()) return attrs.with_context(where());
    if (n.body && info.num_outputs >= 0) {
      return Status::invalid(where() + ": " + std::string(info.keyword) + " takes no body");
    }
    if (n.body && n.op == Op::TransformRegion) {
      FUSEBOX_RETURN_IF_ERROR(verify_transform_body(*n.body, where()));
    } else if (n.body && n.op == Op::ReductionRegion) {
      FUSEBOX_RETURN_IF_ERROR(verify_reduction_body(*n.body, n.attr_i64("row_axes"), where()));
    } else if (n.body && n.op == Op::BatchElementwiseRegion) {
      Status s = verify(*n.body);  // whole-tensor item region (with its prologue) and transform
      if (!s.is_ok()) return s.with_context(where() + ": body");
    } else if (n.body && prologue_input(n) >= 0) {
      Expected<PrologueParts> parts = split_prologue(n);
      if (!parts) return parts.status().with_context(where());
      FUSEBOX_RETURN_IF_ERROR(verify_transform_body(*parts->transform.body, where() + ": prologue"));
      FUSEBOX_RETURN_IF_ERROR(verify_body(*parts->region.body, where()));
    } else if (n.body) {
      FUSEBOX_RETURN_IF_ERROR(verify_body(*n.body, where()));
    }
    // bind_symbols binds its symbols for the nodes after it (ir/bind_symbols.h), once each.
    if (n.op == Op::BindSymbols) {
      for (const Dim& d : n.attr_dims("symbols")) {
        if (d.is_symbol() && bound.count(d.symbol_name())) {
          return Status::invalid(where() + ": symbol '" + d.symbol_name() +
                                 "' is already bound before this node");
        }
      }
    }
    for (const auto& [name, value] : n.attrs.entries()) {
      if (n.op == Op::BindSymbols && name == "symbols") continue;
      if (const Shape* s = std::get_if<Shape>(&value)) {
        FUSEBOX_RETURN_IF_ERROR(check_symbols_bound(*s, bound, [&, &attr = name] { return where() + ": attribute '" + attr + "'"; }));
      }
    }
    Expected<std::vector<TensorType>> inferred = infer_result_types(n, in_types);
    if (!inferred) return inferred.status().with_context(where());
    if (inferred->size() != n.outputs.size()) {
      return Status::invalid(where() + ": has " + std::to_string(n.outputs.size()) + " results, expected " +
                             std::to_string(inferred->size()));
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      ValueId v = n.outputs[i];
      if (!g.valid(v)) return Status::internal(where() + ": result is not a value");
      if (defined[static_cast<size_t>(v)]) {
        return Status::invalid(where() + ": %" + names[static_cast<size_t>(v)] + " is defined twice");
      }
      defined[static_cast<size_t>(v)] = true;
      const TensorType& declared = g.type(v);
      FUSEBOX_RETURN_IF_ERROR(check_symbols_bound(declared.shape, bound, where));
      Status size = check_size(declared.shape);
      if (!size.is_ok()) return size.with_context(where() + ": result " + std::to_string(i));
      if (!type_refines(declared, (*inferred)[i])) {
        return Status::invalid(where() + ": result " + std::to_string(i) + " is declared " +
                               declared.to_string() + " but the operands give " + (*inferred)[i].to_string());
      }
    }
    if (n.op == Op::BindSymbols) {
      for (const Dim& d : n.attr_dims("symbols")) bound.insert(d.symbol_name());
    }
  }
  if (g.outputs().empty()) return Status::invalid(fn + ": returns nothing");
  for (ValueId v : g.outputs()) {
    if (!g.valid(v) || !defined[static_cast<size_t>(v)]) {
      return Status::invalid(fn + ": returns a value that is not defined");
    }
  }
  const int64_t n_out = int64_t(g.outputs().size());
  for (int64_t k : g.optional_outputs()) {
    if (k < 0 || k >= n_out) {
      return Status::invalid(fn + ": optional output " + std::to_string(k) + " is not one of its " +
                             std::to_string(n_out) + " outputs");
    }
  }
  for (int64_t k : g.unmaterialized_outputs()) {
    const auto& opt = g.optional_outputs();
    if (!std::binary_search(opt.begin(), opt.end(), k)) {
      return Status::invalid(fn + ": output " + std::to_string(k) + " is unmaterialized but not optional");
    }
  }
  return Status::ok();
}

Status verify(const Module& m) {
  std::set<std::string> seen;
  for (const Graph& g : m.functions) {
    if (!seen.insert(g.name()).second) return Status::invalid("function @" + g.name() + " defined twice");
    FUSEBOX_RETURN_IF_ERROR(verify(g));
  }
  return Status::ok();
}

}  // namespace fusebox
