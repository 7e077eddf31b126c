// Generated region code (src/backends/cpu/region_jit.*) and the tile interpreter it replaces:
//   - exp/tanh/sigmoid/silu/gelu/log/erf/sin/cos against <cmath> in double over wide ranges and
//     special values, in the AVX-512 code and in the code of hosts without it
//   - every exactly specified step (arithmetic, NaN rules, comparisons, where, saturating casts)
//     bit for bit against the reference kernels, on special values
//   - a large region (streaming stores, broadcast and repeated operands, odd length) run directly
//     on outputs poisoned before each run: generated code equals the interpreter bit for bit
//   - a long body run in stages over blocks equals the interpreter bit for bit
//   - the structural kernel cache, and compiling and running from several threads at once
//   - a region of more operands than a word has bits (a lazy chain's lifted scalars) runs
//     generated code, equal to the interpreter
//   - runs from inside an OpenMP parallel region (as the batch and prologue kernels run them)
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "backends/cpu/region_jit.h"
#include "backends/cpu/region_program.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

#define SKIP_WITHOUT_JIT() \
  if (!cpu::jit_built()) GTEST_SKIP() << "this build has no CPU code generation (llvm-14-dev not found)"

// Runs a one-node graph of `op` fused on the CPU with the given executor.
std::vector<Array> run_cpu(Op op, const std::vector<Array>& inputs, testing::BackendChoice executor, Attrs attrs = {}) {
  CompileOptions o;
  testing::use_backend(o, executor);
  Expected<std::vector<Array>> out = testing::try_run_op_with(op, inputs, std::move(attrs), o);
  EXPECT_TRUE(out) << op_info(op).keyword << ": " << out.status().to_string();
  return out ? *out : std::vector<Array>{};
}

// Arguments: a dense sweep of [-lo, hi], random values, and the special values.
Array sweep(float lo, float hi, int64_t n) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * float(i) / float(n - 1));
  Array r = testing::random_array(DType::F32, {n}, 7, lo, hi);
  for (int64_t i = 0; i < n; ++i) v.push_back(r.data<float>()[i]);
  for (float s : {0.0f, -0.0f, kInf, -kInf, kNaN, 1e-40f, -1e-40f, 1e-30f, -1e-30f, 1e-8f, -3e-5f, 88.7f, -87.3f,
                  89.0f, -88.0f, -104.0f, 9.0f, -9.0f, 9.5f, 1e30f, -1e30f, std::numeric_limits<float>::max()})
    v.push_back(s);
  return testing::array_f32({int64_t(v.size())}, v);
}

struct Transcendental {
  Op op;
  double (*exact)(double);
  Attrs attrs;
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double exp_d(double x) { return std::exp(x); }
double log_d(double x) { return std::log(x); }
double erf_d(double x) { return std::erf(x); }
double sin_d(double x) { return std::sin(x); }
double cos_d(double x) { return std::cos(x); }
double tanh_d(double x) { return std::tanh(x); }

// Relative error below 4e-7 where the exact result is a normal float; results below the normal
// range may flush to 0 (so x * f(x) may lose |x| * FLT_MIN); NaN in, NaN out; saturation like
// <cmath>. `input_scaled` adds 1e-7 |x| of absolute error: tanh-gelu's 1 + tanh(u) cancels.
void expect_accurate(const Array& got, const Array& x, double (*exact)(double), bool input_scaled,
                     const std::string& what) {
  ASSERT_EQ(got.numel(), x.numel());
  int bad = 0;
  for (int64_t i = 0; i < x.numel() && bad < 5; ++i) {
    const float in = x.data<float>()[i], out = got.data<float>()[i];
    const double want = exact(double(in));
    if (std::isnan(want)) {
      if (!std::isnan(out)) ++bad, ADD_FAILURE() << what << "(" << in << ") = " << out << ", want NaN";
      continue;
    }
    const double tiny = std::numeric_limits<float>::min() * std::max(1.0, std::fabs(double(in)));
    if (std::fabs(want) > std::numeric_limits<float>::max()) {
      if (out != float(want)) ++bad, ADD_FAILURE() << what << "(" << in << ") = " << out << ", want " << want;
      continue;
    }
    const double err = std::fabs(double(out) - want);
    if (err > 4e-7 * std::fabs(want) + tiny + (input_scaled ? 1e-7 * std::fabs(double(in)) : 0.0)) {
      ++bad;
      ADD_FAILURE() << what << "(" << in << ") = " << out << ", want " << want << " (rel err "
                    << err / std::fabs(want) << ")";
    }
  }
}

TEST(RegionCodegen, TranscendentalsAreAccurateOnBothPaths) {
  const std::vector<Transcendental> cases = {
      {Op::Exp, exp_d, {}},
      {Op::Tanh, tanh_d, {}},
      {Op::Sigmoid, sigmoid, {}},
      {Op::Silu, silu, {}},
      {Op::Gelu, gelu_tanh, {{"approximate", std::string("tanh")}}},
      {Op::Gelu, gelu_erf, {}},
      {Op::Log, log_d, {}},
      {Op::Erf, erf_d, {}},
      {Op::Sin, sin_d, {}},
      {Op::Cos, cos_d, {}},
  };
  Array x = sweep(-120.0f, 100.0f, 40000);
  Array small = sweep(-1.0f, 1.0f, 40000);
  Array positive = sweep(0.0f, 4.0f, 40000);  // log near 0 and 1, erf across its two pieces
  Array wide = sweep(-9000.0f, 9000.0f, 40000);  // sin/cos on both sides of the libm threshold
  std::vector<testing::BackendChoice> executors = {testing::kCpuInterpreter};
  if (cpu::jit_built()) executors.push_back(testing::kCpuJit);
  for (testing::BackendChoice ex : executors) {
    const std::string path = ex.codegen == cpu::Codegen::Jit ? "generated " : "interpreted ";
    for (const Transcendental& t : cases) {
      for (const Array* in : {&x, &small, &positive, &wide}) {
        std::vector<Array> out = run_cpu(t.op, {*in}, ex, t.attrs);
        ASSERT_EQ(out.size(), 1u);
        expect_accurate(out[0], *in, t.exact, t.op == Op::Gelu, path + std::string(op_info(t.op).keyword));
      }
    }
  }
}

// The generated code of hosts without AVX-512 (no vscalefps, no table lookups), on this host:
// the same accuracy, in vector code over the whole sweep rather than only in scalar tails.
TEST(RegionCodegen, TranscendentalsAreAccurateWithoutAvx512) {
  SKIP_WITHOUT_JIT();
  const std::vector<Transcendental> cases = {
      {Op::Exp, exp_d, {}}, {Op::Tanh, tanh_d, {}}, {Op::Sigmoid, sigmoid, {}}, {Op::Silu, silu, {}},
      {Op::Gelu, gelu_tanh, {{"approximate", std::string("tanh")}}}, {Op::Log, log_d, {}}, {Op::Erf, erf_d, {}},
      {Op::Sin, sin_d, {}}, {Op::Cos, cos_d, {}}};
  const std::vector<Array> sweeps = {sweep(-120.0f, 100.0f, 40000), sweep(-1.0f, 1.0f, 40000), sweep(0.0f, 4.0f, 40000)};
  for (const Transcendental& t : cases) {
    Graph body("body");
    ValueId x = body.add_input("x", TensorType{DType::F32, {}});
    body.add_output(body.add_node(t.op, {x}, {TensorType{DType::F32, {}}}, t.attrs)[0]);
    cpu::JitVariant variant;
    variant.avx512 = false;
    Expected<std::shared_ptr<const cpu::JitKernel>> kernel = cpu::jit_compile(body, variant);
    ASSERT_TRUE(kernel) << kernel.status().to_string();
    for (const Array& in : sweeps) {
      Array out(DType::F32, {in.numel()});
      std::memset(out.raw(), 0xFF, out.nbytes());
      const void* operands[] = {in.raw()};
      void* outputs[] = {out.raw()};
      (*kernel)->function()(operands, outputs, in.numel());
      expect_accurate(out, in, t.exact, t.op == Op::Gelu, "portable " + std::string(op_info(t.op).keyword));
    }
  }
}

// Values that exercise NaN propagation, signed zeros, infinities and integer wrap-around.
Array specials(DType dt, uint64_t seed, int64_t n) {
  Array a = testing::random_array(dt, {n}, seed, dt == DType::F32 || dt == DType::F64 ? -1e3 : -2e9,
                                  dt == DType::F32 || dt == DType::F64 ? 1e3 : 2e9);
  if (is_float(dt)) {
    const double s[] = {0.0, -0.0, double(kInf), -double(kInf), double(kNaN), 1e-40, 3e38, -3e38, 2.5, -2.5, 0.5};
    for (int64_t i = 0; i < n; i += 3) a.set_f64(i, s[(i / 3 + int64_t(seed)) % 11]);
  } else if (dt == DType::I32) {
    for (int64_t i = 0; i < n; i += 7) a.set_i64(i, i % 2 ? INT32_MAX : INT32_MIN);
  }
  return a;
}

TEST(RegionCodegen, ExactStepsMatchTheReferenceBitForBit) {
  SKIP_WITHOUT_JIT();
  const int64_t n = 1000;  // vectors and a scalar tail at every lane count
  for (DType dt : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    Array a = specials(dt, 1, n), b = specials(dt, 2, n);
    std::vector<Op> ops = {Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min, Op::Equal, Op::NotEqual, Op::Less,
                           Op::LessEqual, Op::Greater, Op::GreaterEqual};
    if (is_float(dt)) ops.push_back(Op::Div);
    for (Op op : ops) {
      Array want = testing::run_op1(op, {a, b});
      std::vector<Array> got = run_cpu(op, {a, b}, testing::kCpuJit);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(got[0].same_data(want)) << op_info(op).keyword << " " << dtype_name(dt);
    }
    Array c = testing::random_array(DType::Bool, {n}, 3);
    EXPECT_TRUE(run_cpu(Op::Where, {c, a, b}, testing::kCpuJit)[0].same_data(testing::run_op1(Op::Where, {c, a, b})))
        << "where " << dtype_name(dt);
    for (DType to : {DType::F32, DType::F64, DType::I32, DType::I64, DType::U8, DType::I8, DType::Bool}) {
      Attrs attrs{{"to", to}};
      Array want = testing::run_op1(Op::Cast, {a}, attrs);
      std::vector<Array> got = run_cpu(Op::Cast, {a}, testing::kCpuJit, attrs);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(got[0].same_data(want)) << "cast " << dtype_name(dt) << " -> " << dtype_name(to);
    }
  }
  // Attribute values that are not floats exactly round as the reference's C(v) does; a NaN bound
  // is no bound.
  const std::vector<std::pair<Op, Attrs>> unary = {
      {Op::Neg, {}}, {Op::Abs, {}}, {Op::Sqrt, {}}, {Op::Rsqrt, {}}, {Op::Reciprocal, {}}, {Op::Relu, {}},
      {Op::LeakyRelu, {{"alpha", 0.1}}}, {Op::Floor, {}}, {Op::Ceil, {}}, {Op::Round, {}}, {Op::Identity, {}},
      {Op::Clip, {{"min", -2.3}, {"max", 100.0}}}, {Op::Clip, {{"min", std::nan("")}, {"max", 0.7}}},
      {Op::HardSigmoid, {{"alpha", 0.2}, {"beta", 0.5}}}, {Op::HardSwish, {}}};
  for (DType dt : {DType::F32, DType::F64}) {
    Array f = specials(dt, 4, n);
    for (const auto& [op, attrs] : unary) {
      Array want = testing::run_op1(op, {f}, attrs);
      std::vector<Array> got = run_cpu(op, {f}, testing::kCpuJit, attrs);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(got[0].same_data(want)) << op_info(op).keyword << " " << dtype_name(dt);
      std::vector<Array> interpreted = run_cpu(op, {f}, testing::kCpuInterpreter, attrs);
      EXPECT_TRUE(interpreted[0].same_data(want)) << "interpreted " << op_info(op).keyword << " " << dtype_name(dt);
    }
  }
  Array p = testing::random_array(DType::Bool, {n}, 6), q = testing::random_array(DType::Bool, {n}, 7);
  EXPECT_TRUE(run_cpu(Op::Not, {p}, testing::kCpuJit)[0].same_data(testing::run_op1(Op::Not, {p})));
  EXPECT_TRUE(run_cpu(Op::And, {p, q}, testing::kCpuJit)[0].same_data(testing::run_op1(Op::And, {p, q})));
  EXPECT_TRUE(run_cpu(Op::Or, {p, q}, testing::kCpuJit)[0].same_data(testing::run_op1(Op::Or, {p, q})));
  for (DType from : {DType::U8, DType::I8}) {
    Array small = testing::random_array(from, {n}, 5, from == DType::U8 ? 0 : -128, from == DType::U8 ? 256 : 128);
    for (DType to : {DType::F32, DType::I32, DType::I64, DType::I8, DType::U8, DType::Bool}) {
      Attrs attrs{{"to", to}};
      EXPECT_TRUE(run_cpu(Op::Cast, {small}, testing::kCpuJit, attrs)[0].same_data(
          testing::run_op1(Op::Cast, {small}, attrs)))
          << "cast " << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

// A region of exact steps with a [C,1] broadcast operand, a repeated scalar and two outputs, over
// 2^22 + 13 elements (16 MiB outputs: streaming stores), run directly on poisoned outputs.
TEST(RegionCodegen, LargeRegionEqualsTheInterpreterOnPoisonedOutputs) {
  SKIP_WITHOUT_JIT();
  const int64_t rows = 1031, cols = 4069;  // 4195139 elements, rows * cols % 16 != 0
  Graph body("body");
  ValueId x = body.add_input("x", TensorType{DType::F32, {}});
  ValueId c = body.add_input("c", TensorType{DType::F32, {}});
  ValueId s = body.add_input("s", TensorType{DType::F32, {}});
  TensorType f32{DType::F32, {}};
  ValueId m = body.add_node(Op::Mul, {x, c}, {f32})[0];
  ValueId a = body.add_node(Op::Add, {m, s}, {f32})[0];
  ValueId r = body.add_node(Op::Max, {a, x}, {f32})[0];
  ValueId k = body.add_node(Op::Less, {r, c}, {TensorType{DType::Bool, {}}})[0];
  body.add_output(r);
  body.add_output(k);
  Node region{Op::ElementwiseRegion, {}, {}, {}, std::make_shared<Graph>(body), {}};
  std::vector<TensorType> types = {{DType::F32, make_shape({rows, cols})}, {DType::F32, make_shape({rows, 1})},
                                   {DType::F32, {}}};
  std::vector<Array> in = {specials(DType::F32, 9, rows * cols), testing::random_array(DType::F32, {rows, 1}, 10),
                           testing::array_f32({}, {0.75f})};
  in[0] = in[0].reshaped({rows, cols});
  std::vector<std::vector<Array>> results;
  for (cpu::Codegen codegen : {cpu::Codegen::Interpreter, cpu::Codegen::Jit}) {
    Expected<std::shared_ptr<const cpu::RegionProgram>> program = cpu::RegionProgram::compile(region, types, codegen);
    ASSERT_TRUE(program) << program.status().to_string();
    EXPECT_EQ((*program)->jit_unsupported(), "");
    for (uint8_t poison : testing::kPoisonBytes) {
      std::vector<Array> out = {Array(DType::F32, {rows, cols}), Array(DType::Bool, {rows, cols})};
      for (Array& o : out) std::memset(o.raw(), poison, o.nbytes());
      ASSERT_TRUE((*program)->run(in, out).is_ok());
      if (!results.empty()) {
        EXPECT_TRUE(out[0].same_data(results[0][0])) << "poison " << int(poison);
        EXPECT_TRUE(out[1].same_data(results[0][1])) << "poison " << int(poison);
      } else {
        results.push_back(out);
      }
    }
  }
}

// Operands that repeat along the last axis (a bias [C] over rows, [1,C], a vector over [A,B,C])
// are written out once per run and read in place from each chunk's phase (Load::Periodic), on
// both paths; periods that do not divide the chunk, one too long to write out (4100), and
// patterns that are not periodic (a column [R,1]) are gathered. Against values computed here.
TEST(RegionCodegen, RepeatingOperandsAreReadInPlaceAtEachChunksPhase) {
  Graph body("body");
  TensorType f32{DType::F32, {}};
  ValueId x = body.add_input("x", f32), b = body.add_input("b", f32), c = body.add_input("c", f32);
  body.add_output(body.add_node(Op::Mul, {body.add_node(Op::Add, {x, b}, {f32})[0], c}, {f32})[0]);
  Node region{Op::ElementwiseRegion, {}, {}, {}, std::make_shared<Graph>(body), {}};
  struct Case {
    std::vector<int64_t> x, b, c;
  };
  const Case cases[] = {{{37, 300}, {300}, {1, 300}},
                        {{5, 9, 129}, {129}, {1, 9, 129}},
                        {{3, 4100}, {4100}, {1, 4100}},
                        {{2, 3001}, {3001}, {2, 1}}};
  std::vector<cpu::Codegen> codegens = {cpu::Codegen::Interpreter};
  if (cpu::jit_built()) codegens.push_back(cpu::Codegen::Jit);
  for (const Case& k : cases) {
    const Array xa = testing::random_array(DType::F32, k.x, 21),
                ba = testing::random_array(DType::F32, k.b, 22);
    const Array ca = testing::random_array(DType::F32, k.c, 23);
    std::vector<TensorType> types;
    for (const Array* a : {&xa, &ba, &ca}) types.push_back({DType::F32, make_shape(a->shape())});
    Array want(DType::F32, k.x);
    const std::vector<int64_t> xs = contiguous_strides(k.x);
    for (int64_t i = 0; i < xa.numel(); ++i) {
      auto at = [&](const Array& a) {  // a's element under numpy broadcasting at x's index i
        int64_t off = 0, stride = 1;
        for (size_t d = a.shape().size(); d-- > 0;) {
          const size_t xd = k.x.size() - a.shape().size() + d;
          if (a.shape()[d] != 1) off += (i / xs[xd] % k.x[xd]) * stride;
          stride *= a.shape()[d];
        }
        return a.data<float>()[off];
      };
      const float sum = xa.data<float>()[i] + at(ba);
      want.data<float>()[i] = sum * at(ca);
    }
    for (cpu::Codegen codegen : codegens) {
      SCOPED_TRACE(std::to_string(xa.numel()) +
                   (codegen == cpu::Codegen::Jit ? " elements, generated" : " elements, interpreted"));
      Expected<std::shared_ptr<const cpu::RegionProgram>> program =
          cpu::RegionProgram::compile(region, types, codegen);
      ASSERT_TRUE(program) << program.status().to_string();
      for (uint8_t poison : testing::kPoisonBytes) {
        std::vector<Array> out = {Array(DType::F32, k.x)};
        std::memset(out[0].raw(), poison, out[0].nbytes());
        ASSERT_TRUE((*program)->run(std::vector<Array>{xa, ba, ca}, out).is_ok());
        EXPECT_TRUE(out[0].same_data(want)) << "poison " << int(poison);
      }
    }
  }
}

// Many values live at once get fewer lanes per iteration (16 here, against 64 for a chain), and
// compute the same as the interpreter.
TEST(RegionCodegen, WideBodiesUseFewerLanes) {
  SKIP_WITHOUT_JIT();
  TensorType f32{DType::F32, {}};
  Graph chain("chain");
  ValueId v = chain.add_input("x", f32);
  for (int i = 0; i < 10; ++i) v = chain.add_node(Op::Tanh, {v}, {f32})[0];
  chain.add_output(v);
  EXPECT_EQ(cpu::jit_lanes(chain), 64);

  Graph wide("wide");
  std::vector<ValueId> ins;
  for (int i = 0; i < 20; ++i) ins.push_back(wide.add_input("in" + std::to_string(i), f32));
  for (int i = 0; i < 20; ++i) wide.add_output(wide.add_node(Op::Mul, {ins[size_t(i)], ins[size_t((i + 1) % 20)]}, {f32})[0]);
  EXPECT_EQ(cpu::jit_lanes(wide), 16);

  const int64_t n = 5000;
  Node region{Op::ElementwiseRegion, {}, {}, {}, std::make_shared<Graph>(wide), {}};
  std::vector<TensorType> types(20, TensorType{DType::F32, make_shape({n})});
  std::vector<Array> in;
  for (int i = 0; i < 20; ++i) in.push_back(specials(DType::F32, uint64_t(20 + i), n));
  std::vector<std::vector<Array>> results;
  for (cpu::Codegen codegen : {cpu::Codegen::Interpreter, cpu::Codegen::Jit}) {
    auto program = cpu::RegionProgram::compile(region, types, codegen);
    ASSERT_TRUE(program) << program.status().to_string();
    std::vector<Array> out;
    for (int i = 0; i < 20; ++i) {
      out.emplace_back(DType::F32, std::vector<int64_t>{n});
      std::memset(out.back().raw(), 0xFF, out.back().nbytes());
    }
    ASSERT_TRUE((*program)->run(in, out).is_ok());
    results.push_back(std::move(out));
  }
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(results[1][size_t(i)].same_data(results[0][size_t(i)])) << "output " << i;
}

// A body with a long dependency chain per element (here 11 divisions) whose values cross stages,
// among them a bool and an i32; one output comes from the first stage, one from the last.
// `wide`: 20 more values computed first and read last, which cross too and leave 16 lanes.
Graph staged_body(bool wide) {
  TensorType f32{DType::F32, {}};
  Graph body("body");
  ValueId x = body.add_input("x", f32), c = body.add_input("c", f32), s = body.add_input("s", f32);
  auto op = [&](Op o, std::vector<ValueId> in, DType out = DType::F32, Attrs attrs = {}) {
    return body.add_node(o, std::move(in), {TensorType{out, {}}}, std::move(attrs))[0];
  };
  std::vector<ValueId> early;
  for (int r = 0; wide && r < 20; ++r) early.push_back(op(Op::Add, {early.empty() ? x : early.back(), s}));
  ValueId a1 = op(Op::Add, {op(Op::Div, {x, c}), s});
  ValueId k = op(Op::Less, {a1, x}, DType::Bool);
  ValueId m1 = op(Op::Mul, {op(Op::Div, {a1, s}), x});
  ValueId i = op(Op::Cast, {m1}, DType::I32, {{"to", DType::I32}});
  ValueId d3 = op(Op::Div, {m1, c});
  ValueId d6 = op(Op::Div, {op(Op::Div, {x, op(Op::Div, {d3, a1})}), c});
  ValueId w = op(Op::Where, {k, d6, op(Op::Cast, {i}, DType::F32, {{"to", DType::F32}})});
  for (int r = 0; r < 5; ++r) w = op(Op::Add, {op(Op::Div, {w, r % 2 ? c : s}), x});
  for (ValueId e : early) w = op(Op::Sub, {w, e});
  body.add_output(d3);
  body.add_output(k);
  body.add_output(w);
  return body;
}

// Such bodies run in stages over blocks (jit_stage_starts). Generated code equals the interpreter
// bit for bit on poisoned outputs, with a [C,1] broadcast and a repeated scalar, at a length
// shorter than one block and at one with many blocks, chunks and a scalar tail.
TEST(RegionCodegen, LongBodiesRunInStagesAndEqualTheInterpreter) {
  SKIP_WITHOUT_JIT();
  for (bool wide : {false, true}) {
    const Graph body = staged_body(wide);
    const std::vector<size_t> starts = cpu::jit_stage_starts(body);
    ASSERT_GE(starts.size(), 3u);
    EXPECT_EQ(starts[0], 0u);
    EXPECT_EQ(cpu::jit_lanes(body), wide ? 16 : 64);
    Node region{Op::ElementwiseRegion, {}, {}, {}, std::make_shared<Graph>(body), {}};
    for (const auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 203}, {37, 1021}}) {
      std::vector<TensorType> types = {{DType::F32, make_shape({rows, cols})}, {DType::F32, make_shape({rows, 1})},
                                       {DType::F32, {}}};
      std::vector<Array> in = {specials(DType::F32, 11, rows * cols).reshaped({rows, cols}),
                               testing::random_array(DType::F32, {rows, 1}, 12, 0.5, 2.0), testing::array_f32({}, {1.25f})};
      std::vector<std::vector<Array>> results;
      for (cpu::Codegen codegen : {cpu::Codegen::Interpreter, cpu::Codegen::Jit}) {
        auto program = cpu::RegionProgram::compile(region, types, codegen);
        ASSERT_TRUE(program) << program.status().to_string();
        EXPECT_EQ((*program)->jit_unsupported(), "");
        for (uint8_t poison : testing::kPoisonBytes) {
          std::vector<Array> out = {Array(DType::F32, {rows, cols}), Array(DType::Bool, {rows, cols}),
                                    Array(DType::F32, {rows, cols})};
          for (Array& o : out) std::memset(o.raw(), poison, o.nbytes());
          ASSERT_TRUE((*program)->run(in, out).is_ok());
          if (results.empty()) {
            results.push_back(std::move(out));
            continue;
          }
          for (size_t j = 0; j < out.size(); ++j)
            EXPECT_TRUE(out[j].same_data(results[0][j])) << (wide ? "wide, " : "") << rows * cols << " elements, output "
                                                         << j << ", poison " << int(poison);
        }
      }
    }
  }
}

// A short chain stays one stage, and so does a long body whose stage buffers would exceed
// kJitStageBufferBytes (40 values crossing: 40 KiB).
TEST(RegionCodegen, StagesOnlyForLongBodiesWithSmallBuffers) {
  SKIP_WITHOUT_JIT();
  TensorType f32{DType::F32, {}};
  Graph chain("chain");
  ValueId v = chain.add_input("x", f32);
  v = chain.add_node(Op::Tanh, {chain.add_node(Op::Mul, {v, v}, {f32})[0]}, {f32})[0];
  chain.add_output(v);
  EXPECT_EQ(cpu::jit_stage_starts(chain), std::vector<size_t>{0});

  Graph many("many");
  ValueId x = many.add_input("x", f32);
  std::vector<ValueId> early;
  for (int r = 0; r < 40; ++r) early.push_back(many.add_node(Op::Mul, {early.empty() ? x : early.back(), x}, {f32})[0]);
  ValueId w = x;
  for (int r = 0; r < 4; ++r) w = many.add_node(Op::Sigmoid, {w}, {f32})[0];
  for (ValueId e : early) w = many.add_node(Op::Add, {w, e}, {f32})[0];
  many.add_output(w);
  EXPECT_EQ(cpu::jit_stage_starts(many), std::vector<size_t>{0});
  // Without the early values the same sigmoids are staged.
  Graph few("few");
  ValueId y = few.add_input("x", f32);
  for (int r = 0; r < 4; ++r) y = few.add_node(Op::Sigmoid, {y}, {f32})[0];
  few.add_output(y);
  EXPECT_GT(cpu::jit_stage_starts(few).size(), 1u);
}

// Two executables of the same structure, alive at once, share one generated kernel: the second
// compile is a cache hit, and both compute the reference's result.
TEST(RegionCodegen, KernelsAreCachedByStructure) {
  SKIP_WITHOUT_JIT();
  Array a = testing::random_array(DType::F32, {100}, 1), b = testing::random_array(DType::F32, {100}, 2);
  GraphBuilder gb("cached");
  ValueId x = gb.input("in0", DType::F32, make_shape({100})), y = gb.input("in1", DType::F32, make_shape({100}));
  // A constant no other test uses, so the first compile cannot hit a kernel made elsewhere.
  gb.output(gb.op(Op::Min, {gb.mul(x, gb.scalar(DType::F32, 0.8125)), y}));
  Expected<Graph> g = gb.build();
  ASSERT_TRUE(g) << g.status().to_string();
  CompileOptions o;
  testing::use_backend(o, testing::kCpuJit);
  Expected<Executable> first = Session().compile(*g, o), second = Session().compile(*g, o);
  ASSERT_TRUE(first && second);
  const cpu::JitStats before = cpu::jit_stats();
  Expected<std::vector<Array>> out1 = first->run({{"in0", a}, {"in1", b}});
  const cpu::JitStats middle = cpu::jit_stats();
  Expected<std::vector<Array>> out2 = second->run({{"in0", a}, {"in1", b}});
  const cpu::JitStats after = cpu::jit_stats();
  ASSERT_TRUE(out1 && out2);
  EXPECT_EQ(middle.compiled - before.compiled, 1u);
  EXPECT_EQ(after.compiled - middle.compiled, 0u);
  EXPECT_GE(after.cache_hits - middle.cache_hits, 1u);
  Array want = testing::run_op1(Op::Min, {testing::run_op1(Op::Mul, {a, testing::array_f32({}, {0.8125f})}), b});
  EXPECT_TRUE((*out1)[0].same_data(want));
  EXPECT_TRUE((*out2)[0].same_data(want));
}

TEST(RegionCodegen, CompilesAndRunsFromSeveralThreads) {
  SKIP_WITHOUT_JIT();
  Array x = testing::random_array(DType::F32, {5000}, 3, -4, 4);
  std::vector<std::vector<Array>> out(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < out.size(); ++t) {
    threads.emplace_back([&, t] { out[t] = run_cpu(t % 2 ? Op::Tanh : Op::Sigmoid, {x}, testing::kCpuJit); });
  }
  for (std::thread& t : threads) t.join();
  const Array want_sigmoid = testing::run_op1(Op::Sigmoid, {x}), want_tanh = testing::run_op1(Op::Tanh, {x});
  for (size_t t = 0; t < out.size(); ++t) {
    ASSERT_EQ(out[t].size(), 1u);
    EXPECT_TRUE(testing::arrays_close(out[t][0], t % 2 ? want_tanh : want_sigmoid, 4e-7, 1e-30)) << t;
    EXPECT_TRUE(out[t][0].same_data(out[t % 2][0])) << t;
  }
}

// A 100-step chain whose every step takes its own scalar operand (as the lazy API lifts them):
// 101 operands, beyond one 64-bit word of repeated-operand bits. Generated code runs it and
// equals the interpreter bit for bit.
TEST(RegionCodegen, RegionsOfManyScalarOperandsRunGeneratedCode) {
  SKIP_WITHOUT_JIT();
  const int64_t n = 40000, steps = 100;
  Graph body("body");
  TensorType f32{DType::F32, {}};
  ValueId v = body.add_input("x", f32);
  std::vector<ValueId> scalars;
  for (int64_t s = 0; s < steps; ++s) scalars.push_back(body.add_input("c" + std::to_string(s), f32));
  for (int64_t s = 0; s < steps; ++s)
    v = body.add_node(s % 3 == 2 ? Op::Add : Op::Mul, {v, scalars[size_t(s)]}, {f32})[0];
  body.add_output(v);
  EXPECT_EQ(cpu::jit_lanes(body), 64);  // operands count as live from their reader on
  Node region{Op::ElementwiseRegion, {}, {}, {}, std::make_shared<Graph>(body), {}};
  std::vector<TensorType> types = {{DType::F32, make_shape({n})}};
  std::vector<Array> in = {testing::random_array(DType::F32, {n}, 31, -2, 2)};
  for (int64_t s = 0; s < steps; ++s) {
    types.push_back({DType::F32, {}});
    in.push_back(testing::array_f32(
        {}, {s % 3 == 2 ? 0.01f * float(s % 7) - 0.03f : 1.0f + 0.001f * float(s % 5 - 2)}));
  }
  std::vector<Array> results;
  for (cpu::Codegen codegen : {cpu::Codegen::Interpreter, cpu::Codegen::Jit}) {
    Expected<std::shared_ptr<const cpu::RegionProgram>> program =
        cpu::RegionProgram::compile(region, types, codegen);
    ASSERT_TRUE(program) << program.status().to_string();
    std::vector<Array> out = {Array(DType::F32, {n})};
    std::memset(out[0].raw(), 0xFF, out[0].nbytes());
    const cpu::JitStats before = cpu::jit_stats();
    ASSERT_TRUE((*program)->run(in, out).is_ok());
    const cpu::JitStats after = cpu::jit_stats();
    if (codegen == cpu::Codegen::Jit) {
      EXPECT_EQ(after.compiled + after.cache_hits - before.compiled - before.cache_hits, 1u)
          << "no generated code ran";
    }
    results.push_back(out[0]);
  }
  EXPECT_TRUE(results[1].same_data(results[0]));
  // and against the step-by-step reference
  Array want = in[0];
  for (int64_t s = 0; s < steps; ++s)
    want = testing::run_op1(s % 3 == 2 ? Op::Add : Op::Mul, {want, in[size_t(s + 1)]});
  EXPECT_TRUE(results[1].same_data(want));
}

// Auto generates code from 2^14 elements, or from 2^16 element-steps for a long body: a
// 100-step chain on 1024 elements runs generated code, a 5-step one interprets.
TEST(RegionCodegen, AutoGeneratesCodeForLongBodiesOnFewElements) {
  SKIP_WITHOUT_JIT();
  const int64_t n = 1024;
  for (int64_t steps : {5, 100}) {
    Graph body("body");
    TensorType f32{DType::F32, {}};
    ValueId v = body.add_input("x", f32);
    ValueId c = body.add_input("c", f32);
    for (int64_t s = 0; s < steps; ++s) v = body.add_node(s % 2 ? Op::Add : Op::Mul, {v, c}, {f32})[0];
    body.add_output(v);
    Node region{Op::ElementwiseRegion, {}, {}, {}, std::make_shared<Graph>(body), {}};
    std::vector<TensorType> types = {{DType::F32, make_shape({n})}, {DType::F32, {}}};
    std::vector<Array> in = {testing::random_array(DType::F32, {n}, 41, -1, 1), testing::array_f32({}, {0.999f})};
    Expected<std::shared_ptr<const cpu::RegionProgram>> program =
        cpu::RegionProgram::compile(region, types, cpu::Codegen::Auto);
    ASSERT_TRUE(program) << program.status().to_string();
    std::vector<Array> out = {Array(DType::F32, {n})};
    const cpu::JitStats before = cpu::jit_stats();
    ASSERT_TRUE((*program)->run(in, out).is_ok());
    const cpu::JitStats after = cpu::jit_stats();
    const uint64_t used = after.compiled + after.cache_hits - before.compiled - before.cache_hits;
    EXPECT_EQ(used, steps * n >= cpu::kJitMinElementSteps ? 1u : 0u) << steps << " steps";
  }
}

// The batch and prologue kernels run regions from the threads of their own parallel region. A
// region too small for threads must still run its whole loop on the calling thread: its loop is
// an orphaned `omp for`, which would otherwise share its iterations out over the caller's team.
TEST(RegionCodegen, RunsWholeInsideAnOuterParallelRegion) {
  Graph body("body");
  TensorType f32{DType::F32, {}};
  ValueId x = body.add_input("x", f32);
  ValueId c = body.add_input("c", f32);
  body.add_output(body.add_node(Op::Add, {body.add_node(Op::Mul, {x, c}, {f32})[0], x}, {f32})[0]);
  Node region{Op::ElementwiseRegion, {}, {}, {}, std::make_shared<Graph>(body), {}};
  const int64_t n = 3000;  // one tile, one chunk: below every threshold for threads
  std::vector<TensorType> types = {{DType::F32, make_shape({n})}, {DType::F32, {}}};
  std::vector<cpu::Codegen> codegens = {cpu::Codegen::Interpreter};
  if (cpu::jit_built()) codegens.push_back(cpu::Codegen::Jit);
  for (cpu::Codegen codegen : codegens) {
    Expected<std::shared_ptr<const cpu::RegionProgram>> program = cpu::RegionProgram::compile(region, types, codegen);
    ASSERT_TRUE(program) << program.status().to_string();
    constexpr int kThreads = 4;
    std::vector<std::vector<Array>> in(kThreads), out(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      in[size_t(t)] = {testing::random_array(DType::F32, {n}, 20 + uint64_t(t)), testing::array_f32({}, {0.5f + float(t)})};
      out[size_t(t)] = {Array(DType::F32, {n})};
      std::memset(out[size_t(t)][0].raw(), 0xFF, out[size_t(t)][0].nbytes());
    }
    std::vector<int> ok(kThreads, 0);
#pragma omp parallel for num_threads(kThreads) schedule(static, 1)
    for (int t = 0; t < kThreads; ++t) ok[size_t(t)] = (*program)->run(in[size_t(t)], out[size_t(t)]).is_ok();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_TRUE(ok[size_t(t)]) << t;
      const Array want = testing::run_op1(
          Op::Add, {testing::run_op1(Op::Mul, {in[size_t(t)][0], in[size_t(t)][1]}), in[size_t(t)][0]});
      EXPECT_TRUE(testing::arrays_close(out[size_t(t)][0], want, 1e-6, 1e-6)) << "thread " << t;
    }
  }
}

}  // namespace
}  // namespace fusebox
