// fuse-attention — scaled dot-product attention with its head split and merge, as one
// fused_attention whose CPU kernel never writes the [Tq,Tk] score matrix to memory.
//
// Matches, from each `softmax` on the last axis backwards and forwards:
//
//   x_q ─ reshape [B,T,H,D] ─ transpose [0,2,1,3] ─┐                       (or a [B,H,T,D] q)
//   x_k ─ reshape [B,T,H,D] ─ transpose [0,2,3,1] ─┤ matmul                (or kᵀ = transpose [0,1,3,2] of k)
//                               (mul | div) by a one-element constant ?     (absent: scale folded into q)
//                               add mask ?                                  (broadcast to [B,H,Tq,Tk])
//                               softmax {axis = -1}
//   x_v ─ reshape ─ transpose [0,2,1,3] ─────────── matmul
//                               transpose [0,2,1,3] ─ reshape [B,Tq,H*D] ? (the head merge)
//
// A scale an exporter folded into q or k (a `mul`/`div` by a one-element constant on q or k,
// before or after the split, or on kᵀ) moves into the scale attribute too.
//
// Scores of rank 3 are attention over a batch of [N,T,D] heads, N = batch x heads, as PyTorch
// exports nn.MultiheadAttention (sequence first: each projection reshaped to [T,N,D] and
// transposed to [N,T,D], kᵀ = transpose [1,2,0] of the keys' [T,N,D], the scale a `div` of q):
// they become `fused_attention q, k, v {heads = 1, head_dim = D}` over those [N,T,D] values (one
// head per batch entry), with k = transpose [1,0,2] of the keys' [T,N,D] added before it when
// only kᵀ is there. No mask is taken at rank 3.
// The matmul + mask may already be a fused_matmul_bias_act / fused_matmul_residual without
// activation (those passes run first and take a [Tk] or full-shape add). Produces
// `fused_attention q, k, v[, mask] {heads, head_dim, scale, merge_heads}` defining the last
// matched value; q/k/v are the [B,T,H*D] values before the split where the split is there, else
// the [B,H,T,D] ones. A causal mask written as a constant stays a mask. Requires: a verified
// graph; the target claims fused_attention and the dtype. Preserves: inputs, output positions,
// every value read outside the match (a split whose result is read elsewhere stays; the fused op
// reads its source). Refusals (an intermediate read elsewhere or returned, softmax on another
// axis, a mask that widens the scores, shapes that are not heads, unclaimed kind or dtype) are
// missed entries.
#include <optional>

#include "fusion/pattern_rewrite.h"

namespace fusebox {

namespace {

constexpr const char* kPattern = "fused_attention";

struct Match {
  std::vector<size_t> absorbed;
  ValueId q = kNoValue, k = kNoValue, v = kNoValue, mask = kNoValue;
  double scale = 1.0;
  bool merged = false;
  ValueId result = kNoValue;
};

class Matcher {
 public:
  Matcher(const Graph& g, const UseInfo& uses, const std::vector<std::string>& names, PassContext& ctx)
      : g_(g), uses_(uses), names_(names), ctx_(ctx) {}

  // The rewrite of the attention ending at softmax `softmax_index`; `*k_rows` is set when the
  // caller must add k = transpose [1,0,2] of it (rank-3 scores with only kᵀ there).
  std::optional<Rewrite> match(size_t softmax_index, ValueId* k_rows) const;

 private:
  const Node* def(ValueId v) const {
    int p = uses_.producer[static_cast<size_t>(v)];
    return p < 0 ? nullptr : &g_.nodes()[static_cast<size_t>(p)];
  }
  size_t index(const Node* n) const { return static_cast<size_t>(n - g_.nodes().data()); }
  // `v` is read by one node only and is not returned.
  bool single_use(ValueId v) const { return !uses_.is_output(v) && uses_.users[static_cast<size_t>(v)].size() == 1; }
  std::string node(const Node& n) const { return describe_node(g_, n, names_); }
  void miss(const Node& at, MissReason r, const std::string& detail) const {
    ctx_.remarks.miss(kPattern, node(at), r, "not fusing attention at " + node(at) + ": " + detail);
  }
  std::optional<double> scalar_constant(ValueId v) const {
    const Node* c = def(v);
    if (!c || c->op != Op::Constant) return std::nullopt;
    const Array& a = c->attr_array("value");
    if (a.numel() != 1 || a.rank() > 4) return std::nullopt;
    return a.get_f64(0);
  }
  // The scores product under `x`: [mul|div by a constant], then a matmul (or a fused matmul
  // carrying the mask). Fills q-side/k-side head values and the absorbed nodes.
  const Node* scores(ValueId x, Match* m, ValueId* qh, ValueId* kt) const;
  // The [B,T,H*D] source of head value `hv` = transpose(reshape(x), perm), absorbing the nodes
  // only the pattern reads; `hv` itself when it is not such a split.
  // absorb: the node reading `hv` is absorbed too. *source_absorbable: so is the node reading
  // the returned value.
  ValueId split_source(ValueId hv, const std::vector<int64_t>& perm, int64_t heads, int64_t head_dim,
                       bool absorb, Match* m, bool* source_absorbable) const;
  // `v` = mul(x, c) or div(x, c), c a one-element constant and v read only by an absorbed node
  // (an exporter's scale folded into q or k): x, the node absorbed and c put into the scale.
  ValueId peel_scale(ValueId v, bool reader_absorbed, Match* m) const;
  // The rank-3 form (see the header) once the scores, softmax and claims are checked.
  std::optional<Rewrite> match_batched(const Node& sm, const Node& mm, ValueId qh, ValueId kt, Match m,
                                       ValueId* k_rows) const;
  // Every absorbed intermediate is read by the next step only; else reports why at `sm`.
  bool chain_is_private(const Node& sm, const Match& m) const;
  // The matmul of the softmax's result with v; null (reported) when there is none.
  const Node* product_with_values(const Node& sm) const;

  const Graph& g_;
  const UseInfo& uses_;
  const std::vector<std::string>& names_;
  PassContext& ctx_;
};

bool is_transpose(const Node* n, const std::vector<int64_t>& perm) {
  return n && n->op == Op::Transpose && n->attr_i64s("perm") == perm;
}

const Node* Matcher::scores(ValueId x, Match* m, ValueId* qh, ValueId* kt) const {
  const Node* n = def(x);
  if (!n) return nullptr;
  std::vector<size_t> absorbed;
  double scale = 1.0;
  if (n->op == Op::Mul || n->op == Op::Div) {
    for (int side = 0; side < 2; ++side) {
      if (n->op == Op::Div && side == 0) continue;  // c / s is not a scale
      ValueId c = n->inputs[static_cast<size_t>(side)];
      std::optional<double> value = scalar_constant(c);
      if (!value || !single_use(n->inputs[static_cast<size_t>(1 - side)])) continue;
      scale = n->op == Op::Mul ? *value : 1.0 / *value;
      absorbed.push_back(index(n));
      if (single_use(c)) absorbed.push_back(index(def(c)));
      n = def(n->inputs[static_cast<size_t>(1 - side)]);
      break;
    }
    if (absorbed.empty() || !n) return nullptr;
  }
  ValueId mask = kNoValue;
  if (n->op == Op::FusedMatmulBiasAct || n->op == Op::FusedMatmulResidual) {
    // matmul + mask taken by an earlier pass: only without activation, bias or scale after it.
    bool plain = n->attr_str("act") == "none" && n->inputs.size() == 3 && absorbed.empty() && m->mask == kNoValue;
    if (!plain) return nullptr;
    mask = n->inputs[2];
  } else if (n->op != Op::MatMul) {
    return nullptr;
  }
  const int rank = g_.type(n->outputs[0]).rank();
  if (rank != 4 && rank != 3) return nullptr;
  absorbed.push_back(index(n));
  m->absorbed.insert(m->absorbed.end(), absorbed.begin(), absorbed.end());
  m->scale = scale;
  if (mask != kNoValue) m->mask = mask;
  *qh = n->inputs[0];
  *kt = n->inputs[1];
  return n;
}

ValueId Matcher::peel_scale(ValueId v, bool reader_absorbed, Match* m) const {
  const Node* n = def(v);
  if (!reader_absorbed || !n || (n->op != Op::Mul && n->op != Op::Div) || !single_use(v)) return v;
  for (int side = 0; side < 2; ++side) {
    if (n->op == Op::Div && side == 0) continue;  // c / x is not a scale
    ValueId c = n->inputs[static_cast<size_t>(side)], x = n->inputs[static_cast<size_t>(1 - side)];
    std::optional<double> value = scalar_constant(c);
    if (!value || !(g_.type(x) == g_.type(v))) continue;
    m->scale = n->op == Op::Mul ? m->scale * *value : m->scale / *value;
    m->absorbed.push_back(index(n));
    if (single_use(c)) m->absorbed.push_back(index(def(c)));
    return x;
  }
  return v;
}

ValueId Matcher::split_source(ValueId hv, const std::vector<int64_t>& perm, int64_t heads, int64_t head_dim,
                              bool absorb, Match* m, bool* source_absorbable) const {
  *source_absorbable = absorb;
  const Node* t = def(hv);
  if (!is_transpose(t, perm)) return hv;
  const Node* r = def(t->inputs[0]);
  if (!r || r->op != Op::Reshape) return hv;
  const TensorType& x = g_.type(r->inputs[0]);
  const Shape& split = g_.type(r->outputs[0]).shape;
  if (x.rank() != 3 || split.size() != 4 || !(split[0] == x.shape[0]) || !(split[1] == x.shape[1]) ||
      !(split[2] == Dim(heads)) || !(split[3] == Dim(head_dim))) {
    return hv;
  }
  // Absorb what only this pattern reads; the source is read either way.
  *source_absorbable = false;
  if (absorb && single_use(hv)) {
    m->absorbed.push_back(index(t));
    if (single_use(t->inputs[0])) {
      m->absorbed.push_back(index(r));
      *source_absorbable = true;
    }
  }
  return r->inputs[0];
}

bool Matcher::chain_is_private(const Node& sm, const Match& m) const {
  for (size_t i : m.absorbed) {
    const Node& n = g_.nodes()[i];
    if (n.op == Op::Constant) continue;
    ChainStep step = next_in_chain(g_, uses_, n.outputs[0], names_);
    if (step.user < 0) {
      miss(sm, uses_.is_output(n.outputs[0]) ? MissReason::EscapesAsOutput : MissReason::MultiConsumer,
           step.why_not);
      return false;
    }
  }
  return true;
}

const Node* Matcher::product_with_values(const Node& sm) const {
  ChainStep to_pv = next_in_chain(g_, uses_, sm.outputs[0], names_);
  if (to_pv.user < 0) {
    miss(sm, uses_.is_output(sm.outputs[0]) ? MissReason::EscapesAsOutput : MissReason::MultiConsumer,
         to_pv.why_not);
    return nullptr;
  }
  const Node* pv = &g_.nodes()[static_cast<size_t>(to_pv.user)];
  return pv->op == Op::MatMul && pv->inputs[0] == sm.outputs[0] ? pv : nullptr;
}

std::optional<Rewrite> Matcher::match_batched(const Node& sm, const Node& mm, ValueId qh, ValueId kt, Match m,
                                              ValueId* k_rows) const {
  const TensorType& s = g_.type(mm.outputs[0]);
  const TensorType& qt = g_.type(qh);
  const TensorType& ktt = g_.type(kt);
  if (m.mask != kNoValue) {
    miss(sm, MissReason::ShapeMismatch, "a mask on the rank-3 scores " + s.to_string() + " is not fused");
    return std::nullopt;
  }
  if (qt.rank() != 3 || ktt.rank() != 3 || !qt.shape[2].is_static()) {
    miss(sm, MissReason::ShapeMismatch, "q " + qt.to_string() + " is not [N,Tq,D] with a static D");
    return std::nullopt;
  }
  const int64_t head_dim = qt.shape[2].value();
  if (!chain_is_private(sm, m)) return std::nullopt;
  const Node* pv = product_with_values(sm);
  if (!pv) return std::nullopt;
  const TensorType& vt = g_.type(pv->inputs[1]);
  const Dim batch = qt.shape[0];
  if (vt.rank() != 3 || !(vt.shape[2] == Dim(head_dim)) || !(vt.shape[0] == batch) ||
      !(ktt.shape[0] == batch)) {
    miss(sm, MissReason::ShapeMismatch,
         "v " + vt.to_string() + " and kᵀ " + ktt.to_string() + " are not [" + batch.to_string() + ",Tk," +
             std::to_string(head_dim) + "] and its transpose");
    return std::nullopt;
  }
  m.absorbed.push_back(index(&sm));
  m.absorbed.push_back(index(pv));
  m.q = peel_scale(qh, true, &m);
  const ValueId kt_in = peel_scale(kt, true, &m);
  const Node* t = def(kt_in);
  const bool absorb = single_use(kt_in);
  if (is_transpose(t, {0, 2, 1})) {
    m.k = t->inputs[0];
  } else if (is_transpose(t, {1, 2, 0})) {
    *k_rows = t->inputs[0];
  } else {
    miss(sm, MissReason::ShapeMismatch, "kᵀ " + ktt.to_string() + " is not a transpose of the keys");
    return std::nullopt;
  }
  if (absorb) m.absorbed.push_back(index(t));
  m.v = pv->inputs[1];
  m.result = pv->outputs[0];
  // k: the caller's transpose of *k_rows when only kᵀ is there.
  Node fused{Op::FusedAttention, {m.q, m.k == kNoValue ? kt_in : m.k, m.v}, {m.result}, {}, nullptr, sm.loc};
  fused.attrs.set("heads", int64_t(1));
  fused.attrs.set("head_dim", head_dim);
  if (m.scale != 1.0) fused.attrs.set("scale", m.scale);
  return Rewrite{std::move(m.absorbed), {}, std::move(fused)};
}

std::optional<Rewrite> Matcher::match(size_t softmax_index, ValueId* k_rows) const {
  const Node& sm = g_.nodes()[softmax_index];
  Match m;
  ValueId qh = kNoValue, kt = kNoValue;
  ValueId x = sm.inputs[0];
  const Node* mm = nullptr;
  const Node* add = def(x);
  ValueId masked = kNoValue;
  if (add && add->op == Op::Add) {
    for (int side = 0; side < 2 && !mm; ++side) {
      Match trial;
      trial.mask = add->inputs[static_cast<size_t>(1 - side)];
      mm = scores(add->inputs[static_cast<size_t>(side)], &trial, &qh, &kt);
      if (mm) m = trial;
    }
    if (mm) {
      masked = add->outputs[0];
      m.absorbed.push_back(index(add));
    }
  }
  if (!mm) mm = scores(x, &m, &qh, &kt);
  if (!mm) return std::nullopt;  // not attention-shaped: nothing to report

  // From here on the structure is attention's: every refusal is reported.
  const TensorType& s = g_.type(mm->outputs[0]);
  const TensorType& qt = g_.type(qh);
  const TensorType& ktt = g_.type(kt);
  std::optional<int> axis = normalize_axis(sm.attr_i64("axis"), g_.type(x).rank());
  if (!axis || *axis != s.rank() - 1) {
    miss(sm, MissReason::ShapeMismatch, "softmax runs over axis " + std::to_string(sm.attr_i64("axis")) +
                                            ", not the key axis of the scores " + s.to_string());
    return std::nullopt;
  }
  if (!ctx_.table().claims(FusedKind::Attention)) {
    miss(sm, MissReason::NotClaimedByTarget, "fused_attention is not claimed by target " + std::string(target_name(ctx_.target)));
    return std::nullopt;
  }
  if (!is_float(s.dtype) || !ctx_.table().claims_dtype(s.dtype)) {
    miss(sm, MissReason::DTypeMismatch, std::string(dtype_name(s.dtype)) + " attention is not claimed by target " +
                                            std::string(target_name(ctx_.target)));
    return std::nullopt;
  }
  if (s.rank() == 3) return match_batched(sm, *mm, qh, kt, std::move(m), k_rows);
  if (qt.rank() != 4 || ktt.rank() != 4 || !qt.shape[1].is_static() || !qt.shape[3].is_static()) {
    miss(sm, MissReason::ShapeMismatch, "q " + qt.to_string() + " is not [B,H,Tq,D] with static H and D");
    return std::nullopt;
  }
  const int64_t heads = qt.shape[1].value(), head_dim = qt.shape[3].value();
  if (m.mask != kNoValue && !(g_.type(masked != kNoValue ? masked : mm->outputs[0]) == s)) {
    miss(sm, MissReason::BiasNotBroadcastable, "mask " + g_.type(m.mask).to_string() +
                                                   " widens the scores " + s.to_string() + " (it must broadcast to them)");
    return std::nullopt;
  }
  if (!chain_is_private(sm, m)) return std::nullopt;
  const Node* pv = product_with_values(sm);
  if (!pv) return std::nullopt;
  const TensorType& vt = g_.type(pv->inputs[1]);
  if (vt.rank() != 4 || !(vt.shape[3] == Dim(head_dim)) || !(vt.shape[1] == Dim(heads))) {
    miss(sm, MissReason::ShapeMismatch, "v " + vt.to_string() + " is not [B," + std::to_string(heads) + ",Tk," +
                                            std::to_string(head_dim) + "]");
    return std::nullopt;
  }
  m.absorbed.push_back(softmax_index);
  m.absorbed.push_back(index(pv));

  // Operands: the sources of the head splits where they are there.
  // A scale folded into q or k (before or after the split) moves into the scale attribute.
  bool source_absorbable = false;
  m.q = split_source(peel_scale(qh, true, &m), {0, 2, 1, 3}, heads, head_dim, true, &m, &source_absorbable);
  m.q = peel_scale(m.q, source_absorbable, &m);
  const ValueId kt_in = peel_scale(kt, true, &m);
  const Node* kt_node = def(kt_in);
  if (is_transpose(kt_node, {0, 2, 3, 1})) {
    m.k = split_source(kt_in, {0, 2, 3, 1}, heads, head_dim, true, &m, &source_absorbable);
  } else if (is_transpose(kt_node, {0, 1, 3, 2})) {
    const bool absorb = single_use(kt_in);
    if (absorb) m.absorbed.push_back(index(kt_node));
    ValueId k4 = peel_scale(kt_node->inputs[0], absorb, &m);
    m.k = split_source(k4, {0, 2, 1, 3}, heads, head_dim, absorb, &m, &source_absorbable);
  }
  if (m.k != kNoValue && m.k != kt_in) m.k = peel_scale(m.k, source_absorbable, &m);
  if (m.k == kNoValue || m.k == kt_in) {
    miss(sm, MissReason::ShapeMismatch, "kᵀ " + ktt.to_string() + " is not a transpose of the keys");
    return std::nullopt;
  }
  m.v = split_source(pv->inputs[1], {0, 2, 1, 3}, heads, head_dim, true, &m, &source_absorbable);
  const Dim batch = qt.shape[0];
  if (!(ktt.shape[0] == batch) || !(vt.shape[0] == batch)) {
    miss(sm, MissReason::ShapeMismatch, "batch dims of q " + qt.to_string() + ", kᵀ " + ktt.to_string() + " and v " +
                                            vt.to_string() + " differ (broadcast batches are not fused)");
    return std::nullopt;
  }

  // The head merge after the second product.
  m.result = pv->outputs[0];
  if (const Node* t = single_use(pv->outputs[0]) ? &g_.nodes()[static_cast<size_t>(uses_.users[static_cast<size_t>(pv->outputs[0])][0])] : nullptr;
      is_transpose(t, {0, 2, 1, 3}) && single_use(t->outputs[0])) {
    const Node& r = g_.nodes()[static_cast<size_t>(uses_.users[static_cast<size_t>(t->outputs[0])][0])];
    const Shape& y = g_.type(r.outputs[0]).shape;
    const Shape& o = g_.type(pv->outputs[0]).shape;
    if (r.op == Op::Reshape && y.size() == 3 && y[0] == o[0] && y[1] == o[2] && y[2] == Dim(heads * head_dim)) {
      m.absorbed.push_back(index(t));
      m.absorbed.push_back(index(&r));
      m.result = r.outputs[0];
      m.merged = true;
    }
  }

  Node fused{Op::FusedAttention, {m.q, m.k, m.v}, {m.result}, {}, nullptr, sm.loc};
  if (m.mask != kNoValue) fused.inputs.push_back(m.mask);
  fused.attrs.set("heads", heads);
  fused.attrs.set("head_dim", head_dim);
  if (m.scale != 1.0) fused.attrs.set("scale", m.scale);
  if (!m.merged) fused.attrs.set("merge_heads", false);
  return Rewrite{std::move(m.absorbed), {}, std::move(fused)};
}

}  // namespace

Status run_fuse_attention(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  const Matcher matcher(g, uses, names, ctx);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].op != Op::Softmax) continue;
    ValueId k_rows = kNoValue;
    std::optional<Rewrite> rw = matcher.match(i, &k_rows);
    if (!rw) continue;
    if (k_rows != kNoValue) {  // rank-3 scores with only kᵀ: k = transpose [1,0,2] of the keys' [T,N,D]
      Expected<ValueId> k =
          Prelude(g, ctx, uses, rw->prelude)
              .emit(Op::Transpose, {k_rows}, Attrs{{"perm", std::vector<int64_t>{1, 0, 2}}});
      if (!k) continue;
      rw->fused.inputs[1] = *k;
    }
    rewrites.push_back(std::move(*rw));
  }
  ctx.count("fuse-attention", "fused", static_cast<int64_t>(apply_rewrites(g, std::move(rewrites))));
  return Status::ok();
}

}  // namespace fusebox
