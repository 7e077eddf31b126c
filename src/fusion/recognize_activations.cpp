#include "fusion/recognize_activations.h"

#include "fusion/pattern_rewrite.h"

namespace fusebox {

namespace {

struct Matcher {
  const Graph& g;
  const UseInfo& uses;

  const Node* producer(ValueId v) const {
    int p = uses.producer[static_cast<size_t>(v)];
    return p < 0 ? nullptr : &g.nodes()[static_cast<size_t>(p)];
  }
  // The node defining `v` when it has op `op` and nobody else reads `v`.
  const Node* single_use(ValueId v, Op op) const {
    const Node* n = producer(v);
    if (!n || n->op != op || uses.use_count(v) != 1) return nullptr;
    return n;
  }
  // `v` is a one-element constant equal to `want`.
  bool is_constant(ValueId v, double want) const {
    const Node* n = producer(v);
    if (!n || n->op != Op::Constant) return false;
    const Array& a = n->attr_array("value");
    return a.numel() == 1 && a.get_f64(0) == want;
  }
  size_t index(const Node* n) const { return static_cast<size_t>(n - g.nodes().data()); }
};

// div(mul(x, clip(add(x, 3), 0, 6)), 6) -> hardswish(x).
std::optional<Rewrite> match_hardswish(const Matcher& m, size_t i) {
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
std::optional<Rewrite> match_silu(const Matcher& m, size_t i) {
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

}  // namespace

int64_t recognize_activations(Graph& g) {
  const UseInfo uses = compute_uses(g);
  const Matcher m{g, uses};
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (std::optional<Rewrite> rw = match_hardswish(m, i)) rewrites.push_back(std::move(*rw));
    if (std::optional<Rewrite> rw = match_silu(m, i)) rewrites.push_back(std::move(*rw));
  }
  return static_cast<int64_t>(apply_rewrites(g, std::move(rewrites)));
}

}  // namespace fusebox
