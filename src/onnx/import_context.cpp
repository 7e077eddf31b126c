#include "onnx/import_context.h"

namespace fusebox::onnx_import {

namespace {

// Integer constants up to this many elements also act as known ints (shape vectors); larger ones
// are data, never folded.
constexpr int64_t kMaxKnownInts = 1 << 16;

}  // namespace

IntElem IntElem::from_dim(const Dim& d) {
  if (d.is_static()) return of(d.value());
  if (d.is_symbol()) return {Kind::Symbol, 0, d.symbol_name()};
  return unknown();
}

Dim IntElem::to_dim() const {
  if (kind == Kind::Number && number >= 0) return Dim(number);
  if (kind == Kind::Symbol) return Dim::symbol(symbol);
  return Dim::dynamic();
}

std::string IntElem::to_string() const {
  switch (kind) {
    case Kind::Number: return std::to_string(number);
    case Kind::Symbol: return symbol;
    case Kind::Unknown: return "?";
  }
  return "?";
}

bool KnownInts::all_numbers() const {
  for (const IntElem& e : elems)
    if (!e.is_number()) return false;
  return true;
}

std::vector<int64_t> KnownInts::numbers() const {
  std::vector<int64_t> v;
  for (const IntElem& e : elems) v.push_back(e.number);
  return v;
}

Shape KnownInts::shape() const {
  if (scalar) return {};
  return {Dim(static_cast<int64_t>(elems.size()))};
}

std::string KnownInts::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < elems.size(); ++i) s += (i ? "," : "") + elems[i].to_string();
  return s + "]";
}

Array KnownInts::to_array() const {
  Array a(dtype, scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(elems.size())});
  for (size_t k = 0; k < elems.size(); ++k) {
    if (dtype == DType::Bool) a.data<bool>()[k] = elems[k].number != 0;
    else a.set_i64(int64_t(k), elems[k].number);
  }
  return a;
}

std::string sanitize_name(const std::string& name) {
  std::string s;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    s += ok ? c : '_';
  }
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) s = "v" + s;
  return s;
}

ImportContext::ImportContext(std::string graph_name, int64_t opset, ExternalDataDir external)
    : b_(sanitize_name(graph_name)), opset_(opset), external_(std::move(external)) {}

std::string ImportContext::unique_name(const std::string& onnx_name) {
  std::string base = sanitize_name(onnx_name);
  std::string name = base;
  for (int k = 1; used_names_.count(name); ++k) name = base + "_" + std::to_string(k);
  used_names_.insert(name);
  return name;
}

void ImportContext::name_value(ValueId v, const std::string& onnx_name) {
  if (v == kNoValue || value_names_.count(v)) return;
  std::string name = unique_name(onnx_name);
  value_names_[v] = name;
  b_.name(v, name);
}

std::string ImportContext::symbol(const std::string& dim_param) {
  auto it = symbols_.find(dim_param);
  if (it != symbols_.end()) return it->second;
  std::string name = fresh_symbol(sanitize_name(dim_param));
  symbols_[dim_param] = name;
  return name;
}

std::string ImportContext::fresh_symbol(const std::string& base) {
  std::string name = base;
  for (int k = 1; used_symbols_.count(name); ++k) name = base + "_" + std::to_string(k);
  used_symbols_.insert(name);
  return name;
}

Status ImportContext::add_input(const std::string& onnx_name, DType dtype, Shape shape) {
  std::string name = unique_name(onnx_name);
  ValueId v = b_.input(name, dtype, std::move(shape));
  if (v == kNoValue) return b_.status();
  value_names_[v] = name;
  define(onnx_name, OnnxValue{v, nullptr, std::nullopt, "graph input", {onnx_name}});
  return Status::ok();
}

void ImportContext::add_given_input(const std::string& onnx_name, Array value) {
  add_constant(onnx_name, std::move(value), "graph input '" + onnx_name + "' (value given)");
}

void ImportContext::note_needed(const OnnxValue& v) {
  if (needs_value_.empty() && !v.value_of_inputs.empty()) needs_value_ = *v.value_of_inputs.begin();
}

void ImportContext::add_constant(const std::string& onnx_name, Array value, std::string origin) {
  OnnxValue ov;
  ov.constant = std::make_shared<const Array>(std::move(value));
  ov.origin = std::move(origin);
  define(onnx_name, std::move(ov));
}

Expected<OnnxValue*> ImportContext::lookup(OnnxNode& n, int i) {
  if (!n.has_input(i)) return n.error("input " + std::to_string(i) + " is missing");
  const std::string& name = n.input(i);
  auto it = values_.find(name);
  if (it == values_.end()) {
    return n.error("input " + std::to_string(i) + " '" + name +
                   "' is not defined by a graph input, an initializer or an earlier node");
  }
  if (!it->second.is_tensor()) {
    return n.error("input " + std::to_string(i) + " '" + name + "' is " + it->second.describe_kind() +
                   "; this input takes a tensor");
  }
  return &it->second;
}

std::string OnnxValue::describe_kind() const {
  switch (kind) {
    case Kind::Tensor:
      return "a tensor";
    case Kind::Sequence:
      return "a sequence of " + std::to_string(elements.size()) + " tensors";
    case Kind::Optional:
      return elements.empty() ? "an optional holding nothing"
                              : "an optional holding " + elements[0].describe_kind();
  }
  return "a value";
}

Expected<OnnxValue> ImportContext::any_input(OnnxNode& n, int i) {
  if (!n.has_input(i)) return n.error("input " + std::to_string(i) + " is missing");
  const OnnxValue* v = find(n.input(i));
  if (!v) {
    return n.error("input " + std::to_string(i) + " '" + n.proto_input(i) +
                   "' is not defined by a graph input, an initializer or an earlier node");
  }
  return *v;
}

bool ImportContext::input_is_tensor(const OnnxNode& n, int i) const {
  const OnnxValue* v = n.has_input(i) ? find(n.proto_input(i)) : nullptr;
  return !v || v->is_tensor();
}

Status ImportContext::set_output_value(OnnxNode& n, int i, OnnxValue v) {
  if (!n.has_output(i)) return Status::ok();
  if (v.is_tensor() && v.id != kNoValue) name_value(v.id, n.output(i));
  define(n.output(i), std::move(v));
  return Status::ok();
}

Expected<ValueId> ImportContext::add_element_input(const std::string& graph_name, DType dtype, Shape shape) {
  if (used_names_.count(graph_name)) {
    return Status::invalid("graph input '" + graph_name +
                           "' (an element of a sequence or optional input) clashes "
                           "with another input's name");
  }
  used_names_.insert(graph_name);
  ValueId v = b_.input(graph_name, dtype, std::move(shape));
  if (v == kNoValue) return b_.status();
  value_names_[v] = graph_name;
  return v;
}

Expected<TensorType> ImportContext::type_of(OnnxNode& n, int i) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue* v, lookup(n, i));
  if (v->id != kNoValue) return b_.type(v->id);
  if (v->constant) return TensorType{v->constant->dtype(), make_shape(v->constant->shape())};
  return TensorType{v->ints->dtype, v->ints->shape()};
}

const Array* ImportContext::constant(OnnxNode& n, int i) {
  Expected<OnnxValue*> v = lookup(n, i);
  if (!v) return nullptr;
  OnnxValue& ov = **v;
  if (ov.constant) return ov.constant.get();
  if (ov.ints && ov.ints->all_numbers()) {
    ov.constant = std::make_shared<const Array>(ov.ints->to_array());
    return ov.constant.get();
  }
  return nullptr;
}

std::optional<KnownInts> ImportContext::ints(OnnxNode& n, int i) {
  Expected<OnnxValue*> v = lookup(n, i);
  if (!v) return std::nullopt;
  OnnxValue& ov = **v;
  if (ov.ints) return ov.ints;
  const Array* a = ov.constant.get();
  if (!a || !(is_integer(a->dtype()) || a->dtype() == DType::Bool) || a->rank() > 1 ||
      a->numel() > kMaxKnownInts) {
    return std::nullopt;
  }
  KnownInts k{a->dtype(), a->rank() == 0, {}};
  for (int64_t e = 0; e < a->numel(); ++e) k.elems.push_back(IntElem::of(a->get_i64(e)));
  ov.ints = k;
  return k;
}

Expected<ValueId> ImportContext::value(OnnxNode& n, int i) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue* v, lookup(n, i));
  if (v->id != kNoValue) return v->id;
  const Array* data = constant(n, i);
  if (!data) {
    return n.error("input " + std::to_string(i) + " '" + n.input(i) + "' (from " + v->origin +
                   ") holds sizes known only at run time " + v->ints->to_string() +
                   "; fusebox cannot use it as a tensor");
  }
  v->id = b_.constant(*data);
  if (v->id == kNoValue) return builder_status(n);
  name_value(v->id, n.input(i));
  return v->id;
}

Expected<Array> ImportContext::require_constant(OnnxNode& n, int i, const std::string& what) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue* v, lookup(n, i));
  if (const Array* a = constant(n, i)) return *a;
  note_needed(*v);
  return n.error(what + " (input " + std::to_string(i) + " '" + n.input(i) + "', from " + v->origin +
                 ") must be known at import time");
}

Expected<KnownInts> ImportContext::require_ints(OnnxNode& n, int i, const std::string& what) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue* v, lookup(n, i));
  if (std::optional<KnownInts> k = ints(n, i)) return *k;
  note_needed(*v);
  return n.error(what + " (input " + std::to_string(i) + " '" + n.input(i) + "', from " + v->origin +
                 ") must be an integer vector known at import time");
}

Expected<std::vector<int64_t>> ImportContext::require_static_ints(OnnxNode& n, int i, const std::string& what) {
  FUSEBOX_ASSIGN_OR_RETURN(KnownInts k, require_ints(n, i, what));
  if (!k.all_numbers()) {
    return n.error(what + " (input " + std::to_string(i) + " '" + n.input(i) + "') depends on run-time sizes " +
                   k.to_string());
  }
  return k.numbers();
}

Expected<double> ImportContext::require_scalar(OnnxNode& n, int i, const std::string& what) {
  FUSEBOX_ASSIGN_OR_RETURN(Array a, require_constant(n, i, what));
  if (a.numel() != 1) return n.error(what + " must hold one value, got " + a.type_string());
  return a.get_f64(0);
}

Status ImportContext::builder_status(const OnnxNode& n) const {
  if (b_.status().is_ok()) return Status::ok();
  return b_.status().with_context(n.describe());
}

Status ImportContext::set_output(OnnxNode& n, int i, ValueId v) {
  if (v == kNoValue) {
    Status s = builder_status(n);
    return s.is_ok() ? n.error("internal: no value for output " + std::to_string(i)) : s;
  }
  if (!n.has_output(i)) return Status::ok();
  // A result is computed from the values of whatever its node reads (Shape reads no values, but
  // its result is known ints, set by set_output_ints).
  std::set<std::string> from;
  for (int k = 0; k < n.num_inputs(); ++k) {
    auto it = n.has_input(k) ? values_.find(n.proto_input(k)) : values_.end();
    if (it != values_.end()) from.insert(it->second.value_of_inputs.begin(), it->second.value_of_inputs.end());
  }
  define(n.output(i), OnnxValue{v, nullptr, std::nullopt, n.describe(), std::move(from)});
  name_value(v, n.output(i));
  return Status::ok();
}

Status ImportContext::set_output_constant(OnnxNode& n, int i, Array a) {
  if (!n.has_output(i)) return Status::ok();
  OnnxValue ov;
  ov.constant = std::make_shared<const Array>(std::move(a));
  ov.origin = n.describe();
  define(n.output(i), std::move(ov));
  return Status::ok();
}

Status ImportContext::set_output_ints(OnnxNode& n, int i, KnownInts k) {
  if (!n.has_output(i)) return Status::ok();
  OnnxValue ov;
  ov.ints = std::move(k);
  ov.origin = n.describe();
  define(n.output(i), std::move(ov));
  return Status::ok();
}

void ImportContext::define(const std::string& onnx_name, OnnxValue v) {
  auto it = values_.find(onnx_name);
  if (!scopes_.empty() && !scopes_.back().count(onnx_name)) {
    scopes_.back()[onnx_name] = it == values_.end() ? std::nullopt : std::optional<OnnxValue>(it->second);
  }
  values_[onnx_name] = std::move(v);
}

void ImportContext::begin_scope() { scopes_.emplace_back(); }

void ImportContext::end_scope() {
  if (scopes_.empty()) return;
  for (auto& [name, before] : scopes_.back()) {
    if (before) values_[name] = std::move(*before);
    else values_.erase(name);
  }
  scopes_.pop_back();
}

bool ImportContext::defined_here(const std::string& onnx_name) const {
  return scopes_.empty() ? defined(onnx_name) : scopes_.back().count(onnx_name) > 0;
}

const OnnxValue* ImportContext::find(const std::string& onnx_name) const {
  auto it = values_.find(onnx_name);
  return it == values_.end() ? nullptr : &it->second;
}

void ImportContext::bind(const std::string& onnx_name, OnnxValue v) { define(onnx_name, std::move(v)); }

Status ImportContext::convert_node(const onnx::NodeProto& proto, int index) {
  if (!convert_node_) return Status::internal("no node converter for subgraphs");
  return convert_node_(*this, proto, index);
}

ValueId ImportContext::emit(Op op, std::vector<ValueId> inputs, Attrs attrs) {
  return b_.op(op, std::move(inputs), std::move(attrs));
}

Expected<ValueId> ImportContext::reshape(OnnxNode& n, ValueId x, const Shape& target) {
  Shape s = target;
  int unknown = 0;
  for (Dim& d : s) {
    if (d.is_dynamic()) ++unknown;
  }
  if (unknown > 1) {
    return n.error("the result shape [" + shape_to_string(target) + "] has " + std::to_string(unknown) +
                   " sizes fusebox cannot name (they depend on run-time sizes through ops other than "
                   "the input dims); at most one can be inferred");
  }
  return emit(Op::Reshape, {x}, {{"shape", s}});
}

Expected<std::optional<ImportContext::RunTimeShape>> ImportContext::run_time_shape(OnnxNode& n, ValueId x,
                                                                                   int i,
                                                                                   const std::string& rule) {
  FUSEBOX_ASSIGN_OR_RETURN(OnnxValue * v, lookup(n, i));
  if (v->id == kNoValue || ints(n, i)) return std::optional<RunTimeShape>();
  // The result's rank is the input's length: it must be static (else the caller's path for
  // values known at import time applies, which names what is missing).
  const TensorType t = type(v->id);
  const bool integer = t.dtype == DType::I64 || t.dtype == DType::I32;
  if (!integer || t.rank() != 1 || !t.shape[0].is_static()) return std::optional<RunTimeShape>();
  Shape symbols;
  for (int64_t k = 0; k < t.shape[0].value(); ++k) {
    symbols.push_back(Dim::symbol(fresh_symbol(sanitize_name(n.output(0)) + "_d" + std::to_string(k))));
  }
  ValueId bound = emit(Op::BindSymbols, {x, v->id}, {{"symbols", symbols}, {"rule", rule}});
  if (bound == kNoValue) return builder_status(n);
  return std::optional<RunTimeShape>(RunTimeShape{bound, symbols});
}

Expected<ValueId> ImportContext::run_time_nonzero(OnnxNode& n, ValueId x) {
  const Shape count{Dim::symbol(fresh_symbol(sanitize_name(n.output(0)) + "_nnz"))};
  ValueId bound = emit(Op::BindSymbols, {x, x}, {{"symbols", count}, {"rule", std::string("count_nonzero")}});
  ValueId found = bound == kNoValue ? kNoValue : emit(Op::NonZero, {bound}, {{"count", count}});
  if (found == kNoValue) return builder_status(n);
  return found;
}

Status ImportContext::add_output(const std::string& onnx_name, OnnxOutputLayout* layout) {
  auto it = values_.find(onnx_name);
  if (it == values_.end()) {
    return Status::invalid("graph output '" + onnx_name + "' is not produced by any node, input or initializer");
  }
  // An optional holding a value returns that value; one holding nothing returns no tensors.
  OnnxValue* ov = &it->second;
  OnnxOutputLayout l;
  if (ov->kind == OnnxValue::Kind::Optional && ov->elements.empty()) l = {OnnxValueKind::None, 0};
  if (ov->kind == OnnxValue::Kind::Optional && !ov->elements.empty()) ov = &ov->elements[0];
  if (ov->kind == OnnxValue::Kind::Sequence) {
    l = {OnnxValueKind::Sequence, ov->elements.size()};
    for (size_t k = 0; k < ov->elements.size(); ++k) {
      FUSEBOX_RETURN_IF_ERROR(add_tensor_output(ov->elements[k], onnx_name + "_" + std::to_string(k)));
    }
  } else if (ov->is_tensor()) {
    FUSEBOX_RETURN_IF_ERROR(add_tensor_output(*ov, onnx_name));
  }
  if (layout) *layout = l;
  return b_.status();
}

// `onnx_name`: the output's ONNX name, or "<name>_<k>" for element k of a sequence output.
Status ImportContext::add_tensor_output(OnnxValue& ov, const std::string& onnx_name) {
  ValueId v = ov.id;
  if (v == kNoValue) {
    if (!ov.constant && !(ov.ints && ov.ints->all_numbers())) {
      return Status::invalid("graph output '" + onnx_name + "' holds sizes known only at run time " +
                             ov.ints->to_string() + "; fusebox cannot return it");
    }
    if (!ov.constant) ov.constant = std::make_shared<const Array>(ov.ints->to_array());
    v = ov.id = b_.constant(*ov.constant);
    if (v == kNoValue) return b_.status();
    name_value(v, onnx_name);
  }
  // An output keeps its ONNX name: a value named otherwise (a graph input, an alias through
  // Identity, an output listed twice) is returned through an identity of its own.
  auto named = value_names_.find(v);
  std::string want = sanitize_name(onnx_name);
  if (named == value_names_.end() || named->second != want || returned_.count(v)) {
    v = emit(Op::Identity, {v});
    if (v == kNoValue) return b_.status();
    name_value(v, onnx_name);
  }
  returned_.insert(v);
  b_.output(v);
  return b_.status();
}

Expected<Graph> ImportContext::build() { return b_.build(); }

}  // namespace fusebox::onnx_import
