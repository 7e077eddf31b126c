#include "fusion/recognize_norms.h"

#include "fusion/recognize_match.h"

namespace fusebox {

namespace {

using Matcher = RecognizeMatcher;

// `v` is 1/√a as rsqrt(a), reciprocal(sqrt(a)) or div(1, sqrt(a)): appends its nodes, returns a.
ValueId inverse_sqrt_of(const Matcher& m, ValueId v, std::vector<const Node*>* nodes) {
  if (const Node* r = m.producer(v, Op::Rsqrt)) {
    nodes->push_back(r);
    return r->inputs[0];
  }
  const Node* inv = m.producer(v, Op::Reciprocal);
  if (!inv) {
    inv = m.producer(v, Op::Div);
    if (!inv || !m.is_constant(inv->inputs[0], 1.0)) return kNoValue;
  }
  const Node* sqrt = m.producer(inv->inputs.back(), Op::Sqrt);
  if (!sqrt) return kNoValue;
  nodes->insert(nodes->end(), {sqrt, inv});
  return sqrt->inputs[0];
}

// `root` is num / √a or num · (1/√a): appends the nodes below root, returns {num, a}.
std::optional<std::pair<ValueId, ValueId>> normalised(const Matcher& m, const Node& root,
                                                      std::vector<const Node*>* nodes) {
  if (root.op == Op::Div) {
    const Node* sqrt = m.producer(root.inputs[1], Op::Sqrt);
    if (!sqrt) return std::nullopt;
    nodes->push_back(sqrt);
    return std::pair{root.inputs[0], sqrt->inputs[0]};
  }
  if (root.op != Op::Mul) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    std::vector<const Node*> below;
    ValueId a = inverse_sqrt_of(m, root.inputs[static_cast<size_t>(1 - side)], &below);
    if (a == kNoValue) continue;
    nodes->insert(nodes->end(), below.begin(), below.end());
    return std::pair{root.inputs[static_cast<size_t>(side)], a};
  }
  return std::nullopt;
}

// `v` = num² as pow(num, 2) or mul(num, num).
const Node* square_of(const Matcher& m, ValueId v, ValueId num) {
  if (const Node* pow = m.producer(v, Op::Pow)) {
    return pow->inputs[0] == num && m.is_constant(pow->inputs[1], 2.0) ? pow : nullptr;
  }
  const Node* mul = m.producer(v, Op::Mul);
  return mul && mul->inputs[0] == num && mul->inputs[1] == num ? mul : nullptr;
}

// The first axis when `axes` (sorted, unique) is the trailing range [axis, rank).
std::optional<int64_t> trailing_start(const std::vector<int64_t>& axes, int rank) {
  bool trailing = !axes.empty() && axes.back() == rank - 1 &&
                  axes.back() - axes.front() == static_cast<int64_t>(axes.size()) - 1;
  return trailing ? std::optional<int64_t>(axes.front()) : std::nullopt;
}

std::string not_trailing(const char* what, const std::vector<int64_t>& axes) {
  std::string list;
  for (int64_t a : axes) list += (list.empty() ? "" : ", ") + std::to_string(a);
  if (axes.size() == 1) return std::string(what) + " over axis " + list + " is not the last axis";
  return std::string(what) + " over axes [" + list + "] is not a trailing range of axes";
}

// `p` broadcasts to x.shape[axis:] (numpy rules) without growing x, and has x's dtype.
bool is_norm_parameter(const TensorType& p, const TensorType& x, int64_t axis) {
  const int trailing = x.rank() - static_cast<int>(axis);
  if (p.dtype != x.dtype || p.rank() > trailing) return false;
  for (int d = 0; d < p.rank(); ++d) {
    const Dim& want = x.shape[static_cast<size_t>(x.rank() - p.rank() + d)];
    const Dim& got = p.shape[static_cast<size_t>(d)];
    if (!(got == want) && !(got.is_static() && got.value() == 1)) return false;
  }
  return true;
}

// The node that alone reads `v` when it is `op` with `v` and one norm parameter; that parameter.
const Node* affine_user(const Matcher& m, ValueId v, Op op, const TensorType& x, int64_t axis, ValueId* param) {
  if (m.uses.use_count(v) != 1 || m.uses.users[static_cast<size_t>(v)].empty()) return nullptr;
  const Node& user = m.g.nodes()[static_cast<size_t>(m.uses.users[static_cast<size_t>(v)][0])];
  if (user.op != op || !(m.g.type(user.outputs[0]) == x)) return nullptr;
  *param = other_operand(user, v);
  return *param != kNoValue && is_norm_parameter(m.g.type(*param), x, axis) ? &user : nullptr;
}

std::optional<Rewrite> match_norm(const Matcher& m, PassContext& ctx, size_t i) {
  const Node& root = m.g.nodes()[i];
  std::vector<const Node*> nodes;
  std::optional<std::pair<ValueId, ValueId>> parts = normalised(m, root, &nodes);
  if (!parts) return std::nullopt;
  const auto [num, denom] = *parts;
  // denom = reduce_mean(num²) + eps
  const Node* add = m.producer(denom, Op::Add);
  if (!add) return std::nullopt;
  const Node* var = nullptr;
  const Node* square = nullptr;
  ValueId eps = kNoValue;
  for (int side = 0; side < 2 && !var; ++side) {
    const Node* mean = m.producer(add->inputs[static_cast<size_t>(side)], Op::ReduceMean);
    square = mean ? square_of(m, mean->inputs[0], num) : nullptr;
    if (square) {
      var = mean;
      eps = add->inputs[static_cast<size_t>(1 - side)];
    }
  }
  if (!var) return std::nullopt;
  nodes.insert(nodes.end(), {square, var, add});
  // Layer norm when num = x - reduce_mean(x); else rms norm of num.
  ValueId x = num;
  const Node* center = m.producer(num, Op::Sub);
  const Node* mu = center ? m.producer(center->inputs[1], Op::ReduceMean) : nullptr;
  const bool layer = mu && mu->inputs[0] == center->inputs[0];
  if (layer) {
    x = center->inputs[0];
    nodes.insert(nodes.begin(), {mu, center});
  }
  const char* pattern = layer ? "layer_norm" : "rms_norm";
  nodes.push_back(&root);
  const TensorType& xt = m.g.type(x);
  if (!(m.g.type(root.outputs[0]) == xt)) return std::nullopt;  // constants broadcast x
  const std::optional<std::vector<int64_t>> axes = m.kept_axes(*var);
  const std::optional<int64_t> axis = axes ? trailing_start(*axes, xt.rank()) : std::nullopt;
  const std::optional<double> eps_value = m.constant_value(eps);
  std::string why;
  if (layer && m.kept_axes(*mu) != axes) {
    why = "the mean and the variance do not reduce the same axes with keepdims";
  } else if (!axes) {
    why = "reduce_mean does not keep dims";
  } else if (!axis) {
    why = not_trailing(layer ? "layer norm" : "rms norm", *axes);
  } else if (!eps_value) {
    why = "eps is not a constant";
  } else if (Verdict v = m.read_only_inside(nodes); !v) {
    why = v.reason();
  }
  if (!why.empty()) {
    report_near_miss(ctx, m, pattern, root, why);
    return std::nullopt;
  }
  Node fused{layer ? Op::LayerNorm : Op::RmsNorm, {x}, {root.outputs[0]},
             {{"axis", *axis}, {"eps", *eps_value}}, nullptr, root.loc};
  std::vector<size_t> absorbed;
  for (const Node* n : nodes) absorbed.push_back(m.index(n));
  ValueId scale = kNoValue, bias = kNoValue;
  std::vector<Node> prelude;
  if (const Node* mul = affine_user(m, root.outputs[0], Op::Mul, xt, *axis, &scale)) {
    fused.inputs.push_back(scale);
    fused.outputs = mul->outputs;
    absorbed.push_back(m.index(mul));
    const Node* shift = layer ? affine_user(m, mul->outputs[0], Op::Add, xt, *axis, &bias) : nullptr;
    if (shift) {
      fused.inputs.push_back(bias);
      fused.outputs = shift->outputs;
      absorbed.push_back(m.index(shift));
    }
  } else if (const Node* shift = layer ? affine_user(m, root.outputs[0], Op::Add, xt, *axis, &bias) : nullptr) {
    // A shift without a scale (nn.LayerNorm(bias only), a folded scale): the scale is ones of the
    // bias's shape (one 1 when that shape is symbolic), so multiplying by it changes nothing and
    // the op takes its usual operands.
    const TensorType bt = m.g.type(bias);
    Array ones(bt.dtype, is_static(bt.shape) ? static_dims(bt.shape) : std::vector<int64_t>{});
    for (int64_t k = 0; k < ones.numel(); ++k) ones.set_f64(k, 1.0);
    fused.inputs.push_back(m.add_constant(std::move(ones), root.loc, &prelude));
    fused.inputs.push_back(bias);
    fused.outputs = shift->outputs;
    absorbed.push_back(m.index(shift));
  }
  return Rewrite{std::move(absorbed), std::move(prelude), std::move(fused)};
}

}  // namespace

int64_t recognize_norms(Graph& g, PassContext& ctx) {
  return recognize_all(g, ctx, {match_norm});
}

}  // namespace fusebox
