#include "ir/graph.h"

#include <algorithm>
#include <set>

#include "ir/check.h"

namespace fusebox {

const AttrValue* Node::attr_or_default(std::string_view name) const {
  if (const AttrValue* v = attrs.find(name)) return v;
  const AttrSpec* spec = info().find_attr(name);
  if (spec && spec->default_value) return &*spec->default_value;
  return nullptr;
}

namespace {
template <typename T>
const T& get_attr(const Node& n, std::string_view name) {
  const AttrValue* v = n.attr_or_default(name);
  FUSEBOX_CHECK(v != nullptr) << n.info().keyword << ": attribute '" << name << "' is missing";
  const T* t = std::get_if<T>(v);
  FUSEBOX_CHECK(t != nullptr) << n.info().keyword << ": attribute '" << name << "' has type "
                              << attr_type_name(attr_type_of(*v));
  return *t;
}
}  // namespace

int64_t Node::attr_i64(std::string_view name) const { return get_attr<int64_t>(*this, name); }
double Node::attr_f64(std::string_view name) const { return get_attr<double>(*this, name); }
bool Node::attr_bool(std::string_view name) const { return get_attr<bool>(*this, name); }
const std::string& Node::attr_str(std::string_view name) const {
  return get_attr<std::string>(*this, name);
}
const std::vector<int64_t>& Node::attr_i64s(std::string_view name) const {
  return get_attr<std::vector<int64_t>>(*this, name);
}
const std::vector<double>& Node::attr_f64s(std::string_view name) const {
  return get_attr<std::vector<double>>(*this, name);
}
const Shape& Node::attr_dims(std::string_view name) const { return get_attr<Shape>(*this, name); }
DType Node::attr_dtype(std::string_view name) const { return get_attr<DType>(*this, name); }
const Array& Node::attr_array(std::string_view name) const {
  const auto& p = get_attr<std::shared_ptr<const Array>>(*this, name);
  FUSEBOX_CHECK(p != nullptr) << "null array attribute '" << name << "'";
  return *p;
}

Graph::Graph(const Graph& other)
    : name_(other.name_),
      values_(other.values_),
      inputs_(other.inputs_),
      nodes_(other.nodes_),
      outputs_(other.outputs_),
      optional_outputs_(other.optional_outputs_),
      unmaterialized_outputs_(other.unmaterialized_outputs_) {
  for (Node& n : nodes_)
    if (n.body) n.body = std::make_shared<Graph>(*n.body);
}

Graph& Graph::operator=(const Graph& other) {
  if (this != &other) *this = Graph(other);
  return *this;
}

namespace {
std::vector<int64_t> sorted_unique(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}
}  // namespace

void Graph::set_optional_outputs(std::vector<int64_t> slots) { optional_outputs_ = sorted_unique(std::move(slots)); }

void Graph::set_unmaterialized_outputs(std::vector<int64_t> slots) {
  unmaterialized_outputs_ = sorted_unique(std::move(slots));
}

bool Graph::output_materialized(size_t slot) const {
  return !std::binary_search(unmaterialized_outputs_.begin(), unmaterialized_outputs_.end(), int64_t(slot));
}

ValueId Graph::add_value(TensorType type, std::string name) {
  values_.push_back(ValueInfo{std::move(type), std::move(name)});
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_input(std::string name, TensorType type) {
  ValueId v = add_value(std::move(type), std::move(name));
  inputs_.push_back(v);
  return v;
}

size_t Graph::add_node(Node node) {
  nodes_.push_back(std::move(node));
  return nodes_.size() - 1;
}

std::vector<ValueId> Graph::add_node(Op op, std::vector<ValueId> inputs,
                                     std::vector<TensorType> results, Attrs attrs,
                                     std::shared_ptr<Graph> body) {
  Node n{op, std::move(inputs), {}, std::move(attrs), std::move(body)};
  for (TensorType& t : results) n.outputs.push_back(add_value(std::move(t)));
  std::vector<ValueId> outs = n.outputs;
  add_node(std::move(n));
  return outs;
}

int Graph::find_input(std::string_view name) const {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (value(inputs_[i]).name == name) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> Graph::input_symbols() const {
  std::vector<std::string> syms;
  for (ValueId v : inputs_) {
    for (const Dim& d : type(v).shape) {
      if (d.is_symbol() && std::find(syms.begin(), syms.end(), d.symbol_name()) == syms.end())
        syms.push_back(d.symbol_name());
    }
  }
  return syms;
}

namespace {

// Text names are [A-Za-z0-9_.]+; anything else a builder wrote becomes '_' so printed text
// always parses back.
std::string printable_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.';
    if (!ok) c = '_';
  }
  return out;
}

}  // namespace

std::vector<std::string> value_display_names(const Graph& g) {
  std::vector<std::string> names(g.num_values());
  // The values that get a name of their own, in definition order. Later results of a
  // multi-result node are written %first#k, so they take neither a name nor a number.
  std::vector<ValueId> order;
  for (ValueId v : g.inputs())
    if (g.valid(v)) order.push_back(v);
  for (const Node& n : g.nodes())
    if (!n.outputs.empty() && g.valid(n.outputs[0])) order.push_back(n.outputs[0]);

  // Own names are claimed first so that numbers skip them; a repeated name gets a suffix.
  std::set<std::string> used;
  std::vector<std::string> own(order.size());
  std::vector<bool> repeated(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    own[i] = printable_name(g.value(order[i]).name);
    if (!own[i].empty() && !used.insert(own[i]).second) repeated[i] = true;
  }
  int next = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    std::string n = own[i];
    if (n.empty()) {
      do {
        n = std::to_string(next++);
      } while (used.count(n));
    } else if (repeated[i]) {
      int k = 1;
      do {
        n = own[i] + "." + std::to_string(k++);
      } while (used.count(n));
    }
    used.insert(n);
    names[static_cast<size_t>(order[i])] = n;
  }
  for (const Node& n : g.nodes()) {
    if (n.outputs.empty() || !g.valid(n.outputs[0])) continue;
    const std::string& first = names[static_cast<size_t>(n.outputs[0])];
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (g.valid(n.outputs[k])) names[static_cast<size_t>(n.outputs[k])] = first + "#" + std::to_string(k);
  }
  return names;
}

std::string describe_node(const Graph& g, const Node& n, const std::vector<std::string>& names) {
  std::string s;
  if (n.loc.line > 0) s += std::to_string(n.loc.line) + ":" + std::to_string(n.loc.column) + ": ";
  if (!n.outputs.empty() && g.valid(n.outputs[0])) s += "%" + names[static_cast<size_t>(n.outputs[0])];
  if (n.outputs.size() > 1) s += ":" + std::to_string(n.outputs.size());
  s += " = ";
  s += n.info().keyword;
  return s;
}

const Graph* Module::find(std::string_view name) const {
  for (const Graph& g : functions)
    if (g.name() == name) return &g;
  return nullptr;
}

}  // namespace fusebox
