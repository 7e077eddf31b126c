// The optimizers of ONNX's training domain (ai.onnx.preview.training, version 1) as element-wise
// compositions, each written term for term from the op's definition. Inputs are R (learning
// rate, scalar), T (update count, int64 scalar), then n tensors X, n gradients G and n states
// per state kind; the outputs are the n new X, then the n new values of each state. The same
// formulas apply to every tensor independently; R and T are read at run time.
//
//   Adagrad   r = R / (1 + T * decay_factor);  g = norm_coefficient * X + G
//             H' = H + g * g;  X' = X - r * g / (sqrt(H') + epsilon)
//   Momentum  g = norm_coefficient * X + G;  b = T > 0 ? beta : 1;  V' = alpha * V + b * g
//             standard: X' = X - R * V';  nesterov: X' = X - R * (g + alpha * V')
//   Adam      g = norm_coefficient * X + G;  V' = alpha * V + (1 - alpha) * g
//             H' = beta * H + (1 - beta) * g * g
//             r = T > 0 ? R * sqrt(1 - beta^T) / (1 - alpha^T) : R
//             X' = (1 - norm_coefficient_post) * (X - r * V' / (sqrt(H') + epsilon))
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// One optimizer node's inputs, split by role, with R and T as values of X's float type (T also as
// read, for the T > 0 tests).
struct OptimizerInputs {
  DType dtype = DType::F32;
  ValueId rate = kNoValue, count = kNoValue, count_float = kNoValue;
  std::vector<ValueId> x, g;
  std::vector<std::vector<ValueId>> states;  // per state kind, one per tensor
};

// Reads R, T and `1 + states` groups of n tensors, checking the counts and types.
Expected<OptimizerInputs> read_inputs(ImportContext& ctx, OnnxNode& n, int states, const char* state_names) {
  const int groups = 2 + states;
  const int tensors = (n.num_inputs() - 2) / groups;
  if (n.num_inputs() < 2 + groups || (n.num_inputs() - 2) % groups != 0) {
    return n.error("takes R, T and " + std::to_string(groups) + " groups of tensors (X, G, " + state_names +
                   "), got " + std::to_string(n.num_inputs()) + " inputs");
  }
  if (n.num_outputs() != tensors * (1 + states)) {
    return n.error("has " + std::to_string(n.num_outputs()) + " outputs for " + std::to_string(tensors) +
                   " tensors; it must have " + std::to_string(tensors * (1 + states)));
  }
  OptimizerInputs in;
  FUSEBOX_ASSIGN_OR_RETURN(in.rate, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(in.count, ctx.value(n, 1));
  const TensorType rt = ctx.type(in.rate), tt = ctx.type(in.count);
  if (!is_float(rt.dtype) || rt.rank() != 0) return n.error("input R must be a float scalar, got " + rt.to_string());
  if (tt.dtype != DType::I64 || tt.rank() != 0) return n.error("input T must be an int64 scalar, got " + tt.to_string());
  in.states.resize(size_t(states));
  for (int k = 0; k < tensors; ++k) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 2 + k));
    const TensorType xt = ctx.type(x);
    if (!is_float(xt.dtype)) return n.error("input X" + std::to_string(k + 1) + " must be a float tensor, got " + xt.to_string());
    if (k == 0) in.dtype = xt.dtype;
    if (xt.dtype != in.dtype) return n.error("all tensors must have one float type, got " + xt.to_string());
    in.x.push_back(x);
    for (int s = 0; s <= states; ++s) {
      const int index = 2 + (s + 1) * tensors + k;
      FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, index));
      if (ctx.type(v) != xt) {
        return n.error("input " + std::to_string(index) + " must have the type of X" + std::to_string(k + 1) + " (" +
                       xt.to_string() + "), got " + ctx.type(v).to_string());
      }
      (s == 0 ? in.g : in.states[size_t(s - 1)]).push_back(v);
    }
  }
  if (rt.dtype != in.dtype) in.rate = ctx.emit(Op::Cast, {in.rate}, {{"to", in.dtype}});
  in.count_float = ctx.emit(Op::Cast, {in.count}, {{"to", in.dtype}});
  return in;
}

// T > 0 (bool scalar).
ValueId count_positive(ImportContext& ctx, const OptimizerInputs& in) {
  return ctx.emit(Op::Greater, {in.count, scalar_constant(ctx, DType::I64, 0)});
}

// norm_coefficient * X + G.
ValueId regularized(ImportContext& ctx, const OptimizerInputs& in, size_t k, double norm) {
  return ctx.emit(Op::Add, {ctx.emit(Op::Mul, {scalar_constant(ctx, in.dtype, norm), in.x[k]}), in.g[k]});
}

// Sets output `group * n + k` (the k-th tensor of that output group).
Status set_group_output(ImportContext& ctx, OnnxNode& n, const OptimizerInputs& in, int group, size_t k, ValueId v) {
  return ctx.set_output(n, group * int(in.x.size()) + int(k), v);
}

Status convert_adagrad(ImportContext& ctx, OnnxNode& n) {
  const double decay = n.attr_float("decay_factor", 0.0f), eps = n.attr_float("epsilon", 1e-6f);
  const double norm = n.attr_float("norm_coefficient", 0.0f);
  FUSEBOX_ASSIGN_OR_RETURN(OptimizerInputs in, read_inputs(ctx, n, 1, "H"));
  const DType t = in.dtype;
  ValueId decayed = ctx.emit(Op::Add, {scalar_constant(ctx, t, 1), ctx.emit(Op::Mul, {in.count_float, scalar_constant(ctx, t, decay)})});
  ValueId r = ctx.emit(Op::Div, {in.rate, decayed});
  for (size_t k = 0; k < in.x.size(); ++k) {
    ValueId g = regularized(ctx, in, k, norm);
    ValueId h = ctx.emit(Op::Add, {in.states[0][k], ctx.emit(Op::Mul, {g, g})});
    ValueId adaptive = ctx.emit(Op::Add, {ctx.emit(Op::Sqrt, {h}), scalar_constant(ctx, t, eps)});
    ValueId step = ctx.emit(Op::Div, {ctx.emit(Op::Mul, {r, g}), adaptive});
    FUSEBOX_RETURN_IF_ERROR(set_group_output(ctx, n, in, 0, k, ctx.emit(Op::Sub, {in.x[k], step})));
    FUSEBOX_RETURN_IF_ERROR(set_group_output(ctx, n, in, 1, k, h));
  }
  return Status::ok();
}

Status convert_momentum(ImportContext& ctx, OnnxNode& n) {
  std::optional<float> alpha = n.attr_float("alpha"), beta = n.attr_float("beta");
  std::optional<float> norm = n.attr_float("norm_coefficient");
  std::string mode = n.attr_string("mode", "");
  for (const auto& [name, given] : {std::pair{"alpha", alpha.has_value()}, {"beta", beta.has_value()},
                                    {"norm_coefficient", norm.has_value()}, {"mode", !mode.empty()}}) {
    if (!given) return n.error(std::string("attribute '") + name + "' is required");
  }
  if (mode != "standard" && mode != "nesterov") {
    return n.error("attribute 'mode' = \"" + mode + "\" is not supported (standard or nesterov)");
  }
  FUSEBOX_ASSIGN_OR_RETURN(OptimizerInputs in, read_inputs(ctx, n, 1, "V"));
  const DType t = in.dtype;
  ValueId a = scalar_constant(ctx, t, *alpha);
  ValueId b = ctx.emit(Op::Where, {count_positive(ctx, in), scalar_constant(ctx, t, *beta), scalar_constant(ctx, t, 1)});
  for (size_t k = 0; k < in.x.size(); ++k) {
    ValueId g = regularized(ctx, in, k, *norm);
    ValueId v = ctx.emit(Op::Add, {ctx.emit(Op::Mul, {a, in.states[0][k]}), ctx.emit(Op::Mul, {b, g})});
    ValueId direction = mode == "standard" ? v : ctx.emit(Op::Add, {g, ctx.emit(Op::Mul, {a, v})});
    ValueId x = ctx.emit(Op::Sub, {in.x[k], ctx.emit(Op::Mul, {in.rate, direction})});
    FUSEBOX_RETURN_IF_ERROR(set_group_output(ctx, n, in, 0, k, x));
    FUSEBOX_RETURN_IF_ERROR(set_group_output(ctx, n, in, 1, k, v));
  }
  return Status::ok();
}

Status convert_adam(ImportContext& ctx, OnnxNode& n) {
  const double alpha = n.attr_float("alpha", 0.9f), beta = n.attr_float("beta", 0.999f);
  const double eps = n.attr_float("epsilon", 1e-6f), norm = n.attr_float("norm_coefficient", 0.0f);
  const double post = n.attr_float("norm_coefficient_post", 0.0f);
  FUSEBOX_ASSIGN_OR_RETURN(OptimizerInputs in, read_inputs(ctx, n, 2, "V, H"));
  const DType t = in.dtype;
  ValueId one = scalar_constant(ctx, t, 1), a = scalar_constant(ctx, t, alpha), b = scalar_constant(ctx, t, beta);
  ValueId alpha_t = ctx.emit(Op::Pow, {a, in.count_float}), beta_t = ctx.emit(Op::Pow, {b, in.count_float});
  ValueId adjusted = ctx.emit(Op::Div, {ctx.emit(Op::Mul, {in.rate, ctx.emit(Op::Sqrt, {ctx.emit(Op::Sub, {one, beta_t})})}),
                                        ctx.emit(Op::Sub, {one, alpha_t})});
  ValueId r = ctx.emit(Op::Where, {count_positive(ctx, in), adjusted, in.rate});
  for (size_t k = 0; k < in.x.size(); ++k) {
    ValueId g = regularized(ctx, in, k, norm);
    ValueId v = ctx.emit(Op::Add, {ctx.emit(Op::Mul, {a, in.states[0][k]}), ctx.emit(Op::Mul, {scalar_constant(ctx, t, 1 - alpha), g})});
    ValueId h = ctx.emit(Op::Add, {ctx.emit(Op::Mul, {b, in.states[1][k]}),
                                   ctx.emit(Op::Mul, {ctx.emit(Op::Mul, {scalar_constant(ctx, t, 1 - beta), g}), g})});
    ValueId denom = ctx.emit(Op::Add, {ctx.emit(Op::Sqrt, {h}), scalar_constant(ctx, t, eps)});
    ValueId x = ctx.emit(Op::Sub, {in.x[k], ctx.emit(Op::Div, {ctx.emit(Op::Mul, {r, v}), denom})});
    x = ctx.emit(Op::Mul, {scalar_constant(ctx, t, 1 - post), x});
    FUSEBOX_RETURN_IF_ERROR(set_group_output(ctx, n, in, 0, k, x));
    FUSEBOX_RETURN_IF_ERROR(set_group_output(ctx, n, in, 1, k, v));
    FUSEBOX_RETURN_IF_ERROR(set_group_output(ctx, n, in, 2, k, h));
  }
  return Status::ok();
}

}  // namespace

void add_training_converters(ConverterTable& table) {
  table[converter_key(kTrainingDomain, "Adagrad")] = convert_adagrad;
  table[converter_key(kTrainingDomain, "Momentum")] = convert_momentum;
  table[converter_key(kTrainingDomain, "Adam")] = convert_adam;
}

}  // namespace fusebox::onnx_import
