#include "fusion/residual_norm.h"

#include <optional>

#include "fusion/pattern_rewrite.h"
#include "ir/outline.h"

namespace fusebox {

namespace {

struct Match {
  ValueId x = kNoValue, r = kNoValue, bias = kNoValue;
  std::vector<size_t> adds;  // the absorbed add nodes
};

class Matcher {
 public:
  Matcher(const Graph& g, PassContext& ctx, Op fused_op)
      : g_(g), ctx_(ctx), uses_(compute_uses(g)), names_(value_display_names(g)),
        pattern_(op_keyword(fused_op)) {}

  const UseInfo& uses() const { return uses_; }

  // The producer of `v` when it is an add, else null.
  const Node* add_producing(ValueId v) const {
    int p = uses_.producer[static_cast<size_t>(v)];
    if (p < 0) return nullptr;
    const Node& n = g_.nodes()[static_cast<size_t>(p)];
    return n.op == Op::Add ? &n : nullptr;
  }
  size_t index(const Node& n) const { return static_cast<size_t>(&n - g_.nodes().data()); }

  // `add` sums two operands of its own full type.
  bool is_residual_add(const Node& add) const {
    const TensorType& t = g_.type(add.outputs[0]);
    return is_full_shape(g_.type(add.inputs[0]), t) && is_full_shape(g_.type(add.inputs[1]), t);
  }

  // The residual (and bias) feeding `norm`, or nullopt with the refusal recorded.
  std::optional<Match> match(const Node& norm) const {
    const ValueId s = norm.inputs[0];
    const Node* add = add_producing(s);
    if (!add) return std::nullopt;
    if (is_residual_add(*add)) return Match{add->inputs[0], add->inputs[1], kNoValue, {index(*add)}};
    // A bias add: one operand a residual sum, the other broadcasting into it.
    for (int k = 0; k < 2; ++k) {
      ValueId t = add->inputs[static_cast<size_t>(k)], bias = add->inputs[static_cast<size_t>(1 - k)];
      const Node* inner = add_producing(t);
      if (!inner || !is_residual_add(*inner) || t == bias) continue;
      if (!is_full_shape(g_.type(t), g_.type(s))) {
        miss(norm, *add, MissReason::BiasNotBroadcastable,
             "%" + name(bias) + " " + g_.type(bias).to_string() + " does not broadcast into the residual sum %" +
                 name(t) + " " + g_.type(t).to_string());
        return std::nullopt;
      }
      ChainStep step = next_in_chain(g_, uses_, t, names_);
      if (step.user < 0) {
        miss(norm, *inner, uses_.is_output(t) ? MissReason::EscapesAsOutput : MissReason::MultiConsumer,
             step.why_not);
        return std::nullopt;
      }
      return Match{inner->inputs[0], inner->inputs[1], bias, {index(*inner), index(*add)}};
    }
    // Defect 8: an add that broadcasts one operand is a bias, not a residual.
    const ValueId a = add->inputs[0], b = add->inputs[1];
    miss(norm, *add, MissReason::ShapeMismatch,
         "not a residual: %" + name(a) + " " + g_.type(a).to_string() + " and %" + name(b) + " " +
             g_.type(b).to_string() + " differ in shape (a broadcasting add is a bias)");
    return std::nullopt;
  }

  void miss(const Node& norm, const Node& at, MissReason reason, const std::string& detail) const {
    ctx_.remarks.miss(pattern_, describe_node(g_, at, names_), reason,
                      "not fusing " + describe_node(g_, at, names_) + " into " + describe_node(g_, norm, names_) + ": " +
                          detail);
  }

 private:
  std::string name(ValueId v) const { return names_[static_cast<size_t>(v)]; }

  const Graph& g_;
  PassContext& ctx_;
  UseInfo uses_;
  std::vector<std::string> names_;
  std::string pattern_;
};

}  // namespace

Status fuse_residual_norm(Graph& g, PassContext& ctx, Op norm_op, Op fused_op, FusedKind kind, const char* pass) {
  const Matcher m(g, ctx, fused_op);
  const bool claimed = ctx.table().claims(kind);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& norm = g.nodes()[i];
    if (norm.op != norm_op) continue;
    std::optional<Match> match = m.match(norm);
    if (!match) continue;
    const ValueId s = norm.inputs[0];
    const DType dtype = g.type(s).dtype;
    const Node& first_add = g.nodes()[match->adds.front()];
    if (!claimed) {
      m.miss(norm, first_add, MissReason::NotClaimedByTarget,
             std::string(fused_kind_name(kind)) + " is not claimed by target " + std::string(target_name(ctx.target)));
      continue;
    }
    if (!ctx.table().claims_dtype(dtype)) {
      m.miss(norm, first_add, MissReason::DTypeMismatch,
             std::string(dtype_name(dtype)) + " is not claimed by target " + std::string(target_name(ctx.target)));
      continue;
    }
    // The sum read elsewhere (or returned) becomes the second result. The fused node then
    // defines it where the norm was, so the norm's own operands must not depend on the sum's
    // other readers: only operands defined before the sum are taken.
    const bool sum_escapes = m.uses().use_count(s) > 1;
    if (sum_escapes) {
      const size_t sum_at = match->adds.back();
      bool early = true;
      for (size_t k = 1; k < norm.inputs.size(); ++k) {
        int p = m.uses().producer[static_cast<size_t>(norm.inputs[k])];
        early = early && p < static_cast<int>(sum_at);
      }
      if (!early) {
        m.miss(norm, first_add, MissReason::WouldCreateCycle,
               "a scale or shift of the norm is computed after the sum, which is also read elsewhere");
        continue;
      }
    }
    Node fused{fused_op, {match->x, match->r}, {norm.outputs[0]}, {}, nullptr, norm.loc};
    if (match->bias != kNoValue) fused.inputs.push_back(match->bias);
    for (size_t k = 1; k < norm.inputs.size(); ++k) fused.inputs.push_back(norm.inputs[k]);
    fused.attrs.set("axis", *norm.attr_or_default("axis"));
    fused.attrs.set("eps", *norm.attr_or_default("eps"));
    fused.attrs.set("has_bias", match->bias != kNoValue);
    if (sum_escapes) fused.outputs.push_back(s);
    Rewrite rw{match->adds, {}, std::move(fused)};
    rw.absorbed.push_back(i);
    rewrites.push_back(std::move(rw));
  }
  const size_t fused = apply_rewrites(g, std::move(rewrites));
  ctx.count(pass, "fused", static_cast<int64_t>(fused));
  // A sum that is also read elsewhere is now defined where the norm was: readers between the
  // two move after it (stable order otherwise).
  if (fused > 0) FUSEBOX_RETURN_IF_ERROR(sort_topologically(g));
  return Status::ok();
}

}  // namespace fusebox
