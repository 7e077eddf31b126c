// reduction_region on the CPU: the pass plan (compiled once per node) and the per-row
// interpreter. See reduction_kernel.h for the scheme and its accuracy.
#include "backends/cpu/reduction_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/cpu/reduction_loops.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/region_jit.h"
#include "backends/cpu/region_program.h"
#include "ir/check.h"
#include "ir/reduction_region.h"
#include "ir/shape_inference.h"

namespace fusebox::cpu {

const ReductionLoops& reduction_loops(RowIsa isa) {
  FUSEBOX_CHECK(row_isa_available(isa)) << "reduction loops for " << row_isa_name(isa) << " on a processor without it";
  switch (isa) {
    case RowIsa::Generic: return red_generic::reduction_loops();
    case RowIsa::Avx2: return red_avx2::reduction_loops();
    case RowIsa::Avx512: return red_avx512::reduction_loops();
  }
  return red_generic::reduction_loops();
}

void start_lanes(Op op, double* lanes) {
  const double v = op == Op::ReduceProd  ? 1.0
                   : op == Op::ReduceMax ? -std::numeric_limits<double>::infinity()
                   : op == Op::ReduceMin ? std::numeric_limits<double>::infinity()
                                         : 0.0;
  std::fill(lanes, lanes + kAccLanes, v);
}

double finish_lanes(Op op, const double* lanes) {
  if (op == Op::ReduceProd) return lanes[0];
  if (op == Op::ReduceSum || op == Op::ReduceMean) {
    double s = 0;
    for (int j = 0; j < kAccLanes; ++j) s += lanes[j];
    return s;
  }
  double m = lanes[0];
  for (int j = 1; j < kAccLanes && m == m; ++j) {
    const double v = lanes[j];
    m = ((op == Op::ReduceMax ? m < v : v < m) || v != v) ? v : m;
  }
  return m;
}

namespace {

constexpr int64_t kTile = kReductionTile;
// Below this many elements in all, rows run on one thread (the pool's start costs more).
constexpr int64_t kParallelElements = int64_t(1) << 15;
// Per thread: the most bytes of kept row values (a row of each); beyond, values are recomputed.
constexpr int64_t kKeepBytes = int64_t(256) << 10;

struct Step {
  TileStep tile;
  int out = -1, a = -1, b = -1;  // slots
  bool row = false;              // a row-shaped value (else one value per row)
  int pass = 0;                  // row step / reduction: its pass; per-row step: ready before it
  size_t node = 0;               // its node in the body
  int scalar = -1;               // per-row step without scalar code here: its Plan::scalar_bodies index
  Op op() const { return tile.op; }
};

// The row steps of one pass as an element-wise body for generated code (region_jit.h): one loop
// over a tile with every step in vector registers, where the interpreter runs a loop per step.
// Its operands are the slots the steps read and do not compute (row operands and kept rows, or
// one value per row: repeated), its outputs the slots read after the steps: the pass's reduction
// operands, kept rows, and the write pass's results.
struct PassBody {
  std::shared_ptr<const Graph> body;  // null: the pass has no row step
  std::vector<int> in_slots, out_slots;
  bool generated_only = false;  // a step has no tile loop: the pass runs only as generated code
};

// Which row steps and operands each pass evaluates per tile. `recompute` evaluates every row value
// a pass needs from the operands again; `keep` stores the row values a later pass reads in a
// per-thread row buffer (kept) the pass that first computes them writes, so later passes read
// them instead (softmax: e = exp(x - max) is computed once, by the sum pass).
struct Schedule {
  std::vector<std::vector<int>> row_steps;   // per pass: steps to evaluate per tile
  std::vector<std::vector<int>> row_inputs;  // per pass: operand indices to load per tile
  std::vector<int> kept;                     // slots with a row buffer
  std::vector<int> kept_index;               // per slot: its index in `kept`, or -1
  // Per slot: the result the write pass's step writes straight into, or -1; per result: whether
  // the write pass copies it from where it lives instead.
  std::vector<int> direct;
  std::vector<bool> copied;
  std::vector<PassBody> bodies;  // per pass
  // Per kept row: the result whose row holds it when the write pass is generated code, or -1 (its
  // per-thread buffer). The write pass then reads it from the row it writes, as the softmax row
  // kernel leaves e^(x - max) in y: the result's row is first touched by the pass that computes
  // the kept value, while that pass's arithmetic hides the memory traffic, not by the write pass.
  std::vector<int> host;
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
  Schedule recompute, keep;
  std::vector<std::vector<int>> reductions;  // per pass < passes
  std::vector<std::vector<int>> ready;       // per pass: per-row steps to run before it
  std::vector<int> results;                  // slot per region result
  bool row_results = false;
  // Whether a step has generated code only (no tile loop or scalar code here: floor, clip, sin,
  // ...): the passes that hold one always run generated code, a per-row one runs its one-step
  // body (scalar_bodies) on the row's value; without code generation the reference kernel runs
  // the region.
  bool generated_only = false;
  std::vector<std::shared_ptr<const Graph>> scalar_bodies;
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

// Where each kept row may live in a result's row (Schedule::host). Safe in generated code when,
// in the write pass, one step reads the kept value (generated code loads it in that step's stage
// only) and the result is written directly by that step or a later one (stored at the end of its
// stage, after the load of the same elements); the kept value is no result itself (those are
// copied after the steps), and each result holds one kept row. Outputs never alias operands
// (reduction regions are not run in place), so nothing else reads the result's row.
std::vector<int> hosts(const Plan& plan, const Schedule& sch) {
  std::vector<int> host(sch.kept.size(), -1);
  const std::vector<int>& write = sch.row_steps[static_cast<size_t>(plan.passes)];
  std::vector<bool> taken(plan.results.size(), false);
  for (size_t j = 0; j < sch.kept.size(); ++j) {
    const int k = sch.kept[j];
    if (std::find(plan.results.begin(), plan.results.end(), k) != plan.results.end()) continue;
    int readers = 0;
    size_t first = 0;
    for (size_t i = 0; i < write.size(); ++i) {
      const Step& s = plan.steps[static_cast<size_t>(write[i])];
      if (s.a != k && s.b != k) continue;
      if (readers++ == 0) first = i;
    }
    if (readers != 1) continue;
    for (size_t i = write.size(); i-- > first;) {
      const int r = sch.direct[static_cast<size_t>(plan.steps[static_cast<size_t>(write[i])].out)];
      if (r < 0 || taken[static_cast<size_t>(r)]) continue;
      taken[static_cast<size_t>(r)] = true;
      host[j] = r;
      break;
    }
  }
  return host;
}

// Per pass, the row values its targets need (reduction operands, or the row results). With
// `keep`, a value an earlier pass computed is read from its row buffer, not recomputed.
Schedule schedule(const Plan& plan, bool keep) {
  const int P = plan.passes;
  Schedule out;
  out.row_steps.resize(static_cast<size_t>(P) + 1);
  out.row_inputs.resize(static_cast<size_t>(P) + 1);
  out.kept_index.assign(plan.slots, -1);
  std::vector<int> step_of(plan.slots, -1);
  for (size_t i = 0; i < plan.steps.size(); ++i) step_of[static_cast<size_t>(plan.steps[i].out)] = static_cast<int>(i);
  std::vector<bool> computed(plan.slots, false);  // by an earlier pass's row steps
  for (int p = 0; p <= P; ++p) {
    std::vector<bool> need(plan.slots, false);
    std::vector<int> stack;
    if (p < P) {
      for (int r : plan.reductions[static_cast<size_t>(p)]) stack.push_back(plan.steps[static_cast<size_t>(r)].a);
    } else {
      for (int v : plan.results)
        if (plan.row[static_cast<size_t>(v)]) stack.push_back(v);
    }
    while (!stack.empty()) {
      int v = stack.back();
      stack.pop_back();
      if (!plan.row[static_cast<size_t>(v)] || need[static_cast<size_t>(v)]) continue;
      need[static_cast<size_t>(v)] = true;
      if (keep && computed[static_cast<size_t>(v)]) {
        if (out.kept_index[static_cast<size_t>(v)] < 0) {
          out.kept_index[static_cast<size_t>(v)] = static_cast<int>(out.kept.size());
          out.kept.push_back(v);
        }
        continue;
      }
      int si = step_of[static_cast<size_t>(v)];
      if (si < 0) continue;
      const Step& s = plan.steps[static_cast<size_t>(si)];
      stack.push_back(s.a);
      if (s.b >= 0) stack.push_back(s.b);
    }
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const int v = plan.steps[i].out;
      if (!plan.steps[i].row || !need[static_cast<size_t>(v)] || out.kept_index[static_cast<size_t>(v)] >= 0) continue;
      out.row_steps[static_cast<size_t>(p)].push_back(static_cast<int>(i));
      computed[static_cast<size_t>(v)] = true;
    }
    for (size_t k = 0; k < plan.input_slot.size(); ++k)
      if (need[static_cast<size_t>(plan.input_slot[k])]) out.row_inputs[static_cast<size_t>(p)].push_back(static_cast<int>(k));
  }
  out.direct.assign(plan.slots, -1);
  out.copied.assign(plan.results.size(), true);
  for (int si : out.row_steps[static_cast<size_t>(P)]) {
    const int v = plan.steps[static_cast<size_t>(si)].out;
    for (size_t k = 0; k < plan.results.size() && out.direct[static_cast<size_t>(v)] < 0; ++k) {
      if (plan.results[k] != v) continue;
      out.direct[static_cast<size_t>(v)] = static_cast<int>(k);
      out.copied[k] = false;
    }
  }
  out.host = hosts(plan, out);
  return out;
}

PassBody pass_body(const Plan& plan, const Schedule& sch, int pass) {
  PassBody out;
  const std::vector<int>& steps = sch.row_steps[static_cast<size_t>(pass)];
  if (steps.empty()) return out;
  std::vector<bool> read_after(plan.slots, false);
  if (pass < plan.passes) {
    for (int r : plan.reductions[static_cast<size_t>(pass)])
      read_after[static_cast<size_t>(plan.steps[static_cast<size_t>(r)].a)] = true;
  } else {
    for (int v : plan.results) read_after[static_cast<size_t>(v)] = true;
  }
  for (int v : sch.kept) read_after[static_cast<size_t>(v)] = true;
  auto g = std::make_shared<Graph>("reduction_pass" + std::to_string(pass));
  const TensorType f32{DType::F32, {}};
  std::vector<ValueId> at(plan.slots, kNoValue);
  auto value = [&](int slot) {
    ValueId& v = at[static_cast<size_t>(slot)];
    if (v == kNoValue) {
      v = g->add_input("s" + std::to_string(slot), f32);
      out.in_slots.push_back(slot);
    }
    return v;
  };
  for (int si : steps) {
    const Step& s = plan.steps[static_cast<size_t>(si)];
    const Node& src = plan.body->nodes()[s.node];
    out.generated_only = out.generated_only || !interpreted(src.op);
    std::vector<ValueId> ins{value(s.a)};
    if (s.b >= 0) ins.push_back(value(s.b));
    const ValueId o = g->add_value(f32);
    if (src.op == Op::Div && !plan.row[static_cast<size_t>(s.b)]) {
      // A division by a per-row value multiplies by its reciprocal, as the tile loops do (one
      // more rounding): the reciprocal of the repeated operand is computed once per call.
      const ValueId inv = g->add_node(Op::Reciprocal, {ins[1]}, {f32})[0];
      g->add_node(Node{Op::Mul, {ins[0], inv}, {o}, {}, nullptr, src.loc});
      at[static_cast<size_t>(s.out)] = o;
    } else {
      g->add_node(Node{src.op, std::move(ins), {o}, src.attrs, nullptr, src.loc});
      at[static_cast<size_t>(s.out)] = o;
    }
    if (!read_after[static_cast<size_t>(s.out)]) continue;
    read_after[static_cast<size_t>(s.out)] = false;  // once, however often it is read
    g->add_output(o);
    out.out_slots.push_back(s.out);
  }
  out.body = std::move(g);
  return out;
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
    // A step without a tile loop may still be a row step of generated code (checked below).
    if (!interpreted(b.op) &&
        (b.inputs.empty() || b.outputs.size() != 1 || b.inputs.size() > 2 || is_row_reduction_op(b.op)))
      return nullptr;
    Step s{TileStep{b.op}, b.outputs[0], b.inputs[0], b.inputs.size() > 1 ? b.inputs[1] : -1};
    s.node = static_cast<size_t>(&b - body.nodes().data());
    if (b.op == Op::LeakyRelu) s.tile.alpha = static_cast<float>(b.attr_f64("alpha"));
    if (b.op == Op::Gelu) s.tile.gelu_tanh = b.attr_str("approximate") == "tanh";
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
  plan->reductions.resize(static_cast<size_t>(P));
  plan->ready.resize(static_cast<size_t>(P) + 1);
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const Step& s = plan->steps[i];
    if (is_row_reduction_op(s.op())) plan->reductions[static_cast<size_t>(s.pass)].push_back(static_cast<int>(i));
    else if (!s.row) plan->ready[static_cast<size_t>(s.pass)].push_back(static_cast<int>(i));
  }
  plan->recompute = schedule(*plan, /*keep=*/false);
  plan->keep = schedule(*plan, /*keep=*/true);
  for (Schedule* sch : {&plan->recompute, &plan->keep}) {
    for (int p = 0; p <= P; ++p) sch->bodies.push_back(pass_body(*plan, *sch, p));
  }
  // Steps without a tile loop or scalar code: a row step in a pass body, a per-row step as a body
  // of its own (its operands and result one f32 value), each of which must have generated code.
  const TensorType f32{DType::F32, {}};
  for (Step& s : plan->steps) {
    if (interpreted(s.op())) continue;
    plan->generated_only = true;
    if (s.row) continue;
    const Node& src = body.nodes()[s.node];
    auto g = std::make_shared<Graph>("reduction_row_step");
    std::vector<ValueId> ins{g->add_input("a", f32)};
    if (s.b >= 0) ins.push_back(g->add_input("b", f32));
    const ValueId o = g->add_value(f32);
    g->add_node(Node{src.op, std::move(ins), {o}, src.attrs, nullptr, src.loc});
    g->add_output(o);
    if (!jit_unsupported_step(*g).empty()) return nullptr;
    s.scalar = static_cast<int>(plan->scalar_bodies.size());
    plan->scalar_bodies.push_back(std::move(g));
  }
  for (const Schedule* sch : {&plan->recompute, &plan->keep}) {
    for (const PassBody& pb : sch->bodies) {
      if (pb.generated_only && !jit_unsupported_step(*pb.body).empty()) return nullptr;
    }
  }
  return plan;
}

// The per-row steps (one value per row) round exactly as the reference kernels do.
float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

float unary(const TileStep& s, float x) {
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

float binary(Op op, float x, float y) {
  switch (op) {
    case Op::Add: return x + y;
    case Op::Sub: return x - y;
    case Op::Mul: return x * y;
    case Op::Div: return x / y;
    case Op::Max: return x != x ? x : (y != y ? y : (x < y ? y : x));
    case Op::Min: return x != x ? x : (y != y ? y : (y < x ? y : x));
    default: return std::pow(x, y);
  }
}

// A row operand as the tile loop reads it.
struct Operand {
  const float* base = nullptr;       // row 0's first element
  std::vector<int64_t> lead_stride;  // per leading axis of the row shape
  int kind = 0;                      // 0 contiguous row, 1 one value per row, 2 gathered
  std::vector<int64_t> offsets;      // kind 2: the offset of each row element
};

// Per thread: the tiles of every slot, the per-row values, where each row value of the current
// tile is read, the accumulators and the kept row values.
// The tiles and kept rows start on a cache line, so the loops' stores need no peeling.
struct RowScratch {
  static constexpr size_t kAlign = 64 / sizeof(float);
  // `tile`: a tile's floats (kTile, or a shorter row rounded up to the alignment). The floats are
  // not cleared: every tile and kept row is written before it is read.
  RowScratch(const Plan& p, size_t operands, size_t tile, size_t kept_floats)
      : tile_floats(tile),
        floats(new float[p.slots * tile + kept_floats + kAlign]),
        sv(p.slots),
        ptr(p.slots),
        stride(p.slots),
        row_base(operands),
        next_base(operands),
        acc(p.slots * kAccLanes),
        jit_in(p.slots),
        jit_out(p.slots) {
    const size_t misaligned = (reinterpret_cast<uintptr_t>(floats.get()) / sizeof(float)) % kAlign;
    tiles = floats.get() + (misaligned ? kAlign - misaligned : 0);
    kept = tiles + p.slots * tile;
  }
  size_t tile_floats;
  std::unique_ptr<float[]> floats;
  std::vector<float> sv;
  float* tiles = nullptr;
  float* kept = nullptr;
  std::vector<const float*> ptr;
  std::vector<int> stride;
  std::vector<const float*> row_base;
  std::vector<const float*> next_base;  // the next row's start of each contiguous operand, or null
  std::vector<double> acc;
  std::vector<const void*> jit_in;  // a generated pass's operand and output pointers
  std::vector<void*> jit_out;
  float* tile(int slot) { return tiles + static_cast<size_t>(slot) * tile_floats; }
};

// What every row of one run shares.
struct RunArgs {
  const Plan& p;
  const Schedule& sch;
  const ReductionLoops& loops;
  const std::vector<Operand>& ops;
  const std::vector<int64_t>& lead;  // the leading dims of the row shape
  const std::vector<float*>& outs;
  const std::vector<JitKernelFn>& code;  // per pass: its generated loop, or null (the interpreter)
  const std::vector<JitKernelFn>& scalar_code;  // per Plan::scalar_bodies
  int64_t n = 0;                         // elements per row
  int64_t rows = 0;
  bool hosted = false;  // kept rows in their result rows (Schedule::host)

  // Where kept row j of row r starts.
  float* kept_row(size_t j, int64_t r, RowScratch& w) const {
    const int h = hosted ? sch.host[j] : -1;
    return h >= 0 ? outs[static_cast<size_t>(h)] + r * n : w.kept + j * static_cast<size_t>(n);
  }
};

class ReductionKernel final : public Kernel {
 public:
  ReductionKernel(std::shared_ptr<const Plan> plan, RowIsa isa, Codegen codegen)
      : plan_(std::move(plan)), isa_(isa), codegen_(codegen) {}
  std::string_view kind() const override { return "reduction"; }

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    const Plan& p = *plan_;
    FUSEBOX_ASSIGN_OR_RETURN(const std::vector<int64_t> row_shape, row_shape_for(in));
    const size_t rank = row_shape.size();
    const size_t lead_rank = rank - static_cast<size_t>(p.row_axes);
    int64_t rows = 1, n = 1;
    for (size_t d = 0; d < rank; ++d) (d < lead_rank ? rows : n) *= row_shape[d];
    auto reference = [&] {
      std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
      return run_reference(Node{Op::ReductionRegion, {}, {}, {{"row_axes", p.row_axes}}, std::const_pointer_cast<Graph>(p.body), {}}, ins, outs);
    };
    if (rows * n == 0) return reference();
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
    const bool keep = static_cast<int64_t>(p.keep.kept.size()) * n * int64_t(sizeof(float)) <= kKeepBytes;
    const Schedule& sch = keep ? p.keep : p.recompute;
    std::vector<JitKernelFn> code(static_cast<size_t>(p.passes) + 1, nullptr);
    // Passes with a step that has no tile loop run generated code at any size (make_reduction_kernel
    // takes such a body only where code can be generated).
    const bool passes_need_code = std::any_of(sch.bodies.begin(), sch.bodies.end(),
                                              [](const PassBody& pb) { return pb.generated_only; });
    if (jit_built() && (codegen_ == Codegen::Jit ||
                        (codegen_ == Codegen::Auto && (rows * n >= kJitMinElements || passes_need_code)))) {
      for (size_t pass = 0; pass < code.size(); ++pass) {
        FUSEBOX_ASSIGN_OR_RETURN(code[pass], generated(sch, keep, pass, ops));
      }
    }
    for (size_t pass = 0; pass < code.size(); ++pass) {
      // Its code could not be made here (Auto goes on after a failed compile): the reference.
      if (sch.bodies[pass].generated_only && !code[pass]) return reference();
    }
    // Hosting needs the write pass's generated code: the tile loops assume no operand aliases the
    // result they write.
    const bool hosted = code.back() != nullptr;
    std::vector<JitKernelFn> scalar_code;
    for (const auto& b : p.scalar_bodies) {
      Expected<std::shared_ptr<const JitKernel>> made = scalar_kernel(b);
      if (!made) return codegen_ == Codegen::Jit ? made.status() : reference();
      scalar_code.push_back((*made)->function());
    }
    const RunArgs args{p, sch, reduction_loops(isa_), ops, lead, outs, code, scalar_code, n, rows, hosted};
    const size_t kept_floats = args.sch.kept.size() * static_cast<size_t>(n);
    const size_t tile_floats = static_cast<size_t>((std::min(n, kTile) + 15) / 16 * 16);
#pragma omp parallel if (rows > 1 && rows * n >= kParallelElements)
    {
      RowScratch scratch(p, ops.size(), tile_floats, kept_floats);
#pragma omp for schedule(static)
      for (int64_t r = 0; r < rows; ++r) run_row(args, r, scratch);
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

  // The generated loop of `pass` for these operands (which are one value per row decides the
  // variant), compiled on first use; null when the pass has no row step or, under Auto, a step
  // without generated code (the interpreter runs it).
  Expected<JitKernelFn> generated(const Schedule& sch, bool keep, size_t pass,
                                  const std::vector<Operand>& ops) const {
    const PassBody& pb = sch.bodies[pass];
    if (!pb.body) return JitKernelFn{nullptr};
    const Plan& p = *plan_;
    JitVariant variant;
    variant.repeated.resize(pb.in_slots.size());
    for (size_t k = 0; k < pb.in_slots.size(); ++k) {
      const int slot = pb.in_slots[k];
      bool repeated = !p.row[static_cast<size_t>(slot)];
      for (size_t i = 0; i < p.input_slot.size() && !repeated; ++i)
        repeated = p.input_slot[i] == slot && ops[i].kind == 1;
      variant.repeated[k] = repeated;
    }
    std::lock_guard<std::mutex> lock(jit_mu_);
    auto key = std::make_tuple(keep, pass, variant.repeated);
    auto it = jit_.find(key);
    if (it == jit_.end()) {
      Expected<std::shared_ptr<const JitKernel>> made = jit_compile(*pb.body, variant);
      if (!made && codegen_ == Codegen::Jit) return made.status();
      it = jit_.emplace(std::move(key), made ? *made : nullptr).first;  // null: the interpreter
    }
    return it->second ? it->second->function() : JitKernelFn{nullptr};
  }

  // The generated code of a per-row step's body (Plan::scalar_bodies), compiled on first use.
  Expected<std::shared_ptr<const JitKernel>> scalar_kernel(const std::shared_ptr<const Graph>& body) const {
    std::lock_guard<std::mutex> lock(jit_mu_);
    auto it = scalar_jit_.find(body.get());
    if (it != scalar_jit_.end()) return it->second;
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const JitKernel> made, jit_compile(*body, JitVariant{}));
    return scalar_jit_.emplace(body.get(), std::move(made)).first->second;
  }

  // The row shape at these input sizes: the operand of the body's first reduction, inferred
  // through the body once per set of input shapes (a plan run in a loop sees the same ones; the
  // inference allocates per step, which small rows would feel).
  Expected<std::vector<int64_t>> row_shape_for(std::span<const BufferView> in) const {
    {
      std::lock_guard<std::mutex> lock(shape_mu_);
      const bool same =
          last_shapes_.size() == in.size() &&
          std::equal(in.begin(), in.end(), last_shapes_.begin(),
                     [](const BufferView& b, const std::vector<int64_t>& s) { return b.shape == s; });
      if (same && !last_row_shape_.empty()) return last_row_shape_;
    }
    const Plan& p = *plan_;
    std::vector<TensorType> types(p.slots);
    for (size_t i = 0; i < in.size(); ++i)
      types[static_cast<size_t>(p.body->inputs()[i])] = TensorType{in[i].dtype, make_shape(in[i].shape)};
    std::vector<int64_t> row_shape;
    for (const Node& b : p.body->nodes()) {
      std::vector<TensorType> ts;
      for (ValueId v : b.inputs) ts.push_back(types[static_cast<size_t>(v)]);
      FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> r, infer_result_types(b, ts));
      types[static_cast<size_t>(b.outputs[0])] = r[0];
      if (row_shape.empty() && is_row_reduction_op(b.op)) row_shape = static_dims(ts[0].shape);
    }
    std::lock_guard<std::mutex> lock(shape_mu_);
    last_shapes_.clear();
    for (const BufferView& b : in) last_shapes_.push_back(b.shape);
    last_row_shape_ = row_shape;
    return row_shape;
  }

  static double* lanes_of(int slot, RowScratch& w) { return w.acc.data() + static_cast<size_t>(slot) * kAccLanes; }

  // Points the operands of `pass` at the tile [t0, t0 + len) of the row (gathering where needed)
  // and the kept values at their row buffers.
  static void load_tile(const RunArgs& a, int pass, int64_t r, int64_t t0, int64_t len, RowScratch& w) {
    for (int k : a.sch.row_inputs[static_cast<size_t>(pass)]) {
      const Operand& o = a.ops[static_cast<size_t>(k)];
      const size_t slot = static_cast<size_t>(a.p.input_slot[static_cast<size_t>(k)]);
      const float* base = w.row_base[static_cast<size_t>(k)];
      w.stride[slot] = o.kind == 1 ? 0 : 1;
      if (o.kind != 2) {
        w.ptr[slot] = o.kind == 1 ? base : base + t0;
        continue;
      }
      float* t = w.tile(static_cast<int>(slot));
      for (int64_t i = 0; i < len; ++i) t[i] = base[o.offsets[static_cast<size_t>(t0 + i)]];
      w.ptr[slot] = t;
    }
    for (size_t j = 0; j < a.sch.kept.size(); ++j) {
      const size_t slot = static_cast<size_t>(a.sch.kept[j]);
      w.ptr[slot] = a.kept_row(j, r, w) + t0;
      w.stride[slot] = 1;
    }
  }

  static void prefetch_next(int64_t t0, int64_t len, const RowScratch& w) {
    constexpr int64_t kLine = 64 / sizeof(float);
    for (const float* next : w.next_base) {
      if (!next) continue;
      for (int64_t i = 0; i < len; i += kLine) __builtin_prefetch(next + t0 + i, 0, 2);
    }
  }

  static void run_row(const RunArgs& a, int64_t r, RowScratch& w) {
    const Plan& p = a.p;
    const int64_t n = a.n;
    // Where this row (and the next, for the prefetch) starts in each operand.
    auto row_start = [&](size_t k, int64_t row) {
      int64_t off = 0, rest = row;
      for (size_t d = a.lead.size(); d-- > 0;) {
        off += (rest % a.lead[d]) * a.ops[k].lead_stride[d];
        rest /= a.lead[d];
      }
      return a.ops[k].base + off;
    };
    for (size_t k = 0; k < a.ops.size(); ++k) {
      w.row_base[k] = row_start(k, r);
      const float* next = a.ops[k].kind == 0 && r + 1 < a.rows ? row_start(k, r + 1) : nullptr;
      w.next_base[k] = next != w.row_base[k] ? next : nullptr;  // not one row for all
      int slot = p.input_slot[k];
      if (!p.row[static_cast<size_t>(slot)]) w.sv[static_cast<size_t>(slot)] = w.row_base[k][0];
    }
    for (const auto& [slot, value] : p.constants) w.sv[static_cast<size_t>(slot)] = value;
    // A value of the current tile: a per-row value (stride 0), an operand or kept row, or a tile.
    auto operand = [&](int slot) -> std::pair<const float*, int> {
      const size_t v = static_cast<size_t>(slot);
      if (!p.row[v]) return {&w.sv[v], 0};
      return w.ptr[v] ? std::pair<const float*, int>{w.ptr[v], w.stride[v]} : std::pair<const float*, int>{w.tile(slot), 1};
    };
    for (int pass = 0; pass <= p.passes; ++pass) {
      for (int si : p.ready[static_cast<size_t>(pass)]) {
        const Step& s = p.steps[static_cast<size_t>(si)];
        if (s.scalar >= 0) {
          const void* in[] = {&w.sv[static_cast<size_t>(s.a)],
                              s.b >= 0 ? &w.sv[static_cast<size_t>(s.b)] : nullptr};
          void* out[] = {&w.sv[static_cast<size_t>(s.out)]};
          a.scalar_code[static_cast<size_t>(s.scalar)](in, out, 1);
          continue;
        }
        const float x = w.sv[static_cast<size_t>(s.a)];
        w.sv[static_cast<size_t>(s.out)] = s.b < 0 ? unary(s.tile, x) : binary(s.op(), x, w.sv[static_cast<size_t>(s.b)]);
      }
      if (pass == p.passes && !p.row_results) break;
      const bool reducing = pass < p.passes;
      if (reducing) {
        for (int si : p.reductions[static_cast<size_t>(pass)]) {
          const Step& s = p.steps[static_cast<size_t>(si)];
          start_lanes(s.op(), lanes_of(s.out, w));
        }
      }
      for (int64_t t0 = 0; t0 < n; t0 += kTile) {
        const int64_t len = std::min(kTile, n - t0);
        load_tile(a, pass, r, t0, len, w);
        // The second pass asks for the same tile of the next row's operands (into L2): pass 0 of
        // the next row then reads from cache while this row's arithmetic hid the memory traffic.
        // Left to the hardware, the first pass streams from memory with nothing to overlap:
        // a softmax with a temperature ran 12.6-13.6 ms with this against 16.3-17.5 without.
        if (pass == 1) prefetch_next(t0, len, w);
        // A row value goes into its row buffer, straight into a result (the write pass), or into
        // its tile; later reads find it through ptr (null: the tile).
        auto destination = [&](int slot) {
          const int kept = a.sch.kept_index[static_cast<size_t>(slot)];
          const int direct = reducing ? -1 : a.sch.direct[static_cast<size_t>(slot)];
          float* o = kept >= 0     ? a.kept_row(static_cast<size_t>(kept), r, w) + t0
                     : direct >= 0 ? a.outs[static_cast<size_t>(direct)] + r * n + t0
                                   : w.tile(slot);
          w.ptr[static_cast<size_t>(slot)] = o == w.tile(slot) ? nullptr : o;
          w.stride[static_cast<size_t>(slot)] = 1;
          return o;
        };
        if (const JitKernelFn fn = a.code[static_cast<size_t>(pass)]) {
          const PassBody& pb = a.sch.bodies[static_cast<size_t>(pass)];
          for (size_t k = 0; k < pb.in_slots.size(); ++k) w.jit_in[k] = operand(pb.in_slots[k]).first;
          for (size_t j = 0; j < pb.out_slots.size(); ++j) w.jit_out[j] = destination(pb.out_slots[j]);
          fn(w.jit_in.data(), w.jit_out.data(), len);
        } else {
          for (int si : a.sch.row_steps[static_cast<size_t>(pass)]) {
            const Step& s = p.steps[static_cast<size_t>(si)];
            auto [x, sx] = operand(s.a);
            float* o = destination(s.out);
            if (s.b < 0) {
              a.loops.unary(s.tile, o, x, sx, len);
            } else {
              auto [y, sy] = operand(s.b);
              a.loops.binary(s.op(), o, x, sx, y, sy, len);
            }
          }
        }
        if (reducing) {
          for (int si : p.reductions[static_cast<size_t>(pass)]) {
            const Step& s = p.steps[static_cast<size_t>(si)];
            auto [x, sx] = operand(s.a);
            a.loops.accumulate(s.op(), x, sx, len, lanes_of(s.out, w));
          }
          continue;
        }
        for (size_t k = 0; k < p.results.size(); ++k) {
          int v = p.results[k];
          if (!p.row[static_cast<size_t>(v)] || !a.sch.copied[k]) continue;
          auto [x, sx] = operand(v);
          float* dst = a.outs[k] + r * n + t0;
          if (sx) std::copy(x, x + len, dst);
          else std::fill(dst, dst + len, x[0]);
        }
      }
      if (reducing) {
        for (int si : p.reductions[static_cast<size_t>(pass)]) {
          const Step& s = p.steps[static_cast<size_t>(si)];
          const double v = finish_lanes(s.op(), lanes_of(s.out, w));
          w.sv[static_cast<size_t>(s.out)] = static_cast<float>(s.op() == Op::ReduceMean ? v / double(n) : v);
        }
      }
    }
    for (size_t k = 0; k < p.results.size(); ++k) {
      int v = p.results[k];
      if (!p.row[static_cast<size_t>(v)]) a.outs[k][r] = w.sv[static_cast<size_t>(v)];
    }
  }

  std::shared_ptr<const Plan> plan_;
  RowIsa isa_;
  Codegen codegen_;
  mutable std::mutex jit_mu_;
  mutable std::map<std::tuple<bool, size_t, std::vector<bool>>, std::shared_ptr<const JitKernel>> jit_;
  mutable std::map<const Graph*, std::shared_ptr<const JitKernel>> scalar_jit_;
  mutable std::mutex shape_mu_;  // row_shape_for's last answer
  mutable std::vector<std::vector<int64_t>> last_shapes_;
  mutable std::vector<int64_t> last_row_shape_;
};

}  // namespace

ReductionCodegen reduction_codegen(const Node& n) {
  ReductionCodegen out;
  std::shared_ptr<const Plan> plan = n.op == Op::ReductionRegion && n.body ? make_plan(n) : nullptr;
  if (!plan || (plan->generated_only && !jit_built())) return out;
  out.kernel = true;
  for (const Schedule* sch : {&plan->keep, &plan->recompute}) {
    for (const PassBody& pb : sch->bodies) {
      if (pb.body && out.missing.empty()) out.missing = jit_unsupported_step(*pb.body);
    }
  }
  return out;
}

std::shared_ptr<const Kernel> make_reduction_kernel(const Graph&, const Node& n, RowIsa isa,
                                                    Codegen codegen) {
  if (n.op != Op::ReductionRegion || !n.body) return nullptr;
  std::shared_ptr<const Plan> plan = make_plan(n);
  if (!plan || (plan->generated_only && (codegen == Codegen::Interpreter || !jit_built()))) return nullptr;
  return std::make_shared<ReductionKernel>(std::move(plan), isa, codegen);
}

namespace {

// A reduction without keepdims writes the keepdims result's bytes: its output is viewed with the
// reduced axes kept as 1.
class KeptDimsKernel final : public Kernel {
 public:
  KeptDimsKernel(std::shared_ptr<const Kernel> inner, int64_t row_axes)
      : inner_(std::move(inner)), row_axes_(row_axes) {}
  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    BufferView kept = out[0];
    kept.shape = in[0].shape;
    for (size_t i = kept.shape.size() - static_cast<size_t>(row_axes_); i < kept.shape.size(); ++i)
      kept.shape[i] = 1;
    kept.strides = contiguous_strides(kept.shape);
    return inner_->run(stream, in, std::span<const BufferView>(&kept, 1));
  }
  std::string_view kind() const override { return inner_->kind(); }

 private:
  std::shared_ptr<const Kernel> inner_;
  int64_t row_axes_;
};

}  // namespace

std::shared_ptr<const Kernel> make_row_reduce_kernel(const Graph& g, const Node& n, RowIsa isa,
                                                     Codegen codegen) {
  if (!is_row_reduction_op(n.op) || n.inputs.size() != 1 || n.outputs.size() != 1) return nullptr;
  const TensorType& x = g.type(n.inputs[0]);
  if (x.dtype != DType::F32 || g.type(n.outputs[0]).dtype != DType::F32) return nullptr;
  const std::optional<int64_t> k = trailing_reduced_axes(n, x.rank());
  if (!k || *k > x.rank()) return nullptr;
  // The region: the reduction with keepdims, outlined from a graph of its own.
  Graph one("row_reduce");
  const ValueId in = one.add_input("x", x);
  Node reduce = n;
  reduce.inputs = {in};
  reduce.attrs.set("keepdims", true);
  const ValueId y = one.add_value(TensorType{DType::F32, per_row_shape(x.shape, *k)});
  reduce.outputs = {y};
  one.add_node(std::move(reduce));
  one.add_output(y);
  if (!outline_reduction_regions(one, {ReductionGroup{{0}, "row_reduce", *k}}).is_ok()) return nullptr;
  const auto region = std::find_if(one.nodes().begin(), one.nodes().end(),
                                   [](const Node& m) { return m.op == Op::ReductionRegion; });
  if (region == one.nodes().end()) return nullptr;
  std::shared_ptr<const Kernel> kernel = make_reduction_kernel(one, *region, isa, codegen);
  if (!kernel) return nullptr;
  return std::make_shared<KeptDimsKernel>(std::move(kernel), *k);
}

}  // namespace fusebox::cpu
