#include "fusion/recognize_softmax.h"

#include "fusion/recognize_match.h"

namespace fusebox {

namespace {

using Matcher = RecognizeMatcher;

std::optional<Rewrite> match_softmax(const Matcher& m, PassContext& ctx, size_t i) {
  const Node& root = m.g.nodes()[i];
  // softmax: root = div(exp(z), s); log_softmax: root = sub(z, log(s)); s = reduce_sum(exp(z)).
  const bool log = root.op == Op::Sub;
  if (root.op != Op::Div && !log) return std::nullopt;
  const Node* ln = log ? m.producer(root.inputs[1], Op::Log) : nullptr;
  const Node* sum = m.producer(log ? (ln ? ln->inputs[0] : kNoValue) : root.inputs[1], Op::ReduceSum);
  const Node* exp = sum ? m.producer(sum->inputs[0], Op::Exp) : nullptr;
  if (!exp || (log ? root.inputs[0] != exp->inputs[0] : root.inputs[0] != exp->outputs[0])) return std::nullopt;
  const ValueId z = exp->inputs[0];
  const char* pattern = log ? "log_softmax" : "softmax";
  if (!(m.g.type(root.outputs[0]) == m.g.type(z))) return std::nullopt;
  std::vector<const Node*> nodes{exp, sum};
  if (ln) nodes.push_back(ln);
  nodes.push_back(&root);
  std::string why;
  std::optional<std::vector<int64_t>> axes = m.kept_axes(*sum);
  if (!axes) {
    why = "reduce_sum does not keep dims";
  } else if (axes->size() != 1) {
    why = "the sum reduces " + std::to_string(axes->size()) + " axes, not one";
  } else if (Verdict v = m.read_only_inside(nodes); !v) {
    why = v.reason();
  }
  if (!why.empty()) {
    report_near_miss(ctx, m, pattern, root, why);
    return std::nullopt;
  }
  // Absorb z = x - reduce_max(x) over the same axis when only the pattern reads it.
  ValueId x = z;
  const Node* shift = m.producer(z, Op::Sub);
  const Node* max = shift ? m.producer(shift->inputs[1], Op::ReduceMax) : nullptr;
  if (max && max->inputs[0] == shift->inputs[0] && m.kept_axes(*max) == axes) {
    std::vector<const Node*> all{max, shift};
    all.insert(all.end(), nodes.begin(), nodes.end());
    if (m.read_only_inside(all)) {
      nodes = std::move(all);
      x = shift->inputs[0];
    }
  }
  Rewrite rw{{}, {}, Node{log ? Op::LogSoftmax : Op::Softmax, {x}, {root.outputs[0]},
                          {{"axis", (*axes)[0]}}, nullptr, root.loc}};
  for (const Node* n : nodes) rw.absorbed.push_back(m.index(n));
  return rw;
}

// log(softmax(x)) -> log_softmax(x) over the softmax's axis.
std::optional<Rewrite> match_log_of_softmax(const Matcher& m, PassContext& ctx, size_t i) {
  const Node& root = m.g.nodes()[i];
  const Node* sm = root.op == Op::Log ? m.producer(root.inputs[0], Op::Softmax) : nullptr;
  if (!sm) return std::nullopt;
  if (Verdict v = m.read_only_inside({sm, &root}); !v) {
    report_near_miss(ctx, m, "log_softmax", root, v.reason());
    return std::nullopt;
  }
  return Rewrite{{m.index(sm), i}, {}, Node{Op::LogSoftmax, {sm->inputs[0]}, {root.outputs[0]},
                                             {{"axis", sm->attr_i64("axis")}}, nullptr, root.loc}};
}

}  // namespace

int64_t recognize_softmax(Graph& g, PassContext& ctx) {
  // Two rounds: a softmax the first recognises from primitives may be the operand of a log.
  const int64_t first = recognize_all(g, ctx, {match_softmax});
  return first + recognize_all(g, ctx, {match_log_of_softmax});
}

}  // namespace fusebox
