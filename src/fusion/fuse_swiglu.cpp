// fuse-swiglu — the SwiGLU feed-forward gate `silu(gate) · up` as one fused_swiglu (spec §4.1):
// the matmul result is never written whole, and its two halves never round-trip through memory.
//
// Matches `mul(silu(gate), up)` (either operand order) where
//   halves        gate and up are the two halves of the last axis of one value h (each a slice
//                 taking exactly [0, n) or [n, 2n): ir/fused_swiglu_op.h), in either order, and
//                 h = matmul(x, w), optionally + bias along the last axis;
//   two matmuls   gate = matmul(x, wg) and up = matmul(x, wu) over the same x, wg and wu
//                 constants of one shape [k, n] (each optionally + a constant bias [n]): merged
//                 into one matmul over concat(wg, wu) (folded once, at compile time).
// Every value in between is read only inside the pattern (graph outputs count as uses).
// Produces: `fused_swiglu x, w[, bias] {gate_first}` defining the mul's result; gate_first
// records which half is the gate (spec defect 7: unfusing honours it). Requires: a verified
// graph; the target claims fused_swiglu and the dtype. Preserves: inputs, output positions,
// every value read outside the match. Refusals (halves of different values, a slice that is not
// a half, an intermediate read elsewhere, weights that are not constants) are missed entries.
//
// Runs before fuse-matmul-bias-act, which would otherwise take the gate's silu as its epilogue.
#include <algorithm>
#include <string>

#include "fusion/pattern_rewrite.h"
#include "ir/fused_swiglu_op.h"

namespace fusebox {

namespace {

constexpr const char* kPattern = "fused_swiglu";

struct Matcher {
  const Graph& g;
  const UseInfo& uses;
  const std::vector<std::string>& names;
  PassContext& ctx;

  const Node* producer(ValueId v, Op op) const {
    const int p = uses.producer[static_cast<size_t>(v)];
    if (p < 0) return nullptr;
    const Node& n = g.nodes()[static_cast<size_t>(p)];
    return n.op == op ? &n : nullptr;
  }
  std::string name(ValueId v) const { return "%" + names[static_cast<size_t>(v)]; }
  size_t index(const Node* n) const { return static_cast<size_t>(n - g.nodes().data()); }
  bool is_constant(ValueId v) const { return producer(v, Op::Constant) != nullptr; }

  void miss(const Node& root, MissReason reason, const std::string& why) const {
    const std::string node = describe_node(g, root, names);
    ctx.remarks.miss(kPattern, node, reason, "not fusing " + node + " as " + kPattern + ": " + why);
  }

  // The target claims the result's dtype for fused_swiglu; else records why not.
  bool dtype_claimed(const Node& root) const {
    const DType dt = g.type(root.outputs[0]).dtype;
    if (ctx.table().claims_dtype(dt)) return true;
    miss(root, MissReason::DTypeMismatch,
         std::string(dtype_name(dt)) + " is not claimed by target " + std::string(target_name(ctx.target)));
    return false;
  }

  // Every result of `nodes` but the last's is read only by `nodes` and is not a graph output;
  // else records why and returns false.
  bool read_only_inside(const Node& root, const std::vector<const Node*>& nodes) const {
    for (size_t k = 0; k + 1 < nodes.size(); ++k) {
      const ValueId v = nodes[k]->outputs[0];
      if (uses.is_output(v)) {
        miss(root, MissReason::EscapesAsOutput, name(v) + " is also a graph output");
        return false;
      }
      for (int user : uses.users[static_cast<size_t>(v)]) {
        const Node* u = &g.nodes()[static_cast<size_t>(user)];
        if (std::find(nodes.begin(), nodes.end(), u) == nodes.end()) {
          miss(root, MissReason::MultiConsumer, name(v) + " is also read outside the pattern");
          return false;
        }
      }
    }
    return true;
  }
};

// v = matmul(x, w) or matmul(x, w) + bias (bias along the last axis): the matmul, and the add.
struct Product {
  const Node* matmul = nullptr;
  const Node* add = nullptr;
  ValueId bias = kNoValue;
};

std::optional<Product> product_of(const Matcher& m, ValueId v) {
  Product p;
  if ((p.matmul = m.producer(v, Op::MatMul))) return p;
  p.add = m.producer(v, Op::Add);
  if (!p.add) return std::nullopt;
  const TensorType& t = m.g.type(v);
  for (int side = 0; side < 2; ++side) {
    const Node* mm = m.producer(p.add->inputs[static_cast<size_t>(side)], Op::MatMul);
    const ValueId b = p.add->inputs[static_cast<size_t>(1 - side)];
    if (!mm || t.rank() < 1 || !is_per_channel(m.g.type(b), t, t.rank() - 1)) continue;
    if (!(m.g.type(mm->outputs[0]) == t)) continue;
    p.matmul = mm;
    p.bias = b;
    return p;
  }
  return std::nullopt;
}

void append(std::vector<const Node*>* nodes, const Product& p) {
  nodes->push_back(p.matmul);
  if (p.add) nodes->push_back(p.add);
}

// The halves form: gate and up slices of one matmul output.
std::optional<Rewrite> match_halves(const Matcher& m, const Node& root, const Node& silu, ValueId up) {
  const Node* gs = m.producer(silu.inputs[0], Op::Slice);
  const Node* us = m.producer(up, Op::Slice);
  if (!gs || !us) return std::nullopt;
  if (gs->inputs[0] != us->inputs[0]) {
    m.miss(root, MissReason::ShapeMismatch,
           "the gate " + m.name(silu.inputs[0]) + " and the up " + m.name(up) +
               " are slices of different values");
    return std::nullopt;
  }
  const ValueId h = gs->inputs[0];
  const std::optional<Product> p = product_of(m, h);
  // A vector w drops the matmul's last axis: the halves would split another one.
  if (!p || m.g.type(p->matmul->inputs[1]).rank() < 2) return std::nullopt;
  const std::optional<int> gate_half = slice_half(*gs, m.g.type(h));
  const std::optional<int> up_half = slice_half(*us, m.g.type(h));
  if (!gate_half || !up_half || *gate_half == *up_half) {
    const ValueId bad = !gate_half ? silu.inputs[0] : up;
    m.miss(root, MissReason::ShapeMismatch,
           !gate_half || !up_half ? m.name(bad) + " is not one half of the last axis of " + m.name(h)
                                  : "the gate and the up slices take the same half of " + m.name(h));
    return std::nullopt;
  }
  std::vector<const Node*> nodes;
  append(&nodes, *p);
  nodes.insert(nodes.end(), {gs, us, &silu, &root});
  if (!m.read_only_inside(root, nodes) || !m.dtype_claimed(root)) return std::nullopt;
  Node fused{Op::FusedSwiglu,   {p->matmul->inputs[0], p->matmul->inputs[1]},
             {root.outputs[0]}, {{"gate_first", *gate_half == 0}},
             nullptr,           root.loc};
  if (p->bias != kNoValue) fused.inputs.push_back(p->bias);
  Rewrite rw{{}, {}, std::move(fused)};
  for (const Node* n : nodes) rw.absorbed.push_back(m.index(n));
  return rw;
}

// The two-matmul form: x·wg and x·wu with constant weights, merged.
std::optional<Rewrite> match_two_matmuls(const Matcher& m, Graph& g, const Node& root, const Node& silu,
                                         ValueId up, const UseInfo& uses) {
  const std::optional<Product> gp = product_of(m, silu.inputs[0]);
  const std::optional<Product> upp = product_of(m, up);
  if (!gp || !upp || gp->matmul == upp->matmul) return std::nullopt;
  const ValueId x = gp->matmul->inputs[0];
  if (upp->matmul->inputs[0] != x) return std::nullopt;  // unrelated products
  const ValueId wg = gp->matmul->inputs[1], wu = upp->matmul->inputs[1];
  const TensorType& wt = m.g.type(wg);
  std::string why;
  if (!m.is_constant(wg) || !m.is_constant(wu)) {
    why = "the weights " + m.name(wg) + " and " + m.name(wu) +
          " are not both constants (merging them would copy them on every run)";
  } else if (!(wt == m.g.type(wu)) || wt.rank() != 2) {
    why = "the weights " + wt.to_string() + " and " + m.g.type(wu).to_string() +
          " are not two matrices of one shape";
  } else if ((gp->bias == kNoValue) != (upp->bias == kNoValue)) {
    why = "only one of the two matmuls adds a bias";
  } else if (gp->bias != kNoValue && (!m.is_constant(gp->bias) || !m.is_constant(upp->bias) ||
                                      !(m.g.type(gp->bias) == m.g.type(upp->bias)))) {
    why = "the biases are not two constants of one shape";
  }
  if (!why.empty()) {
    m.miss(root, MissReason::ShapeMismatch, why);
    return std::nullopt;
  }
  std::vector<const Node*> nodes;
  append(&nodes, *gp);
  append(&nodes, *upp);
  nodes.insert(nodes.end(), {&silu, &root});
  if (!m.read_only_inside(root, nodes) || !m.dtype_claimed(root)) return std::nullopt;
  Rewrite rw{
      {}, {}, Node{Op::FusedSwiglu, {x}, {root.outputs[0]}, {{"gate_first", true}}, nullptr, root.loc}};
  Prelude prelude(g, m.ctx, uses, rw.prelude);
  Expected<ValueId> w = prelude.emit(Op::Concat, {wg, wu}, {{"axis", int64_t{-1}}});
  if (!w) return std::nullopt;
  rw.fused.inputs.push_back(*w);
  if (gp->bias != kNoValue) {
    Expected<ValueId> b = prelude.emit(Op::Concat, {gp->bias, upp->bias}, {{"axis", int64_t{-1}}});
    if (!b) return std::nullopt;
    rw.fused.inputs.push_back(*b);
  }
  for (const Node* n : nodes) rw.absorbed.push_back(m.index(n));
  return rw;
}

}  // namespace

Status run_fuse_swiglu(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  const Matcher m{g, uses, names, ctx};
  std::vector<Rewrite> rewrites;
  const size_t count = g.nodes().size();
  for (size_t i = 0; i < count; ++i) {
    const Node& root = g.nodes()[i];
    if (root.op != Op::Mul) continue;
    for (int side = 0; side < 2; ++side) {
      const Node* silu = m.producer(root.inputs[static_cast<size_t>(side)], Op::Silu);
      const ValueId up = root.inputs[static_cast<size_t>(1 - side)];
      if (!silu || silu->inputs[0] == up) continue;
      std::optional<Rewrite> rw = match_halves(m, root, *silu, up);
      if (!rw) rw = match_two_matmuls(m, g, root, *silu, up, uses);
      if (!rw) continue;
      rewrites.push_back(std::move(*rw));
      break;
    }
  }
  ctx.count("fuse-swiglu", "fused", static_cast<int64_t>(apply_rewrites(g, std::move(rewrites))));
  return Status::ok();
}

}  // namespace fusebox
