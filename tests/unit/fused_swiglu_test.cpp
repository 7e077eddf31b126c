// fused_swiglu (ir/fused_swiglu_op.h), the fuse-swiglu pass and the CPU kernel, checked by
// behaviour:
//
//   1. at random shapes (batch dims, M = 1, odd K, halves of 1 to 33), the halves form with and
//      without a bias and with the gate in either half, and the two-matmul form with constant
//      weights, compile with the CPU pipeline to exactly one fused_swiglu whose results equal
//      the unfused graph run op by op on the reference backend;
//   2. the reference kernel equals silu(gate) * up computed here by naive loops in double, the
//      gate taken from the half gate_first names (spec defect 7), on poisoned outputs;
//   3. unfusing a gate_first = false node gives silu the second half;
//   4. the CPU kernel (oneDNN matmuls + one region pass, generated code and the interpreter) on
//      poisoned outputs, with the weights a constant (split once) and an input (split per run).
//
// Inputs are random in [-2, 2), never all zeros. Tolerance: 1e-5 relative to max(1,
// max|expected|) per output: oneDNN accumulates the matmul in f32 in its own order (the
// reference in double), and the region's sigmoid is an approximation within 4e-7 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/onednn/onednn_kernels.h"
#include "backends/cpu/reference/reference.h"
#include "ir/fused_ops.h"
#include "ir/fused_swiglu_op.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::close_to_scale;
using testing::count_op;
using testing::random_array;
using I64s = std::vector<int64_t>;

std::string shape_text(const I64s& dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : ",") + std::to_string(d);
  return "f32[" + s + "]";
}

// silu(gate) * up over the halves of x·w (+ b), in double, by naive loops. x [..., m, k] with
// batch dims flattened into rows, w [k, 2n], b [2n] or empty.
std::vector<double> naive_swiglu(const Array& x, const Array& w, const Array* b, bool gate_first) {
  const int64_t k = w.shape()[0], two_n = w.shape()[1], n = two_n / 2, rows = x.numel() / k;
  std::vector<double> y(static_cast<size_t>(rows * n));
  std::vector<double> h(static_cast<size_t>(two_n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < two_n; ++j) {
      double acc = b ? b->get_f64(j) : 0.0;
      for (int64_t i = 0; i < k; ++i) acc += x.get_f64(r * k + i) * w.get_f64(i * two_n + j);
      h[static_cast<size_t>(j)] = acc;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double g = h[static_cast<size_t>(gate_first ? i : n + i)],
                   u = h[static_cast<size_t>(gate_first ? n + i : i)];
      y[static_cast<size_t>(r * n + i)] = g / (1 + std::exp(-g)) * u;
    }
  }
  return y;
}

::testing::AssertionResult close_to(const Array& got, const std::vector<double>& want) {
  if (got.numel() != static_cast<int64_t>(want.size()))
    return ::testing::AssertionFailure() << "size " << got.numel();
  double scale = 1;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(got.get_f64(static_cast<int64_t>(i)) - want[i]);
    if (!(d <= 1e-5 * scale))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got.get_f64(int64_t(i)) << " vs " << want[i];
  }
  return ::testing::AssertionSuccess();
}

Expected<std::vector<Array>> run(const Graph& g, const NamedArrays& in, bool fused) {
  CompileOptions o;
  o.fuse = fused;
  o.verify_each_pass = true;
  if (!fused) o.backend = "reference";
  FUSEBOX_ASSIGN_OR_RETURN(Executable exe, Session().compile(g, o));
  if (fused) EXPECT_EQ(count_op(exe.graph(), Op::FusedSwiglu), 1u) << print_graph(exe.graph());
  return exe.run(in);
}

void expect_fused_equals_reference(const std::string& text, const NamedArrays& in) {
  SCOPED_TRACE(text);
  Expected<Graph> g = parse_graph(text);
  ASSERT_TRUE(g) << g.status().to_string();
  Expected<std::vector<Array>> got = run(*g, in, true), want = run(*g, in, false);
  ASSERT_TRUE(got) << got.status().to_string();
  ASSERT_TRUE(want) << want.status().to_string();
  EXPECT_TRUE(close_to_scale((*got)[0], (*want)[0]));
}

TEST(FusedSwiglu, HalvesFormEqualsTheReferenceAtRandomShapes) {
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int64_t> size(1, 33);
  for (int trial = 0; trial < 8; ++trial) {
    const bool gate_first = trial % 2 == 0, bias = trial % 4 < 2;
    const int64_t batch = trial % 3 == 0 ? 3 : 1, m = trial == 1 ? 1 : size(rng), k = size(rng),
                  n = size(rng);
    const I64s xd = batch > 1 ? I64s{batch, m, k} : I64s{m, k},
               yd = batch > 1 ? I64s{batch, m, n} : I64s{m, n};
    I64s hd = yd;
    hd.back() = 2 * n;
    const std::string h = shape_text(hd), y = shape_text(yd), last = std::to_string(hd.size() - 1);
    const std::string src = bias ? "%1" : "%0";  // what the slices read
    std::string text = "func @f(%x: " + shape_text(xd) + ", %w: " + shape_text({k, 2 * n}) +
                       (bias ? ", %b: " + shape_text({2 * n}) : "") + ") -> " + y + " {\n";
    text += "  %0 = matmul %x, %w : " + h + "\n";
    if (bias) text += "  %1 = add %0, %b : " + h + "\n";
    text += "  %2 = slice " + src + " {starts = [0], ends = [" + std::to_string(n) + "], axes = [" + last +
            "]} : " + y + "\n";
    text += "  %3 = slice " + src + " {starts = [" + std::to_string(n) + "], ends = [" +
            std::to_string(2 * n) + "], axes = [-1]} : " + y + "\n";
    text += std::string("  %4 = silu ") + (gate_first ? "%2" : "%3") + " : " + y + "\n";
    text +=
        std::string("  %5 = mul ") + (gate_first ? "%3, %4" : "%4, %2") + " : " + y + "\n  return %5\n}\n";
    NamedArrays in{{"x", random_array(DType::F32, xd, 10 + trial)},
                   {"w", random_array(DType::F32, {k, 2 * n}, 20 + trial)}};
    if (bias) in.emplace("b", random_array(DType::F32, {2 * n}, 30 + trial));
    expect_fused_equals_reference(text, in);
  }
}

TEST(FusedSwiglu, TwoMatmulsWithConstantWeightsMergeAndEqualTheReference) {
  for (int64_t n : {1, 7, 64}) {
    const int64_t k = 2 * n + 3, m = 5;
    auto constant = [](const std::string& name, const Array& a) {
      std::string values;
      for (int64_t i = 0; i < a.numel(); ++i) values += (i ? ", " : "") + std::to_string(a.get_f64(i));
      return "  %" + name + " = constant {value = dense<" + shape_text(a.shape()) + ": [" + values +
             "]>} : " + shape_text(a.shape()) + "\n";
    };
    const std::string h = shape_text({m, n});
    std::string text = "func @f(%x: " + shape_text({m, k}) + ") -> " + h + " {\n";
    text += constant("wg", random_array(DType::F32, {k, n}, 1)) +
            constant("wu", random_array(DType::F32, {k, n}, 2));
    text += "  %0 = matmul %x, %wg : " + h + "\n  %1 = matmul %x, %wu : " + h + "\n";
    text += "  %2 = silu %0 : " + h + "\n  %3 = mul %1, %2 : " + h + "\n  return %3\n}\n";
    expect_fused_equals_reference(text, {{"x", random_array(DType::F32, {m, k}, 3)}});
  }
}

// Defect 7: the reference kernel (and so the op's definition) takes the gate from the half
// gate_first names; checked against loops written here, on poisoned outputs.
TEST(FusedSwiglu, ReferenceTakesTheGateFromTheNamedHalf) {
  const Array x = random_array(DType::F32, {2, 3, 5}, 1), w = random_array(DType::F32, {5, 8}, 2);
  const Array b = random_array(DType::F32, {8}, 3);
  for (bool gate_first : {true, false}) {
    std::vector<Array> got =
        testing::run_reference_poisoned(Op::FusedSwiglu, {x, w, b}, {{"gate_first", gate_first}});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (I64s{2, 3, 4}));
    EXPECT_TRUE(close_to(got[0], naive_swiglu(x, w, &b, gate_first))) << "gate_first " << gate_first;
    // Swapping the halves is another function: the result must not match the other order.
    EXPECT_FALSE(close_to(got[0], naive_swiglu(x, w, &b, !gate_first)));
  }
}

// Defect 7 again, structurally: unfusing gate_first = false gives silu the slice [n, 2n).
TEST(FusedSwiglu, UnfuseHonoursWhichHalfIsTheGate) {
  Expected<Graph> g = parse_graph(R"(
func @f(%x: f32[N,8], %w: f32[8,6]) -> f32[N,3] {
  %0 = fused_swiglu %x, %w {gate_first = false} : f32[N,3]
  return %0
})");
  ASSERT_TRUE(g) << g.status().to_string();
  EXPECT_EQ(unfuse_contractions(*g), 1u);
  const Node* silu = nullptr;
  for (const Node& n : g->nodes())
    if (n.op == Op::Silu) silu = &n;
  ASSERT_NE(silu, nullptr) << print_graph(*g);
  const Node* gate = nullptr;
  for (const Node& n : g->nodes())
    if (n.outputs[0] == silu->inputs[0]) gate = &n;
  ASSERT_NE(gate, nullptr);
  ASSERT_EQ(gate->op, Op::Slice) << print_graph(*g);
  EXPECT_EQ(gate->attr_i64s("starts"), I64s{3});
  EXPECT_EQ(gate->attr_i64s("ends"), I64s{6});
  EXPECT_EQ(slice_half(*gate, TensorType{DType::F32, make_shape({4, 6})}), 1);
}

// The CPU kernel directly, outputs poisoned: weights constant (split at compile time) and an input
// (split per run), with and without a bias, generated code and the interpreter.
TEST(FusedSwiglu, CpuKernelEqualsLoopsOnPoisonedOutputs) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "fusebox was built without oneDNN (libdnnl-dev)";
  const int64_t m = 37, k = 24, n = 45;
  const Array x = random_array(DType::F32, {m, k}, 4), w = random_array(DType::F32, {k, 2 * n}, 5);
  const Array b = random_array(DType::F32, {2 * n}, 6);
  for (cpu::Codegen codegen : {cpu::Codegen::Jit, cpu::Codegen::Interpreter}) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool constant_w = variant & 1, bias = variant & 2, gate_first = variant != 1;
      SCOPED_TRACE("variant " + std::to_string(variant) + " codegen " + std::to_string(int(codegen)));
      Graph g("f");
      std::vector<ValueId> in{g.add_input("x", TensorType{DType::F32, make_shape({m, k})})};
      const TensorType wt{DType::F32, make_shape({k, 2 * n})};
      in.push_back(constant_w
                       ? g.add_node(Op::Constant, {}, {wt}, {{"value", std::make_shared<const Array>(w)}})[0]
                       : g.add_input("w", wt));
      if (bias) in.push_back(g.add_input("b", TensorType{DType::F32, make_shape({2 * n})}));
      g.add_output(g.add_node(Op::FusedSwiglu, in, {TensorType{DType::F32, make_shape({m, n})}},
                              {{"gate_first", gate_first}})[0]);
      CpuBackendOptions options;
      options.codegen = codegen;
      std::shared_ptr<Backend> cpu = cpu::make_cpu_backend(options);
      Expected<std::shared_ptr<const Kernel>> kernel = cpu->compile(g, g.nodes().back());
      ASSERT_TRUE(kernel) << kernel.status().to_string();
      EXPECT_EQ((*kernel)->kind(), "onednn");
      std::vector<BufferView> views{host_view(x), host_view(w)};
      if (bias) views.push_back(host_view(b));
      for (uint8_t poison : testing::kPoisonBytes) {
        Array y(DType::F32, {m, n});
        y.fill_bytes(poison);
        const BufferView out = host_view(y);
        Status s = (*kernel)->run(cpu->stream(), views, std::span<const BufferView>(&out, 1));
        ASSERT_TRUE(s.is_ok()) << s.to_string();
        EXPECT_TRUE(close_to(y, naive_swiglu(x, w, bias ? &b : nullptr, gate_first)))
            << "poison " << int(poison);
      }
    }
  }
}

}  // namespace
}  // namespace fusebox
