// RNN, GRU, LSTM (unrolled at import), the training-domain optimizers, Dropout's mask and
// BatchNormalization's training mode (src/onnx/convert_recurrent.cpp, convert_training.cpp):
// each model runs unfused on the reference kernels and fused on the CPU pipeline, both compared
// with the op computed directly here in double from ONNX's equations, on random inputs.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportRecurrent, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

// The inputs with every float element NaN (integers kept: they may be lengths or counts).
NamedArrays poisoned(const NamedArrays& inputs) {
  NamedArrays out;
  for (const auto& [name, a] : inputs) {
    Array p = a.clone();
    if (is_float(p.dtype())) {
      for (int64_t i = 0; i < p.numel(); ++i) p.set_f64(i, std::numeric_limits<double>::quiet_NaN());
    }
    out.emplace(name, std::move(p));
  }
  return out;
}

// Runs `g` with `options`, first on NaN inputs so that any buffer the plan reuses holds NaN, then
// on `inputs`.
std::vector<Array> run_poisoned(const Graph& g, const CompileOptions& options, const NamedArrays& inputs) {
  Expected<Executable> exe = Session().compile(g, options);
  EXPECT_TRUE(exe.has_value()) << exe.status().to_string();
  if (!exe) return {};
  EXPECT_TRUE(exe->run(poisoned(inputs)).has_value());
  Expected<std::vector<Array>> out = exe->run(inputs);
  EXPECT_TRUE(out.has_value()) << out.status().to_string();
  return out ? *out : std::vector<Array>{};
}

// Imports the model, runs it unfused on the reference kernels and fused on the cpu backend, and
// compares both with `expected` (relative tolerance: the fused matmuls may reassociate sums).
void expect_both(const OnnxModel& m, const NamedArrays& inputs, const std::vector<Array>& expected, double rtol = 1e-5) {
  Graph g = import_model(m);
  ASSERT_FALSE(g.outputs().empty());
  CompileOptions unfused;
  unfused.fuse = false;
  unfused.backend = "reference";
  CompileOptions fused;
  use_backend(fused, kCpu);
  for (const CompileOptions& options : {unfused, fused}) {
    SCOPED_TRACE(options.fuse ? "fused" : "unfused");
    std::vector<Array> out = run_poisoned(g, options, inputs);
    ASSERT_EQ(out.size(), expected.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_TRUE(arrays_close(out[i], expected[i], rtol, 1e-6)) << "output " << i;
  }
}

// ---- RNN, GRU, LSTM --------------------------------------------------------------------

void set_activations(onnx::NodeProto& n, const std::vector<std::string>& names) {
  auto* a = n.add_attribute();
  a->set_name("activations");
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& s : names) a->add_strings(s);
}

struct Act {
  std::string name;
  double alpha = 0, beta = 0;
};

double activate(const Act& a, double x) {
  if (a.name == "Tanh") return std::tanh(x);
  if (a.name == "Sigmoid") return 1 / (1 + std::exp(-x));
  if (a.name == "Relu") return std::max(0.0, x);
  if (a.name == "LeakyRelu") return x >= 0 ? x : a.alpha * x;
  if (a.name == "HardSigmoid") return std::clamp(a.alpha * x + a.beta, 0.0, 1.0);
  if (a.name == "Affine") return a.alpha * x + a.beta;
  if (a.name == "ScaledTanh") return a.alpha * std::tanh(a.beta * x);
  if (a.name == "Elu") return x >= 0 ? x : a.alpha * (std::exp(x) - 1);
  if (a.name == "Softsign") return x / (1 + std::fabs(x));
  if (a.name == "Softplus") return std::log1p(std::exp(x));
  if (a.name == "ThresholdedRelu") return x > a.alpha ? x : 0;
  ADD_FAILURE() << "no activation " << a.name;
  return 0;
}

struct RecurrentCase {
  std::string op;  // RNN, GRU, LSTM
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = true, lens = false, peepholes = false, linear_before_reset = false, input_forget = false;
  std::optional<float> clip;
  std::vector<Act> acts;  // empty: the defaults
  bool all_outputs = true;
};

constexpr int64_t kT = 4, kB = 3, kI = 5, kH = 4;

int gates_of(const std::string& op) { return op == "RNN" ? 1 : op == "GRU" ? 3 : 4; }

std::vector<Act> default_acts(const std::string& op) {
  if (op == "RNN") return {{"Tanh"}};
  if (op == "GRU") return {{"Sigmoid"}, {"Tanh"}};
  return {{"Sigmoid"}, {"Tanh"}, {"Tanh"}};
}

struct RecurrentData {
  Array x, w, r, b, lens, h0, c0, p;
};

// ONNX's equations, step by step in double. Returns Y, Y_h (and Y_c for LSTM) in the case's layout.
std::vector<Array> recurrent_reference(const RecurrentCase& c, const RecurrentData& in) {
  const int G = gates_of(c.op), D = c.direction == "bidirectional" ? 2 : 1;
  const bool bf = c.layout == 1;
  std::vector<Act> acts = c.acts.empty() ? default_acts(c.op) : c.acts;
  if (c.acts.empty() && D == 2) {
    std::vector<Act> one = acts;
    acts.insert(acts.end(), one.begin(), one.end());
  }
  const size_t per = acts.size() / size_t(D);
  auto X = [&](int64_t t, int64_t b, int64_t i) { return in.x.get_f64(bf ? (b * kT + t) * kI + i : (t * kB + b) * kI + i); };
  auto state0 = [&](const Array& a, int64_t d, int64_t b, int64_t j) {
    if (a.numel() == 0) return 0.0;
    return a.get_f64(bf ? (b * D + d) * kH + j : (d * kB + b) * kH + j);
  };
  auto clip = [&](double v) { return c.clip ? std::clamp(v, -double(*c.clip), double(*c.clip)) : v; };
  Array y(DType::F32, bf ? std::vector<int64_t>{kB, kT, D, kH} : std::vector<int64_t>{kT, D, kB, kH});
  Array yh(DType::F32, bf ? std::vector<int64_t>{kB, D, kH} : std::vector<int64_t>{D, kB, kH});
  Array yc = yh.clone();
  auto y_at = [&](int64_t t, int64_t d, int64_t b, int64_t j) { return bf ? ((b * kT + t) * D + d) * kH + j : ((t * D + d) * kB + b) * kH + j; };
  auto yh_at = [&](int64_t d, int64_t b, int64_t j) { return bf ? (b * D + d) * kH + j : (d * kB + b) * kH + j; };
  for (int64_t d = 0; d < D; ++d) {
    const Act* act = &acts[size_t(d) * per];
    const bool reverse = c.direction == "reverse" || d == 1;
    for (int64_t b = 0; b < kB; ++b) {
      std::vector<double> h(kH), cs(kH);
      for (int64_t j = 0; j < kH; ++j) h[j] = state0(in.h0, d, b, j), cs[j] = state0(in.c0, d, b, j);
      const int64_t len = in.lens.numel() ? in.lens.get_i64(b) : kT;
      for (int64_t k = 0; k < kT; ++k) {
        const int64_t t = reverse ? kT - 1 - k : k;
        if (t >= len) {
          for (int64_t j = 0; j < kH; ++j) y.set_f64(y_at(t, d, b, j), 0);
          continue;
        }
        // xw[g*H + j] = X W^T + Wb, rec[g*H + j] = H R^T + Rb.
        std::vector<double> xw(size_t(G * kH)), rec(size_t(G * kH));
        for (int64_t row = 0; row < G * kH; ++row) {
          double sx = in.b.numel() ? in.b.get_f64(d * 2 * G * kH + row) : 0;
          double sr = in.b.numel() ? in.b.get_f64(d * 2 * G * kH + G * kH + row) : 0;
          for (int64_t i = 0; i < kI; ++i) sx += X(t, b, i) * in.w.get_f64((d * G * kH + row) * kI + i);
          for (int64_t i = 0; i < kH; ++i) sr += h[size_t(i)] * in.r.get_f64((d * G * kH + row) * kH + i);
          xw[size_t(row)] = sx, rec[size_t(row)] = sr;
        }
        std::vector<double> hn(kH), cn(kH);
        if (c.op == "RNN") {
          for (int64_t j = 0; j < kH; ++j) hn[j] = activate(act[0], clip(xw[j] + rec[j]));
        } else if (c.op == "GRU") {
          std::vector<double> z(kH), rg(kH);
          for (int64_t j = 0; j < kH; ++j) {
            z[j] = activate(act[0], clip(xw[j] + rec[j]));
            rg[j] = activate(act[0], clip(xw[kH + j] + rec[kH + j]));
          }
          for (int64_t j = 0; j < kH; ++j) {
            double pre;
            if (c.linear_before_reset) {
              pre = xw[2 * kH + j] + rg[j] * rec[2 * kH + j];
            } else {
              double s = in.b.numel() ? in.b.get_f64(d * 2 * G * kH + G * kH + 2 * kH + j) : 0;  // Rb_h
              for (int64_t i = 0; i < kH; ++i) s += rg[i] * h[i] * in.r.get_f64((d * G * kH + 2 * kH + j) * kH + i);
              pre = xw[2 * kH + j] + s;
            }
            double hh = activate(act[1], clip(pre));
            hn[j] = (1 - z[j]) * hh + z[j] * h[j];
          }
        } else {
          auto peep = [&](int k2, int64_t j) { return in.p.numel() ? in.p.get_f64(d * 3 * kH + k2 * kH + j) : 0.0; };
          for (int64_t j = 0; j < kH; ++j) {
            double i = activate(act[0], clip(xw[j] + rec[j] + peep(0, j) * cs[j]));
            double f = c.input_forget ? 1 - i : activate(act[0], clip(xw[2 * kH + j] + rec[2 * kH + j] + peep(2, j) * cs[j]));
            double g = activate(act[1], clip(xw[3 * kH + j] + rec[3 * kH + j]));
            cn[j] = f * cs[j] + i * g;
            double o = activate(act[0], clip(xw[kH + j] + rec[kH + j] + peep(1, j) * cn[j]));
            hn[j] = o * activate(act[2], cn[j]);
          }
        }
        h = hn, cs = cn;
        for (int64_t j = 0; j < kH; ++j) y.set_f64(y_at(t, d, b, j), h[j]);
      }
      for (int64_t j = 0; j < kH; ++j) yh.set_f64(yh_at(d, b, j), h[j]), yc.set_f64(yh_at(d, b, j), cs[j]);
    }
  }
  std::vector<Array> out{y, yh};
  if (c.op == "LSTM") out.push_back(yc);
  return out;
}

void run_recurrent_case(const RecurrentCase& c, uint64_t seed) {
  const int G = gates_of(c.op), D = c.direction == "bidirectional" ? 2 : 1;
  const bool bf = c.layout == 1, lstm = c.op == "LSTM";
  RecurrentData in;
  in.x = random_array(DType::F32, bf ? std::vector<int64_t>{kB, kT, kI} : std::vector<int64_t>{kT, kB, kI}, seed, -1, 1);
  in.w = random_array(DType::F32, {D, G * kH, kI}, seed + 1, -0.6, 0.6);
  in.r = random_array(DType::F32, {D, G * kH, kH}, seed + 2, -0.6, 0.6);
  std::vector<int64_t> state = bf ? std::vector<int64_t>{kB, D, kH} : std::vector<int64_t>{D, kB, kH};
  OnnxModel m(14);
  std::vector<std::string> inputs{"X", "W", "R"};
  NamedArrays values{{"X", in.x}, {"W", in.w}, {"R", in.r}};
  m.input("X", {in.x.shape()[0], in.x.shape()[1], kI});
  m.input("W", {D, G * kH, kI});
  m.input("R", {D, G * kH, kH});
  auto optional = [&](const std::string& name, bool present, Array a, int32_t type = TP::FLOAT) {
    inputs.push_back(present ? name : "");
    if (!present) return Array();
    std::vector<OnnxDim> dims(a.shape().begin(), a.shape().end());
    m.input(name, type, dims);
    values.emplace(name, a);
    return a;
  };
  in.b = optional("B", c.bias, random_array(DType::F32, {D, 2 * G * kH}, seed + 3, -0.5, 0.5));
  in.lens = optional("sequence_lens", c.lens, array_of_ints(DType::I32, {kB}, {kT, 1, 3}), TP::INT32);
  in.h0 = optional("initial_h", c.initial, random_array(DType::F32, state, seed + 4, -1, 1));
  if (lstm) {
    in.c0 = optional("initial_c", c.initial, random_array(DType::F32, state, seed + 5, -1, 1));
    in.p = optional("P", c.peepholes, random_array(DType::F32, {D, 3 * kH}, seed + 6, -0.5, 0.5));
  }
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  std::vector<std::string> outputs{c.all_outputs ? "Y" : "", "Y_h"};
  if (lstm) outputs.push_back("Y_c");
  auto& n = m.node(c.op, inputs, outputs, "cell");
  set_attr(n, "hidden_size", kH);
  if (c.direction != "forward") set_attr(n, "direction", c.direction);
  if (c.layout != 0) set_attr(n, "layout", c.layout);
  if (c.clip) set_attr(n, "clip", *c.clip);
  if (c.linear_before_reset) set_attr(n, "linear_before_reset", int64_t(1));
  if (c.input_forget) set_attr(n, "input_forget", int64_t(1));
  if (!c.acts.empty()) {
    std::vector<std::string> names;
    std::vector<float> alphas, betas;
    for (const Act& act : c.acts) {
      names.push_back(act.name);
      if (act.name == "LeakyRelu" || act.name == "Elu" || act.name == "ThresholdedRelu") alphas.push_back(float(act.alpha));
      if (act.name == "HardSigmoid" || act.name == "Affine" || act.name == "ScaledTanh") {
        alphas.push_back(float(act.alpha)), betas.push_back(float(act.beta));
      }
    }
    set_activations(n, names);
    if (!alphas.empty()) set_attr(n, "activation_alpha", alphas);
    if (!betas.empty()) set_attr(n, "activation_beta", betas);
  }
  for (const std::string& o : outputs) {
    if (!o.empty()) m.output(o);
  }
  std::vector<Array> expected = recurrent_reference(c, in);
  if (!c.all_outputs) expected.erase(expected.begin());
  expect_both(m, values, expected);
}

TEST(OnnxImportRecurrent, RnnDirectionsLayoutsAndActivations) {
  uint64_t seed = 100;
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      SCOPED_TRACE(std::string(dir) + " layout " + std::to_string(layout));
      run_recurrent_case({.op = "RNN", .direction = dir, .layout = layout}, seed += 10);
    }
  }
  SCOPED_TRACE("activations with alpha, clip, no bias, zero initial state");
  run_recurrent_case({.op = "RNN", .direction = "bidirectional", .bias = false, .initial = false, .clip = 0.5f,
                      .acts = {{"LeakyRelu", 0.2}, {"ScaledTanh", 1.5, 0.7}}},
                     seed += 10);
}

TEST(OnnxImportRecurrent, GruBothResetOrders) {
  uint64_t seed = 200;
  for (bool lbr : {false, true}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      SCOPED_TRACE(std::string(dir) + (lbr ? " linear_before_reset" : ""));
      run_recurrent_case({.op = "GRU", .direction = dir, .layout = lbr ? 1 : 0, .linear_before_reset = lbr}, seed += 10);
    }
  }
  SCOPED_TRACE("HardSigmoid/Softsign, clip, Y_h only");
  run_recurrent_case({.op = "GRU", .clip = 0.8f, .acts = {{"HardSigmoid", 0.3, 0.4}, {"Softsign"}}, .all_outputs = false},
                     seed += 10);
}

TEST(OnnxImportRecurrent, LstmPeepholesInputForgetAndActivations) {
  uint64_t seed = 300;
  for (const char* dir : {"forward", "reverse", "bidirectional"}) {
    for (int64_t layout : {0, 1}) {
      SCOPED_TRACE(std::string(dir) + " layout " + std::to_string(layout));
      run_recurrent_case({.op = "LSTM", .direction = dir, .layout = layout, .peepholes = true}, seed += 10);
    }
  }
  // |C| grows past the clip here, so clipping h's input too would show.
  {
    SCOPED_TRACE("input_forget, clip, other activations, zero initial state");
    run_recurrent_case({.op = "LSTM", .initial = false, .input_forget = true, .clip = 0.3f,
                        .acts = {{"HardSigmoid", 0.25, 0.5}, {"Affine", 3.0, 0.1}, {"Softplus"}}},
                       seed += 10);
  }
  {
    SCOPED_TRACE("clip with initial states, Elu and Softsign");
    run_recurrent_case({.op = "LSTM", .peepholes = true, .clip = 0.3f, .acts = {{"Sigmoid"}, {"Elu", 0.8}, {"Softsign"}}},
                       seed += 10);
  }
}

TEST(OnnxImportRecurrent, SequenceLensStopEachBatchEntry) {
  uint64_t seed = 400;
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    for (const char* dir : {"forward", "reverse", "bidirectional"}) {
      SCOPED_TRACE(std::string(op) + " " + dir);
      run_recurrent_case({.op = op, .direction = dir, .lens = true, .peepholes = std::string(op) == "LSTM"}, seed += 10);
    }
  }
}

TEST(OnnxImportRecurrent, InputProjectionIsOneMatmulPerDirection) {
  // Forward LSTM over 4 steps: one matmul for X W^T, one per step for H R^T.
  OnnxModel m(14);
  m.input("X", {kT, "N", kI});
  m.initializer("W", random_array(DType::F32, {1, 4 * kH, kI}, 7));
  m.initializer("R", random_array(DType::F32, {1, 4 * kH, kH}, 8));
  set_attr(m.node("LSTM", {"X", "W", "R"}, {"Y"}, "lstm"), "hidden_size", kH);
  m.output("Y");
  Graph g = import_model(m);
  EXPECT_EQ(count_op(g, Op::MatMul), size_t(1 + kT));
  // The batch stays a symbol: one import runs at every batch size.
  Array x = random_array(DType::F32, {kT, 2, kI}, 9);
  CompileOptions options;
  use_backend(options, kCpu);
  Expected<Executable> exe = Session().compile(g, options);
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  for (int64_t batch : {2, 5}) {
    Expected<std::vector<Array>> out = exe->run({{"X", random_array(DType::F32, {kT, batch, kI}, 10)}});
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{kT, 1, batch, kH}));
  }
}

TEST(OnnxImportRecurrent, RefusesWhatCannotBeUnrolled) {
  auto model = [](std::vector<OnnxDim> x_dims, const std::function<void(onnx::NodeProto&)>& attrs, int64_t w_rows = 4 * kH) {
    OnnxModel m(14);
    m.input("X", TP::FLOAT, x_dims);
    m.input("W", {1, w_rows, kI});
    m.input("R", {1, 4 * kH, kH});
    auto& n = m.node("LSTM", {"X", "W", "R"}, {"Y"}, "lstm");
    set_attr(n, "hidden_size", kH);
    if (attrs) attrs(n);
    m.output("Y");
    return m;
  };
  std::string e = import_error(model({"T", kB, kI}, {}));
  EXPECT_CONTAINS(e, "LSTM node 'lstm'");
  EXPECT_CONTAINS(e, "sequence length of X must be static");
  e = import_error(model({2000, kB, kI}, {}));
  EXPECT_CONTAINS(e, "sequence length 2000");
  EXPECT_CONTAINS(e, "unrolled at import");
  e = import_error(model({kT, kB, kI}, [](onnx::NodeProto& n) { set_activations(n, {"Sigmoid", "Gelu", "Tanh"}); }));
  EXPECT_CONTAINS(e, "attribute 'activations': \"Gelu\"");
  e = import_error(model({kT, kB, kI}, [](onnx::NodeProto& n) { set_attr(n, "direction", "sideways"); }));
  EXPECT_CONTAINS(e, "attribute 'direction' = \"sideways\"");
  e = import_error(model({kT, kB, kI}, {}, 3 * kH));
  EXPECT_CONTAINS(e, "input W must have size 16 along axis 1");
  e = import_error(model({kT, kB, kI}, [](onnx::NodeProto& n) { set_activations(n, {"Affine", "Tanh", "Tanh"}); }));
  EXPECT_CONTAINS(e, "activation Affine needs a value in attribute 'activation_alpha'");
}

// ---- training-domain optimizers ---------------------------------------------------------

constexpr const char* kTraining = "ai.onnx.preview.training";

struct OptimizerCase {
  std::string op, mode;  // mode: Momentum only
  std::vector<std::string> states;
  int64_t t = 0;
};

TEST(OnnxImportTraining, OptimizersMatchTheirDefinitions) {
  const double R = 0.05;
  const std::vector<std::vector<int64_t>> shapes{{3}, {2, 4}};
  for (const OptimizerCase& c : {OptimizerCase{"Adagrad", "", {"H"}, 3}, OptimizerCase{"Momentum", "standard", {"V"}, 2},
                                 OptimizerCase{"Momentum", "nesterov", {"V"}, 5}, OptimizerCase{"Momentum", "standard", {"V"}, 0},
                                 OptimizerCase{"Adam", "", {"V", "H"}, 4}, OptimizerCase{"Adam", "", {"V", "H"}, 0}}) {
    SCOPED_TRACE(c.op + " " + c.mode + " T=" + std::to_string(c.t));
    OnnxModel m(1, kTraining);
    m.input("R", TP::FLOAT, {});
    m.input("T", TP::INT64, {});
    NamedArrays values{{"R", scalar_f32(float(R))}, {"T", array_of_ints(DType::I64, {}, {c.t})}};
    std::vector<std::string> inputs{"R", "T"}, outputs;
    std::vector<std::string> groups{"X", "G"};
    groups.insert(groups.end(), c.states.begin(), c.states.end());
    uint64_t seed = 500;
    for (const std::string& group : groups) {
      for (size_t k = 0; k < shapes.size(); ++k) {
        std::string name = group + std::to_string(k);
        std::vector<OnnxDim> dims(shapes[k].begin(), shapes[k].end());
        m.input(name, dims);
        // Accumulated squares are positive.
        values.emplace(name, random_array(DType::F32, shapes[k], ++seed, group == "H" ? 0.1 : -1, 1));
        inputs.push_back(name);
      }
    }
    for (const std::string& group : groups) {
      if (group == "G") continue;
      for (size_t k = 0; k < shapes.size(); ++k) outputs.push_back(group + std::to_string(k) + "_new");
    }
    auto& n = m.node(c.op, inputs, outputs, "opt");
    n.set_domain(kTraining);
    const double alpha = 0.9, beta = c.op == "Adam" ? 0.99 : 0.7, eps = 1e-3, norm = 0.01, decay = 0.1, post = 0.02;
    set_attr(n, "norm_coefficient", float(norm));
    if (c.op == "Adagrad") set_attr(n, "decay_factor", float(decay)), set_attr(n, "epsilon", float(eps));
    if (c.op != "Adagrad") set_attr(n, "alpha", float(alpha)), set_attr(n, "beta", float(beta));
    if (c.op == "Momentum") set_attr(n, "mode", c.mode);
    if (c.op == "Adam") set_attr(n, "epsilon", float(eps)), set_attr(n, "norm_coefficient_post", float(post));
    for (const std::string& o : outputs) m.output(o);

    std::map<std::string, Array> want;
    for (size_t k = 0; k < shapes.size(); ++k) {
      std::string s = std::to_string(k);
      const Array &x = values.at("X" + s), &g = values.at("G" + s);
      Array xn = x.clone(), vn = x.clone(), hn = x.clone();
      for (int64_t i = 0; i < x.numel(); ++i) {
        double gr = norm * x.get_f64(i) + g.get_f64(i), xi = x.get_f64(i);
        if (c.op == "Adagrad") {
          double h = values.at("H" + s).get_f64(i) + gr * gr;
          hn.set_f64(i, h);
          xn.set_f64(i, xi - R / (1 + c.t * decay) * gr / (std::sqrt(h) + eps));
        } else if (c.op == "Momentum") {
          double v = alpha * values.at("V" + s).get_f64(i) + (c.t > 0 ? beta : 1) * gr;
          vn.set_f64(i, v);
          xn.set_f64(i, xi - R * (c.mode == "standard" ? v : gr + alpha * v));
        } else {
          double v = alpha * values.at("V" + s).get_f64(i) + (1 - alpha) * gr;
          double h = beta * values.at("H" + s).get_f64(i) + (1 - beta) * gr * gr;
          double r = c.t > 0 ? R * std::sqrt(1 - std::pow(beta, c.t)) / (1 - std::pow(alpha, c.t)) : R;
          vn.set_f64(i, v), hn.set_f64(i, h);
          xn.set_f64(i, (1 - post) * (xi - r * v / (std::sqrt(h) + eps)));
        }
      }
      want["X" + s] = xn, want["V" + s] = vn, want["H" + s] = hn;
    }
    std::vector<Array> expected;
    for (const std::string& group : groups) {
      if (group == "G") continue;
      for (size_t k = 0; k < shapes.size(); ++k) expected.push_back(want.at(group + std::to_string(k)));
    }
    expect_both(m, values, expected);
  }
}

TEST(OnnxImportTraining, DomainsAreChecked) {
  // A default-domain op in a model that imports only the training domain.
  OnnxModel m(1, kTraining);
  m.input("x", {2});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  EXPECT_CONTAINS(import_error(m), "Relu node 'relu': the model imports no opset of the default ONNX domain");
  // A training op in a model that does not import its domain.
  OnnxModel d(17);
  d.input("R", TP::FLOAT, {});
  d.input("T", TP::INT64, {});
  for (const char* s : {"X", "G", "H"}) d.input(s, {2});
  d.node("Adagrad", {"R", "T", "X", "G", "H"}, {"X_new", "H_new"}, "ada").set_domain(kTraining);
  d.output("X_new");
  EXPECT_CONTAINS(import_error(d), "Adagrad node 'ada': the model imports no opset of domain 'ai.onnx.preview.training'");
  // Bad arity and a missing required attribute.
  OnnxModel a(1, kTraining);
  a.input("R", TP::FLOAT, {});
  a.input("T", TP::INT64, {});
  for (const char* s : {"X", "G", "V", "V2"}) a.input(s, {2});
  auto& n = a.node("Momentum", {"R", "T", "X", "G", "V", "V2"}, {"X_new", "V_new"}, "mom");
  n.set_domain(kTraining);
  set_attr(n, "alpha", 0.9f), set_attr(n, "beta", 0.1f), set_attr(n, "mode", "standard"), set_attr(n, "norm_coefficient", 0.0f);
  a.output("X_new");
  EXPECT_CONTAINS(import_error(a), "Momentum node 'mom': takes R, T and 3 groups of tensors (X, G, V), got 6 inputs");
  OnnxModel b(1, kTraining);
  b.input("R", TP::FLOAT, {});
  b.input("T", TP::INT64, {});
  for (const char* s : {"X", "G", "V"}) b.input(s, {2});
  auto& nb = b.node("Momentum", {"R", "T", "X", "G", "V"}, {"X_new", "V_new"}, "mom");
  nb.set_domain(kTraining);
  set_attr(nb, "alpha", 0.9f), set_attr(nb, "beta", 0.1f), set_attr(nb, "mode", "standard");
  b.output("X_new");
  EXPECT_CONTAINS(import_error(b), "Momentum node 'mom': attribute 'norm_coefficient' is required");
}

// ---- Dropout, BatchNormalization ---------------------------------------------------------

TEST(OnnxImportTraining, DropoutMaskAndZeroRatioTraining) {
  Array x = random_array(DType::F32, {2, 3, 4}, 601);
  Array all_true(DType::Bool, {2, 3, 4});
  for (int64_t i = 0; i < all_true.numel(); ++i) all_true.set_f64(i, 1);
  for (bool training : {false, true}) {
    SCOPED_TRACE(training ? "training, ratio 0" : "inference");
    OnnxModel m(13);
    m.input("x", {2, 3, 4});
    m.initializer("ratio", scalar_f32(training ? 0.0f : 0.4f));
    Array t(DType::Bool, {});
    t.set_f64(0, training ? 1 : 0);
    m.initializer("training", t);
    m.node("Dropout", {"x", "ratio", "training"}, {"y", "mask"}, "drop");
    m.output("y");
    m.output("mask");
    expect_both(m, {{"x", x}}, {x, all_true});
  }
  OnnxModel m(13);
  m.input("x", {2, 3, 4});
  m.initializer("ratio", scalar_f32(0.25f));
  Array t(DType::Bool, {});
  t.set_f64(0, 1);
  m.initializer("training", t);
  m.node("Dropout", {"x", "ratio", "training"}, {"y"}, "drop");
  m.output("y");
  EXPECT_CONTAINS(import_error(m), "Dropout node 'drop': training with ratio 0.25 draws a random mask, which is not supported");
}

TEST(OnnxImportTraining, BatchNormalizationTrainingMode) {
  const int64_t N = 3, C = 4, H = 2, W = 5;
  const double eps = 1e-3, momentum = 0.8;
  OnnxModel m(15);
  m.input("x", {"N", C, H, W});
  for (const char* s : {"scale", "bias", "mean", "var"}) m.input(s, {C});
  auto& n = m.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean", "running_var"}, "bn");
  set_attr(n, "training_mode", int64_t(1));
  set_attr(n, "epsilon", float(eps));
  set_attr(n, "momentum", float(momentum));
  for (const char* s : {"y", "running_mean", "running_var"}) m.output(s);
  NamedArrays in{{"x", random_array(DType::F32, {N, C, H, W}, 701, -2, 3)},
                 {"scale", random_array(DType::F32, {C}, 702)},
                 {"bias", random_array(DType::F32, {C}, 703)},
                 {"mean", random_array(DType::F32, {C}, 704)},
                 {"var", random_array(DType::F32, {C}, 705, 0.5, 2)}};
  const Array& x = in.at("x");
  Array y(DType::F32, {N, C, H, W}), rm(DType::F32, {C}), rv(DType::F32, {C});
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    const int64_t count = N * H * W;
    auto at = [&](int64_t b, int64_t k) { return (b * C + c) * H * W + k; };
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t k = 0; k < H * W; ++k) sum += x.get_f64(at(b, k));
    }
    const double mean = sum / double(count);
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t k = 0; k < H * W; ++k) sq += (x.get_f64(at(b, k)) - mean) * (x.get_f64(at(b, k)) - mean);
    }
    const double var = sq / double(count);
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t k = 0; k < H * W; ++k) {
        y.set_f64(at(b, k), (x.get_f64(at(b, k)) - mean) / std::sqrt(var + eps) * in.at("scale").get_f64(c) + in.at("bias").get_f64(c));
      }
    }
    rm.set_f64(c, in.at("mean").get_f64(c) * momentum + mean * (1 - momentum));
    rv.set_f64(c, in.at("var").get_f64(c) * momentum + var * (1 - momentum));
  }
  expect_both(m, in, {y, rm, rv});
}

TEST(OnnxImportRecurrent, UnrolledGraphGrowsLinearly) {
  // 256 unrolled LSTM steps: one recurrent matmul and a bounded number of nodes per step.
  OnnxModel m(14);
  m.input("X", {256, 2, kI});
  m.initializer("W", random_array(DType::F32, {1, 4 * kH, kI}, 11));
  m.initializer("R", random_array(DType::F32, {1, 4 * kH, kH}, 12));
  auto& n = m.node("LSTM", {"X", "W", "R"}, {"Y", "Y_h"}, "lstm");
  set_attr(n, "hidden_size", kH);
  m.output("Y_h");
  auto start = std::chrono::steady_clock::now();
  Graph g = import_model(m);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(count_op(g, Op::MatMul), size_t(1 + 256));
  EXPECT_LT(g.nodes().size(), size_t(24 * 256));
  std::printf("LSTM of 256 steps imported in %.1f ms (%zu nodes)\n", seconds * 1e3, g.nodes().size());
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
