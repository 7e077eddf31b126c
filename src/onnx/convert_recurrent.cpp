// RNN, GRU and LSTM, unrolled at import over the static sequence length into matmuls and
// element-wise ops. Per direction:
//
//   X [T, B, I] ──matmul(W^T)── XW [T, B, G*H] (+ biases)       one matmul for every time step
//                                 │ slice step t
//   H(t-1) ──matmul(R^T)──> + ──> gates ──> activations ──> H(t), C(t)   per step, in the order of
//                                                                       the direction
//
// The gate arithmetic of a step is element-wise between two matmuls, so it fuses into regions.
// Gates are ONNX's: RNN  H = f(x + H R^T)
//                   GRU  z, r = f(.); h = g(x_h + (r * H) R_h^T + Rb_h), or with
//                        linear_before_reset g(x_h + r * (H R_h^T + Rb_h)); H = (1 - z) * h + z * H
//                   LSTM i, f = f(. + P * C); c = g(.); C = f * C + i * c; o = f(. + P_o * C);
//                        H = o * h(C); input_forget couples the gates: f = 1 - i
// `clip` bounds every gate's pre-activation (not C before h). With sequence_lens, a step at or
// past an entry's length leaves its H and C unchanged and writes 0 to Y; the reverse direction
// runs from step T - 1 down, so each entry's reversed sequence starts at its own last step.
// Activation alpha/beta values are consumed in the order of the activation list, one by each
// activation that takes that parameter; when the list runs out, the default of the ONNX op of
// the same name applies (Affine and ScaledTanh have none and must be given values).
#include <algorithm>
#include <cctype>
#include <optional>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

constexpr int64_t kMaxSteps = 1024;

enum class Cell { Rnn, Gru, Lstm };

struct Activation {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// ONNX's default activations of one direction.
std::vector<std::string> default_activations(Cell cell) {
  switch (cell) {
    case Cell::Rnn: return {"Tanh"};
    case Cell::Gru: return {"Sigmoid", "Tanh"};
    case Cell::Lstm: return {"Sigmoid", "Tanh", "Tanh"};
  }
  return {};
}

// The activations of every direction (directions * per-direction count), with their parameters.
Expected<std::vector<Activation>> read_activations(OnnxNode& n, Cell cell, int directions) {
  const std::vector<std::string> defaults = default_activations(cell);
  const size_t per = defaults.size(), want = per * size_t(directions);
  std::vector<std::string> names;
  if (std::optional<std::vector<std::string>> given = n.attr_strings("activations")) {
    names = *given;
    // RNN's schema default lists two (forward, reverse) even for one direction.
    if (cell == Cell::Rnn && directions == 1 && names.size() == 2 && lower(names[0]) == lower(names[1])) names.resize(1);
    if (names.size() != want) {
      return n.error("attribute 'activations' has " + std::to_string(names.size()) + " entries; " +
                     std::to_string(want) + " are needed (" + std::to_string(per) + " per direction)");
    }
  } else {
    for (int d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  }
  std::vector<float> alphas = n.attr_floats("activation_alpha").value_or(std::vector<float>{});
  std::vector<float> betas = n.attr_floats("activation_beta").value_or(std::vector<float>{});
  size_t next_alpha = 0, next_beta = 0;
  // Takes the next value of the list, else the default (none: the value is required).
  auto take = [&](std::vector<float>& list, size_t& next, std::optional<double> def, const std::string& act,
                  const char* attr) -> Expected<double> {
    if (next < list.size()) return double(list[next++]);
    if (def) return *def;
    return n.error("activation " + act + " needs a value in attribute '" + attr + "'");
  };
  std::vector<Activation> out;
  for (const std::string& name : names) {
    Activation a{lower(name)};
    const std::string& l = a.name;
    if (l == "relu" || l == "tanh" || l == "sigmoid" || l == "softsign" || l == "softplus") {
      // no parameters
    } else if (l == "leakyrelu" || l == "thresholdedrelu" || l == "elu") {
      FUSEBOX_ASSIGN_OR_RETURN(a.alpha, take(alphas, next_alpha, l == "leakyrelu" ? 0.01 : 1.0, name, "activation_alpha"));
    } else if (l == "hardsigmoid" || l == "affine" || l == "scaledtanh") {
      bool hs = l == "hardsigmoid";
      FUSEBOX_ASSIGN_OR_RETURN(a.alpha, take(alphas, next_alpha, hs ? std::optional<double>(0.2) : std::nullopt, name, "activation_alpha"));
      FUSEBOX_ASSIGN_OR_RETURN(a.beta, take(betas, next_beta, hs ? std::optional<double>(0.5) : std::nullopt, name, "activation_beta"));
    } else {
      return n.error("attribute 'activations': \"" + name + "\" is not an activation ONNX defines for " + n.op_type());
    }
    out.push_back(std::move(a));
  }
  return out;
}

// The per-step computation of one direction: the node's settings and the emitting helpers.
class Unroller {
 public:
  Unroller(ImportContext& ctx, OnnxNode& n, DType dtype, Dim batch, int64_t hidden, std::optional<double> clip)
      : ctx_(ctx), n_(n), dtype_(dtype), batch_(std::move(batch)), hidden_(hidden), clip_(clip) {}

  ValueId scalar(double v) { return scalar_constant(ctx_, dtype_, v); }
  ValueId add(ValueId a, ValueId b) { return ctx_.emit(Op::Add, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return ctx_.emit(Op::Mul, {a, b}); }

  // Elements [begin, end) of `axis`.
  ValueId slice(ValueId v, int64_t axis, int64_t begin, int64_t end) {
    return ctx_.emit(Op::Slice, {v}, {{"starts", std::vector<int64_t>{begin}}, {"ends", std::vector<int64_t>{end}},
                                      {"axes", std::vector<int64_t>{axis}}});
  }
  // Gate k of a [B, G*H] value.
  ValueId gate(ValueId v, int k) { return slice(v, 1, k * hidden_, (k + 1) * hidden_); }
  // v[d] of a value whose first axis is the direction.
  Expected<ValueId> direction(ValueId v, int d) {
    ValueId s = slice(v, 0, d, d + 1);
    if (s == kNoValue) return ctx_.builder_status(n_);
    Shape rest = ctx_.type(s).shape;
    rest.erase(rest.begin());
    return ctx_.reshape(n_, s, rest);
  }
  // A 2-D value transposed.
  ValueId transposed(ValueId v) { return ctx_.emit(Op::Transpose, {v}, {{"perm", std::vector<int64_t>{1, 0}}}); }
  // Step t of XW [T, B, G*H] as [B, G*H].
  Expected<ValueId> step(ValueId xw, int64_t t) {
    ValueId s = slice(xw, 0, t, t + 1);
    if (s == kNoValue) return ctx_.builder_status(n_);
    return ctx_.reshape(n_, s, Shape{batch_, ctx_.type(s).shape[2]});
  }
  // Zeros [B, H] for an absent initial state.
  Expected<ValueId> zeros() {
    if (!batch_.is_static() && !batch_.is_symbol()) {
      return n_.error("the batch size of X has no name; give initial_h (and initial_c) explicitly");
    }
    return ctx_.emit(Op::Expand, {scalar(0)}, {{"shape", Shape{batch_, Dim(hidden_)}}});
  }

  // The activation of a gate's pre-activation x, clipped first when the node has `clip`
  // (`clipped` false for LSTM's h(C), whose input is no gate).
  ValueId activate(const Activation& a, ValueId x, bool clipped = true) {
    if (clip_ && clipped) x = ctx_.emit(Op::Clip, {x}, {{"min", -*clip_}, {"max", *clip_}});
    const std::string& l = a.name;
    if (l == "relu") return ctx_.emit(Op::Relu, {x});
    if (l == "tanh") return ctx_.emit(Op::Tanh, {x});
    if (l == "sigmoid") return ctx_.emit(Op::Sigmoid, {x});
    if (l == "leakyrelu") return ctx_.emit(Op::LeakyRelu, {x}, {{"alpha", a.alpha}});
    if (l == "hardsigmoid") return ctx_.emit(Op::HardSigmoid, {x}, {{"alpha", a.alpha}, {"beta", a.beta}});
    if (l == "thresholdedrelu") return emit_thresholded_relu(ctx_, x, a.alpha);
    if (l == "elu") return emit_elu(ctx_, x, a.alpha);
    if (l == "softsign") return emit_softsign(ctx_, x);
    if (l == "softplus") return emit_softplus(ctx_, x);
    if (l == "affine") return add(mul(scalar(a.alpha), x), scalar(a.beta));
    // scaledtanh
    return mul(scalar(a.alpha), ctx_.emit(Op::Tanh, {mul(scalar(a.beta), x)}));
  }

 private:
  ImportContext& ctx_;
  OnnxNode& n_;
  DType dtype_;
  Dim batch_;
  int64_t hidden_;
  std::optional<double> clip_;
};

// A static dim of `t` must be `want` (a symbolic one is checked at run time by the ops).
Status check_dim(OnnxNode& n, const TensorType& t, int axis, int64_t want, const std::string& what) {
  if (t.rank() <= axis) return n.error("input " + what + " has rank " + std::to_string(t.rank()) + ", got " + t.to_string());
  const Dim& d = t.shape[size_t(axis)];
  if (d.is_static() && d.value() != want) {
    return n.error("input " + what + " must have size " + std::to_string(want) + " along axis " + std::to_string(axis) +
                   ", got " + t.to_string());
  }
  return Status::ok();
}

// The optional input i as a value of rank `rank` checked against `dims` (-1: any), moved from
// [B, D, H] to [D, B, H] when `batch_first`; kNoValue when absent.
Expected<ValueId> optional_input(ImportContext& ctx, OnnxNode& n, int i, const std::string& what, DType dtype,
                                 std::vector<int64_t> dims, bool batch_first) {
  if (!n.has_input(i)) return kNoValue;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, i));
  const TensorType t = ctx.type(v);
  if (t.rank() != int(dims.size())) return n.error("input " + what + " must have rank " + std::to_string(dims.size()) + ", got " + t.to_string());
  if (t.dtype != dtype) return n.error("input " + what + " must have X's type, got " + t.to_string());
  for (size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] >= 0) FUSEBOX_RETURN_IF_ERROR(check_dim(n, t, int(k), dims[k], what));
  }
  if (batch_first) v = ctx.emit(Op::Transpose, {v}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  return v;
}

// Stacks [B, H] values to [count, B, H] (`values` in order).
Expected<ValueId> stack(ImportContext& ctx, OnnxNode& n, const std::vector<ValueId>& values, int axis_count) {
  std::vector<ValueId> parts;
  for (ValueId v : values) {
    Shape s = ctx.type(v).shape;
    for (int k = 0; k < axis_count; ++k) s.insert(s.begin(), Dim(1));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId r, ctx.reshape(n, v, s));
    parts.push_back(r);
  }
  return parts.size() == 1 ? parts[0] : ctx.emit(Op::Concat, std::move(parts), {{"axis", int64_t(0)}});
}

struct Outputs {
  std::vector<ValueId> y;  // per step, [B, H]
  ValueId h = kNoValue, c = kNoValue;
};

Status convert_recurrent(ImportContext& ctx, OnnxNode& n) {
  const Cell cell = n.op_type() == "RNN" ? Cell::Rnn : n.op_type() == "GRU" ? Cell::Gru : Cell::Lstm;
  const int gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const std::string dir = n.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
    return n.error("attribute 'direction' = \"" + dir + "\" is not supported (forward, reverse or bidirectional)");
  }
  const int directions = dir == "bidirectional" ? 2 : 1;
  const int64_t layout = n.attr_int("layout", 0);
  if (layout != 0 && layout != 1) return n.error("attribute 'layout' = " + std::to_string(layout) + " is not supported (0 or 1)");
  const bool batch_first = layout == 1;
  std::optional<float> clip_attr = n.attr_float("clip");
  if (clip_attr && !(*clip_attr >= 0)) return n.error("attribute 'clip' must be >= 0, got " + std::to_string(*clip_attr));
  std::optional<double> clip;
  if (clip_attr) clip = double(*clip_attr);
  const bool linear_before_reset = cell == Cell::Gru && n.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = cell == Cell::Lstm && n.attr_int("input_forget", 0) != 0;
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<Activation> acts, read_activations(n, cell, directions));

  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId w, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId r, ctx.value(n, 2));
  const TensorType xt = ctx.type(x), wt = ctx.type(w), rt = ctx.type(r);
  if (!is_float(xt.dtype) || xt.rank() != 3) return n.error("input X must be a 3-D float tensor, got " + xt.to_string());
  if (wt.rank() != 3 || wt.dtype != xt.dtype) return n.error("input W must be a 3-D tensor of X's type, got " + wt.to_string());
  if (rt.rank() != 3 || rt.dtype != xt.dtype) return n.error("input R must be a 3-D tensor of X's type, got " + rt.to_string());
  int64_t hidden = n.attr_int("hidden_size", -1);
  if (hidden < 0) {
    if (!rt.shape[2].is_static()) return n.error("attribute 'hidden_size' is absent and R's last size is not static: " + rt.to_string());
    hidden = rt.shape[2].value();
  }
  if (hidden < 1) return n.error("attribute 'hidden_size' must be >= 1, got " + std::to_string(hidden));
  const int64_t gh = gates * hidden;
  const Dim steps_dim = xt.shape[batch_first ? 1 : 0], batch = xt.shape[batch_first ? 0 : 1];
  if (!steps_dim.is_static()) {
    return n.error("the sequence length of X must be static (the loop is unrolled at import), got " + xt.to_string());
  }
  const int64_t steps = steps_dim.value();
  if (steps < 1 || steps > kMaxSteps) {
    return n.error("the sequence length " + std::to_string(steps) + " of X is outside [1, " + std::to_string(kMaxSteps) +
                   "] (the loop is unrolled at import)");
  }
  for (auto [t, what, axis, want] : {std::tuple{wt, "W", 0, int64_t(directions)}, {wt, "W", 1, gh}, {rt, "R", 0, int64_t(directions)},
                                     {rt, "R", 1, gh}, {rt, "R", 2, hidden}}) {
    FUSEBOX_RETURN_IF_ERROR(check_dim(n, t, axis, want, what));
  }
  if (batch_first) x = ctx.emit(Op::Transpose, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  const DType dt = xt.dtype;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId bias, optional_input(ctx, n, 3, "B", dt, {directions, 2 * gh}, false));
  ValueId lens = kNoValue;
  if (n.has_input(4)) {
    FUSEBOX_ASSIGN_OR_RETURN(lens, ctx.value(n, 4));
    const TensorType lt = ctx.type(lens);
    if (!is_integer(lt.dtype) || lt.rank() != 1) return n.error("input sequence_lens must be a 1-D integer tensor, got " + lt.to_string());
    Shape column{lt.shape[0], Dim(1)};
    FUSEBOX_ASSIGN_OR_RETURN(lens, ctx.reshape(n, lens, column));
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId h0, optional_input(ctx, n, 5, "initial_h", dt, {batch_first ? -1 : directions, -1, hidden}, batch_first));
  if (batch_first && h0 != kNoValue) FUSEBOX_RETURN_IF_ERROR(check_dim(n, ctx.type(h0), 0, directions, "initial_h"));
  ValueId c0 = kNoValue, peep = kNoValue;
  if (cell == Cell::Lstm) {
    FUSEBOX_ASSIGN_OR_RETURN(c0, optional_input(ctx, n, 6, "initial_c", dt, {batch_first ? -1 : directions, -1, hidden}, batch_first));
    if (batch_first && c0 != kNoValue) FUSEBOX_RETURN_IF_ERROR(check_dim(n, ctx.type(c0), 0, directions, "initial_c"));
    FUSEBOX_ASSIGN_OR_RETURN(peep, optional_input(ctx, n, 7, "P", dt, {directions, 3 * hidden}, false));
  }

  Unroller u(ctx, n, dt, batch, hidden, clip);
  const size_t per = acts.size() / size_t(directions);
  std::vector<Outputs> outs(static_cast<size_t>(directions));
  for (int d = 0; d < directions; ++d) {
    const bool reverse = dir == "reverse" || d == 1;
    const Activation* act = &acts[size_t(d) * per];
    FUSEBOX_ASSIGN_OR_RETURN(ValueId wd, u.direction(w, d));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId rd, u.direction(r, d));
    ValueId xw = ctx.emit(Op::MatMul, {x, u.transposed(wd)});  // [T, B, G*H], every step at once
    ValueId rec_t = u.transposed(rd);                           // [H, G*H]
    ValueId rec_bias = kNoValue;
    if (bias != kNoValue) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId bd, u.direction(bias, d));
      ValueId wb = u.slice(bd, 0, 0, gh), rb = u.slice(bd, 0, gh, 2 * gh);
      // The recurrent bias joins the input side, except where GRU multiplies it by r.
      if (linear_before_reset) rec_bias = rb;
      xw = u.add(xw, linear_before_reset ? wb : u.add(wb, rb));
    }
    ValueId h = kNoValue, c = kNoValue;
    if (h0 != kNoValue) {
      FUSEBOX_ASSIGN_OR_RETURN(h, u.direction(h0, d));
    } else {
      FUSEBOX_ASSIGN_OR_RETURN(h, u.zeros());
    }
    if (cell == Cell::Lstm) {
      if (c0 != kNoValue) {
        FUSEBOX_ASSIGN_OR_RETURN(c, u.direction(c0, d));
      } else {
        FUSEBOX_ASSIGN_OR_RETURN(c, u.zeros());
      }
    }
    ValueId p_i = kNoValue, p_o = kNoValue, p_f = kNoValue;
    if (peep != kNoValue) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId pd, u.direction(peep, d));
      p_i = u.slice(pd, 0, 0, hidden), p_o = u.slice(pd, 0, hidden, 2 * hidden), p_f = u.slice(pd, 0, 2 * hidden, 3 * hidden);
    }
    // GRU without linear_before_reset multiplies H by r before the hidden gate's matmul.
    ValueId rec_zr = kNoValue, rec_h = kNoValue;
    if (cell == Cell::Gru && !linear_before_reset) rec_zr = u.slice(rec_t, 1, 0, 2 * hidden), rec_h = u.slice(rec_t, 1, 2 * hidden, gh);

    outs[size_t(d)].y.resize(size_t(steps));
    for (int64_t k = 0; k < steps; ++k) {
      const int64_t t = reverse ? steps - 1 - k : k;
      FUSEBOX_ASSIGN_OR_RETURN(ValueId xs, u.step(xw, t));
      ValueId h_new = kNoValue, c_new = kNoValue;
      if (cell == Cell::Rnn) {
        h_new = u.activate(act[0], u.add(xs, ctx.emit(Op::MatMul, {h, rec_t})));
      } else if (cell == Cell::Gru) {
        ValueId rec = ctx.emit(Op::MatMul, {h, linear_before_reset ? rec_t : rec_zr});
        if (rec_bias != kNoValue) rec = u.add(rec, rec_bias);
        ValueId z = u.activate(act[0], u.add(u.gate(xs, 0), u.gate(rec, 0)));
        ValueId rg = u.activate(act[0], u.add(u.gate(xs, 1), u.gate(rec, 1)));
        ValueId hidden_in = linear_before_reset ? u.mul(rg, u.gate(rec, 2)) : ctx.emit(Op::MatMul, {u.mul(rg, h), rec_h});
        ValueId hh = u.activate(act[1], u.add(u.gate(xs, 2), hidden_in));
        // (1 - z) * hh + z * H
        h_new = u.add(u.mul(ctx.emit(Op::Sub, {u.scalar(1), z}), hh), u.mul(z, h));
      } else {
        ValueId g = u.add(xs, ctx.emit(Op::MatMul, {h, rec_t}));
        ValueId pre_i = u.gate(g, 0), pre_o = u.gate(g, 1), pre_f = u.gate(g, 2), pre_c = u.gate(g, 3);
        if (p_i != kNoValue) pre_i = u.add(pre_i, u.mul(p_i, c)), pre_f = u.add(pre_f, u.mul(p_f, c));
        ValueId i = u.activate(act[0], pre_i);
        ValueId f = input_forget ? ctx.emit(Op::Sub, {u.scalar(1), i}) : u.activate(act[0], pre_f);
        c_new = u.add(u.mul(f, c), u.mul(i, u.activate(act[1], pre_c)));
        if (p_o != kNoValue) pre_o = u.add(pre_o, u.mul(p_o, c_new));
        ValueId o = u.activate(act[0], pre_o);
        h_new = u.mul(o, u.activate(act[2], c_new, false));
      }
      ValueId y = h_new;
      if (lens != kNoValue) {
        Array step_index(ctx.type(lens).dtype, {});
        step_index.set_f64(0, double(t));
        ValueId valid = ctx.emit(Op::Less, {ctx.builder().constant(step_index), lens});  // [B, 1]
        y = ctx.emit(Op::Where, {valid, h_new, u.scalar(0)});
        h_new = ctx.emit(Op::Where, {valid, h_new, h});
        if (c_new != kNoValue) c_new = ctx.emit(Op::Where, {valid, c_new, c});
      }
      h = h_new, c = c_new;
      outs[size_t(d)].y[size_t(t)] = y;
    }
    outs[size_t(d)].h = h, outs[size_t(d)].c = c;
  }

  // Y [T, D, B, H] (layout 1: [B, T, D, H]); Y_h, Y_c [D, B, H] (layout 1: [B, D, H]).
  if (n.has_output(0)) {
    std::vector<ValueId> per_direction;
    for (const Outputs& o : outs) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId s, stack(ctx, n, o.y, 2));  // [T, 1, B, H]
      per_direction.push_back(s);
    }
    ValueId y = directions == 1 ? per_direction[0] : ctx.emit(Op::Concat, std::move(per_direction), {{"axis", int64_t(1)}});
    if (batch_first) y = ctx.emit(Op::Transpose, {y}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 0, y));
  }
  for (int i : {1, 2}) {
    if (!n.has_output(i)) continue;
    if (i == 2 && cell != Cell::Lstm) return n.error("has no output " + std::to_string(i));
    std::vector<ValueId> finals;
    for (const Outputs& o : outs) finals.push_back(i == 1 ? o.h : o.c);
    FUSEBOX_ASSIGN_OR_RETURN(ValueId s, stack(ctx, n, finals, 1));  // [D, B, H]
    if (batch_first) s = ctx.emit(Op::Transpose, {s}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, i, s));
  }
  return Status::ok();
}

}  // namespace

void add_recurrent_converters(ConverterTable& table) {
  table["RNN"] = convert_recurrent;
  table["GRU"] = convert_recurrent;
  table["LSTM"] = convert_recurrent;
}

}  // namespace fusebox::onnx_import
