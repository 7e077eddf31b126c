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

// What the unrolled steps emit, with the node's dtype, batch, hidden size and clip.
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

// The optional input i checked against `dims` (its rank and, where not -1, its sizes), moved from
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

// The values, each given `axis_count` leading size-1 axes, concatenated along axis 0:
// [B, H] values give [count, B, H] (1 axis) or [count, 1, B, H] (2 axes).
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

// A recurrent node's settings and inputs, read and checked (optional inputs kNoValue when absent;
// X, initial_h and initial_c already in layout 0).
struct RecurrentNode {
  Cell cell = Cell::Rnn;
  int gates = 1, directions = 1;
  bool reverse_only = false, linear_before_reset = false, input_forget = false, batch_first = false;
  std::optional<double> clip;
  std::vector<Activation> acts;  // directions * per-direction count
  int64_t hidden = 0, steps = 0;
  Dim batch;
  DType dtype = DType::F32;
  ValueId x = kNoValue, w = kNoValue, r = kNoValue, bias = kNoValue, lens = kNoValue, h0 = kNoValue, c0 = kNoValue,
          peep = kNoValue;
};

Expected<RecurrentNode> read_node(ImportContext& ctx, OnnxNode& n) {
  RecurrentNode rn;
  rn.cell = n.op_type() == "RNN" ? Cell::Rnn : n.op_type() == "GRU" ? Cell::Gru : Cell::Lstm;
  rn.gates = rn.cell == Cell::Rnn ? 1 : rn.cell == Cell::Gru ? 3 : 4;
  const std::string dir = n.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
    return n.error("attribute 'direction' = \"" + dir + "\" is not supported (forward, reverse or bidirectional)");
  }
  rn.directions = dir == "bidirectional" ? 2 : 1;
  rn.reverse_only = dir == "reverse";
  const int64_t layout = n.attr_int("layout", 0);
  if (layout != 0 && layout != 1) return n.error("attribute 'layout' = " + std::to_string(layout) + " is not supported (0 or 1)");
  rn.batch_first = layout == 1;
  if (std::optional<float> clip = n.attr_float("clip")) {
    if (!(*clip >= 0)) return n.error("attribute 'clip' must be >= 0, got " + std::to_string(*clip));
    rn.clip = double(*clip);
  }
  rn.linear_before_reset = rn.cell == Cell::Gru && n.attr_int("linear_before_reset", 0) != 0;
  rn.input_forget = rn.cell == Cell::Lstm && n.attr_int("input_forget", 0) != 0;
  FUSEBOX_ASSIGN_OR_RETURN(rn.acts, read_activations(n, rn.cell, rn.directions));

  FUSEBOX_ASSIGN_OR_RETURN(rn.x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(rn.w, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(rn.r, ctx.value(n, 2));
  const TensorType xt = ctx.type(rn.x), wt = ctx.type(rn.w), rt = ctx.type(rn.r);
  if (!is_float(xt.dtype) || xt.rank() != 3) return n.error("input X must be a 3-D float tensor, got " + xt.to_string());
  if (wt.rank() != 3 || wt.dtype != xt.dtype) return n.error("input W must be a 3-D tensor of X's type, got " + wt.to_string());
  if (rt.rank() != 3 || rt.dtype != xt.dtype) return n.error("input R must be a 3-D tensor of X's type, got " + rt.to_string());
  rn.dtype = xt.dtype;
  rn.hidden = n.attr_int("hidden_size", -1);
  if (rn.hidden < 0) {
    if (!rt.shape[2].is_static()) return n.error("attribute 'hidden_size' is absent and R's last size is not static: " + rt.to_string());
    rn.hidden = rt.shape[2].value();
  }
  if (rn.hidden < 1) return n.error("attribute 'hidden_size' must be >= 1, got " + std::to_string(rn.hidden));
  const int64_t gh = rn.gates * rn.hidden, dirs = rn.directions;
  const Dim steps = xt.shape[rn.batch_first ? 1 : 0];
  rn.batch = xt.shape[rn.batch_first ? 0 : 1];
  if (!steps.is_static()) {
    return n.error("the sequence length of X must be static (the loop is unrolled at import), got " + xt.to_string());
  }
  rn.steps = steps.value();
  if (rn.steps < 1 || rn.steps > kMaxSteps) {
    return n.error("the sequence length " + std::to_string(rn.steps) + " of X is outside [1, " + std::to_string(kMaxSteps) +
                   "] (the loop is unrolled at import)");
  }
  for (auto [t, what, axis, want] :
       {std::tuple{wt, "W", 0, dirs}, {wt, "W", 1, gh}, {rt, "R", 0, dirs}, {rt, "R", 1, gh}, {rt, "R", 2, rn.hidden}}) {
    FUSEBOX_RETURN_IF_ERROR(check_dim(n, t, axis, want, what));
  }
  if (rn.batch_first) rn.x = ctx.emit(Op::Transpose, {rn.x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
  FUSEBOX_ASSIGN_OR_RETURN(rn.bias, optional_input(ctx, n, 3, "B", rn.dtype, {dirs, 2 * gh}, false));
  if (n.has_input(4)) {
    FUSEBOX_ASSIGN_OR_RETURN(rn.lens, ctx.value(n, 4));
    const TensorType lt = ctx.type(rn.lens);
    if (!is_integer(lt.dtype) || lt.rank() != 1) return n.error("input sequence_lens must be a 1-D integer tensor, got " + lt.to_string());
    FUSEBOX_ASSIGN_OR_RETURN(rn.lens, ctx.reshape(n, rn.lens, Shape{lt.shape[0], Dim(1)}));  // [B, 1]
  }
  // initial_h, initial_c: [D, B, H], or [B, D, H] in layout 1.
  for (auto [i, what, v] : {std::tuple{5, "initial_h", &rn.h0}, {6, "initial_c", &rn.c0}}) {
    if (i == 6 && rn.cell != Cell::Lstm) break;
    FUSEBOX_ASSIGN_OR_RETURN(*v, optional_input(ctx, n, i, what, rn.dtype, {rn.batch_first ? -1 : dirs, -1, rn.hidden}, rn.batch_first));
    if (*v != kNoValue) FUSEBOX_RETURN_IF_ERROR(check_dim(n, ctx.type(*v), 0, dirs, what));
  }
  if (rn.cell == Cell::Lstm) {
    FUSEBOX_ASSIGN_OR_RETURN(rn.peep, optional_input(ctx, n, 7, "P", rn.dtype, {dirs, 3 * rn.hidden}, false));
  }
  return rn;
}

// One direction's weights as the steps read them.
struct DirectionWeights {
  ValueId rec_t = kNoValue;                     // R^T [H, G*H]
  ValueId rec_zr = kNoValue, rec_h = kNoValue;  // GRU without linear_before_reset: R^T split
  ValueId rec_bias = kNoValue;                  // GRU with linear_before_reset: Rb
  ValueId p_i = kNoValue, p_o = kNoValue, p_f = kNoValue;
};

struct State {
  ValueId h = kNoValue, c = kNoValue;
};

// One time step: the new state from the step's input projection xs [B, G*H].
State cell_step(ImportContext& ctx, const RecurrentNode& rn, Unroller& u, const DirectionWeights& dw,
                const Activation* act, ValueId xs, State s) {
  if (rn.cell == Cell::Rnn) return {u.activate(act[0], u.add(xs, ctx.emit(Op::MatMul, {s.h, dw.rec_t})))};
  if (rn.cell == Cell::Gru) {
    ValueId rec = ctx.emit(Op::MatMul, {s.h, rn.linear_before_reset ? dw.rec_t : dw.rec_zr});
    if (dw.rec_bias != kNoValue) rec = u.add(rec, dw.rec_bias);
    ValueId z = u.activate(act[0], u.add(u.gate(xs, 0), u.gate(rec, 0)));
    ValueId r = u.activate(act[0], u.add(u.gate(xs, 1), u.gate(rec, 1)));
    ValueId hidden_in = rn.linear_before_reset ? u.mul(r, u.gate(rec, 2)) : ctx.emit(Op::MatMul, {u.mul(r, s.h), dw.rec_h});
    ValueId hh = u.activate(act[1], u.add(u.gate(xs, 2), hidden_in));
    // (1 - z) * hh + z * H
    return {u.add(u.mul(ctx.emit(Op::Sub, {u.scalar(1), z}), hh), u.mul(z, s.h))};
  }
  ValueId g = u.add(xs, ctx.emit(Op::MatMul, {s.h, dw.rec_t}));
  ValueId pre_i = u.gate(g, 0), pre_o = u.gate(g, 1), pre_f = u.gate(g, 2), pre_c = u.gate(g, 3);
  if (dw.p_i != kNoValue) pre_i = u.add(pre_i, u.mul(dw.p_i, s.c)), pre_f = u.add(pre_f, u.mul(dw.p_f, s.c));
  ValueId i = u.activate(act[0], pre_i);
  ValueId f = rn.input_forget ? ctx.emit(Op::Sub, {u.scalar(1), i}) : u.activate(act[0], pre_f);
  ValueId c = u.add(u.mul(f, s.c), u.mul(i, u.activate(act[1], pre_c)));
  if (dw.p_o != kNoValue) pre_o = u.add(pre_o, u.mul(dw.p_o, c));
  ValueId o = u.activate(act[0], pre_o);
  return {u.mul(o, u.activate(act[2], c, false)), c};
}

// One direction unrolled: Y per time step ([B, H], in time order) and the final state.
struct DirectionOutputs {
  std::vector<ValueId> y;
  State last;
};

Expected<DirectionOutputs> unroll_direction(ImportContext& ctx, const RecurrentNode& rn, Unroller& u, int d) {
  const bool reverse = rn.reverse_only || d == 1;
  const int64_t gh = rn.gates * rn.hidden, hidden = rn.hidden;
  const Activation* act = &rn.acts[size_t(d) * (rn.acts.size() / size_t(rn.directions))];
  FUSEBOX_ASSIGN_OR_RETURN(ValueId wd, u.direction(rn.w, d));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId rd, u.direction(rn.r, d));
  ValueId xw = ctx.emit(Op::MatMul, {rn.x, u.transposed(wd)});  // [T, B, G*H]: every step at once
  DirectionWeights dw;
  dw.rec_t = u.transposed(rd);
  if (rn.bias != kNoValue) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId bd, u.direction(rn.bias, d));
    ValueId wb = u.slice(bd, 0, 0, gh), rb = u.slice(bd, 0, gh, 2 * gh);
    // The recurrent bias joins the input side, except where GRU multiplies it by r.
    if (rn.linear_before_reset) dw.rec_bias = rb;
    xw = u.add(xw, rn.linear_before_reset ? wb : u.add(wb, rb));
  }
  if (rn.cell == Cell::Gru && !rn.linear_before_reset) {
    dw.rec_zr = u.slice(dw.rec_t, 1, 0, 2 * hidden), dw.rec_h = u.slice(dw.rec_t, 1, 2 * hidden, gh);
  }
  if (rn.peep != kNoValue) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId pd, u.direction(rn.peep, d));
    dw.p_i = u.slice(pd, 0, 0, hidden), dw.p_o = u.slice(pd, 0, hidden, 2 * hidden), dw.p_f = u.slice(pd, 0, 2 * hidden, 3 * hidden);
  }
  State s;
  FUSEBOX_ASSIGN_OR_RETURN(s.h, rn.h0 != kNoValue ? u.direction(rn.h0, d) : u.zeros());
  if (rn.cell == Cell::Lstm) {
    FUSEBOX_ASSIGN_OR_RETURN(s.c, rn.c0 != kNoValue ? u.direction(rn.c0, d) : u.zeros());
  }

  DirectionOutputs out;
  out.y.resize(size_t(rn.steps));
  for (int64_t k = 0; k < rn.steps; ++k) {
    const int64_t t = reverse ? rn.steps - 1 - k : k;
    FUSEBOX_ASSIGN_OR_RETURN(ValueId xs, u.step(xw, t));
    State next = cell_step(ctx, rn, u, dw, act, xs, s);
    ValueId y = next.h;
    if (rn.lens != kNoValue) {
      // Entries whose sequence ended keep their state and write 0.
      Array index(ctx.type(rn.lens).dtype, {});
      index.set_f64(0, double(t));
      ValueId valid = ctx.emit(Op::Less, {ctx.builder().constant(index), rn.lens});  // [B, 1]
      y = ctx.emit(Op::Where, {valid, next.h, u.scalar(0)});
      next.h = ctx.emit(Op::Where, {valid, next.h, s.h});
      if (next.c != kNoValue) next.c = ctx.emit(Op::Where, {valid, next.c, s.c});
    }
    s = next;
    out.y[size_t(t)] = y;
  }
  out.last = s;
  return out;
}

Status convert_recurrent(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(RecurrentNode rn, read_node(ctx, n));
  Unroller u(ctx, n, rn.dtype, rn.batch, rn.hidden, rn.clip);
  std::vector<DirectionOutputs> outs;
  for (int d = 0; d < rn.directions; ++d) {
    FUSEBOX_ASSIGN_OR_RETURN(DirectionOutputs o, unroll_direction(ctx, rn, u, d));
    outs.push_back(std::move(o));
  }
  // Y [T, D, B, H] (layout 1: [B, T, D, H]); Y_h, Y_c [D, B, H] (layout 1: [B, D, H]).
  if (n.has_output(0)) {
    std::vector<ValueId> per_direction;
    for (const DirectionOutputs& o : outs) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId s, stack(ctx, n, o.y, 2));  // [T, 1, B, H]
      per_direction.push_back(s);
    }
    ValueId y = rn.directions == 1 ? per_direction[0] : ctx.emit(Op::Concat, std::move(per_direction), {{"axis", int64_t(1)}});
    if (rn.batch_first) y = ctx.emit(Op::Transpose, {y}, {{"perm", std::vector<int64_t>{2, 0, 1, 3}}});
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 0, y));
  }
  for (int i : {1, 2}) {
    if (!n.has_output(i)) continue;
    if (i == 2 && rn.cell != Cell::Lstm) return n.error("has no output " + std::to_string(i));
    std::vector<ValueId> finals;
    for (const DirectionOutputs& o : outs) finals.push_back(i == 1 ? o.last.h : o.last.c);
    FUSEBOX_ASSIGN_OR_RETURN(ValueId s, stack(ctx, n, finals, 1));  // [D, B, H]
    if (rn.batch_first) s = ctx.emit(Op::Transpose, {s}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
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
