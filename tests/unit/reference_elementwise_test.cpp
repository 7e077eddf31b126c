// Values of the CPU reference kernels of the element-wise ops: unary ops and cast, binary ops with
// broadcasting, where and expand. Expected values come from closed forms, hand-worked cases and
// naive loops written here in double, independent of the kernels' code.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <functional>

#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::array_of_ints;
using testing::arrays_close;
using testing::random_array;
using testing::run_op1;
using testing::run_reference_poisoned;
using testing::to_ints;

// An array of x's shape and `dtype` whose element i is f(x[i]) (through Array::set_f64).
Array map_expected(const Array& x, DType dtype, const std::function<double(double)>& f) {
  Array e(dtype, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) e.set_f64(i, f(x.get_f64(i)));
  return e;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct UnaryCase {
  Op op;
  Attrs attrs;
  std::function<double(double)> f;
  bool positive_domain = false;
};

std::vector<UnaryCase> float_unary_cases() {
  const double pi = 3.14159265358979323846;
  return {
      {Op::Neg, {}, [](double x) { return -x; }},
      {Op::Abs, {}, [](double x) { return x < 0 ? -x : x; }},
      {Op::Exp, {}, [](double x) { return std::exp(x); }},
      {Op::Log, {}, [](double x) { return std::log(x); }, true},
      {Op::Sqrt, {}, [](double x) { return std::sqrt(x); }, true},
      {Op::Rsqrt, {}, [](double x) { return 1.0 / std::sqrt(x); }, true},
      {Op::Reciprocal, {}, [](double x) { return 1.0 / x; }, true},
      {Op::Tanh, {}, [](double x) { return (std::exp(2 * x) - 1) / (std::exp(2 * x) + 1); }},
      {Op::Sigmoid, {}, sigmoid},
      {Op::Relu, {}, [](double x) { return x > 0 ? x : 0.0; }},
      {Op::LeakyRelu, {{"alpha", 0.1}}, [](double x) { return x < 0 ? 0.1 * x : x; }},
      {Op::Gelu, {}, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {Op::Gelu, {{"approximate", std::string("tanh")}},
       [pi](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x))); }},
      {Op::Silu, {}, [](double x) { return x * sigmoid(x); }},
      {Op::Erf, {}, [](double x) { return std::erf(x); }},
      {Op::HardSigmoid, {}, [](double x) { return std::max(0.0, std::min(1.0, 0.2 * x + 0.5)); }},
      {Op::HardSigmoid, {{"alpha", 0.5}, {"beta", 0.25}},
       [](double x) { return std::max(0.0, std::min(1.0, 0.5 * x + 0.25)); }},
      {Op::HardSwish, {}, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); }},
      {Op::Sin, {}, [](double x) { return std::sin(x); }},
      {Op::Cos, {}, [](double x) { return std::cos(x); }},
      {Op::Floor, {}, [](double x) { return std::floor(x); }},
      {Op::Ceil, {}, [](double x) { return std::ceil(x); }},
      {Op::Round, {}, [](double x) { return std::nearbyint(x); }},  // default mode: half to even
      {Op::Clip, {{"min", -1.0}, {"max", 1.5}}, [](double x) { return std::min(1.5, std::max(-1.0, x)); }},
      {Op::Clip, {{"max", 0.5}}, [](double x) { return std::min(0.5, x); }},
      {Op::Identity, {}, [](double x) { return x; }},
  };
}

// Every float unary op on every float dtype against the formula in double. f32/f64 compute in
// their own precision; f16/bf16 compute in float and round once, so their tolerance is a few
// units in the last place of the narrow type.
TEST(ReferenceUnary, FloatOpsMatchDoubleFormulasInEveryFloatDtype) {
  struct Tol {
    DType dtype;
    double rtol, atol;
  };
  for (Tol t : {Tol{DType::F32, 2e-6, 1e-6}, Tol{DType::F64, 1e-13, 1e-14}, Tol{DType::F16, 2e-3, 1e-4},
                Tol{DType::BF16, 1.6e-2, 1e-3}}) {
    Array x = random_array(t.dtype, {4, 16}, 11, -4.0, 4.0);
    Array pos = random_array(t.dtype, {4, 16}, 12, 0.05, 5.0);
    for (const UnaryCase& c : float_unary_cases()) {
      const Array& in = c.positive_domain ? pos : x;
      Array got = run_op1(c.op, {in}, c.attrs);
      EXPECT_TRUE(arrays_close(got, map_expected(in, t.dtype, c.f), t.rtol, t.atol))
          << op_keyword(c.op) << " on " << dtype_name(t.dtype);
    }
  }
}

// The trigonometric and hyperbolic ops (and their inverses) on the domain where each is defined
// and well conditioned, every float dtype, against <cmath> in double.
TEST(ReferenceUnary, TrigAndHyperbolicOpsOnTheirDomains) {
  struct Case {
    Op op;
    double lo, hi;
    double (*f)(double);
  };
  const Case cases[] = {
      {Op::Tan, -1.2, 1.2, [](double x) { return std::tan(x); }},
      {Op::Asin, -0.95, 0.95, [](double x) { return std::asin(x); }},
      {Op::Acos, -0.95, 0.95, [](double x) { return std::acos(x); }},
      {Op::Atan, -6.0, 6.0, [](double x) { return std::atan(x); }},
      {Op::Sinh, -4.0, 4.0, [](double x) { return std::sinh(x); }},
      {Op::Cosh, -4.0, 4.0, [](double x) { return std::cosh(x); }},
      {Op::Asinh, -6.0, 6.0, [](double x) { return std::asinh(x); }},
      {Op::Acosh, 1.05, 8.0, [](double x) { return std::acosh(x); }},
      {Op::Atanh, -0.9, 0.9, [](double x) { return std::atanh(x); }},
  };
  struct Tol {
    DType dtype;
    double rtol, atol;
  };
  for (Tol t : {Tol{DType::F32, 2e-6, 1e-6}, Tol{DType::F64, 1e-13, 1e-14}, Tol{DType::F16, 2e-3, 1e-3},
                Tol{DType::BF16, 1.6e-2, 8e-3}}) {
    for (const Case& c : cases) {
      Array in = random_array(t.dtype, {3, 17}, 21 + static_cast<int>(c.op), c.lo, c.hi);
      Array got = run_op1(c.op, {in});
      EXPECT_TRUE(arrays_close(got, map_expected(in, t.dtype, c.f), t.rtol, t.atol))
          << op_keyword(c.op) << " on " << dtype_name(t.dtype);
    }
  }
  // Outside the domain: NaN, as <cmath> and ONNX say.
  Array bad = array_of(DType::F32, {3}, {1.5, -2.0, 0.5});
  EXPECT_TRUE(std::isnan(run_op1(Op::Asin, {bad}).get_f64(0)));
  EXPECT_TRUE(std::isnan(run_op1(Op::Atanh, {bad}).get_f64(1)));
  EXPECT_TRUE(std::isnan(run_op1(Op::Acosh, {bad}).get_f64(2)));
}

// bitshift on every unsigned width, with a broadcast shift vector, against shifts written out in
// the test; shifts of the bit width or more give 0.
TEST(ReferenceBinary, BitShiftOnUnsignedIntegers) {
  for (DType t : {DType::U8, DType::U16, DType::U32, DType::U64}) {
    const int64_t bits = 8 * dtype_size(t);
    Array a = random_array(t, {3, 5}, 31, 0, 200);
    Array s = array_of(t, {5}, {0.0, 1.0, 3.0, double(bits - 1), double(bits)});
    for (const char* dir : {"left", "right"}) {
      Array got = run_op1(Op::BitShift, {a, s}, {{"direction", std::string(dir)}});
      for (int64_t i = 0; i < 15; ++i) {
        const uint64_t x = uint64_t(a.get_i64(i)), sh = uint64_t(s.get_i64(i % 5));
        const uint64_t mask = bits == 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
        const uint64_t want = sh >= uint64_t(bits) ? 0 : (dir[0] == 'l' ? (x << sh) & mask : x >> sh);
        EXPECT_EQ(uint64_t(got.get_i64(i)), want) << dtype_name(t) << " " << dir << " element " << i;
      }
    }
  }
}

TEST(ReferenceUnary, ClosedFormValues) {
  Array x = array_of(DType::F64, {7}, {0.0, 1.0, -1.0, 0.5, 3.0, -3.0, 40.0});
  auto at = [](const Array& a, int64_t i) { return a.get_f64(i); };
  Array s = run_op1(Op::Sigmoid, {x});
  EXPECT_EQ(at(s, 0), 0.5);
  EXPECT_EQ(at(s, 6), 1.0);
  EXPECT_NEAR(at(s, 1), 0.7310585786300049, 1e-15);
  Array g = run_op1(Op::Gelu, {x});
  EXPECT_EQ(at(g, 0), 0.0);
  EXPECT_NEAR(at(g, 1), 0.8413447460685429, 1e-15);    // x * Phi(x) at 1
  EXPECT_NEAR(at(g, 2), -0.15865525393145707, 1e-15);
  Array gt = run_op1(Op::Gelu, {x}, {{"approximate", std::string("tanh")}});
  EXPECT_NEAR(at(gt, 1), 0.8411919906082768, 1e-15);
  Array e = run_op1(Op::Erf, {x});
  EXPECT_NEAR(at(e, 1), 0.8427007929497149, 1e-15);
  EXPECT_NEAR(at(e, 3), 0.5204998778130465, 1e-15);
  EXPECT_NEAR(at(run_op1(Op::Silu, {x}), 1), 0.7310585786300049, 1e-15);
  Array hs = run_op1(Op::HardSigmoid, {x});
  EXPECT_NEAR(at(hs, 1), 0.7, 1e-15);
  EXPECT_EQ(at(hs, 4), 1.0);
  EXPECT_EQ(at(hs, 5), 0.0);
  Array hw = run_op1(Op::HardSwish, {x});
  EXPECT_NEAR(at(hw, 1), 2.0 / 3.0, 1e-15);
  EXPECT_EQ(at(hw, 4), 3.0);
  EXPECT_EQ(at(hw, 5), 0.0);
  // Sigmoid far out on the negative side stays accurate (no 1 / (1 + inf) underflow to 0 early).
  Array far = run_op1(Op::Sigmoid, {array_of(DType::F64, {1}, {-700.0})});
  EXPECT_NEAR(at(far, 0) / std::exp(-700.0), 1.0, 1e-12);
  Array far32 = run_op1(Op::Sigmoid, {array_of(DType::F32, {2}, {-90.0, 90.0})});
  EXPECT_GT(at(far32, 0), 0.0);
  EXPECT_EQ(at(far32, 1), 1.0);
}

TEST(ReferenceUnary, RoundIsHalfToEvenAndKeepsSign) {
  Array x = array_of(DType::F32, {10}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6, -0.4, 1e9 + 0.5});
  Array r = run_op1(Op::Round, {x});
  std::vector<double> want = {0, 2, 2, -0.0, -2, -2, 2, 3, -0.0, 1e9};
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(r.get_f64(i), want[size_t(i)]) << i;
  EXPECT_TRUE(std::signbit(r.get_f64(3)));
  EXPECT_TRUE(std::signbit(r.get_f64(8)));
  EXPECT_EQ(r.get_f64(9), double(float(1e9 + 0.5)));  // already integral in f32
}

TEST(ReferenceUnary, IdentitiesOnRandomData) {
  Array x = random_array(DType::F32, {256}, 5, 0.1, 8.0);
  EXPECT_TRUE(arrays_close(run_op1(Op::Exp, {run_op1(Op::Log, {x})}), x, 1e-6, 0));
  EXPECT_TRUE(arrays_close(run_op1(Op::Reciprocal, {run_op1(Op::Reciprocal, {x})}), x, 1e-6, 0));
  Array y = random_array(DType::F64, {256}, 6, -6.0, 6.0);
  Array s = run_op1(Op::Sin, {y}), c = run_op1(Op::Cos, {y});
  for (int64_t i = 0; i < y.numel(); ++i) {
    EXPECT_NEAR(s.get_f64(i) * s.get_f64(i) + c.get_f64(i) * c.get_f64(i), 1.0, 1e-15);
  }
}

TEST(ReferenceUnary, NanPropagates) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Array x = array_of(d, {1}, {NAN});
    for (Op op : {Op::Relu, Op::Sigmoid, Op::Silu, Op::Round, Op::HardSigmoid, Op::HardSwish,
                  Op::LeakyRelu, Op::Abs, Op::Neg, Op::Floor, Op::Gelu}) {
      EXPECT_TRUE(std::isnan(run_op1(op, {x}).get_f64(0))) << op_keyword(op) << " " << dtype_name(d);
    }
    EXPECT_TRUE(std::isnan(run_op1(Op::Clip, {x}, {{"min", 0.0}, {"max", 1.0}}).get_f64(0)));
  }
  // A bound larger than the lower one: min(max(x, lo), hi) gives hi.
  Array z = run_op1(Op::Clip, {array_of(DType::F32, {2}, {-5, 5})}, {{"min", 2.0}, {"max", 1.0}});
  EXPECT_EQ(z.get_f64(0), 1.0);
  EXPECT_EQ(z.get_f64(1), 1.0);
}

TEST(ReferenceUnary, IntegerOpsWrapAndClip) {
  Array i32 = array_of_ints(DType::I32, {5}, {INT32_MIN, -7, 0, 7, INT32_MAX});
  EXPECT_EQ(to_ints(run_op1(Op::Neg, {i32})), (std::vector<int64_t>{INT32_MIN, 7, 0, -7, -INT32_MAX}));
  EXPECT_EQ(to_ints(run_op1(Op::Abs, {i32})), (std::vector<int64_t>{INT32_MIN, 7, 0, 7, INT32_MAX}));
  EXPECT_EQ(to_ints(run_op1(Op::Relu, {i32})), (std::vector<int64_t>{0, 0, 0, 7, INT32_MAX}));
  Array i64 = array_of_ints(DType::I64, {3}, {INT64_MIN, -1, 5});
  EXPECT_EQ(to_ints(run_op1(Op::Abs, {i64})), (std::vector<int64_t>{INT64_MIN, 1, 5}));
  EXPECT_EQ(to_ints(run_op1(Op::Neg, {i64})), (std::vector<int64_t>{INT64_MIN, 1, -5}));
  Array i8 = array_of_ints(DType::I8, {4}, {-128, -3, 3, 127});
  EXPECT_EQ(to_ints(run_op1(Op::Neg, {i8})), (std::vector<int64_t>{-128, 3, -3, -127}));
  EXPECT_EQ(to_ints(run_op1(Op::Clip, {i8}, {{"min", -2.0}, {"max", 100.0}})), (std::vector<int64_t>{-2, -2, 3, 100}));
  // Bounds outside the type's range do not clip; fractional bounds round inward.
  EXPECT_EQ(to_ints(run_op1(Op::Clip, {i8}, {{"min", -1000.0}, {"max", 1e30}})), (std::vector<int64_t>{-128, -3, 3, 127}));
  EXPECT_EQ(to_ints(run_op1(Op::Clip, {i8}, {{"min", -2.5}, {"max", 2.5}})), (std::vector<int64_t>{-2, -2, 2, 2}));
  EXPECT_EQ(to_ints(run_op1(Op::Clip, {i8}, {{"min", 0.0}})), (std::vector<int64_t>{0, 0, 3, 127}));
  Array u8 = array_of_ints(DType::U8, {3}, {0, 1, 255});
  EXPECT_EQ(to_ints(run_op1(Op::Neg, {u8})), (std::vector<int64_t>{0, 255, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::Abs, {u8})), (std::vector<int64_t>{0, 1, 255}));
  EXPECT_EQ(to_ints(run_op1(Op::Clip, {u8}, {{"min", -5.0}, {"max", 200.0}})), (std::vector<int64_t>{0, 1, 200}));
  EXPECT_EQ(to_ints(run_op1(Op::Clip, {i64}, {{"max", 1e300}})), (std::vector<int64_t>{INT64_MIN, -1, 5}));
  Array b = array_of_ints(DType::Bool, {2}, {0, 1});
  EXPECT_EQ(to_ints(run_op1(Op::Not, {b})), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(to_ints(run_op1(Op::Identity, {b})), (std::vector<int64_t>{0, 1}));
}

TEST(ReferenceCast, FloatToIntegerTruncatesSaturatesAndWraps) {
  Array x = array_of(DType::F32, {7}, {2.7, -2.7, NAN, 1e20, -1e20, 300.5, -1.0});
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {x}, {{"to", DType::I64}})),
            (std::vector<int64_t>{2, -2, 0, INT64_MAX, INT64_MIN, 300, -1}));
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {x}, {{"to", DType::I32}})), (std::vector<int64_t>{2, -2, 0, -1, 0, 300, -1}));
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {x}, {{"to", DType::U8}})), (std::vector<int64_t>{2, 254, 0, 255, 0, 44, 255}));
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {x}, {{"to", DType::I8}})), (std::vector<int64_t>{2, -2, 0, -1, 0, 44, -1}));
  // The same rule as Array::set_f64, on random data of every float dtype.
  for (DType from : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Array r = random_array(from, {64}, 3, -400.0, 400.0);
    for (DType to : {DType::I8, DType::U8, DType::I32, DType::I64}) {
      EXPECT_TRUE(run_op1(Op::Cast, {r}, {{"to", to}}).same_data(map_expected(r, to, [](double v) { return v; })));
    }
  }
}

TEST(ReferenceCast, BoolAndIntegerConversions) {
  Array f = array_of(DType::F32, {5}, {0.0, -0.0, NAN, 0.1, -3.0});
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {f}, {{"to", DType::Bool}})), (std::vector<int64_t>{0, 0, 1, 1, 1}));
  Array i = array_of_ints(DType::I32, {4}, {0, 300, -1, 256});
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {i}, {{"to", DType::Bool}})), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {i}, {{"to", DType::I8}})), (std::vector<int64_t>{0, 44, -1, 0}));
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {i}, {{"to", DType::U8}})), (std::vector<int64_t>{0, 44, 255, 0}));
  EXPECT_EQ(to_ints(run_op1(Op::Cast, {array_of_ints(DType::U8, {2}, {200, 7})}, {{"to", DType::I8}})),
            (std::vector<int64_t>{-56, 7}));
  Array b = array_of_ints(DType::Bool, {2}, {1, 0});
  for (DType to : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64}) {
    Array r = run_op1(Op::Cast, {b}, {{"to", to}});
    EXPECT_EQ(r.get_f64(0), 1.0) << dtype_name(to);
    EXPECT_EQ(r.get_f64(1), 0.0) << dtype_name(to);
  }
  Array big = array_of_ints(DType::I64, {3}, {(int64_t(1) << 53) + 1, -7, INT64_MIN});
  Array d = run_op1(Op::Cast, {big}, {{"to", DType::F64}});
  EXPECT_EQ(d.get_f64(0), 9007199254740992.0);  // ties to even
  EXPECT_EQ(d.get_f64(1), -7.0);
  EXPECT_EQ(d.get_f64(2), -9223372036854775808.0);
  // Widening integers to floats is exact; same-dtype cast copies.
  Array small = random_array(DType::I32, {50}, 9, -1e6, 1e6);
  EXPECT_TRUE(run_op1(Op::Cast, {small}, {{"to", DType::F64}}).same_data(map_expected(small, DType::F64, [](double v) { return v; })));
  EXPECT_TRUE(run_op1(Op::Cast, {small}, {{"to", DType::I32}}).same_data(small));
}

TEST(ReferenceCast, NarrowFloatsRoundOnceToNearestEven) {
  auto bits = [](const Array& a, int64_t i) { return a.data<uint16_t>()[i]; };
  // f32 -> f16: 1 + 2^-11 is halfway between 1 and the next f16: ties to even.
  Array h = run_op1(Op::Cast, {array_of(DType::F32, {3}, {1.0 + std::ldexp(1.0, -11), 65520.0, 1e-8})},
                    {{"to", DType::F16}});
  EXPECT_EQ(bits(h, 0), 0x3c00);
  EXPECT_EQ(bits(h, 1), 0x7c00);  // rounds up to infinity
  EXPECT_EQ(bits(h, 2), 0x0000);  // below half the smallest subnormal
  // f64 just above the f16/bf16 halfway point: rounding through f32 first would land exactly on
  // the halfway point and tie down; one rounding goes up.
  Array d = array_of(DType::F64, {2}, {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                                        1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)});
  EXPECT_EQ(bits(run_op1(Op::Cast, {d}, {{"to", DType::F16}}), 0), 0x3c01);
  EXPECT_EQ(bits(run_op1(Op::Cast, {d}, {{"to", DType::BF16}}), 1), 0x3f81);
  // The same for integers: 2^25 + 2^17 + 1 is just above a bf16 halfway point.
  Array i = array_of_ints(DType::I32, {3}, {(1 << 25) + (1 << 17) + 1, 65519, 65520});
  Array ib = run_op1(Op::Cast, {i}, {{"to", DType::BF16}});
  EXPECT_EQ(bits(ib, 0), 0x4c01);
  Array ih = run_op1(Op::Cast, {i}, {{"to", DType::F16}});
  EXPECT_EQ(bits(ih, 1), 0x7bff);  // 65504
  EXPECT_EQ(bits(ih, 2), 0x7c00);  // halfway to 65536: even is infinity
  // f16 -> f32 -> f16 round-trips; f32 -> f64 is exact.
  Array r16 = random_array(DType::F16, {64}, 4);
  EXPECT_TRUE(run_op1(Op::Cast, {run_op1(Op::Cast, {r16}, {{"to", DType::F32}})}, {{"to", DType::F16}}).same_data(r16));
  Array r32 = random_array(DType::F32, {64}, 4);
  EXPECT_TRUE(arrays_close(run_op1(Op::Cast, {r32}, {{"to", DType::F64}}), map_expected(r32, DType::F64, [](double v) { return v; }), 0, 0));
}

// Casting f64 to f16/bf16 gives the nearest value, ties to even: checked against both neighbours
// of the result, on random doubles and on doubles just off the exact halfway points.
TEST(ReferenceCast, F64ToNarrowFloatsIsCorrectlyRounded) {
  for (DType to : {DType::F16, DType::BF16}) {
    auto value = [to](uint16_t h) { return double(to == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h)); };
    uint16_t max_finite = to == DType::F16 ? 0x7bff : 0x7f7f;
    Array seeds = random_array(DType::I32, {600}, 81, 0, max_finite);
    Array d(DType::F64, {1800});
    for (int64_t i = 0; i < 600; ++i) {
      uint16_t h = uint16_t(seeds.get_i64(i));
      double mid = (value(h) + value(uint16_t(h + 1))) / 2;  // exact in double
      double sign = i % 2 ? -1.0 : 1.0;
      d.set_f64(3 * i, sign * mid * (1 + std::ldexp(1.0, -45)));
      d.set_f64(3 * i + 1, sign * mid * (1 - std::ldexp(1.0, -45)));
      d.set_f64(3 * i + 2, sign * (i % 3 ? mid : value(h) + (value(uint16_t(h + 1)) - value(h)) * 0.3));
    }
    Array r = run_op1(Op::Cast, {d}, {{"to", to}});
    for (int64_t i = 0; i < d.numel(); ++i) {
      uint16_t h = r.data<uint16_t>()[i] & 0x7fff;
      double want = std::fabs(d.get_f64(i)), dist = std::fabs(value(h) - want);
      ASSERT_LE(dist, std::fabs(value(uint16_t(h + 1)) - want)) << dtype_name(to) << " " << d.get_f64(i);
      if (h > 0) {
        double below = std::fabs(value(uint16_t(h - 1)) - want);
        ASSERT_LE(dist, below) << dtype_name(to) << " " << d.get_f64(i);
        if (dist == below || dist == std::fabs(value(uint16_t(h + 1)) - want)) {
          ASSERT_EQ(h & 1, 0) << d.get_f64(i);
        }
      }
      ASSERT_EQ(bool(r.data<uint16_t>()[i] & 0x8000), std::signbit(d.get_f64(i)));
    }
  }
}

// ---- binary --------------------------------------------------------------------------------

// Flat index into an operand of shape `in` broadcast to `out`, for the row-major flat index i of
// `out`: written out with div/mod, independent of the kernels' stride walker.
int64_t broadcast_source(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  int64_t src = 0, in_stride = 1;
  for (size_t k = 0; k < out.size(); ++k) {
    size_t d = out.size() - 1 - k;
    int64_t coord = i % out[d];
    i /= out[d];
    if (k < in.size()) {
      int64_t size = in[in.size() - 1 - k];
      src += (size == 1 ? 0 : coord) * in_stride;
      in_stride *= size;
    }
  }
  return src;
}

std::vector<int64_t> broadcast_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1, db = k < b.size() ? b[b.size() - 1 - k] : 1;
    out[out.size() - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

using Shapes = std::pair<std::vector<int64_t>, std::vector<int64_t>>;
const std::vector<Shapes> kBroadcastPatterns = {
    {{5, 1}, {5, 7}}, {{1, 7}, {5, 1}}, {{}, {9}}, {{9}, {}}, {{2, 1, 4}, {3, 1}}, {{4, 6}, {4, 6}}, {{6}, {3, 6}},
};

// Runs op on a and b and checks every element against f(a[..], b[..]) with the broadcast written
// out by hand.
void check_binary(Op op, const Array& a, const Array& b, DType out_dtype,
                  const std::function<double(double, double)>& f, double rtol = 0) {
  Array got = run_op1(op, {a, b});
  std::vector<int64_t> shape = broadcast_shape(a.shape(), b.shape());
  Array want(out_dtype, shape);
  for (int64_t i = 0; i < want.numel(); ++i) {
    want.set_f64(i, f(a.get_f64(broadcast_source(i, shape, a.shape())), b.get_f64(broadcast_source(i, shape, b.shape()))));
  }
  EXPECT_TRUE(arrays_close(got, want, rtol, 0)) << op_keyword(op) << " " << a.type_string() << ", " << b.type_string();
}

TEST(ReferenceBinary, FloatOpsBroadcastLikeNumpy) {
  const std::vector<std::pair<Op, std::function<double(double, double)>>> arith = {
      {Op::Add, [](double x, double y) { return x + y; }}, {Op::Sub, [](double x, double y) { return x - y; }},
      {Op::Mul, [](double x, double y) { return x * y; }}, {Op::Div, [](double x, double y) { return x / y; }},
      {Op::Max, [](double x, double y) { return std::max(x, y); }},
      {Op::Min, [](double x, double y) { return std::min(x, y); }},
      {Op::Mod, [](double x, double y) { return x - std::floor(x / y) * y; }},
      {Op::Pow, [](double x, double y) { return std::pow(std::fabs(x), y); }},
  };
  const std::vector<std::pair<Op, std::function<double(double, double)>>> cmp = {
      {Op::Equal, [](double x, double y) { return x == y; }}, {Op::NotEqual, [](double x, double y) { return x != y; }},
      {Op::Less, [](double x, double y) { return x < y; }}, {Op::LessEqual, [](double x, double y) { return x <= y; }},
      {Op::Greater, [](double x, double y) { return x > y; }},
      {Op::GreaterEqual, [](double x, double y) { return x >= y; }},
  };
  uint64_t seed = 100;
  for (DType d : {DType::F32, DType::F64}) {
    double rtol = d == DType::F32 ? 2e-6 : 1e-12;
    for (const auto& [sa, sb] : kBroadcastPatterns) {
      Array a = random_array(d, sa, ++seed, -3.0, 3.0), b = random_array(d, sb, ++seed, 0.5, 3.0);
      Array abs_a = map_expected(a, d, [](double v) { return std::fabs(v); });
      for (const auto& [op, f] : arith) check_binary(op, op == Op::Pow ? abs_a : a, b, d, f, rtol * 4);
      // Integer-valued operands so that equal values occur.
      Array ia = random_array(d, sa, ++seed, -3.0, 3.0), ib = random_array(d, sb, ++seed, -3.0, 3.0);
      ia = map_expected(ia, d, [](double v) { return std::trunc(v); });
      ib = map_expected(ib, d, [](double v) { return std::trunc(v); });
      for (const auto& [op, f] : cmp) check_binary(op, ia, ib, DType::Bool, f);
    }
  }
}

TEST(ReferenceBinary, HalfTypesComputeInFloatAndRoundOnce) {
  for (DType d : {DType::F16, DType::BF16}) {
    Array a = random_array(d, {5, 7}, 21), b = random_array(d, {5, 1}, 22, 0.5, 2.0);
    for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div}) {
      Array got = run_op1(op, {a, b});
      Array want(d, {5, 7});
      for (int64_t i = 0; i < 35; ++i) {
        float x = float(a.get_f64(i)), y = float(b.get_f64(i / 7));
        float r = op == Op::Add ? x + y : op == Op::Sub ? x - y : op == Op::Mul ? x * y : x / y;
        want.set_f64(i, r);  // float -> narrow type: one rounding
      }
      EXPECT_TRUE(got.same_data(want)) << op_keyword(op) << " " << dtype_name(d);
    }
    check_binary(Op::Less, a, b, DType::Bool, [](double x, double y) { return x < y; });
  }
}

TEST(ReferenceBinary, IntegerArithmeticWraps) {
  auto bin = [](Op op, DType d, std::vector<int64_t> x, std::vector<int64_t> y) {
    int64_t n = int64_t(x.size());
    return to_ints(run_op1(op, {array_of_ints(d, {n}, x), array_of_ints(d, {n}, y)}));
  };
  EXPECT_EQ(bin(Op::Add, DType::I32, {INT32_MAX, -5}, {1, 3}), (std::vector<int64_t>{INT32_MIN, -2}));
  EXPECT_EQ(bin(Op::Sub, DType::I64, {INT64_MIN, 5}, {1, 7}), (std::vector<int64_t>{INT64_MAX, -2}));
  EXPECT_EQ(bin(Op::Add, DType::U8, {250, 3}, {10, 4}), (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(bin(Op::Sub, DType::U8, {3}, {4}), (std::vector<int64_t>{255}));
  EXPECT_EQ(bin(Op::Mul, DType::I32, {65536, -46341}, {65536, 46341}), (std::vector<int64_t>{0, 2147479015}));
  EXPECT_EQ(bin(Op::Mul, DType::I8, {100, -128}, {3, -1}), (std::vector<int64_t>{44, -128}));
  EXPECT_EQ(bin(Op::Mul, DType::I64, {INT64_MAX}, {2}), (std::vector<int64_t>{-2}));
  EXPECT_EQ(bin(Op::Max, DType::I32, {-3, 5}, {2, 1}), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(bin(Op::Min, DType::U8, {3, 200}, {4, 100}), (std::vector<int64_t>{3, 100}));
}

TEST(ReferenceBinary, IntegerDivisionAndModuloAreTotal) {
  for (DType d : {DType::I8, DType::I32, DType::I64}) {
    int64_t lo = d == DType::I8 ? INT8_MIN : d == DType::I32 ? INT32_MIN : INT64_MIN;
    Array x = array_of_ints(d, {8}, {7, -7, 7, -7, 5, lo, lo, 0});
    Array y = array_of_ints(d, {8}, {2, 2, -2, -2, 0, -1, 3, 0});
    EXPECT_EQ(to_ints(run_op1(Op::Div, {x, y})), (std::vector<int64_t>{3, -3, -3, 3, 0, lo, lo / 3, 0}))
        << dtype_name(d);
    int64_t lo_mod3 = lo - (lo / 3) * 3;  // lo % 3, moved into the divisor's sign
    if (lo_mod3 < 0) lo_mod3 += 3;
    EXPECT_EQ(to_ints(run_op1(Op::Mod, {x, y})), (std::vector<int64_t>{1, 1, -1, -1, 0, 0, lo_mod3, 0}))
        << dtype_name(d);
  }
  Array u = array_of_ints(DType::U8, {3}, {200, 7, 9});
  EXPECT_EQ(to_ints(run_op1(Op::Div, {u, array_of_ints(DType::U8, {3}, {3, 0, 2})})), (std::vector<int64_t>{66, 0, 4}));
  EXPECT_EQ(to_ints(run_op1(Op::Mod, {u, array_of_ints(DType::U8, {3}, {3, 0, 2})})), (std::vector<int64_t>{2, 0, 1}));
  // Random data against the floor-modulo definition x - floor(x / y) * y.
  Array a = random_array(DType::I32, {200}, 31, -1000, 1000), b = random_array(DType::I32, {200}, 32, -20, 20);
  Array m = run_op1(Op::Mod, {a, b}), q = run_op1(Op::Div, {a, b});
  for (int64_t i = 0; i < 200; ++i) {
    int64_t x = a.get_i64(i), y = b.get_i64(i);
    EXPECT_EQ(m.get_i64(i), y == 0 ? 0 : x - int64_t(std::floor(double(x) / double(y))) * y);
    EXPECT_EQ(q.get_i64(i), y == 0 ? 0 : int64_t(std::trunc(double(x) / double(y))));
  }
}

TEST(ReferenceBinary, IntegerPowerBySquaringWraps) {
  Array base = array_of_ints(DType::I32, {11}, {2, 3, 0, 2, 1, -1, -1, 2, 2, 3, -2});
  Array exp = array_of_ints(DType::I32, {11}, {10, 0, 0, -1, -5, -3, -4, 31, 32, 40, 3});
  uint32_t p3_40 = 1;
  for (int i = 0; i < 40; ++i) p3_40 *= 3u;
  EXPECT_EQ(to_ints(run_op1(Op::Pow, {base, exp})),
            (std::vector<int64_t>{1024, 1, 1, 0, 1, -1, 1, INT32_MIN, 0, int32_t(p3_40), -8}));
  EXPECT_EQ(to_ints(run_op1(Op::Pow, {array_of_ints(DType::U8, {2}, {2, 3}), array_of_ints(DType::U8, {2}, {8, 5})})),
            (std::vector<int64_t>{0, 243}));
  EXPECT_EQ(to_ints(run_op1(Op::Pow, {array_of_ints(DType::I64, {1}, {3}), array_of_ints(DType::I64, {1}, {INT64_MAX})})).size(), 1u);
}

TEST(ReferenceBinary, FloatEdgeCases) {
  Array x = array_of(DType::F64, {6}, {-7.5, 7.5, 5.0, -4.0, 4.0, -1.0});
  Array y = array_of(DType::F64, {6}, {2.0, -2.0, 0.0, 2.0, -2.0, INFINITY});
  Array m = run_op1(Op::Mod, {x, y});
  EXPECT_EQ(m.get_f64(0), 0.5);
  EXPECT_EQ(m.get_f64(1), -0.5);
  EXPECT_TRUE(std::isnan(m.get_f64(2)));
  EXPECT_EQ(m.get_f64(3), 0.0);
  EXPECT_FALSE(std::signbit(m.get_f64(3)));
  EXPECT_TRUE(std::signbit(m.get_f64(4)));  // zero takes the divisor's sign
  EXPECT_EQ(m.get_f64(5), INFINITY);        // as numpy: -1 mod inf = inf
  Array d = run_op1(Op::Div, {x, y});
  EXPECT_EQ(d.get_f64(2), INFINITY);
  Array n = array_of(DType::F32, {3}, {NAN, 1.0, NAN});
  Array v = array_of(DType::F32, {3}, {1.0, NAN, NAN});
  for (Op op : {Op::Max, Op::Min, Op::Add}) {
    Array r = run_op1(op, {n, v});
    for (int64_t i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(r.get_f64(i))) << op_keyword(op) << i;
  }
  EXPECT_EQ(to_ints(run_op1(Op::Equal, {n, v})), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(to_ints(run_op1(Op::NotEqual, {n, v})), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::LessEqual, {n, v})), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(to_ints(run_op1(Op::GreaterEqual, {n, v})), (std::vector<int64_t>{0, 0, 0}));
}

TEST(ReferenceBinary, BooleanOps) {
  Array a = array_of_ints(DType::Bool, {4}, {0, 0, 1, 1}), b = array_of_ints(DType::Bool, {4}, {0, 1, 0, 1});
  EXPECT_EQ(to_ints(run_op1(Op::And, {a, b})), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::Or, {a, b})), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::Equal, {a, b})), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::Less, {a, b})), (std::vector<int64_t>{0, 1, 0, 0}));
  Array c = random_array(DType::Bool, {5, 1}, 41), e = random_array(DType::Bool, {1, 6}, 42);
  check_binary(Op::And, c, e, DType::Bool, [](double x, double y) { return x != 0 && y != 0; });
  check_binary(Op::Or, c, e, DType::Bool, [](double x, double y) { return x != 0 || y != 0; });
  // Integers of every width broadcast the same way.
  for (DType d : {DType::I8, DType::U8, DType::I32, DType::I64}) {
    Array p = random_array(d, {5, 1}, 43, 0, 100), q = random_array(d, {1, 6}, 44, 0, 20);
    check_binary(Op::Add, p, q, d, [](double x, double y) { return x + y; });
    check_binary(Op::Greater, p, q, DType::Bool, [](double x, double y) { return x > y; });
  }
}

TEST(ReferenceWhere, SelectsWithThreeWayBroadcast) {
  Array x = random_array(DType::F32, {4, 6}, 51), y = random_array(DType::F32, {4, 6}, 52);
  Array all = array_of_ints(DType::Bool, {1}, {1}), none = array_of_ints(DType::Bool, {}, {0});
  EXPECT_TRUE(run_op1(Op::Where, {all, x, y}).same_data(x));
  EXPECT_TRUE(run_op1(Op::Where, {none, x, y}).same_data(y));
  for (DType d : {DType::F32, DType::F16, DType::I64, DType::U8, DType::Bool}) {
    Array c = random_array(DType::Bool, {4, 1}, 53), p = random_array(d, {1, 6}, 54, -50, 50);
    Array q = random_array(d, {}, 55, -50, 50);
    Array got = run_op1(Op::Where, {c, p, q});
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{4, 6}));
    for (int64_t i = 0; i < 24; ++i) {
      double want = c.get_f64(i / 6) != 0 ? p.get_f64(i % 6) : q.get_f64(0);
      EXPECT_EQ(got.get_f64(i), want) << dtype_name(d) << " " << i;
    }
  }
}

TEST(ReferenceExpand, CopiesAlongStretchedDims) {
  for (DType d : {DType::F64, DType::I32, DType::Bool, DType::BF16}) {
    Array x = random_array(d, {3, 1}, 61, -9, 9);
    Array got = run_op1(Op::Expand, {x}, {{"shape", make_shape({2, 3, 4})}});
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{2, 3, 4}));
    for (int64_t i = 0; i < got.numel(); ++i) EXPECT_EQ(got.get_f64(i), x.get_f64((i / 4) % 3)) << i;
  }
  // The target may itself hold 1s that the operand stretches.
  Array x = random_array(DType::F32, {1, 5}, 62);
  Array got = run_op1(Op::Expand, {x}, {{"shape", make_shape({4, 1})}});
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{4, 5}));
  for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(got.get_f64(i), x.get_f64(i % 5));
}

TEST(ReferenceElementwise, EmptyTensors) {
  Array e = random_array(DType::F32, {0, 3}, 1), row = random_array(DType::F32, {1, 3}, 2);
  EXPECT_EQ(run_op1(Op::Exp, {e}).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(run_op1(Op::Cast, {e}, {{"to", DType::I8}}).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(run_op1(Op::Add, {e, row}).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(run_op1(Op::Where, {random_array(DType::Bool, {0, 1}, 3), row, row}).shape(), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(run_op1(Op::Expand, {row}, {{"shape", make_shape({0, 3})}}).shape(), (std::vector<int64_t>{0, 3}));
}

TEST(ReferenceElementwise, KernelsOverwriteEveryResultElement) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Array x = random_array(d, {3, 5}, 71), pos = random_array(d, {3, 5}, 72, 0.1, 3.0);
    Array col = random_array(d, {3, 1}, 73);
    for (const UnaryCase& c : float_unary_cases()) run_reference_poisoned(c.op, {c.positive_domain ? pos : x}, c.attrs);
    for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Max, Op::Min, Op::Mod, Op::Equal,
                  Op::NotEqual, Op::Less, Op::LessEqual, Op::Greater, Op::GreaterEqual}) {
      run_reference_poisoned(op, {pos, col});
      run_reference_poisoned(op, {col, x});
    }
    run_reference_poisoned(Op::Where, {random_array(DType::Bool, {1, 5}, 74), x, col});
    run_reference_poisoned(Op::Expand, {col}, {{"shape", make_shape({2, 3, 4})}});
  }
  for (DType d : {DType::I8, DType::U8, DType::I32, DType::I64}) {
    Array x = random_array(d, {4, 3}, 75, -100, 100), row = random_array(d, {3}, 76, -9, 9);
    for (Op op : {Op::Neg, Op::Abs, Op::Relu, Op::Identity}) run_reference_poisoned(op, {x});
    run_reference_poisoned(Op::Clip, {x}, {{"min", -5.0}, {"max", 5.0}});
    for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Max, Op::Min, Op::Mod, Op::Equal, Op::Less}) {
      run_reference_poisoned(op, {x, row});
    }
  }
  Array b = random_array(DType::Bool, {4, 3}, 77), brow = random_array(DType::Bool, {3}, 78);
  for (Op op : {Op::And, Op::Or, Op::Equal, Op::NotEqual}) run_reference_poisoned(op, {b, brow});
  run_reference_poisoned(Op::Not, {b});
  for (DType from : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64, DType::Bool}) {
    for (DType to : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64, DType::Bool}) {
      run_reference_poisoned(Op::Cast, {random_array(from, {2, 7}, 79, -300, 300)}, {{"to", to}});
    }
  }
}

}  // namespace
}  // namespace fusebox
