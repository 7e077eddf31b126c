// Element-wise ONNX ops. ONNX and fusebox agree on numpy broadcasting and on the element types
// of these ops, so most map one to one; the exceptions are written next to their converter.
// Integer shape arithmetic (Shape -> Gather -> Mul -> Concat ...) folds here when every operand
// is known at import time, and so does arithmetic on rank-0 float constants (fold_scalar).
#include <cfloat>
#include <cmath>
#include <functional>
#include <sstream>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

const std::map<std::string, Op, std::less<>>& unary_ops() {
  static const std::map<std::string, Op, std::less<>> ops = {
      {"Relu", Op::Relu},   {"Sigmoid", Op::Sigmoid},       {"Tanh", Op::Tanh},   {"Erf", Op::Erf},
      {"Sqrt", Op::Sqrt},   {"Reciprocal", Op::Reciprocal}, {"Exp", Op::Exp},     {"Log", Op::Log},
      {"Neg", Op::Neg},     {"Abs", Op::Abs},               {"Floor", Op::Floor}, {"Ceil", Op::Ceil},
      {"Sin", Op::Sin},     {"Cos", Op::Cos},               {"Round", Op::Round}, {"Not", Op::Not},
      {"HardSwish", Op::HardSwish}, {"Tan", Op::Tan},   {"Asin", Op::Asin},   {"Acos", Op::Acos},
      {"Atan", Op::Atan},   {"Sinh", Op::Sinh},   {"Cosh", Op::Cosh},   {"Asinh", Op::Asinh},
      {"Acosh", Op::Acosh}, {"Atanh", Op::Atanh},
  };
  return ops;
}

const std::map<std::string, Op, std::less<>>& binary_ops() {
  static const std::map<std::string, Op, std::less<>> ops = {
      {"Add", Op::Add},          {"Sub", Op::Sub},         {"Mul", Op::Mul},
      {"Div", Op::Div},          {"Pow", Op::Pow},         {"Equal", Op::Equal},
      {"Less", Op::Less},        {"Greater", Op::Greater}, {"LessOrEqual", Op::LessEqual},
      {"GreaterOrEqual", Op::GreaterEqual},                {"And", Op::And},
      {"Or", Op::Or},            {"Mod", Op::Mod},
  };
  return ops;
}

bool is_comparison(Op op) {
  return op == Op::Equal || op == Op::Less || op == Op::Greater || op == Op::LessEqual ||
         op == Op::GreaterEqual;
}

// One folded element of integer arithmetic. Symbols survive the identities (N*1, N+0, N/1) and
// comparisons a size can decide (a size is never negative); anything else is unknown.
std::optional<IntElem> fold_elem(Op op, const IntElem& a, const IntElem& b) {
  if (a.is_number() && b.is_number()) {
    int64_t x = a.number, y = b.number;
    switch (op) {
      case Op::Add: return IntElem::of(x + y);
      case Op::Sub: return IntElem::of(x - y);
      case Op::Mul: return IntElem::of(x * y);
      case Op::Div: if (y == 0) return std::nullopt; return IntElem::of(x / y);  // truncates, as ONNX Runtime
      case Op::Mod: {
        if (y == 0) return std::nullopt;
        int64_t m = x % y;
        return IntElem::of((m != 0 && ((m < 0) != (y < 0))) ? m + y : m);
      }
      case Op::Equal: return IntElem::of(x == y);
      case Op::Less: return IntElem::of(x < y);
      case Op::Greater: return IntElem::of(x > y);
      case Op::LessEqual: return IntElem::of(x <= y);
      case Op::GreaterEqual: return IntElem::of(x >= y);
      case Op::And: return IntElem::of((x != 0) && (y != 0));
      case Op::Or: return IntElem::of((x != 0) || (y != 0));
      default: return std::nullopt;
    }
  }
  bool a_sym = a.kind == IntElem::Kind::Symbol, b_sym = b.kind == IntElem::Kind::Symbol;
  switch (op) {
    case Op::Mul:
      if (a_sym && b.is_number() && b.number == 1) return a;
      if (b_sym && a.is_number() && a.number == 1) return b;
      break;
    case Op::Add:
      if (a_sym && b.is_number() && b.number == 0) return a;
      if (b_sym && a.is_number() && a.number == 0) return b;
      break;
    case Op::Sub:
    case Op::Div:
      if (a_sym && b.is_number() && b.number == (op == Op::Sub ? 0 : 1)) return a;
      break;
    case Op::Equal:
      if (a_sym && b_sym && a.symbol == b.symbol) return IntElem::of(1);
      if ((a_sym && b.is_number() && b.number < 0) || (b_sym && a.is_number() && a.number < 0)) {
        return IntElem::of(0);
      }
      break;
    default: break;
  }
  return IntElem::unknown();
}

// Element-wise over known ints with numpy broadcasting of rank <= 1; nullopt: not foldable.
std::optional<KnownInts> fold_binary(Op op, const KnownInts& a, const KnownInts& b) {
  size_t na = a.elems.size(), nb = b.elems.size();
  if (na != nb && na != 1 && nb != 1) return std::nullopt;
  KnownInts r;
  r.dtype = is_comparison(op) || op == Op::And || op == Op::Or ? DType::Bool : a.dtype;
  r.scalar = a.scalar && b.scalar;
  size_t n = na == 1 ? nb : na;
  for (size_t i = 0; i < n; ++i) {
    std::optional<IntElem> e = fold_elem(op, a.elems[na == 1 ? 0 : i], b.elems[nb == 1 ? 0 : i]);
    if (!e) return std::nullopt;
    r.elems.push_back(*e);
  }
  return r;
}

// Rank-0 f32/f64 constants fold through the ops whose result, computed in double and rounded to
// the operands' type, is what the op computes in that type (+ - * / round once; the unary ops
// here are exact). A Range function body computes its Loop's trip count from its scalar inputs
// this way, and Loop needs that count at import.
const Array* scalar_float(ImportContext& ctx, OnnxNode& n, int i) {
  const Array* a = ctx.constant(n, i);
  return a && a->rank() == 0 && (a->dtype() == DType::F32 || a->dtype() == DType::F64) ? a : nullptr;
}

std::optional<double> fold_scalar(Op op, double a, double b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Neg: return -a;
    case Op::Abs: return std::fabs(a);
    case Op::Floor: return std::floor(a);
    case Op::Ceil: return std::ceil(a);
    case Op::Relu: return a < 0 ? 0.0 : a;
    default: return std::nullopt;
  }
}

// The folded rank-0 result of `op` on input 0 (and 1), or nullopt.
std::optional<Array> fold_scalar_node(ImportContext& ctx, OnnxNode& n, Op op, bool binary) {
  const Array* a = scalar_float(ctx, n, 0);
  const Array* b = binary ? scalar_float(ctx, n, 1) : a;
  if (!a || !b || a->dtype() != b->dtype()) return std::nullopt;
  std::optional<double> r = fold_scalar(op, a->get_f64(0), b->get_f64(0));
  if (!r) return std::nullopt;
  Array out(a->dtype(), {});
  out.set_f64(0, *r);
  return out;
}

Status convert_unary(ImportContext& ctx, OnnxNode& n) {
  Op op = unary_ops().at(n.op_type());
  // Shape arithmetic negates too (LayerNormalization's function body: Neg(axis) ranks a shape).
  if (std::optional<KnownInts> k = op == Op::Neg ? ctx.ints(n, 0) : std::nullopt) {
    for (IntElem& e : k->elems) e = e.is_number() ? IntElem::of(-e.number) : IntElem::unknown();
    return ctx.set_output_ints(n, 0, *k);
  }
  // A known condition negates at import (If on Not(OptionalHasElement(x)) picks its branch).
  if (std::optional<KnownInts> k = op == Op::Not ? ctx.ints(n, 0) : std::nullopt) {
    if (k->dtype == DType::Bool && k->all_numbers()) {
      for (IntElem& e : k->elems) e = IntElem::of(e.number == 0);
      return ctx.set_output_ints(n, 0, *k);
    }
  }
  if (std::optional<Array> r = fold_scalar_node(ctx, n, op, false)) return ctx.set_output_constant(n, 0, std::move(*r));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, ctx.emit(op, {x}));
}

Status convert_identity(ImportContext& ctx, OnnxNode& n) {
  // Identity forwards whatever its input stands for, a sequence or an optional included.
  if (!ctx.input_is_tensor(n, 0)) {
    FUSEBOX_ASSIGN_OR_RETURN(OnnxValue v, ctx.any_input(n, 0));
    return ctx.set_output_value(n, 0, std::move(v));
  }
  if (std::optional<KnownInts> k = ctx.ints(n, 0)) return ctx.set_output_ints(n, 0, *k);
  if (const Array* a = ctx.constant(n, 0)) return ctx.set_output_constant(n, 0, *a);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, x);
}

// Dropout drops nothing in inference (training_mode absent or false) and in training with ratio
// 0: the output is the input and the mask is all true. Training with a ratio above 0 draws a
// random mask, which fusebox does not generate.
Status convert_dropout(ImportContext& ctx, OnnxNode& n) {
  n.accept_attr("seed");
  bool training = false;
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(double t, ctx.require_scalar(n, 2, "training_mode"));
    training = t != 0;
  }
  if (ctx.opset() < 12) {
    n.accept_attr("ratio");  // an attribute before opset 12, with no effect at inference
  } else if (n.has_input(1) && training) {
    FUSEBOX_ASSIGN_OR_RETURN(double ratio, ctx.require_scalar(n, 1, "ratio"));
    if (ratio != 0) {
      std::ostringstream r;
      r << ratio;
      return n.error("training with ratio " + r.str() + " draws a random mask, which is not supported (only ratio 0)");
    }
  } else if (n.has_input(1)) {
    n.input(1);  // ratio: no effect at inference
  }
  if (training && !n.has_input(1)) {
    return n.error("training with the default ratio 0.5 draws a random mask, which is not supported (only ratio 0)");
  }
  if (n.has_output(1)) {
    // Before opset 10 the mask has the input's type, and its values are not specified.
    if (ctx.opset() < 10) return n.error("the mask output before opset 10 is not supported");
    FUSEBOX_ASSIGN_OR_RETURN(TensorType xt, ctx.type_of(n, 0));
    for (const Dim& d : xt.shape) {
      if (!d.is_static() && !d.is_symbol()) return n.error("the mask output needs the input's sizes, got " + xt.to_string());
    }
    Array all(DType::Bool, {});
    all.data<bool>()[0] = true;
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 1, ctx.emit(Op::Expand, {ctx.builder().constant(all)}, {{"shape", xt.shape}})));
  }
  return convert_identity(ctx, n);
}

Status convert_hard_sigmoid(ImportContext& ctx, OnnxNode& n) {
  double alpha = n.attr_float("alpha", 0.2f), beta = n.attr_float("beta", 0.5f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, ctx.emit(Op::HardSigmoid, {x}, {{"alpha", alpha}, {"beta", beta}}));
}

Status convert_leaky_relu(ImportContext& ctx, OnnxNode& n) {
  double alpha = n.attr_float("alpha", 0.01f);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, ctx.emit(Op::LeakyRelu, {x}, {{"alpha", alpha}}));
}

// PRelu: where(x < 0, x * slope, x), which is exact (no op rounds differently from ONNX's).
Status convert_prelu(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId slope, ctx.value(n, 1));
  Array zero(ctx.type(x).dtype, {});
  zero.set_f64(0, 0.0);
  ValueId negative = ctx.emit(Op::Less, {x, ctx.builder().constant(zero)});
  ValueId scaled = ctx.emit(Op::Mul, {x, slope});
  return ctx.set_output(n, 0, ctx.emit(Op::Where, {negative, scaled, x}));
}

Status convert_gelu(ImportContext& ctx, OnnxNode& n) {
  std::string approx = n.attr_string("approximate", "none");
  if (approx != "none" && approx != "tanh") return n.error("attribute 'approximate' = \"" + approx + "\" is not supported");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, ctx.emit(Op::Gelu, {x}, {{"approximate", approx}}));
}

Status convert_clip(ImportContext& ctx, OnnxNode& n) {
  Attrs attrs;
  if (ctx.opset() < 11) {
    // Before opset 11 the bounds are attributes whose defaults are the float range: no bound.
    if (std::optional<float> lo = n.attr_float("min"); lo && *lo != -FLT_MAX) attrs.set("min", double(*lo));
    if (std::optional<float> hi = n.attr_float("max"); hi && *hi != FLT_MAX) attrs.set("max", double(*hi));
  } else if ((n.has_input(1) && !ctx.constant(n, 1)) || (n.has_input(2) && !ctx.constant(n, 2))) {
    // A bound computed at run time: min(max(x, min), max), which is Clip's definition (NaN stays
    // NaN, min > max gives max; the bounds have x's type).
    FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.value(n, 0));
    if (n.has_input(1)) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId lo, ctx.value(n, 1));
      y = ctx.emit(Op::Max, {y, lo});
    }
    if (n.has_input(2)) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId hi, ctx.value(n, 2));
      y = ctx.emit(Op::Min, {y, hi});
    }
    return ctx.set_output(n, 0, y);
  } else {
    if (n.has_input(1)) {
      FUSEBOX_ASSIGN_OR_RETURN(double lo, ctx.require_scalar(n, 1, "min"));
      attrs.set("min", lo);
    }
    if (n.has_input(2)) {
      FUSEBOX_ASSIGN_OR_RETURN(double hi, ctx.require_scalar(n, 2, "max"));
      attrs.set("max", hi);
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, ctx.emit(Op::Clip, {x}, std::move(attrs)));
}

Status convert_cast(ImportContext& ctx, OnnxNode& n) {
  std::optional<int64_t> to_onnx = n.attr_int("to");
  n.accept_attr("saturate");  // only affects float8 targets, which are refused below
  if (!to_onnx) return n.error("attribute 'to' is missing");
  std::optional<DType> to = dtype_from_onnx(static_cast<int32_t>(*to_onnx));
  if (!to) return n.error("cast to " + onnx_type_name(static_cast<int32_t>(*to_onnx)) + " is not supported");
  if (std::optional<KnownInts> k = ctx.ints(n, 0)) {
    if (is_integer(*to)) {
      k->dtype = *to;
      return ctx.set_output_ints(n, 0, *k);
    }
    if (k->all_numbers()) {
      Array a(*to, k->scalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(k->elems.size())});
      for (size_t i = 0; i < k->elems.size(); ++i) a.set_f64(int64_t(i), double(k->elems[i].number));
      if (*to == DType::Bool) {
        for (size_t i = 0; i < k->elems.size(); ++i) a.data<bool>()[i] = k->elems[i].number != 0;
      }
      return ctx.set_output_constant(n, 0, std::move(a));
    }
  }
  if (const Array* a = scalar_float(ctx, n, 0)) {
    // Truncation toward zero, as ONNX casts float to integer, where the result fits.
    double v = a->get_f64(0);
    bool fits = std::isfinite(v) && (*to == DType::I64 ? std::fabs(v) < 0x1p62 : *to == DType::I32 && std::fabs(v) < 0x1p31);
    if (fits || *to == DType::Bool || *to == DType::F32 || *to == DType::F64) {
      Array r(*to, {});
      if (*to == DType::Bool) r.data<bool>()[0] = v != 0;
      else if (fits) r.set_i64(0, int64_t(std::trunc(v)));
      else r.set_f64(0, v);
      return ctx.set_output_constant(n, 0, std::move(r));
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (ctx.type(x).dtype == *to) return ctx.set_output(n, 0, x);
  return ctx.set_output(n, 0, ctx.emit(Op::Cast, {x}, {{"to", *to}}));
}

Status convert_binary(ImportContext& ctx, OnnxNode& n) {
  Op op = binary_ops().at(n.op_type());
  // ONNX Mod with fmod=0 is floor modulo (numpy), fusebox mod's default; fmod=1 truncates.
  const bool fmod = op == Op::Mod && n.attr_int("fmod", 0) != 0;
  std::optional<KnownInts> a = ctx.ints(n, 0), b = ctx.ints(n, 1);
  if (a && b && op != Op::Pow && !fmod) {
    if (std::optional<KnownInts> r = fold_binary(op, *a, *b)) return ctx.set_output_ints(n, 0, *r);
  }
  if (std::optional<Array> r = fold_scalar_node(ctx, n, op, true)) return ctx.set_output_constant(n, 0, std::move(*r));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.value(n, 1));
  if (op == Op::Pow && ctx.type(y).dtype != ctx.type(x).dtype) {
    // ONNX Pow (opset 12+) takes an exponent of another type; the result has the base's type.
    y = ctx.emit(Op::Cast, {y}, {{"to", ctx.type(x).dtype}});
  }
  return ctx.set_output(n, 0, ctx.emit(op, {x, y}, fmod ? Attrs{{"fmod", true}} : Attrs{}));
}

Status convert_bit_shift(ImportContext& ctx, OnnxNode& n) {
  std::string direction = n.attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    return n.error("attribute 'direction' must be \"LEFT\" or \"RIGHT\", got \"" + direction + "\"");
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.value(n, 1));
  return ctx.set_output(n, 0, ctx.emit(Op::BitShift, {x, y}, {{"direction", std::string(direction == "LEFT" ? "left" : "right")}}));
}

Status convert_where(ImportContext& ctx, OnnxNode& n) {
  std::optional<KnownInts> c = ctx.ints(n, 0), a = ctx.ints(n, 1), b = ctx.ints(n, 2);
  if (c && a && b && c->all_numbers()) {
    size_t len = std::max({c->elems.size(), a->elems.size(), b->elems.size()});
    bool ok = true;
    for (const KnownInts* k : {&*c, &*a, &*b}) ok &= k->elems.size() == len || k->elems.size() == 1;
    if (ok) {
      KnownInts r{a->dtype, c->scalar && a->scalar && b->scalar, {}};
      for (size_t i = 0; i < len; ++i) {
        auto at = [&](const KnownInts& k) { return k.elems[k.elems.size() == 1 ? 0 : i]; };
        r.elems.push_back(at(*c).number != 0 ? at(*a) : at(*b));
      }
      return ctx.set_output_ints(n, 0, r);
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId cond, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.value(n, 2));
  return ctx.set_output(n, 0, ctx.emit(Op::Where, {cond, x, y}));
}

// Max, Min, Sum, Mean with any number of operands: a chain of binary ops (Mean divides the sum
// by the count once at the end).
Status convert_variadic(ImportContext& ctx, OnnxNode& n) {
  const std::string& t = n.op_type();
  Op op = t == "Max" ? Op::Max : t == "Min" ? Op::Min : Op::Add;
  if (n.num_inputs() < 1) return n.error("needs at least one input");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId acc, ctx.value(n, 0));
  for (int i = 1; i < n.num_inputs(); ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, i));
    acc = ctx.emit(op, {acc, v});
  }
  if (t == "Mean" && n.num_inputs() > 1 && acc != kNoValue) {
    Array count(ctx.type(acc).dtype, {});
    count.set_f64(0, double(n.num_inputs()));
    acc = ctx.emit(Op::Div, {acc, ctx.builder().constant(count)});
  }
  return ctx.set_output(n, 0, acc);
}

}  // namespace

void add_elementwise_converters(ConverterTable& table) {
  for (const auto& [name, op] : unary_ops()) table[name] = convert_unary;
  for (const auto& [name, op] : binary_ops()) table[name] = convert_binary;
  table["BitShift"] = convert_bit_shift;
  table["Identity"] = convert_identity;
  table["Dropout"] = convert_dropout;
  table["HardSigmoid"] = convert_hard_sigmoid;
  table["LeakyRelu"] = convert_leaky_relu;
  table["Gelu"] = convert_gelu;
  table["PRelu"] = convert_prelu;
  table["Clip"] = convert_clip;
  table["Cast"] = convert_cast;
  table["Where"] = convert_where;
  for (const char* name : {"Max", "Min", "Sum", "Mean"}) table[name] = convert_variadic;
}

}  // namespace fusebox::onnx_import
