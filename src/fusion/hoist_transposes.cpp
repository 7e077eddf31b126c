// hoist-transposes — moves a transpose of an element-wise result above the element-wise node, so
// that it joins the transform chain of the operand it reads (and with it the region's prologue):
// `transpose(mul(sub(resize(x), mean), inv_std))` becomes `mul(sub(transpose(resize(x)), mean'),
// inv_std')`, one kernel that writes the transposed layout directly instead of a region and a
// second pass over its result (a HWC image normalised and laid out as CHW).
//
// Matches: a transpose whose operand is the one result of a region step (an Elementwise or
// Broadcast op with numpy broadcasting, ir/outline.h: not batch_norm or expand) read by nothing
// else (not returned), where at most one operand of that node has the result's shape
// and every other one is small (at most one dim not 1: a per-channel mean, a scalar), and that is
// not the layout step of a batch item (its result reaches a concat through index-only steps:
// fuse-batch-preprocess writes those through its item table). Produces: the node over permuted
// operands, defining the transpose's result: the full one transposed, a small one reshaped to
// the permuted dims (with one dim not 1 its element order does not change: a view, and constants
// fold), a one-element one kept as it is. Repeated until no transpose moves, so it climbs a chain
// of element-wise nodes. Requires: a verified graph. Preserves: inputs, output positions, values
// bit for bit (an element-wise op commutes with a permutation of its operands' elements).
//
// It is a rewrite that enables fusion, not a fusion: a transpose it leaves in place is no missed
// pattern (the report lists none).
//
//   classify     the transposes and their producers' kinds
//   decide       hoistable(): single use, one full-shape operand, the others small
//   materialize  apply_rewrites (fusion/pattern_rewrite.h): the transposed operands as prelude
#include "fusion/pattern_rewrite.h"
#include "ir/op_info.h"
#include "ir/outline.h"

namespace fusebox {

namespace {

bool one_element(const TensorType& t) {
  for (const Dim& d : t.shape) {
    if (!d.is_static() || d.value() != 1) return false;
  }
  return true;
}

// At most one dim is not 1: transposing it moves no data worth counting.
bool small(const TensorType& t) {
  int wide = 0;
  for (const Dim& d : t.shape) wide += !(d.is_static() && d.value() == 1);
  return wide <= 1;
}

// Whether the element-wise node `n` (result y) may take the transpose above it: one operand of
// y's shape at most, the others small.
bool hoistable(const Graph& g, const Node& n, const TensorType& y) {
  int full = 0;
  for (ValueId a : n.inputs) {
    const TensorType& t = g.type(a);
    if (t.shape == y.shape)
      ++full;
    else if (!small(t) || t.rank() > y.rank())
      return false;
  }
  return full <= 1;
}

// Whether `v` reaches a concat through index-only steps each read once: the transpose is then the
// layout step of a batch item (fuse-batch-preprocess keeps items whose region writes through it).
bool feeds_a_concat(const Graph& g, const UseInfo& uses, ValueId v) {
  for (int hops = 0; hops < 8; ++hops) {
    const std::vector<int>& readers = uses.users[size_t(v)];
    if (readers.size() != 1 || uses.is_output(v)) return false;
    const Node& r = g.nodes()[size_t(readers[0])];
    if (r.op == Op::Concat) return true;
    if (r.info().kind != OpKind::Injective || r.outputs.size() != 1) return false;
    v = r.outputs[0];
  }
  return false;
}

// One round: every transpose that can move up by one node does.
Expected<size_t> hoist_once(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& t = g.nodes()[i];
    if (t.op != Op::Transpose) continue;
    const int p = uses.producer[size_t(t.inputs[0])];
    if (p < 0) continue;
    const Node& n = g.nodes()[size_t(p)];
    // A region step (ir/outline.h): numpy broadcasting, meaningful per element; not batch_norm
    // (per-channel along axis 1), expand (a target shape) or a region (a prologue reads a source).
    if (!is_region_step(g, n)) continue;
    // Only where nothing else reads the node's result (then it would be computed twice).
    if (next_in_chain(g, uses, n.outputs[0], names).user != int(i)) continue;
    if (!hoistable(g, n, g.type(n.outputs[0])) || feeds_a_concat(g, uses, t.outputs[0])) continue;
    const TensorType y = g.type(n.outputs[0]);  // a copy: emitting adds values to g
    Rewrite rw{{size_t(p), i}, {}, {}};
    Prelude pre(g, ctx, uses, rw.prelude);
    std::vector<ValueId> operands;
    for (ValueId a : n.inputs) {
      const TensorType at = g.type(a);
      if (one_element(at)) {
        operands.push_back(a);
        continue;
      }
      if (at.shape == y.shape) {
        FUSEBOX_ASSIGN_OR_RETURN(ValueId moved, pre.emit(Op::Transpose, {a}, t.attrs));
        operands.push_back(moved);
        continue;
      }
      // A small operand (one dim not 1) keeps its element order under any permutation: a reshape
      // to the permuted dims (a view) transposes it.
      Shape dims(size_t(y.rank() - at.rank()), Dim(1));
      dims.insert(dims.end(), at.shape.begin(), at.shape.end());
      Shape permuted;
      for (int64_t axis : t.attr_i64s("perm")) permuted.push_back(dims[size_t(axis)]);
      FUSEBOX_ASSIGN_OR_RETURN(ValueId moved, pre.emit(Op::Reshape, {a}, {{"shape", permuted}}));
      operands.push_back(moved);
    }
    rw.fused = Node{n.op, operands, {t.outputs[0]}, n.attrs, nullptr, n.loc};
    rewrites.push_back(std::move(rw));
  }
  return apply_rewrites(g, std::move(rewrites));
}

}  // namespace

Status run_hoist_transposes(Graph& g, PassContext& ctx) {
  int64_t moved = 0;
  // Each round moves every transpose up one node; a chain of k nodes takes k rounds.
  for (int round = 0; round < 64; ++round) {
    FUSEBOX_ASSIGN_OR_RETURN(size_t n, hoist_once(g, ctx));
    if (n == 0) break;
    moved += int64_t(n);
  }
  ctx.count("hoist-transposes", "hoisted", moved);
  return Status::ok();
}

}  // namespace fusebox
