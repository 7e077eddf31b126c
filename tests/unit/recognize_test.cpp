// canonicalize's recognition of decomposed forms (recognize_activations, recognize_norms,
// recognize_softmax), checked by behaviour: each form as exporters write it is compiled with
// the CPU pipeline; the fused graph must hold the recognised op and no trace of the primitives
// it replaced, and its results must equal the unrecognised graph run op by op on the reference
// backend. Inputs are random, never zeros; sizes are odd and include T = 1.
//
// Tolerance: 1e-5 relative to max(1, max|expected|) per output. The primitives round to f32
// after every step while the recognised op computes in double and rounds once; the constants
// exporters write (√2, √(2/π), 1/6 in f32) differ from the exact ones by < 1e-7 relative.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/parser.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::random_array;

using testing::close_to_scale;
using testing::count_op;

struct Form {
  const char* name;
  Op recognised;
  Op gone;  // a primitive the recognised op replaces
  const char* text;
};
void PrintTo(const Form& f, std::ostream* os) { *os << f.name; }

// The forms of tests/lit/fusion/canonicalize-recognize.fbir, over symbols so that one graph
// runs at several sizes.
const Form kForms[] = {
    {"layer_norm_affine", Op::LayerNorm, Op::ReduceMean, R"(
func @f(%x: f32[N,T,C], %gamma: f32[C], %beta: f32[C]) -> f32[N,T,C] {
  %two = constant {value = dense<f32[]: [2.0]>} : f32[]
  %eps = constant {value = dense<f32[]: [1e-05]>} : f32[]
  %0 = reduce_mean %x {axes = [-1], keepdims = true} : f32[N,T,1]
  %1 = sub %x, %0 : f32[N,T,C]
  %2 = pow %1, %two : f32[N,T,C]
  %3 = reduce_mean %2 {axes = [-1], keepdims = true} : f32[N,T,1]
  %4 = add %3, %eps : f32[N,T,1]
  %5 = sqrt %4 : f32[N,T,1]
  %6 = div %1, %5 : f32[N,T,C]
  %7 = mul %6, %gamma : f32[N,T,C]
  %8 = add %7, %beta : f32[N,T,C]
  return %8
})"},
    {"layer_norm_trailing", Op::LayerNorm, Op::ReduceMean, R"(
func @f(%x: f32[N,T,C], %gamma: f32[C]) -> f32[N,T,C] {
  %eps = constant {value = dense<f32[]: [0.001]>} : f32[]
  %0 = reduce_mean %x {axes = [1, 2], keepdims = true} : f32[N,1,1]
  %1 = sub %x, %0 : f32[N,T,C]
  %2 = mul %1, %1 : f32[N,T,C]
  %3 = reduce_mean %2 {axes = [-2, -1], keepdims = true} : f32[N,1,1]
  %4 = add %eps, %3 : f32[N,1,1]
  %5 = rsqrt %4 : f32[N,1,1]
  %6 = mul %5, %1 : f32[N,T,C]
  %7 = mul %gamma, %6 : f32[N,T,C]
  %8 = add %7, %gamma : f32[N,T,C]
  return %8
})"},
    {"rms_norm", Op::RmsNorm, Op::ReduceMean, R"(
func @f(%x: f32[N,T,C], %w: f32[C]) -> f32[N,T,C] {
  %two = constant {value = dense<f32[]: [2.0]>} : f32[]
  %eps = constant {value = dense<f32[]: [1e-06]>} : f32[]
  %0 = pow %x, %two : f32[N,T,C]
  %1 = reduce_mean %0 {axes = [-1], keepdims = true} : f32[N,T,1]
  %2 = add %1, %eps : f32[N,T,1]
  %3 = rsqrt %2 : f32[N,T,1]
  %4 = mul %x, %3 : f32[N,T,C]
  %5 = mul %w, %4 : f32[N,T,C]
  return %5
})"},
    {"rms_norm_div", Op::RmsNorm, Op::ReduceMean, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %eps = constant {value = dense<f32[]: [1e-06]>} : f32[]
  %0 = mul %x, %x : f32[N,T,C]
  %1 = reduce_mean %0 {axes = [2], keepdims = true} : f32[N,T,1]
  %2 = add %1, %eps : f32[N,T,1]
  %3 = sqrt %2 : f32[N,T,1]
  %4 = div %x, %3 : f32[N,T,C]
  return %4
})"},
    {"gelu_erf", Op::Gelu, Op::Erf, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %sqrt2 = constant {value = dense<f32[]: [1.4142135381698608]>} : f32[]
  %one = constant {value = dense<f32[]: [1.0]>} : f32[]
  %half = constant {value = dense<f32[]: [0.5]>} : f32[]
  %0 = div %x, %sqrt2 : f32[N,T,C]
  %1 = erf %0 : f32[N,T,C]
  %2 = add %1, %one : f32[N,T,C]
  %3 = mul %x, %2 : f32[N,T,C]
  %4 = mul %3, %half : f32[N,T,C]
  return %4
})"},
    {"gelu_erf_mul", Op::Gelu, Op::Erf, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %rsqrt2 = constant {value = dense<f32[]: [0.70710678]>} : f32[]
  %one = constant {value = dense<f32[]: [1.0]>} : f32[]
  %half = constant {value = dense<f32[]: [0.5]>} : f32[]
  %0 = mul %x, %half : f32[N,T,C]
  %1 = mul %rsqrt2, %x : f32[N,T,C]
  %2 = erf %1 : f32[N,T,C]
  %3 = add %one, %2 : f32[N,T,C]
  %4 = mul %0, %3 : f32[N,T,C]
  return %4
})"},
    {"gelu_tanh", Op::Gelu, Op::Tanh, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %kappa = constant {value = dense<f32[]: [0.044715]>} : f32[]
  %beta = constant {value = dense<f32[]: [0.7978845608028654]>} : f32[]
  %one = constant {value = dense<f32[]: [1.0]>} : f32[]
  %half = constant {value = dense<f32[]: [0.5]>} : f32[]
  %0 = mul %x, %x : f32[N,T,C]
  %1 = mul %x, %0 : f32[N,T,C]
  %2 = mul %kappa, %1 : f32[N,T,C]
  %3 = add %x, %2 : f32[N,T,C]
  %4 = mul %beta, %3 : f32[N,T,C]
  %5 = tanh %4 : f32[N,T,C]
  %6 = add %one, %5 : f32[N,T,C]
  %7 = mul %x, %6 : f32[N,T,C]
  %8 = mul %half, %7 : f32[N,T,C]
  return %8
})"},
    {"gelu_tanh_pow", Op::Gelu, Op::Tanh, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %three = constant {value = dense<f32[]: [3.0]>} : f32[]
  %kappa = constant {value = dense<f32[]: [0.044715]>} : f32[]
  %beta = constant {value = dense<f32[]: [0.7978846]>} : f32[]
  %one = constant {value = dense<f32[]: [1.0]>} : f32[]
  %half = constant {value = dense<f32[]: [0.5]>} : f32[]
  %0 = pow %x, %three : f32[N,T,C]
  %1 = mul %0, %kappa : f32[N,T,C]
  %2 = add %1, %x : f32[N,T,C]
  %3 = mul %2, %beta : f32[N,T,C]
  %4 = tanh %3 : f32[N,T,C]
  %5 = add %4, %one : f32[N,T,C]
  %6 = mul %half, %x : f32[N,T,C]
  %7 = mul %6, %5 : f32[N,T,C]
  return %7
})"},
    {"silu", Op::Silu, Op::Sigmoid, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = sigmoid %x : f32[N,T,C]
  %1 = mul %0, %x : f32[N,T,C]
  return %1
})"},
    {"hardswish", Op::HardSwish, Op::Clip, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %three = constant {value = dense<f32[]: [3.0]>} : f32[]
  %six = constant {value = dense<f32[]: [6.0]>} : f32[]
  %0 = add %x, %three : f32[N,T,C]
  %1 = clip %0 {min = 0.0, max = 6.0} : f32[N,T,C]
  %2 = mul %x, %1 : f32[N,T,C]
  %3 = div %2, %six : f32[N,T,C]
  return %3
})"},
    {"hardsigmoid_div", Op::HardSigmoid, Op::Clip, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %three = constant {value = dense<f32[]: [3.0]>} : f32[]
  %six = constant {value = dense<f32[]: [6.0]>} : f32[]
  %0 = add %x, %three : f32[N,T,C]
  %1 = clip %0 {min = 0.0, max = 6.0} : f32[N,T,C]
  %2 = div %1, %six : f32[N,T,C]
  return %2
})"},
    {"hardsigmoid_mul", Op::HardSigmoid, Op::Clip, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %three = constant {value = dense<f32[]: [3.0]>} : f32[]
  %sixth = constant {value = dense<f32[]: [0.16666667]>} : f32[]
  %0 = add %three, %x : f32[N,T,C]
  %1 = clip %0 {min = 0.0, max = 6.0} : f32[N,T,C]
  %2 = mul %1, %sixth : f32[N,T,C]
  return %2
})"},
    {"softmax", Op::Softmax, Op::ReduceSum, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = reduce_max %x {axes = [-1], keepdims = true} : f32[N,T,1]
  %1 = sub %x, %0 : f32[N,T,C]
  %2 = exp %1 : f32[N,T,C]
  %3 = reduce_sum %2 {axes = [-1], keepdims = true} : f32[N,T,1]
  %4 = div %2, %3 : f32[N,T,C]
  return %4
})"},
    {"softmax_no_max_axis1", Op::Softmax, Op::ReduceSum, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = exp %x : f32[N,T,C]
  %1 = reduce_sum %0 {axes = [1], keepdims = true} : f32[N,1,C]
  %2 = div %0, %1 : f32[N,T,C]
  return %2
})"},
    {"log_softmax", Op::LogSoftmax, Op::ReduceSum, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = reduce_max %x {axes = [2], keepdims = true} : f32[N,T,1]
  %1 = sub %x, %0 : f32[N,T,C]
  %2 = exp %1 : f32[N,T,C]
  %3 = reduce_sum %2 {axes = [2], keepdims = true} : f32[N,T,1]
  %4 = log %3 : f32[N,T,1]
  %5 = sub %1, %4 : f32[N,T,C]
  return %5
})"},
    {"log_softmax_no_max", Op::LogSoftmax, Op::ReduceSum, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = exp %x : f32[N,T,C]
  %1 = reduce_sum %0 {axes = [-1], keepdims = true} : f32[N,T,1]
  %2 = log %1 : f32[N,T,1]
  %3 = sub %x, %2 : f32[N,T,C]
  return %3
})"},
    {"gelu_div2", Op::Gelu, Op::Erf, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %rsqrt2 = constant {value = dense<f32[]: [0.70710677]>} : f32[]
  %one = constant {value = dense<f32[]: [1.0]>} : f32[]
  %two = constant {value = dense<f32[]: [2.0]>} : f32[]
  %0 = mul %x, %rsqrt2 : f32[N,T,C]
  %1 = erf %0 : f32[N,T,C]
  %2 = add %one, %1 : f32[N,T,C]
  %3 = mul %2, %x : f32[N,T,C]
  %4 = div %3, %two : f32[N,T,C]
  return %4
})"},
    {"gelu_tanh_half_x", Op::Gelu, Op::Tanh, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %kappa = constant {value = dense<f32[]: [0.044715]>} : f32[]
  %beta = constant {value = dense<f32[]: [0.7978845608028654]>} : f32[]
  %one = constant {value = dense<f32[]: [1.0]>} : f32[]
  %two = constant {value = dense<f32[]: [2.0]>} : f32[]
  %0 = mul %x, %x : f32[N,T,C]
  %1 = mul %x, %0 : f32[N,T,C]
  %2 = mul %kappa, %1 : f32[N,T,C]
  %3 = add %x, %2 : f32[N,T,C]
  %4 = mul %beta, %3 : f32[N,T,C]
  %5 = tanh %4 : f32[N,T,C]
  %6 = add %one, %5 : f32[N,T,C]
  %7 = div %x, %two : f32[N,T,C]
  %8 = mul %7, %6 : f32[N,T,C]
  return %8
})"},
    {"hardswish_of_hardsigmoid", Op::HardSwish, Op::HardSigmoid, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = hardsigmoid %x {alpha = 0.1666666716337204, beta = 0.5} : f32[N,T,C]
  %1 = mul %0, %x : f32[N,T,C]
  return %1
})"},
    {"hardswish_clip_inner_div", Op::HardSwish, Op::Clip, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %three = constant {value = dense<f32[]: [3.0]>} : f32[]
  %six = constant {value = dense<f32[]: [6.0]>} : f32[]
  %0 = add %three, %x : f32[N,T,C]
  %1 = clip %0 {min = 0.0, max = 6.0} : f32[N,T,C]
  %2 = div %1, %six : f32[N,T,C]
  %3 = mul %x, %2 : f32[N,T,C]
  return %3
})"},
    {"log_of_softmax_op", Op::LogSoftmax, Op::Softmax, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = softmax %x {axis = -1} : f32[N,T,C]
  %1 = log %0 : f32[N,T,C]
  return %1
})"},
    {"log_of_softmax_primitives", Op::LogSoftmax, Op::ReduceSum, R"(
func @f(%x: f32[N,T,C]) -> f32[N,T,C] {
  %0 = reduce_max %x {axes = [1], keepdims = true} : f32[N,1,C]
  %1 = sub %x, %0 : f32[N,T,C]
  %2 = exp %1 : f32[N,T,C]
  %3 = reduce_sum %2 {axes = [1], keepdims = true} : f32[N,1,C]
  %4 = div %2, %3 : f32[N,T,C]
  %5 = log %4 : f32[N,T,C]
  return %5
})"},
    {"layer_norm_bias_only", Op::LayerNorm, Op::ReduceMean, R"(
func @f(%x: f32[N,T,C], %beta: f32[C]) -> f32[N,T,C] {
  %two = constant {value = dense<f32[]: [2.0]>} : f32[]
  %eps = constant {value = dense<f32[]: [1e-05]>} : f32[]
  %0 = reduce_mean %x {axes = [-1], keepdims = true} : f32[N,T,1]
  %1 = sub %x, %0 : f32[N,T,C]
  %2 = pow %1, %two : f32[N,T,C]
  %3 = reduce_mean %2 {axes = [-1], keepdims = true} : f32[N,T,1]
  %4 = add %3, %eps : f32[N,T,1]
  %5 = sqrt %4 : f32[N,T,1]
  %6 = div %1, %5 : f32[N,T,C]
  %7 = add %6, %beta : f32[N,T,C]
  return %7
})"},
};

// Random inputs for `g` with N, T, C = the given sizes (every input's dims are N, T or C).
NamedArrays random_inputs(const Graph& g, int64_t n, int64_t t, int64_t c, std::mt19937_64& rng) {
  NamedArrays in;
  for (ValueId v : g.inputs()) {
    std::vector<int64_t> dims;
    for (const Dim& d : g.type(v).shape) {
      const std::string s = d.to_string();
      dims.push_back(s == "N" ? n : s == "T" ? t : c);
    }
    in.emplace(g.value(v).name, random_array(DType::F32, dims, rng()));
  }
  return in;
}

class RecognizeTest : public ::testing::TestWithParam<Form> {};

TEST_P(RecognizeTest, RecognisedOpEqualsThePrimitivesOnTheReference) {
  const Form& form = GetParam();
  Expected<Graph> g = parse_graph(form.text);
  ASSERT_TRUE(g) << g.status().to_string();
  CompileOptions fused;
  fused.verify_each_pass = true;
  Expected<Executable> exe = Session().compile(*g, fused);
  ASSERT_TRUE(exe) << exe.status().to_string();
  EXPECT_EQ(count_op(exe->graph(), form.recognised), 1u) << print_graph(exe->graph());
  EXPECT_EQ(count_op(exe->graph(), form.gone), 0u) << print_graph(exe->graph());
  CompileOptions unfused;
  unfused.fuse = false;
  unfused.backend = "reference";
  Expected<Executable> ref = Session().compile(*g, unfused);
  ASSERT_TRUE(ref) << ref.status().to_string();
  ASSERT_EQ(count_op(ref->graph(), form.recognised), 0u) << "the reference must run the primitives";
  std::mt19937_64 rng(17);
  const int64_t sizes[][3] = {{2, 1, 33}, {3, 5, 512}, {1, 7, 3}};
  for (const auto& s : sizes) {
    NamedArrays in = random_inputs(*g, s[0], s[1], s[2], rng);
    Expected<std::vector<Array>> got = exe->run(in);
    Expected<std::vector<Array>> want = ref->run(in);
    ASSERT_TRUE(got) << got.status().to_string();
    ASSERT_TRUE(want) << want.status().to_string();
    EXPECT_TRUE(close_to_scale((*got)[0], (*want)[0])) << "N, T, C = " << s[0] << ", " << s[1] << ", " << s[2];
  }
}

INSTANTIATE_TEST_SUITE_P(Forms, RecognizeTest, ::testing::ValuesIn(kForms),
                         [](const ::testing::TestParamInfo<Form>& info) { return std::string(info.param.name); });

// The choice recognize_softmax.h states: softmax written without the max subtraction overflows
// where exp(x) does, the recognised op does not. With x in [90, 100) the primitives give NaN
// (inf / inf); the recognised graph gives a distribution.
TEST(Recognize, SoftmaxWithoutMaxNoLongerOverflows) {
  Expected<Graph> g = parse_graph(R"(
func @f(%x: f32[3,9]) -> f32[3,9] {
  %0 = exp %x : f32[3,9]
  %1 = reduce_sum %0 {axes = [-1], keepdims = true} : f32[3,1]
  %2 = div %0, %1 : f32[3,9]
  return %2
})");
  ASSERT_TRUE(g) << g.status().to_string();
  NamedArrays in{{"x", random_array(DType::F32, {3, 9}, 5, 90.0, 100.0)}};
  CompileOptions unfused;
  unfused.fuse = false;
  unfused.backend = "reference";
  Expected<Executable> ref = Session().compile(*g, unfused);
  Expected<Executable> exe = Session().compile(*g, CompileOptions{});
  ASSERT_TRUE(ref && exe);
  ASSERT_EQ(count_op(exe->graph(), Op::Softmax), 1u) << print_graph(exe->graph());
  Expected<std::vector<Array>> raw = ref->run(in), got = exe->run(in);
  ASSERT_TRUE(raw && got);
  for (double v : testing::to_doubles((*raw)[0])) EXPECT_TRUE(std::isnan(v));
  std::vector<double> p = testing::to_doubles((*got)[0]);
  for (size_t row = 0; row < 3; ++row) {
    double sum = 0;
    for (size_t k = 0; k < 9; ++k) {
      ASSERT_TRUE(std::isfinite(p[row * 9 + k]));
      sum += p[row * 9 + k];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

}  // namespace
}  // namespace fusebox
