// reduction_region on the CPU: the pass plan (compiled once per node) and the per-row
// interpreter. See reduction_kernel.h for the scheme and its accuracy.
#include "backends/cpu/reduction_kernel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/reference/reference.h"
#include "ir/reduction_region.h"
#include "ir/shape_inference.h"

namespace fusebox::cpu {

namespace {

constexpr int64_t kTile = 256;
// Below this many elements in all, rows run on one thread (the pool's start costs more).
constexpr int64_t kParallelElements = int64_t(1) << 15;

struct Step {
  Op op;
  int out = -1, a = -1, b = -1;  // slots
  bool row = false;              // a row-shaped value (else one value per row)
  int pass = 0;                  // row step / reduction: its pass; per-row step: ready before it
  float alpha = 0;               // leaky_relu
  bool gelu_tanh = false;
};

struct Plan {
  std::shared_ptr<const Graph> body;
  int64_t row_axes = 1;
  size_t slots = 0;
  std::vector<bool> row;              // per slot
  std::vector<int> input_slot;        // per operand
  std::vector<std::pair<int, float>> constants;
  std::vector<Step> steps;            // body order
  int passes = 0;                     // reduction passes; pass `passes` writes row results
  std::vector<std::vector<int>> row_steps;   // per pass: steps to evaluate per tile
  std::vector<std::vector<int>> row_inputs;  // per pass: operand indices to load per tile
  std::vector<std::vector<int>> reductions;  // per pass < passes
  std::vector<std::vector<int>> ready;       // per pass: per-row steps to run before it
  std::vector<int> results;                  // slot per region result
  bool row_results = false;
};

bool interpreted(Op op) {
  switch (op) {
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt: case Op::Reciprocal:
    case Op::Tanh: case Op::Sigmoid: case Op::Relu: case Op::LeakyRelu: case Op::Gelu: case Op::Silu: case Op::Erf:
    case Op::Identity: case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Max: case Op::Min:
    case Op::Pow: case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin: case Op::ReduceProd:
      return true;
    default: return false;
  }
}

// A parameter is row-shaped unless its row dims are all 1 (or absent).
bool param_is_row(const Shape& param, int64_t row_axes) {
  for (int64_t k = 0; k < row_axes; ++k) {
    int64_t d = static_cast<int64_t>(param.size()) - 1 - k;
    if (d < 0) break;
    const Dim& dim = param[static_cast<size_t>(d)];
    if (!(dim.is_static() && dim.value() == 1)) return true;
  }
  return false;
}

std::shared_ptr<const Plan> make_plan(const Node& n) {
  const Graph& body = *n.body;
  auto plan = std::make_shared<Plan>();
  plan->body = n.body;
  plan->row_axes = n.attr_i64("row_axes");
  plan->slots = body.num_values();
  plan->row.assign(plan->slots, false);
  std::vector<int> avail(plan->slots, 0);  // row: its pass; per-row: ready before this pass
  for (size_t v = 0; v < plan->slots; ++v)
    if (body.type(static_cast<ValueId>(v)).dtype != DType::F32) return nullptr;
  for (ValueId p : body.inputs()) {
    plan->input_slot.push_back(p);
    plan->row[static_cast<size_t>(p)] = param_is_row(body.type(p).shape, plan->row_axes);
  }
  for (const Node& b : body.nodes()) {
    if (b.op == Op::Constant) {
      plan->constants.push_back({b.outputs[0], b.attr_array("value").data<float>()[0]});
      continue;
    }
    if (!interpreted(b.op)) return nullptr;
    Step s{b.op, b.outputs[0], b.inputs[0], b.inputs.size() > 1 ? b.inputs[1] : -1};
    if (b.op == Op::LeakyRelu) s.alpha = static_cast<float>(b.attr_f64("alpha"));
    if (b.op == Op::Gelu) s.gelu_tanh = b.attr_str("approximate") == "tanh";
    if (is_row_reduction_op(b.op)) {
      if (!plan->row[static_cast<size_t>(s.a)]) return nullptr;  // a row of one element: the reference
      s.pass = avail[static_cast<size_t>(s.a)];
      avail[static_cast<size_t>(s.out)] = s.pass + 1;
      plan->passes = std::max(plan->passes, s.pass + 1);
    } else {
      for (int v : {s.a, s.b}) {
        if (v < 0) continue;
        s.row = s.row || plan->row[static_cast<size_t>(v)];
        s.pass = std::max(s.pass, avail[static_cast<size_t>(v)]);
      }
      plan->row[static_cast<size_t>(s.out)] = s.row;
      avail[static_cast<size_t>(s.out)] = s.pass;
    }
    plan->steps.push_back(s);
  }
  for (ValueId v : body.outputs()) {
    bool produced = std::any_of(plan->steps.begin(), plan->steps.end(), [&](const Step& s) { return s.out == v; });
    if (!produced) return nullptr;  // a returned parameter or constant: the reference copies it
    plan->results.push_back(v);
    plan->row_results = plan->row_results || plan->row[static_cast<size_t>(v)];
  }
  const int P = plan->passes;
  plan->row_steps.resize(static_cast<size_t>(P) + 1);
  plan->row_inputs.resize(static_cast<size_t>(P) + 1);
  plan->reductions.resize(static_cast<size_t>(P));
  plan->ready.resize(static_cast<size_t>(P) + 1);
  std::vector<int> step_of(plan->slots, -1);
  for (size_t i = 0; i < plan->steps.size(); ++i) step_of[static_cast<size_t>(plan->steps[i].out)] = static_cast<int>(i);
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const Step& s = plan->steps[i];
    if (is_row_reduction_op(s.op)) plan->reductions[static_cast<size_t>(s.pass)].push_back(static_cast<int>(i));
    else if (!s.row) plan->ready[static_cast<size_t>(s.pass)].push_back(static_cast<int>(i));
  }
  // Per pass, the row values its targets need (reduction operands, or the row results).
  for (int p = 0; p <= P; ++p) {
    std::vector<bool> need(plan->slots, false);
    std::vector<int> stack;
    if (p < P) {
      for (int r : plan->reductions[static_cast<size_t>(p)]) stack.push_back(plan->steps[static_cast<size_t>(r)].a);
    } else {
      for (int v : plan->results)
        if (plan->row[static_cast<size_t>(v)]) stack.push_back(v);
    }
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      if (!plan->row[static_cast<size_t>(v)] || need[static_cast<size_t>(v)]) continue;
      need[static_cast<size_t>(v)] = true;
      int si = step_of[static_cast<size_t>(v)];
      if (si < 0) continue;
      const Step& s = plan->steps[static_cast<size_t>(si)];
      stack.push_back(s.a);
      if (s.b >= 0) stack.push_back(s.b);
    }
    for (size_t i = 0; i < plan->steps.size(); ++i)
      if (plan->steps[i].row && need[static_cast<size_t>(plan->steps[i].out)]) plan->row_steps[static_cast<size_t>(p)].push_back(static_cast<int>(i));
    for (size_t k = 0; k < plan->input_slot.size(); ++k)
      if (need[static_cast<size_t>(plan->input_slot[k])]) plan->row_inputs[static_cast<size_t>(p)].push_back(static_cast<int>(k));
  }
  return plan;
}

template <typename C>
C nan_max(C x, C y) { return x != x ? x : (y != y ? y : (x < y ? y : x)); }
template <typename C>
C nan_min(C x, C y) { return x != x ? x : (y != y ? y : (y < x ? y : x)); }

float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

float unary(const Step& s, float x) {
  switch (s.op) {
    case Op::Neg: return -x;
    case Op::Abs: return std::fabs(x);
    case Op::Exp: return std::exp(x);
    case Op::Log: return std::log(x);
    case Op::Sqrt: return std::sqrt(x);
    case Op::Rsqrt: return 1.0f / std::sqrt(x);
    case Op::Reciprocal: return 1.0f / x;
    case Op::Tanh: return std::tanh(x);
    case Op::Sigmoid: return sigmoid(x);
    case Op::Relu: return x != x ? x : (x > 0.0f ? x : 0.0f);
    case Op::LeakyRelu: return x < 0.0f ? s.alpha * x : x;
    case Op::Gelu:
      if (s.gelu_tanh) {
        const float k = float(std::sqrt(2.0 / 3.14159265358979323846));
        return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
      }
      return 0.5f * x * (1.0f + std::erf(x / 1.41421356237309504880f));
    case Op::Silu: return x * sigmoid(x);
    case Op::Erf: return std::erf(x);
    default: return x;  // Identity
  }
}

// One unary step over a tile; the op is chosen once per tile, not per element.
template <typename F>
void unary_loop(float* out, const float* a, int sa, int64_t n, F f) {
  if (sa == 0) {
    const float v = f(a[0]);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i]);
}

void unary_tile(const Step& s, float* out, const float* a, int sa, int64_t n) {
  switch (s.op) {
    case Op::Neg: return unary_loop(out, a, sa, n, [](float x) { return -x; });
    case Op::Abs: return unary_loop(out, a, sa, n, [](float x) { return std::fabs(x); });
    case Op::Exp: return unary_loop(out, a, sa, n, [](float x) { return std::exp(x); });
    case Op::Log: return unary_loop(out, a, sa, n, [](float x) { return std::log(x); });
    case Op::Sqrt: return unary_loop(out, a, sa, n, [](float x) { return std::sqrt(x); });
    case Op::Rsqrt: return unary_loop(out, a, sa, n, [](float x) { return 1.0f / std::sqrt(x); });
    case Op::Reciprocal: return unary_loop(out, a, sa, n, [](float x) { return 1.0f / x; });
    case Op::Relu: return unary_loop(out, a, sa, n, [](float x) { return x != x ? x : (x > 0.0f ? x : 0.0f); });
    default: return unary_loop(out, a, sa, n, [&s](float x) { return unary(s, x); });
  }
}

template <int SA, int SB, typename F>
void binary_loop(float* out, const float* a, const float* b, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i * SA], b[i * SB]);
}

template <typename F>
void binary_any(float* out, const float* a, int sa, const float* b, int sb, int64_t n, F f) {
  if (sa && sb) binary_loop<1, 1>(out, a, b, n, f);
  else if (sa) binary_loop<1, 0>(out, a, b, n, f);
  else if (sb) binary_loop<0, 1>(out, a, b, n, f);
  else binary_loop<0, 0>(out, a, b, n, f);
}

void binary(Op op, float* out, const float* a, int sa, const float* b, int sb, int64_t n) {
  switch (op) {
    case Op::Add: return binary_any(out, a, sa, b, sb, n, [](float x, float y) { return x + y; });
    case Op::Sub: return binary_any(out, a, sa, b, sb, n, [](float x, float y) { return x - y; });
    case Op::Mul: return binary_any(out, a, sa, b, sb, n, [](float x, float y) { return x * y; });
    case Op::Div: return binary_any(out, a, sa, b, sb, n, [](float x, float y) { return x / y; });
    case Op::Max: return binary_any(out, a, sa, b, sb, n, [](float x, float y) { return nan_max(x, y); });
    case Op::Min: return binary_any(out, a, sa, b, sb, n, [](float x, float y) { return nan_min(x, y); });
    default: return binary_any(out, a, sa, b, sb, n, [](float x, float y) { return std::pow(x, y); });
  }
}

// A row operand as the tile loop reads it.
struct Operand {
  const float* base = nullptr;       // row 0's first element
  std::vector<int64_t> lead_stride;  // per leading axis of the row shape
  int kind = 0;                      // 0 contiguous row, 1 one value per row, 2 gathered
  std::vector<int64_t> offsets;      // kind 2: the offset of each row element
};

class ReductionKernel final : public Kernel {
 public:
  explicit ReductionKernel(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}
  std::string_view kind() const override { return "reduction"; }

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    const Plan& p = *plan_;
    std::vector<TensorType> in_types;
    for (const BufferView& b : in) in_types.push_back(TensorType{b.dtype, make_shape(b.shape)});
    // The row shape at these sizes: the operand of the body's first reduction.
    std::vector<TensorType> types(p.slots);
    for (size_t i = 0; i < in.size(); ++i) types[static_cast<size_t>(p.body->inputs()[i])] = in_types[i];
    std::vector<int64_t> row_shape;
    for (const Node& b : p.body->nodes()) {
      std::vector<TensorType> ts;
      for (ValueId v : b.inputs) ts.push_back(types[static_cast<size_t>(v)]);
      FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> r, infer_result_types(b, ts));
      types[static_cast<size_t>(b.outputs[0])] = r[0];
      if (row_shape.empty() && is_row_reduction_op(b.op)) row_shape = static_dims(ts[0].shape);
    }
    const size_t rank = row_shape.size();
    const size_t lead_rank = rank - static_cast<size_t>(p.row_axes);
    int64_t rows = 1, n = 1;
    for (size_t d = 0; d < rank; ++d) (d < lead_rank ? rows : n) *= row_shape[d];
    if (rows * n == 0) {
      std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
      return run_reference(Node{Op::ReductionRegion, {}, {}, {{"row_axes", p.row_axes}}, std::const_pointer_cast<Graph>(p.body), {}}, ins, outs);
    }
    std::vector<Operand> ops(in.size());
    for (size_t k = 0; k < in.size(); ++k) {
      std::vector<int64_t> strides = broadcast_strides_of(in[k].shape, row_shape);
      Operand& o = ops[k];
      o.base = static_cast<const float*>(in[k].data);
      o.lead_stride.assign(strides.begin(), strides.begin() + static_cast<long>(lead_rank));
      bool contiguous = true, constant = true;
      int64_t expect = 1;
      for (size_t d = rank; d-- > lead_rank;) {
        if (row_shape[d] == 1) continue;
        contiguous = contiguous && strides[d] == expect;
        constant = constant && strides[d] == 0;
        expect *= row_shape[d];
      }
      o.kind = contiguous ? 0 : constant ? 1 : 2;
      if (o.kind == 2) {
        o.offsets.resize(static_cast<size_t>(n));
        std::vector<int64_t> idx(rank, 0);
        for (int64_t j = 0; j < n; ++j) {
          int64_t off = 0;
          for (size_t d = lead_rank; d < rank; ++d) off += idx[d] * strides[d];
          o.offsets[static_cast<size_t>(j)] = off;
          for (size_t d = rank; d-- > lead_rank;) {
            if (++idx[d] < row_shape[d]) break;
            idx[d] = 0;
          }
        }
      }
    }
    std::vector<float*> outs;
    for (const BufferView& b : out) outs.push_back(static_cast<float*>(b.data));
    std::vector<int64_t> lead(row_shape.begin(), row_shape.begin() + static_cast<long>(lead_rank));
#pragma omp parallel if (rows > 1 && rows * n >= kParallelElements)
    {
      std::vector<float> tiles(p.slots * kTile), sv(p.slots);
      std::vector<const float*> ptr(p.slots);
      std::vector<int> stride(p.slots);
      std::vector<const float*> row_base(ops.size());
      std::vector<double> acc(p.slots);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) run_row(p, ops, lead, r, n, outs, tiles, sv, ptr, stride, row_base, acc);
    }
    return Status::ok();
  }

 private:
  static std::vector<int64_t> broadcast_strides_of(const std::vector<int64_t>& in, const std::vector<int64_t>& shape) {
    std::vector<int64_t> strides(shape.size(), 0);
    int64_t s = 1;
    for (size_t k = in.size(); k-- > 0;) {
      size_t d = shape.size() - (in.size() - k);
      strides[d] = in[k] == 1 ? 0 : s;
      s *= in[k];
    }
    return strides;
  }

  static void run_row(const Plan& p, const std::vector<Operand>& ops, const std::vector<int64_t>& lead, int64_t r,
                      int64_t n, const std::vector<float*>& outs, std::vector<float>& tiles, std::vector<float>& sv,
                      std::vector<const float*>& ptr, std::vector<int>& stride, std::vector<const float*>& row_base,
                      std::vector<double>& acc) {
    // Where this row starts in each operand.
    for (size_t k = 0; k < ops.size(); ++k) {
      int64_t off = 0, rest = r;
      for (size_t d = lead.size(); d-- > 0;) {
        off += (rest % lead[d]) * ops[k].lead_stride[d];
        rest /= lead[d];
      }
      row_base[k] = ops[k].base + off;
      int slot = p.input_slot[k];
      if (!p.row[static_cast<size_t>(slot)]) sv[static_cast<size_t>(slot)] = row_base[k][0];
    }
    for (const auto& [slot, value] : p.constants) sv[static_cast<size_t>(slot)] = value;
    auto operand = [&](int slot, float* tile_of_slot) -> std::pair<const float*, int> {
      if (!p.row[static_cast<size_t>(slot)]) return {&sv[static_cast<size_t>(slot)], 0};
      return {ptr[static_cast<size_t>(slot)] ? ptr[static_cast<size_t>(slot)] : tile_of_slot,
              ptr[static_cast<size_t>(slot)] ? stride[static_cast<size_t>(slot)] : 1};
    };
    for (int pass = 0; pass <= p.passes; ++pass) {
      for (int si : p.ready[static_cast<size_t>(pass)]) {
        const Step& s = p.steps[static_cast<size_t>(si)];
        float a = sv[static_cast<size_t>(s.a)];
        if (s.b < 0) sv[static_cast<size_t>(s.out)] = unary(s, a);
        else binary(s.op, &sv[static_cast<size_t>(s.out)], &a, 0, &sv[static_cast<size_t>(s.b)], 0, 1);
      }
      if (pass == p.passes && !p.row_results) break;
      const bool reducing = pass < p.passes;
      if (reducing) {
        for (int si : p.reductions[static_cast<size_t>(pass)]) {
          const Step& s = p.steps[static_cast<size_t>(si)];
          acc[static_cast<size_t>(s.out)] = s.op == Op::ReduceProd ? 1.0
                                            : s.op == Op::ReduceMax ? -std::numeric_limits<double>::infinity()
                                            : s.op == Op::ReduceMin ? std::numeric_limits<double>::infinity()
                                                                    : 0.0;
        }
      }
      for (int64_t t0 = 0; t0 < n; t0 += kTile) {
        const int64_t len = std::min(kTile, n - t0);
        auto tile = [&](int slot) { return tiles.data() + static_cast<size_t>(slot) * kTile; };
        for (int k : p.row_inputs[static_cast<size_t>(pass)]) {
          const Operand& o = ops[static_cast<size_t>(k)];
          int slot = p.input_slot[static_cast<size_t>(k)];
          if (o.kind == 0) {
            ptr[static_cast<size_t>(slot)] = row_base[static_cast<size_t>(k)] + t0;
            stride[static_cast<size_t>(slot)] = 1;
          } else if (o.kind == 1) {
            ptr[static_cast<size_t>(slot)] = row_base[static_cast<size_t>(k)];
            stride[static_cast<size_t>(slot)] = 0;
          } else {
            float* t = tile(slot);
            for (int64_t i = 0; i < len; ++i) t[i] = row_base[static_cast<size_t>(k)][o.offsets[static_cast<size_t>(t0 + i)]];
            ptr[static_cast<size_t>(slot)] = t;
            stride[static_cast<size_t>(slot)] = 1;
          }
        }
        for (int si : p.row_steps[static_cast<size_t>(pass)]) {
          const Step& s = p.steps[static_cast<size_t>(si)];
          float* o = tile(s.out);
          auto [a, sa] = operand(s.a, tile(s.a));
          if (s.b < 0) {
            unary_tile(s, o, a, sa, len);
          } else {
            auto [b, sb] = operand(s.b, tile(s.b));
            binary(s.op, o, a, sa, b, sb, len);
          }
          ptr[static_cast<size_t>(s.out)] = nullptr;  // lives in its tile
        }
        if (reducing) {
          for (int si : p.reductions[static_cast<size_t>(pass)]) {
            const Step& s = p.steps[static_cast<size_t>(si)];
            auto [a, sa] = operand(s.a, tile(s.a));
            accumulate(s.op, a, sa, len, acc[static_cast<size_t>(s.out)]);
          }
        } else {
          for (size_t k = 0; k < p.results.size(); ++k) {
            int v = p.results[k];
            if (!p.row[static_cast<size_t>(v)]) continue;
            auto [a, sa] = operand(v, tile(v));
            float* dst = outs[k] + r * n + t0;
            for (int64_t i = 0; i < len; ++i) dst[i] = a[i * sa];
          }
        }
      }
      if (reducing) {
        for (int si : p.reductions[static_cast<size_t>(pass)]) {
          const Step& s = p.steps[static_cast<size_t>(si)];
          double v = acc[static_cast<size_t>(s.out)];
          sv[static_cast<size_t>(s.out)] = static_cast<float>(s.op == Op::ReduceMean ? v / double(n) : v);
        }
      }
    }
    for (size_t k = 0; k < p.results.size(); ++k) {
      int v = p.results[k];
      if (!p.row[static_cast<size_t>(v)]) outs[k][r] = sv[static_cast<size_t>(v)];
    }
  }

  // Folds `len` values into a row's accumulator exactly as the reference kernel does: sums and
  // products in double, element by element in row order (so the rounded result is the
  // reference's, bit for bit); max and min in f32 with NaN propagating.
  static void accumulate(Op op, const float* a, int sa, int64_t len, double& acc) {
    if (op == Op::ReduceSum || op == Op::ReduceMean) {
      double s = acc;
      for (int64_t i = 0; i < len; ++i) s += double(a[i * sa]);
      acc = s;
      return;
    }
    if (op == Op::ReduceProd) {
      double s = acc;
      for (int64_t i = 0; i < len; ++i) s *= double(a[i * sa]);
      acc = s;
      return;
    }
    const bool is_max = op == Op::ReduceMax;
    float m = static_cast<float>(acc);
    for (int64_t i = 0; i < len; ++i) m = is_max ? nan_max(m, a[i * sa]) : nan_min(m, a[i * sa]);
    acc = double(m);
  }

  std::shared_ptr<const Plan> plan_;
};

}  // namespace

std::shared_ptr<const Kernel> make_reduction_kernel(const Graph&, const Node& n) {
  if (n.op != Op::ReductionRegion || !n.body) return nullptr;
  std::shared_ptr<const Plan> plan = make_plan(n);
  if (!plan) return nullptr;
  return std::make_shared<ReductionKernel>(std::move(plan));
}

}  // namespace fusebox::cpu
