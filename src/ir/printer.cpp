// The .fbir printer. The text it writes is the canonical form the parser reads back unchanged:
// one node per line, two-space indents, attributes in schema order, values named by
// value_display_names(), results of multi-result nodes used as %name#k.
#include "ir/printer.h"

#include "ir/attr_text.h"

namespace fusebox {

namespace {

class GraphPrinter {
 public:
  explicit GraphPrinter(const Graph& g) : g_(g), names_(value_display_names(g)) {
    // Every result of a multi-result node is used as %first#k, the first one included.
    for (const Node& n : g.nodes()) {
      if (n.outputs.size() > 1 && g.valid(n.outputs[0])) names_[static_cast<size_t>(n.outputs[0])] += "#0";
    }
  }

  // "(%x: f32[N], %w: f32[N,4])"
  void params(std::string& out) const {
    out += "(";
    for (size_t i = 0; i < g_.inputs().size(); ++i) {
      ValueId v = g_.inputs()[i];
      if (i) out += ", ";
      out += use(v) + ": " + type(v);
    }
    out += ")";
  }

  // Nodes, the return line and the closing brace, each line indented by `indent`.
  void block(std::string& out, const std::string& indent) const {
    for (const Node& n : g_.nodes()) node(out, n, indent);
    out += indent + "return";
    for (size_t i = 0; i < g_.outputs().size(); ++i) out += (i ? ", " : " ") + use(g_.outputs()[i]);
    out += output_slots();
    out += "\n";
    out += indent.substr(2) + "}\n";
  }

 private:
  // " {optional = [0], unmaterialized = [0]}" when some output is optional (spec §4.6).
  std::string output_slots() const {
    if (g_.optional_outputs().empty() && g_.unmaterialized_outputs().empty()) return "";
    auto list = [](const std::vector<int64_t>& v) {
      std::string t = "[";
      for (size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + std::to_string(v[i]);
      return t + "]";
    };
    std::string t = " {optional = " + list(g_.optional_outputs());
    if (!g_.unmaterialized_outputs().empty()) t += ", unmaterialized = " + list(g_.unmaterialized_outputs());
    return t + "}";
  }

  std::string use(ValueId v) const {
    if (!g_.valid(v)) return "%<invalid>";
    return "%" + names_[static_cast<size_t>(v)];
  }
  std::string type(ValueId v) const { return g_.valid(v) ? g_.type(v).to_string() : "<invalid>"; }

  void node(std::string& out, const Node& n, const std::string& indent) const {
    const OpInfo& info = n.info();
    out += indent;
    if (!n.outputs.empty()) {
      ValueId first = n.outputs[0];
      std::string name = use(first);
      if (n.outputs.size() > 1) name = name.substr(0, name.size() - 2) + ":" + std::to_string(n.outputs.size());
      out += name + " = ";
    }
    out += info.keyword;
    for (size_t i = 0; i < n.inputs.size(); ++i) out += (i ? ", " : " ") + use(n.inputs[i]);
    attrs(out, n);
    out += " :";
    for (size_t i = 0; i < n.outputs.size(); ++i) out += (i ? ", " : " ") + type(n.outputs[i]);
    if (n.body) {
      GraphPrinter body(*n.body);
      out += " ";
      body.params(out);
      out += " {\n";
      body.block(out, indent + "  ");
      return;  // block() ended the line with the closing brace
    }
    out += "\n";
  }

  // Schema order first; names outside the schema (only in unverified graphs) follow in node
  // order so that nothing is silently dropped.
  static void attrs(std::string& out, const Node& n) {
    if (n.attrs.empty()) return;
    const OpInfo& info = n.info();
    std::string dict;
    auto add = [&](const std::string& name, const AttrValue& v) {
      dict += (dict.empty() ? "" : ", ") + name + " = " + print_attr_value(v);
    };
    for (const AttrSpec& spec : info.attrs)
      if (const AttrValue* v = n.attrs.find(spec.name)) add(spec.name, *v);
    for (const auto& [name, value] : n.attrs.entries())
      if (!info.find_attr(name)) add(name, value);
    out += " {" + dict + "}";
  }

  const Graph& g_;
  std::vector<std::string> names_;
};

}  // namespace

std::string print_graph(const Graph& g) {
  GraphPrinter p(g);
  std::string out = "func @" + g.name();
  p.params(out);
  out += " -> ";
  const std::vector<ValueId>& outs = g.outputs();
  if (outs.size() != 1) out += "(";
  for (size_t i = 0; i < outs.size(); ++i) {
    if (i) out += ", ";
    out += g.valid(outs[i]) ? g.type(outs[i]).to_string() : "<invalid>";
  }
  if (outs.size() != 1) out += ")";
  out += " {\n";
  p.block(out, "  ");
  return out;
}

std::string print_module(const Module& m) {
  std::string out;
  for (size_t i = 0; i < m.functions.size(); ++i) {
    if (i) out += "\n";
    out += print_graph(m.functions[i]);
  }
  return out;
}

}  // namespace fusebox
