#include "fusion/recognize_match.h"

#include <algorithm>
#include <cmath>

#include "ir/shape.h"

namespace fusebox {

RecognizeMatcher::RecognizeMatcher(Graph& graph, const UseInfo& u)
    : g(graph), uses(u), names(value_display_names(graph)), graph_(graph) {}

ValueId RecognizeMatcher::add_constant(Array value, SourceLoc loc, std::vector<Node>* prelude) const {
  const ValueId v = graph_.add_value(TensorType{value.dtype(), make_shape(value.shape())});
  Attrs attrs{{"value", std::make_shared<const Array>(std::move(value))}};
  prelude->push_back(Node{Op::Constant, {}, {v}, std::move(attrs), nullptr, loc});
  return v;
}

const Node* RecognizeMatcher::producer(ValueId v) const {
  if (v == kNoValue) return nullptr;
  int p = uses.producer[static_cast<size_t>(v)];
  return p < 0 ? nullptr : &g.nodes()[static_cast<size_t>(p)];
}

const Node* RecognizeMatcher::producer(ValueId v, Op op) const {
  const Node* n = producer(v);
  return n && n->op == op ? n : nullptr;
}

const Node* RecognizeMatcher::single_use(ValueId v, Op op) const {
  const Node* n = producer(v, op);
  return n && uses.use_count(v) == 1 ? n : nullptr;
}

std::optional<double> RecognizeMatcher::constant_value(ValueId v) const {
  const Node* n = producer(v, Op::Constant);
  if (!n) return std::nullopt;
  const Array& a = n->attr_array("value");
  if (a.numel() != 1) return std::nullopt;
  return a.get_f64(0);
}

bool RecognizeMatcher::is_constant(ValueId v, double want) const {
  std::optional<double> c = constant_value(v);
  return c && std::fabs(*c - want) <= kConstantTolerance * std::fabs(want);
}

Verdict RecognizeMatcher::read_only_inside(const std::vector<const Node*>& nodes) const {
  for (size_t k = 0; k + 1 < nodes.size(); ++k) {
    for (ValueId v : nodes[k]->outputs) {
      if (uses.is_output(v)) return Verdict::no(name(v) + " is also a graph output");
      for (int user : uses.users[static_cast<size_t>(v)]) {
        const Node* u = &g.nodes()[static_cast<size_t>(user)];
        if (std::find(nodes.begin(), nodes.end(), u) == nodes.end()) {
          return Verdict::no(name(v) + " is also read outside the pattern");
        }
      }
    }
  }
  return Verdict::yes();
}

std::optional<std::vector<int64_t>> RecognizeMatcher::kept_axes(const Node& n) const {
  if (!n.attr_bool("keepdims")) return std::nullopt;
  const int rank = g.type(n.inputs[0]).rank();
  std::vector<int64_t> axes;
  for (int64_t a : n.attr_i64s("axes")) {
    std::optional<int> axis = normalize_axis(a, rank);
    if (!axis) return std::nullopt;
    axes.push_back(*axis);
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

void report_near_miss(PassContext& ctx, const RecognizeMatcher& m, const char* pattern, const Node& root,
                      const std::string& why) {
  const std::string node = describe_node(m.g, root, m.names);
  ctx.remarks.miss(pattern, node, MissReason::NotRecognised,
                   "not recognising " + node + " as " + pattern + ": " + why);
}

int64_t recognize_all(Graph& g, PassContext& ctx, std::initializer_list<RecognizeFn> recognisers) {
  const UseInfo uses = compute_uses(g);
  const RecognizeMatcher m(g, uses);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (RecognizeFn match : recognisers) {
      if (std::optional<Rewrite> rw = match(m, ctx, i)) rewrites.push_back(std::move(*rw));
    }
  }
  return static_cast<int64_t>(apply_rewrites(g, std::move(rewrites)));
}

}  // namespace fusebox
