// Fuzz target: random well-typed graphs, fused against the reference. The input bytes drive a
// generator: shapes (zero-size and broadcast dims included), a chain of ops from every kind of
// ops.def (element-wise, broadcast, reductions, movement, matmul/conv, pooling, resize), the
// FusionOptions, the target and the CPU codegen. The fused graph (pipeline of that target; for
// a target without an executor, its fused graph runs on the cpu backend) must verify, compile and
// run; its results must match the unfused graph on the reference backend within the tolerance
// of docs/reliability.md. A graph the builder rejects is skipped: the builder decides what is
// well typed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "fusebox/session.h"
#include "fusion/fuse.h"
#include "ir/builder.h"
#include "ir/check.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace fusebox {
namespace {

// Reads the fuzz input as a stream of choices; past its end every choice is 0.
class Choices {
 public:
  Choices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  int pick(int lo, int hi) { return lo + byte() % (hi - lo + 1); }  // in [lo, hi]
  bool coin() { return byte() & 1; }
  bool done() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// How a value was computed, for the comparison (see the tolerance table in the docs).
struct Val {
  ValueId id;
  bool bit_exact;   // only ops whose fused and reference results are identical
  bool reassoc;     // a reduction, contraction or norm above it may sum in another order
};

class GraphGen {
 public:
  explicit GraphGen(Choices& c) : c_(c), b_("fuzz") {}

  // Builds the graph and its inputs; false when the builder rejected it.
  bool make(Graph* graph, std::vector<std::vector<int64_t>>* input_shapes) {
    const int rank = c_.pick(0, 4);
    for (int i = 0; i < rank; ++i) base_.push_back(dim());
    add_input(base_);
    for (int steps = c_.pick(1, 10); steps > 0 && b_.status().is_ok(); --steps) step();
    b_.output(vals_.back().id);
    if (vals_.size() > 2 && c_.coin()) b_.output(vals_[c_.byte() % vals_.size()].id);
    Expected<Graph> g = b_.build();
    if (!g) return false;
    *graph = std::move(*g);
    *input_shapes = std::move(input_shapes_);
    return true;
  }

 private:
  int64_t dim() {
    const uint8_t v = c_.byte();
    return v % 16 == 0 ? 0 : v % 5 + 1;  // 0 now and then, else 1..5
  }
  std::vector<int64_t> shape_of(ValueId v) const {
    std::vector<int64_t> s;
    for (const Dim& d : b_.type(v).shape) s.push_back(d.value());
    return s;
  }
  Val add_input(std::vector<int64_t> shape) {
    ValueId v = b_.input("in" + std::to_string(input_shapes_.size()), DType::F32, make_shape(shape));
    input_shapes_.push_back(std::move(shape));
    vals_.push_back({v, true, false});
    return vals_.back();
  }
  // A fresh input that broadcasts against `shape`: some dims 1, leading dims dropped.
  Val broadcast_input(std::vector<int64_t> shape) {
    for (auto& d : shape)
      if (c_.coin()) d = 1;
    while (!shape.empty() && c_.coin()) shape.erase(shape.begin());
    return add_input(shape);
  }
  Val pick_val() { return vals_[c_.byte() % vals_.size()]; }
  void push(ValueId v, const Val& from, bool exact, bool reassoc = false) {
    vals_.push_back({v, from.bit_exact && exact, from.reassoc || reassoc});
  }
  void push2(ValueId v, const Val& a, const Val& b, bool exact) {
    vals_.push_back({v, a.bit_exact && b.bit_exact && exact, a.reassoc || b.reassoc});
  }
  int64_t axis(int rank) { return rank == 0 ? 0 : int64_t(c_.byte() % rank); }

  void step() {
    Val a = pick_val();
    std::vector<int64_t> s = shape_of(a.id);
    const int rank = int(s.size());
    switch (c_.pick(0, 11)) {
      case 0: return unary(a);
      case 1: return binary(a);
      case 2: {  // a comparison picks between two values; only where it cannot flip
        Val other = c_.coin() ? pick_val() : broadcast_input(s);
        if (!a.bit_exact || !other.bit_exact) return binary(a);
        ValueId cond = b_.op(c_.coin() ? Op::Greater : Op::LessEqual, {a.id, other.id});
        return push2(b_.op(Op::Where, {cond, a.id, other.id}), a, other, true);
      }
      case 3: {  // through another dtype and back
        if (a.bit_exact && c_.coin())
          return push(b_.cast(b_.cast(b_.op(Op::Round, {a.id}), DType::I32), DType::F32), a, true);
        return push(b_.cast(b_.cast(a.id, DType::F64), DType::F32), a, true);
      }
      case 4: {
        std::vector<int64_t> axes;
        for (int i = 0; i < rank; ++i)
          if (c_.coin()) axes.push_back(i);
        const Op ops[] = {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin};
        const Op op = ops[c_.byte() % 4];
        const bool exact = op == Op::ReduceMax || op == Op::ReduceMin;
        return push(b_.op(op, {a.id}, {{"axes", axes}, {"keepdims", c_.coin()}}), a, exact, !exact);
      }
      case 5: {
        if (rank == 0) return unary(a);
        const Op ops[] = {Op::Softmax, Op::LogSoftmax, Op::LayerNorm, Op::RmsNorm};
        return push(b_.op(ops[c_.byte() % 4], {a.id}, {{"axis", int64_t(-1)}}), a, false, true);
      }
      case 6: return movement(a, s);
      case 7: {  // concat with another value of the same shape, or with itself
        if (rank == 0) return unary(a);
        Val other = c_.coin() ? a : add_input(s);
        return push2(b_.op(Op::Concat, {a.id, other.id, a.id}, {{"axis", axis(rank)}}), a, other, true);
      }
      case 8: return contraction(a, s);
      case 9: return conv(a, s);
      case 10: return pool(a, s);
      default: {  // expand a size-1 dim (or prepend one)
        std::vector<int64_t> to = s;
        for (auto& d : to)
          if (d == 1 && c_.coin()) d = c_.pick(2, 4);
        if (c_.coin()) to.insert(to.begin(), c_.pick(1, 3));
        return push(b_.op(Op::Expand, {a.id}, {{"shape", make_shape(to)}}), a, true);
      }
    }
  }

  void unary(const Val& a) {
    // Domains kept valid: log/sqrt/reciprocal of |x| + 1.
    auto plus_one = [&] { return b_.add(b_.op(Op::Abs, {a.id}), b_.scalar(DType::F32, 1.0)); };
    switch (c_.pick(0, 13)) {
      case 0: return push(b_.op(Op::Neg, {a.id}), a, true);
      case 1: return push(b_.op(Op::Abs, {a.id}), a, true);
      case 2: return push(b_.relu(a.id), a, true);
      case 3: return push(b_.op(Op::Exp, {b_.op(Op::Neg, {b_.op(Op::Abs, {a.id})})}), a, false);
      case 4: return push(b_.tanh(a.id), a, false);
      case 5: return push(b_.sigmoid(a.id), a, false);
      case 6: return push(b_.op(Op::Log, {plus_one()}), a, false);
      case 7: return push(b_.op(Op::Sqrt, {plus_one()}), a, true);
      case 8: return push(b_.op(Op::Reciprocal, {plus_one()}), a, false);
      case 9: return push(b_.gelu(a.id, c_.coin()), a, false);
      case 10: return push(b_.op(c_.coin() ? Op::Silu : Op::HardSwish, {a.id}), a, false);
      case 11: return push(b_.op(c_.coin() ? Op::Sin : Op::Erf, {a.id}), a, false);
      case 12: return push(b_.op(Op::Clip, {a.id}, {{"min", -1.0}, {"max", 1.5}}), a, true);
      default:  // floor/ceil only where they cannot flip
        if (!a.bit_exact) return push(b_.op(Op::LeakyRelu, {a.id}), a, true);
        return push(b_.op(c_.coin() ? Op::Floor : Op::Ceil, {a.id}), a, true);
    }
  }

  void binary(const Val& a) {
    Val other = c_.coin() ? pick_val() : broadcast_input(shape_of(a.id));
    switch (c_.pick(0, 5)) {
      case 0: return push2(b_.add(a.id, other.id), a, other, true);
      case 1: return push2(b_.sub(a.id, other.id), a, other, true);
      case 2: return push2(b_.mul(a.id, other.id), a, other, true);
      case 3: {
        ValueId den = b_.add(b_.op(Op::Abs, {other.id}), b_.scalar(DType::F32, 1.0));
        return push2(b_.div(a.id, den), a, other, true);
      }
      case 4: return push2(b_.op(Op::Max, {a.id, other.id}), a, other, true);
      default: return push2(b_.op(Op::Min, {a.id, other.id}), a, other, true);
    }
  }

  void movement(const Val& a, const std::vector<int64_t>& s) {
    const int rank = int(s.size());
    if (rank == 0) return unary(a);
    switch (c_.pick(0, 5)) {
      case 0: {
        std::vector<int64_t> perm(static_cast<size_t>(rank));
        std::iota(perm.begin(), perm.end(), 0);
        for (int i = rank - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[c_.byte() % size_t(i + 1)]);
        return push(b_.transpose(a.id, perm), a, true);
      }
      case 1: {  // flatten, or split the first dim
        std::vector<int64_t> to = {-1};
        if (c_.coin() && s[0] % 2 == 0 && s[0] > 0) to = {2, s[0] / 2, -1};
        return push(b_.reshape(a.id, make_shape(to)), a, true);
      }
      case 2: {
        const int64_t ax = axis(rank), n = s[size_t(ax)];
        const int64_t start = n ? c_.byte() % n : 0, end = start + c_.pick(0, 3);
        std::vector<int64_t> steps = {c_.coin() ? 1 : 2};
        return push(b_.op(Op::Slice, {a.id}, {{"starts", std::vector<int64_t>{start}},
                                              {"ends", std::vector<int64_t>{end}},
                                              {"axes", std::vector<int64_t>{ax}}, {"steps", steps}}),
                    a, true);
      }
      case 3: return push(b_.op(Op::Flip, {a.id}, {{"axes", std::vector<int64_t>{axis(rank)}}}), a, true);
      case 4: {
        std::vector<int64_t> pads(size_t(2 * rank));
        for (auto& p : pads) p = c_.pick(0, 2);
        const char* modes[] = {"constant", "edge", "reflect"};
        return push(b_.op(Op::Pad, {a.id}, {{"pads", pads}, {"mode", std::string(modes[c_.byte() % 3])},
                                            {"value", 0.5}}),
                    a, true);
      }
      default: {  // gather along an axis with in-range indices (negative ones too)
        const int64_t ax = axis(rank), n = s[size_t(ax)];
        if (n == 0) return push(b_.op(Op::Flip, {a.id}, {{"axes", std::vector<int64_t>{ax}}}), a, true);
        std::vector<int64_t> idx(size_t(c_.pick(0, 4)));
        for (auto& i : idx) i = int64_t(c_.byte() % (2 * n)) - n;
        ValueId ids = b_.constant(Array::from_vector(DType::I64, {int64_t(idx.size())}, idx));
        return push(b_.op(Op::Gather, {a.id, ids}, {{"axis", ax}}), a, true);
      }
    }
  }

  // A matmul of `a` (rank >= 1) with a fresh weight, and often a bias and an activation after it
  // (what fuse-matmul-bias-act matches), or a residual add.
  void contraction(const Val& a, const std::vector<int64_t>& s) {
    if (s.empty()) return unary(a);
    const int64_t k = s.back(), n = c_.pick(1, 5);
    Val w = add_input({k, n});
    ValueId y = b_.matmul(a.id, w.id);
    if (c_.coin()) y = b_.add(y, add_input({n}).id);
    if (c_.coin()) y = c_.coin() ? b_.relu(y) : b_.sigmoid(y);
    push2(y, a, w, false);
    vals_.back().reassoc = true;
  }

  // conv2d on a fresh NCHW input (or `a` when it is rank 4), often with bias and relu after it.
  void conv(const Val& a, const std::vector<int64_t>& s) {
    Val x = s.size() == 4 ? a : add_input({c_.pick(1, 2), c_.pick(1, 4), c_.pick(1, 6), c_.pick(1, 6)});
    const std::vector<int64_t> xs = shape_of(x.id);
    const int64_t c = xs[1], groups = c > 1 && c % 2 == 0 && c_.coin() ? 2 : 1;
    const int64_t o = groups * c_.pick(1, 2), kh = c_.pick(1, 3), kw = c_.pick(1, 3);
    Val w = add_input({o, c / groups, kh, kw});
    std::vector<int64_t> stride = {c_.pick(1, 2), c_.pick(1, 2)}, dilation = {c_.pick(1, 2), 1};
    std::vector<int64_t> pad = {c_.pick(0, 1), c_.pick(0, 1), c_.pick(0, 1), c_.pick(0, 1)};
    ValueId y = b_.op(Op::Conv2d, {x.id, w.id},
                      {{"stride", stride}, {"pad", pad}, {"dilation", dilation}, {"groups", groups}});
    if (c_.coin()) y = b_.add(y, add_input({o, 1, 1}).id);
    if (c_.coin()) y = b_.relu(y);
    push2(y, x, w, false);
    vals_.back().reassoc = true;
  }

  void pool(const Val& a, const std::vector<int64_t>& s) {
    if (s.size() != 4) return movement(a, s);
    const std::vector<int64_t> kernel = {c_.pick(1, 2), c_.pick(1, 2)};
    switch (c_.pick(0, 3)) {
      case 0: return push(b_.op(Op::MaxPool2d, {a.id}, {{"kernel", kernel}, {"ceil_mode", c_.coin()}}), a, true);
      case 1: return push(b_.op(Op::AvgPool2d, {a.id}, {{"kernel", kernel}}), a, false, true);
      case 2: return push(b_.op(Op::GlobalAvgPool, {a.id}), a, false, true);
      default: {
        const std::vector<int64_t> sizes = {s[0], s[1], c_.pick(1, 7), c_.pick(1, 7)};
        const bool linear = c_.coin();
        return push(b_.op(Op::Resize, {a.id}, {{"sizes", make_shape(sizes)},
                                               {"mode", std::string(linear ? "linear" : "nearest")}}),
                    a, !linear, linear);
      }
    }
  }

  Choices& c_;
  GraphBuilder b_;
  std::vector<int64_t> base_;
  std::vector<Val> vals_;
  std::vector<std::vector<int64_t>> input_shapes_;

 public:
  // Output k's value (graph outputs are the last value and maybe one other: see make()).
  std::vector<Val> output_vals() const { return vals_; }
};

// Random non-zero values in ±[0.25, 2) from a seed (a small LCG: reproducible everywhere).
Array random_input(const std::vector<int64_t>& shape, uint64_t seed) {
  Array a(DType::F32, shape);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const float u = float(seed >> 40) / float(1 << 24);
    p[i] = (0.25f + 1.75f * u) * ((seed >> 33) & 1 ? 1.f : -1.f);
  }
  return a;
}

// |got - want| <= atol + rtol * |want| for every element, NaN equal to NaN (docs/reliability.md).
bool close(const Array& got, const Array& want, double rtol, double atol, std::string* why) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    *why = "type " + got.type_string() + " vs reference " + want.type_string();
    return false;
  }
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.get_f64(i), w = want.get_f64(i);
    if (std::isnan(g) && std::isnan(w)) continue;
    if (g == w || std::abs(g - w) <= atol + rtol * std::abs(w)) continue;
    *why = "element " + std::to_string(i) + ": " + std::to_string(g) + " vs reference " + std::to_string(w);
    return false;
  }
  return true;
}

FusionOptions random_options(Choices& c, FusionTarget target) {
  FusionOptions o = FusionOptions::for_target(target, EnvLookup([](std::string_view) { return std::nullopt; }));
  const uint8_t bits = c.byte(), more = c.byte();
  o.skip_fusion = bits % 8 == 0;
  o.unfuse_elementwise_regions = bits & 2;
  o.keep_elementwise_regions = bits & 4;
  o.fk_fusion = !(bits & 8);
  o.fuse_region_prologue = !(bits & 16);
  o.fuse_batch_preprocess = !(bits & 32);
  o.native_fk_regions = bits & 64;
  o.disable_conv_bias_act_fusion = bits & 128;
  o.no_io_peaks_output = more & 1;
  o.decompose_fusion_regions = more & 2;
  if (more & 4) o.fusion_limits = FusionLimits{size_t(1 + (more >> 3) % 8), size_t(1 + (more >> 6))};
  return o;
}

Expected<std::vector<Array>> run(const Graph& g, const CompileOptions& o, const std::vector<Array>& in) {
  FUSEBOX_ASSIGN_OR_RETURN(Executable exe, Session(0).compile(g, o));
  return exe.run(in);
}

void check_graph(const uint8_t* data, size_t size) {
  Choices c(data, size);
  GraphGen gen(c);
  Graph g;
  std::vector<std::vector<int64_t>> shapes;
  if (!gen.make(&g, &shapes)) return;
  const auto target = FusionTarget(c.byte() % kNumFusionTargets);
  const FusionOptions options = random_options(c, target);
  const cpu::Codegen codegens[] = {cpu::Codegen::Auto, cpu::Codegen::Interpreter, cpu::Codegen::Jit};
  const cpu::Codegen codegen = codegens[c.byte() % 3];
  std::vector<Array> in;
  for (size_t k = 0; k < shapes.size(); ++k) in.push_back(random_input(shapes[k], 1 + k + 977 * size));

  CompileOptions ref;
  ref.fuse = false;
  ref.backend = "reference";
  Expected<std::vector<Array>> want = run(g, ref, in);
  // A graph the reference cannot run (a reduction of max over nothing) proves nothing here.
  if (!want) return;

  // Fuse for the target, then run that graph as it is on the cpu backend.
  Expected<Graph> fused = Fuse(target, claim_table_of(target)).options(options).run(g);
  FUSEBOX_CHECK(fused) << "fusion failed: " << fused.status().to_string() << "\n" << print_graph(g);
  const Status verified = verify(*fused);
  FUSEBOX_CHECK(verified.is_ok()) << "fused graph does not verify: " << verified.to_string() << "\n"
                                  << print_graph(g);
  CompileOptions cpu;
  cpu.fuse = target == FusionTarget::Cpu;
  cpu.fusion = options;
  cpu.verify_each_pass = true;
  cpu.cpu.codegen = codegen;
  Expected<std::vector<Array>> got = run(cpu.fuse ? g : *fused, cpu, in);
  FUSEBOX_CHECK(got) << "fused run failed: " << got.status().to_string() << "\n"
                     << print_graph(g) << "\nfused for " << target_name(target) << ":\n" << print_graph(*fused);
  FUSEBOX_CHECK(got->size() == want->size());

  // Tolerances (docs/reliability.md): element-wise chains 1e-5 relative; a reduction, norm or
  // contraction above the output may sum in another order: 1e-4 relative; both with an absolute
  // floor scaled by the output's largest magnitude (cancellation after a rounding).
  const std::vector<Val> vals = gen.output_vals();
  for (size_t k = 0; k < want->size(); ++k) {
    const Array& w = (*want)[k];
    bool reassoc = false;
    for (const Val& v : vals)
      if (v.id == g.outputs()[k]) reassoc = v.reassoc;
    double scale = 1;
    for (int64_t i = 0; i < w.numel(); ++i)
      if (std::isfinite(w.get_f64(i))) scale = std::max(scale, std::abs(w.get_f64(i)));
    const double rtol = reassoc ? 1e-4 : 1e-5, atol = (reassoc ? 1e-4 : 1e-6) * scale;
    std::string why;
    FUSEBOX_CHECK(close((*got)[k], w, rtol, atol, &why))
        << "output " << k << " differs from the reference: " << why << "\n" << print_graph(g)
        << "\nfused for " << target_name(target) << " (" << to_string(options) << ", codegen "
        << codegen_name(codegen) << "):\n" << print_graph(*fused);
  }
}

}  // namespace
}  // namespace fusebox

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 512) return 0;  // a graph needs a few dozen choices
  fusebox::check_graph(data, size);
  return 0;
}
