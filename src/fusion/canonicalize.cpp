// canonicalize — constant folding, shape refinement and dead-node removal.
// Matches: nodes whose operands are all constants (folded through the runtime's evaluator when
// the result is small), values whose declared type is less specific than inference gives (`?`
// dims refined), dead nodes. Produces: constant nodes, refined types. Requires: a verified graph.
// Preserves: inputs, output positions and every returned value's type except `?` refinement.
// With recognition on (not under skip_fusion): hardswish, hardsigmoid, SiLU and gelu (erf and tanh)
// written out in primitives become ops (recognize_activations.h), so do layer norm and rms norm
// (recognize_norms.h), softmax and log-softmax (recognize_softmax.h); a form matched by structure
// but refused is a near-miss remark (`fusebox explain`). Batch norm after a conv folds into the
// conv's weights and bias (fold_batch_norm.h), a constant scale after a matmul with constant
// weights into the weights (fold_matmul_scale.h: ONNX Gemm's alpha).
#include <algorithm>

#include "fusion/fold_batch_norm.h"
#include "fusion/fold_matmul_scale.h"
#include "fusion/pass.h"
#include "fusion/recognize_activations.h"
#include "fusion/recognize_norms.h"
#include "fusion/recognize_softmax.h"
#include "ir/dead_code.h"
#include "ir/shape_inference.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

// Folding larger results would bloat the graph for no launch saved (unless an operand is as
// large: see fold_constants).
constexpr int64_t kMaxFoldedElements = 1 << 16;

bool is_constant(const Graph& g, const UseInfo& uses, ValueId v) {
  int p = uses.producer[static_cast<size_t>(v)];
  return p >= 0 && g.nodes()[static_cast<size_t>(p)].op == Op::Constant;
}

Status fold_constants(Graph& g, PassContext& ctx) {
  if (!ctx.evaluate) return Status::ok();
  UseInfo uses = compute_uses(g);
  auto& nodes = g.mutable_nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& n = nodes[i];
    // A bind_symbols of constants still binds its symbols when it runs: never folded away.
    if (n.op == Op::Constant || n.op == Op::BindSymbols || n.inputs.empty() || n.outputs.size() != 1)
      continue;
    bool all_constant = true;
    for (ValueId v : n.inputs) all_constant = all_constant && is_constant(g, uses, v);
    if (!all_constant) continue;
    std::vector<Array> in;
    int64_t largest = 0;
    for (ValueId v : n.inputs) {
      in.push_back(nodes[static_cast<size_t>(uses.producer[static_cast<size_t>(v)])].attr_array("value"));
      largest = std::max(largest, in.back().numel());
    }
    // A result no larger than an operand it replaces (a transposed or reshaped weight) folds at
    // any size: otherwise it would run on every call.
    std::optional<int64_t> count = num_elements(g.type(n.outputs[0]).shape);
    if (!count || *count > std::max(kMaxFoldedElements, largest)) continue;
    Expected<std::vector<Array>> out = ctx.evaluate(n, in);
    if (!out) continue;  // a kernel refusing (e.g. gather out of range) is reported at run time
    Node folded{Op::Constant, {}, n.outputs, {{"value", std::make_shared<const Array>((*out)[0])}}, nullptr, n.loc};
    n = std::move(folded);
    ctx.count("canonicalize", "folded");
  }
  return Status::ok();
}

Status refine_types(Graph& g, PassContext& ctx) {
  for (const Node& n : g.nodes()) {
    std::vector<TensorType> in;
    for (ValueId v : n.inputs) in.push_back(g.type(v));
    Expected<std::vector<TensorType>> types = infer_result_types(n, in);
    if (!types) return types.status();
    for (size_t r = 0; r < n.outputs.size(); ++r) {
      TensorType& declared = g.value(n.outputs[r]).type;
      for (size_t d = 0; d < declared.shape.size(); ++d) {
        const Dim& inferred = (*types)[r].shape[d];
        if (declared.shape[d].is_dynamic() && !inferred.is_dynamic()) {
          declared.shape[d] = inferred;
          ctx.count("canonicalize", "refined");
        }
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status run_canonicalize(Graph& g, PassContext& ctx) {
  FUSEBOX_RETURN_IF_ERROR(fold_constants(g, ctx));
  if (ctx.recognize_patterns) {
    ctx.count("canonicalize", "activations-recognised", recognize_activations(g, ctx));
    ctx.count("canonicalize", "norms-recognised", recognize_norms(g, ctx));
    ctx.count("canonicalize", "softmax-recognised", recognize_softmax(g, ctx));
    FUSEBOX_ASSIGN_OR_RETURN(int64_t folded, fold_batch_norms(g, ctx));
    ctx.count("canonicalize", "batch-norms-folded", folded);
    ctx.count("canonicalize", "matmul-scales-folded", fold_matmul_scales(g, ctx));
  }
  FUSEBOX_RETURN_IF_ERROR(refine_types(g, ctx));
  ctx.count("canonicalize", "removed", static_cast<int64_t>(remove_dead_nodes(g)));
  return Status::ok();
}

}  // namespace fusebox
