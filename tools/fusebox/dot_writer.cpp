#include "dot_writer.h"

#include <set>
#include <utility>
#include <vector>

#include "ir/attr_text.h"

namespace fusebox::cli {

namespace {

std::string quoted(std::string_view text) { return "\"" + dot_escape(text) + "\""; }

// The box text of a primitive node: its keyword (with the value of a scalar constant), then one
// line per result. Body values are per-element scalars without names of their own, so body
// nodes show only their types.
std::string box_label(const Graph& g, const Node& n, const std::vector<std::string>& names, bool in_body) {
  std::string label(n.info().keyword);
  if (n.op == Op::Constant) {
    const AttrValue* v = n.attrs.find("value");
    const auto* array = v ? std::get_if<std::shared_ptr<const Array>>(v) : nullptr;
    if (array && *array && (*array)->numel() == 1) label += " " + format_f64((*array)->get_f64(0));
  }
  for (ValueId r : n.outputs) {
    label += "\n";
    if (!in_body) label += "%" + names[static_cast<size_t>(r)] + ": ";
    label += g.type(r).to_string();
  }
  return label;
}

std::string region_label(const Node& n) {
  std::string kind(n.info().keyword);
  const AttrValue* name = n.attrs.find("name");
  const auto* text = name ? std::get_if<std::string>(name) : nullptr;
  if (!text || text->empty() || *text == kind) return kind;
  return *text + " (" + kind + ")";
}

class DotWriter {
 public:
  std::string write(const Graph& g) {
    out_ = "digraph " + quoted(g.name()) + " {\n";
    out_ += "  label=" + quoted("@" + g.name() + " (fused)") + ";\n  labelloc=t;\n  fontname=\"Helvetica\";\n";
    out_ += "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n";
    out_ += "  edge [arrowsize=0.6];\n";
    std::vector<std::string> names = value_display_names(g);
    std::vector<std::string> source(g.num_values());
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      ValueId v = g.inputs()[i];
      std::string id = "in" + std::to_string(i);
      source[static_cast<size_t>(v)] = id;
      out_ += "  " + id + " [shape=ellipse, label=" +
              quoted("%" + names[static_cast<size_t>(v)] + "\n" + g.type(v).to_string()) + "];\n";
    }
    emit_nodes(g, names, source, /*in_body=*/false, "  ");
    for (size_t k = 0; k < g.outputs().size(); ++k) {
      ValueId v = g.outputs()[k];
      std::string id = "out" + std::to_string(k);
      out_ += "  " + id + " [shape=ellipse, label=" +
              quoted("output " + std::to_string(k) + ": %" + names[static_cast<size_t>(v)] + "\n" +
                     g.type(v).to_string()) +
              "];\n";
      add_edge(source[static_cast<size_t>(v)], id);
    }
    // Edges go last, at the top level: an edge written inside a cluster would pull its outer
    // endpoint into that cluster.
    for (const auto& [from, to] : edges_) out_ += "  " + from + " -> " + to + ";\n";
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  // Writes the nodes of `g` (a function or a region body). `source[v]` is the DOT node that
  // produces value v; it is filled in for every result as nodes are written.
  void emit_nodes(const Graph& g, const std::vector<std::string>& names, std::vector<std::string>& source,
                  bool in_body, const std::string& indent) {
    for (const Node& n : g.nodes()) {
      if (n.body) {
        emit_region(g, n, source, indent);
        continue;
      }
      std::string id = "n" + std::to_string(next_node_++);
      std::string style = n.op == Op::Constant ? ", style=filled, fillcolor=\"#eeeeee\"" : "";
      out_ += indent + id + " [label=" + quoted(box_label(g, n, names, in_body)) + style + "];\n";
      std::set<std::string> seen;
      for (ValueId v : n.inputs) {
        const std::string& from = source[static_cast<size_t>(v)];
        if (seen.insert(from).second) add_edge(from, id);
      }
      for (ValueId r : n.outputs) source[static_cast<size_t>(r)] = id;
    }
  }

  void emit_region(const Graph& g, const Node& n, std::vector<std::string>& source, const std::string& indent) {
    const Graph& body = *n.body;
    out_ += indent + "subgraph cluster_" + std::to_string(next_cluster_++) + " {\n";
    std::string inner = indent + "  ";
    out_ += inner + "label=" + quoted(region_label(n)) + ";\n";
    out_ += inner + "style=\"rounded,filled\";\n" + inner + "fillcolor=\"#e8f0fe\";\n" + inner + "color=\"#4a6fa5\";\n";
    std::vector<std::string> body_source(body.num_values());
    for (size_t i = 0; i < body.inputs().size() && i < n.inputs.size(); ++i) {
      body_source[static_cast<size_t>(body.inputs()[i])] = source[static_cast<size_t>(n.inputs[i])];
    }
    if (body.nodes().empty()) {  // only pass-through results: keep the cluster visible
      out_ += inner + "n" + std::to_string(next_node_++) + " [shape=plaintext, label=\"(pass-through)\"];\n";
    }
    emit_nodes(body, value_display_names(body), body_source, /*in_body=*/true, inner);
    out_ += indent + "}\n";
    for (size_t k = 0; k < body.outputs().size() && k < n.outputs.size(); ++k) {
      source[static_cast<size_t>(n.outputs[k])] = body_source[static_cast<size_t>(body.outputs()[k])];
    }
  }

  void add_edge(const std::string& from, const std::string& to) {
    if (!from.empty()) edges_.emplace_back(from, to);  // empty: an unverified graph; skip the edge
  }

  std::string out_;
  int next_node_ = 0;
  int next_cluster_ = 0;
  std::vector<std::pair<std::string, std::string>> edges_;
};

}  // namespace

std::string dot_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += c;
    }
  }
  return out;
}

std::string graph_to_dot(const Graph& g) { return DotWriter().write(g); }

}  // namespace fusebox::cli
