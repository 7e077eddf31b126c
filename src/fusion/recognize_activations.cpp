#include "fusion/recognize_activations.h"

#include <cmath>
#include <numbers>

#include "fusion/recognize_match.h"

namespace fusebox {

namespace {

using Matcher = RecognizeMatcher;

// div(mul(x, clip(add(x, 3), 0, 6)), 6) -> hardswish(x).
std::optional<Rewrite> match_hardswish(const Matcher& m, PassContext&, size_t i) {
  const Node& div = m.g.nodes()[i];
  if (div.op != Op::Div || !m.is_constant(div.inputs[1], 6.0)) return std::nullopt;
  const Node* mul = m.single_use(div.inputs[0], Op::Mul);
  if (!mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ValueId x = mul->inputs[static_cast<size_t>(side)];
    const Node* clip = m.single_use(mul->inputs[static_cast<size_t>(1 - side)], Op::Clip);
    if (!clip || !clip->attrs.has("min") || !clip->attrs.has("max") || clip->attr_f64("min") != 0.0 ||
        clip->attr_f64("max") != 6.0) {
      continue;
    }
    const Node* add = m.single_use(clip->inputs[0], Op::Add);
    if (!add) continue;
    ValueId three = other_operand(*add, x);
    if (three == kNoValue || !m.is_constant(three, 3.0)) continue;
    const TensorType& y = m.g.type(div.outputs[0]);
    if (!(m.g.type(x) == y)) continue;  // the constants must not broadcast x to a larger shape
    return Rewrite{{m.index(add), m.index(clip), m.index(mul), i}, {},
                   Node{Op::HardSwish, {x}, {div.outputs[0]}, {}, nullptr, div.loc}};
  }
  return std::nullopt;
}

// mul(x, sigmoid(x)) -> silu(x), either operand order.
std::optional<Rewrite> match_silu(const Matcher& m, PassContext&, size_t i) {
  const Node& mul = m.g.nodes()[i];
  if (mul.op != Op::Mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ValueId x = mul.inputs[static_cast<size_t>(side)];
    const Node* sig = m.single_use(mul.inputs[static_cast<size_t>(1 - side)], Op::Sigmoid);
    if (!sig || sig->inputs[0] != x) continue;
    return Rewrite{{m.index(sig), i}, {}, Node{Op::Silu, {x}, {mul.outputs[0]}, {}, nullptr, mul.loc}};
  }
  return std::nullopt;
}

// A structural match: the nodes it absorbs (its result node last) and the node replacing them.
struct Candidate {
  std::vector<const Node*> nodes;
  Node fused;
};

// Turns a structural match into a rewrite, or reports why not.
std::optional<Rewrite> decide(const Matcher& m, PassContext& ctx, const char* pattern, Candidate c) {
  const Node& root = *c.nodes.back();
  const ValueId x = c.fused.inputs[0];
  if (!(m.g.type(x) == m.g.type(root.outputs[0]))) return std::nullopt;  // constants broadcast x
  if (Verdict v = m.read_only_inside(c.nodes); !v) {
    report_near_miss(ctx, m, pattern, root, v.reason());
    return std::nullopt;
  }
  Rewrite rw{{}, {}, std::move(c.fused)};
  for (const Node* n : c.nodes) rw.absorbed.push_back(m.index(n));
  return rw;
}

// `v` = mul(x, c) or mul(c, x) with constant c ~ `want`: appends the mul, returns x.
ValueId scaled_by(const Matcher& m, ValueId v, double want, std::vector<const Node*>* nodes) {
  const Node* mul = m.producer(v, Op::Mul);
  if (!mul) return kNoValue;
  for (int side = 0; side < 2; ++side) {
    if (!m.is_constant(mul->inputs[static_cast<size_t>(1 - side)], want)) continue;
    nodes->push_back(mul);
    return mul->inputs[static_cast<size_t>(side)];
  }
  return kNoValue;
}

// `v` = x³ as pow(x, 3), mul(x, mul(x, x)) or mul(mul(x, x), x).
bool is_cube_of(const Matcher& m, ValueId v, ValueId x, std::vector<const Node*>* nodes) {
  if (const Node* pow = m.producer(v, Op::Pow)) {
    if (pow->inputs[0] != x || !m.is_constant(pow->inputs[1], 3.0)) return false;
    nodes->push_back(pow);
    return true;
  }
  const Node* mul = m.producer(v, Op::Mul);
  if (!mul) return false;
  for (int side = 0; side < 2; ++side) {
    const Node* sq = m.producer(mul->inputs[static_cast<size_t>(1 - side)], Op::Mul);
    if (mul->inputs[static_cast<size_t>(side)] != x || !sq || sq->inputs[0] != x || sq->inputs[1] != x) continue;
    nodes->insert(nodes->end(), {sq, mul});
    return true;
  }
  return false;
}

// erf(x / √2) or erf(x · (1/√2)) (value `v`): appends its nodes.
bool is_erf_term(const Matcher& m, ValueId v, ValueId x, std::vector<const Node*>* nodes) {
  const Node* erf = m.producer(v, Op::Erf);
  if (!erf) return false;
  const Node* div = m.producer(erf->inputs[0], Op::Div);
  if (div && div->inputs[0] == x && m.is_constant(div->inputs[1], std::numbers::sqrt2)) {
    nodes->insert(nodes->end(), {div, erf});
    return true;
  }
  if (scaled_by(m, erf->inputs[0], 1 / std::numbers::sqrt2, nodes) != x) return false;
  nodes->push_back(erf);
  return true;
}

// tanh(√(2/π) · (x + 0.044715 · x³)) (value `v`), the products in either order: appends its nodes.
bool is_tanh_term(const Matcher& m, ValueId v, ValueId x, std::vector<const Node*>* nodes) {
  const Node* tanh = m.producer(v, Op::Tanh);
  if (!tanh) return false;
  const ValueId sum = scaled_by(m, tanh->inputs[0], std::sqrt(2 / std::numbers::pi), nodes);
  const Node* add = sum == kNoValue ? nullptr : m.producer(sum, Op::Add);
  if (!add) return false;
  const ValueId cube = scaled_by(m, other_operand(*add, x), 0.044715, nodes);
  if (cube == kNoValue || !is_cube_of(m, cube, x, nodes)) return false;
  nodes->insert(nodes->end(), {add, tanh});
  return true;
}

// `v` = 1 + erf(x/√2) or 1 + tanh(√(2/π)·(x + 0.044715·x³)), the add either way round: the
// candidate gelu of x (its nodes so far, the add last; `outer` appended) or nullopt.
std::optional<Candidate> gelu_of(const Matcher& m, ValueId v, ValueId x, std::initializer_list<const Node*> outer,
                                 const Node& root) {
  const Node* add = m.producer(v, Op::Add);
  if (!add) return std::nullopt;
  for (int one = 0; one < 2; ++one) {
    if (!m.is_constant(add->inputs[static_cast<size_t>(one)], 1.0)) continue;
    const ValueId term = add->inputs[static_cast<size_t>(1 - one)];
    std::vector<const Node*> nodes;
    Attrs attrs;
    if (!is_erf_term(m, term, x, &nodes)) {
      nodes.clear();
      if (!is_tanh_term(m, term, x, &nodes)) continue;
      attrs = {{"approximate", std::string("tanh")}};
    }
    nodes.push_back(add);
    nodes.insert(nodes.end(), outer);
    return Candidate{nodes, Node{Op::Gelu, {x}, {root.outputs[0]}, attrs, nullptr, root.loc}};
  }
  return std::nullopt;
}

// x/2 as div(x, 2): x, or kNoValue.
ValueId halved(const Matcher& m, ValueId v, const Node** div) {
  *div = m.producer(v, Op::Div);
  return *div && m.is_constant((*div)->inputs[1], 2.0) ? (*div)->inputs[0] : kNoValue;
}

// gelu and gelu tanh, the half written as · 0.5 or / 2:
//   0.5 · x · (1 + erf(x/√2))   the three factors multiplied in any order and nesting
//   x · (1 + erf(x/√2)) / 2     the product either way round, then / 2
//   (x / 2) · (1 + erf(x/√2))   either way round
// and the same with 1 + tanh(√(2/π)·(x + 0.044715·x³)).
std::optional<Rewrite> match_gelu(const Matcher& m, PassContext& ctx, size_t i) {
  const Node& root = m.g.nodes()[i];
  if (root.op == Op::Div) {
    const Node* inner = m.is_constant(root.inputs[1], 2.0) ? m.producer(root.inputs[0], Op::Mul) : nullptr;
    for (int side = 0; inner && side < 2; ++side) {
      const ValueId x = inner->inputs[static_cast<size_t>(side)];
      if (auto c = gelu_of(m, inner->inputs[static_cast<size_t>(1 - side)], x, {inner, &root}, root)) {
        return decide(m, ctx, "gelu", std::move(*c));
      }
    }
    return std::nullopt;
  }
  if (root.op != Op::Mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Node* div = nullptr;
    const ValueId x = halved(m, root.inputs[static_cast<size_t>(side)], &div);
    if (x == kNoValue) continue;
    if (auto c = gelu_of(m, root.inputs[static_cast<size_t>(1 - side)], x, {div, &root}, root)) {
      return decide(m, ctx, "gelu", std::move(*c));
    }
  }
  for (int side = 0; side < 2; ++side) {
    const Node* inner = m.producer(root.inputs[static_cast<size_t>(side)], Op::Mul);
    if (!inner) continue;
    const ValueId f[3] = {root.inputs[static_cast<size_t>(1 - side)], inner->inputs[0], inner->inputs[1]};
    for (int h = 0; h < 3; ++h) {    // the factor 0.5
      for (int p = 0; p < 3; ++p) {  // the factor 1 + erf(...) or 1 + tanh(...)
        if (h == p || !m.is_constant(f[h], 0.5)) continue;
        if (auto c = gelu_of(m, f[p], f[3 - h - p], {inner, &root}, root)) {
          return decide(m, ctx, "gelu", std::move(*c));
        }
      }
    }
  }
  return std::nullopt;
}

// clip(x + 3, 0, 6) / 6 or clip(x + 3, 0, 6) · (1/6) -> hardsigmoid(x) {alpha = 1/6, beta = 0.5}.
std::optional<Rewrite> match_hardsigmoid(const Matcher& m, PassContext& ctx, size_t i) {
  const Node& root = m.g.nodes()[i];
  ValueId clipped = kNoValue;
  if (root.op == Op::Div && m.is_constant(root.inputs[1], 6.0)) clipped = root.inputs[0];
  for (int side = 0; side < 2 && root.op == Op::Mul; ++side) {
    if (m.is_constant(root.inputs[static_cast<size_t>(1 - side)], 1.0 / 6.0)) clipped = root.inputs[static_cast<size_t>(side)];
  }
  const Node* clip = clipped == kNoValue ? nullptr : m.producer(clipped, Op::Clip);
  if (!clip || !clip->attrs.has("min") || !clip->attrs.has("max") || clip->attr_f64("min") != 0.0 ||
      clip->attr_f64("max") != 6.0) {
    return std::nullopt;
  }
  const Node* add = m.producer(clip->inputs[0], Op::Add);
  if (!add) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    if (!m.is_constant(add->inputs[static_cast<size_t>(1 - side)], 3.0)) continue;
    const ValueId x = add->inputs[static_cast<size_t>(side)];
    Attrs attrs{{"alpha", 1.0 / 6.0}, {"beta", 0.5}};
    return decide(m, ctx, "hardsigmoid",
                  {{add, clip, &root}, Node{Op::HardSigmoid, {x}, {root.outputs[0]}, attrs, nullptr, root.loc}});
  }
  return std::nullopt;
}

// x · hardsigmoid(x) {alpha = 1/6, beta = 0.5} -> hardswish(x), either operand order: PyTorch's
// export of F.hardswish below opset 14, and x · clip(x + 3, 0, 6) / 6 once the first round has
// made the clip form a hardsigmoid. Other alpha/beta are another function: a near-miss.
std::optional<Rewrite> match_hardswish_of_hardsigmoid(const Matcher& m, PassContext& ctx, size_t i) {
  const Node& root = m.g.nodes()[i];
  if (root.op != Op::Mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ValueId x = root.inputs[static_cast<size_t>(side)];
    const Node* hs = m.producer(root.inputs[static_cast<size_t>(1 - side)], Op::HardSigmoid);
    if (!hs || hs->inputs[0] != x) continue;
    const double alpha = hs->attr_f64("alpha"), beta = hs->attr_f64("beta");
    if (std::fabs(alpha - 1.0 / 6.0) > kConstantTolerance / 6.0 || beta != 0.5) {
      report_near_miss(ctx, m, "hardswish", root,
                       "hardsigmoid has alpha " + std::to_string(alpha) + ", beta " + std::to_string(beta) +
                           ", not 1/6 and 0.5");
      return std::nullopt;
    }
    Node fused{Op::HardSwish, {x}, {root.outputs[0]}, {}, nullptr, root.loc};
    return decide(m, ctx, "hardswish", {{hs, &root}, std::move(fused)});
  }
  return std::nullopt;
}

}  // namespace

int64_t recognize_activations(Graph& g, PassContext& ctx) {
  const int64_t first = recognize_all(g, ctx, {match_hardswish, match_silu, match_gelu, match_hardsigmoid});
  // A second round over what the first made: x · hardsigmoid(x).
  return first + recognize_all(g, ctx, {match_hardswish_of_hardsigmoid});
}

}  // namespace fusebox
