// Reference kernels of the unary element-wise ops (neg .. cast).
//
// Float ops compute in the dtype's Compute type (f32 and f16/bf16 in float, f64 in double) and
// store with one rounding. neg/abs/relu/clip also take integers and wrap (abs(INT_MIN) is
// INT_MIN). Where NaN could be swallowed by a comparison (relu, clip, hardsigmoid, hardswish) the
// comparisons are written so that NaN propagates.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

namespace {

// out[i] = store(f(load(in[i]))) over every element.
template <DType D, typename F>
void map_elements(const Array& x, Array& y, F f) {
  using T = DTypeTraits<D>;
  FUSEBOX_CHECK(x.numel() == y.numel() && y.dtype() == D) << "unary result does not match operand";
  const Storage<D>* in = x.data<Storage<D>>();
  Storage<D>* out = y.data<Storage<D>>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = T::store(f(T::load(in[i])));
}

// A float-only op; f is called with the Compute type (float or double).
template <typename F>
Status float_unary(const KernelArgs& a, F f) {
  return visit_dtype(a.in[0].dtype(), [&]<DType D>() -> Status {
    if constexpr (kIsFloatType<D>) {
      map_elements<D>(a.in[0], a.out[0], f);
      return Status::ok();
    } else {
      return unsupported_dtype(a, D);
    }
  });
}

// An op on floats and integers: float_f for floats, int_f for integers.
template <typename FloatF, typename IntF>
Status numeric_unary(const KernelArgs& a, FloatF float_f, IntF int_f) {
  return visit_dtype(a.in[0].dtype(), [&]<DType D>() -> Status {
    if constexpr (kIsFloatType<D>) {
      map_elements<D>(a.in[0], a.out[0], float_f);
      return Status::ok();
    } else if constexpr (kIsIntType<D>) {
      map_elements<D>(a.in[0], a.out[0], int_f);
      return Status::ok();
    } else {
      return unsupported_dtype(a, D);
    }
  });
}

// Two's complement negation without signed overflow: -INT_MIN is INT_MIN.
template <typename T>
T wrap_neg(T x) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(U(0) - static_cast<U>(x)));
}

template <typename C>
C stable_sigmoid(C x) {
  // exp of a non-positive argument only, so neither branch overflows.
  if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
  C e = std::exp(x);
  return e / (C(1) + e);
}

// Round half to even, independent of the floating-point environment; keeps the sign of zero.
template <typename C>
C round_half_even(C x) {
  C f = std::floor(x);
  C diff = x - f;
  C r;
  if (diff < C(0.5)) r = f;
  else if (diff > C(0.5)) r = f + C(1);
  else r = std::fmod(f, C(2)) == C(0) ? f : f + C(1);
  return r == C(0) ? std::copysign(C(0), x) : r;
}

// --- cast -------------------------------------------------------------------------------------

// An integer rounded to nearest even with `bits` significant bits. The result has at most `bits`
// significant bits, so it converts to float exactly and then to f16/bf16 exactly (or overflows to
// inf exactly where the correctly rounded value does): one rounding in all.
float int_to_float_bits(int64_t v, int bits) {
  bool neg = v < 0;
  uint64_t u = neg ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  int top = 63;
  while (top > 0 && !((u >> top) & 1u)) --top;
  double r;
  if (top < bits) {
    r = double(u);
  } else {
    int shift = top - bits + 1;
    uint64_t keep = u >> shift;
    uint64_t rem = u & ((uint64_t(1) << shift) - 1);
    uint64_t half = uint64_t(1) << (shift - 1);
    if (rem > half || (rem == half && (keep & 1u))) ++keep;  // may carry to bits+1 bits: exact
    r = std::ldexp(double(keep), shift);
  }
  return static_cast<float>(neg ? -r : r);
}

template <DType From, DType To>
Storage<To> cast_element(Storage<From> s) {
  using FromT = DTypeTraits<From>;
  using ToT = DTypeTraits<To>;
  if constexpr (To == DType::Bool) {
    return FromT::load(s) != typename FromT::Compute(0);  // NaN != 0: true
  } else if constexpr (From == DType::Bool) {
    if constexpr (kIsFloatType<To>) return ToT::store(typename ToT::Compute(s ? 1 : 0));
    else return static_cast<Storage<To>>(s ? 1 : 0);
  } else if constexpr (kIsFloatType<From> && kIsIntType<To>) {
    return static_cast<Storage<To>>(f64_to_i64(double(FromT::load(s))));
  } else if constexpr (kIsIntType<From> && kIsIntType<To>) {
    return static_cast<Storage<To>>(s);  // modular narrowing (defined since C++20)
  } else if constexpr (kIsIntType<From>) {  // integer to float
    if constexpr (To == DType::F64) return static_cast<double>(s);
    else if constexpr (To == DType::F32) return static_cast<float>(s);
    else if constexpr (To == DType::F16) return ToT::store(int_to_float_bits(int64_t(s), 11));
    else return ToT::store(int_to_float_bits(int64_t(s), 8));
  } else {  // float to float
    return store_f64<To>(double(FromT::load(s)));
  }
}

template <DType From>
Status cast_from(const KernelArgs& a) {
  DType to = a.out[0].dtype();
  FUSEBOX_CHECK(to == a.node.attr_dtype("to") && a.out[0].numel() == a.in[0].numel())
      << "cast result does not match its attribute";
  return visit_dtype(to, [&]<DType To>() -> Status {
    const Storage<From>* in = a.in[0].data<Storage<From>>();
    Storage<To>* out = a.out[0].data<Storage<To>>();
    for (int64_t i = 0; i < a.in[0].numel(); ++i) out[i] = cast_element<From, To>(in[i]);
    return Status::ok();
  });
}

}  // namespace

Status ref_Neg(const KernelArgs& a) {
  return numeric_unary(a, [](auto x) { return -x; }, [](auto x) { return wrap_neg(x); });
}

Status ref_Abs(const KernelArgs& a) {
  return numeric_unary(
      a, [](auto x) { return std::fabs(x); },
      [](auto x) {
        if constexpr (std::is_signed_v<decltype(x)>) return x < 0 ? wrap_neg(x) : x;
        else return x;
      });
}

Status ref_Exp(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::exp(x); }); }
Status ref_Log(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::log(x); }); }
Status ref_Sqrt(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::sqrt(x); }); }

Status ref_Rsqrt(const KernelArgs& a) {
  return float_unary(a, [](auto x) { return decltype(x)(1) / std::sqrt(x); });
}

Status ref_Reciprocal(const KernelArgs& a) {
  return float_unary(a, [](auto x) { return decltype(x)(1) / x; });
}

Status ref_Tanh(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::tanh(x); }); }

Status ref_Sigmoid(const KernelArgs& a) {
  return float_unary(a, [](auto x) { return stable_sigmoid(x); });
}

Status ref_Relu(const KernelArgs& a) {
  // NaN stays NaN; -0 gives +0.
  return numeric_unary(
      a, [](auto x) { return x != x ? x : (x > decltype(x)(0) ? x : decltype(x)(0)); },
      [](auto x) { return x > decltype(x)(0) ? x : decltype(x)(0); });
}

Status ref_LeakyRelu(const KernelArgs& a) {
  double alpha = a.node.attr_f64("alpha");
  return float_unary(a, [alpha](auto x) {
    using C = decltype(x);
    return x < C(0) ? C(alpha) * x : x;
  });
}

Status ref_Gelu(const KernelArgs& a) {
  if (a.node.attr_str("approximate") == "tanh") {
    return float_unary(a, [](auto x) {
      using C = decltype(x);
      const C k = C(std::sqrt(2.0 / 3.14159265358979323846));
      return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
    });
  }
  return float_unary(a, [](auto x) {
    using C = decltype(x);
    return C(0.5) * x * (C(1) + std::erf(x / C(1.41421356237309504880)));
  });
}

Status ref_Silu(const KernelArgs& a) {
  return float_unary(a, [](auto x) { return x * stable_sigmoid(x); });
}

Status ref_Erf(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::erf(x); }); }

Status ref_HardSigmoid(const KernelArgs& a) {
  double alpha = a.node.attr_f64("alpha"), beta = a.node.attr_f64("beta");
  return float_unary(a, [alpha, beta](auto x) {
    using C = decltype(x);
    C v = C(alpha) * x + C(beta);
    v = v < C(0) ? C(0) : v;
    return v > C(1) ? C(1) : v;
  });
}

Status ref_HardSwish(const KernelArgs& a) {
  return float_unary(a, [](auto x) {
    using C = decltype(x);
    C t = x + C(3);
    t = t < C(0) ? C(0) : t;
    t = t > C(6) ? C(6) : t;
    return x * t / C(6);
  });
}

Status ref_Sin(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::sin(x); }); }
Status ref_Cos(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::cos(x); }); }
Status ref_Tan(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::tan(x); }); }
Status ref_Asin(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::asin(x); }); }
Status ref_Acos(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::acos(x); }); }
Status ref_Atan(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::atan(x); }); }
Status ref_Sinh(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::sinh(x); }); }
Status ref_Cosh(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::cosh(x); }); }
Status ref_Asinh(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::asinh(x); }); }
Status ref_Acosh(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::acosh(x); }); }
Status ref_Atanh(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::atanh(x); }); }
Status ref_Floor(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::floor(x); }); }
Status ref_Ceil(const KernelArgs& a) { return float_unary(a, [](auto x) { return std::ceil(x); }); }

Status ref_Round(const KernelArgs& a) {
  return float_unary(a, [](auto x) { return round_half_even(x); });
}

Status ref_Not(const KernelArgs& a) {
  if (a.in[0].dtype() != DType::Bool) return unsupported_dtype(a, a.in[0].dtype());
  map_elements<DType::Bool>(a.in[0], a.out[0], [](bool x) { return !x; });
  return Status::ok();
}

Status ref_Clip(const KernelArgs& a) {
  // Absent bounds (and NaN bounds) are unbounded. Floats clip as min(max(x, lo), hi), so lo > hi
  // gives hi and NaN x stays NaN. Integers clip to the integers inside [min, max]: the bounds
  // round inward (ceil of min, floor of max) and saturate to the type's range.
  double lo = a.node.has_attr("min") ? a.node.attr_f64("min") : -INFINITY;
  double hi = a.node.has_attr("max") ? a.node.attr_f64("max") : INFINITY;
  if (lo != lo) lo = -INFINITY;
  if (hi != hi) hi = INFINITY;
  return visit_dtype(a.in[0].dtype(), [&]<DType D>() -> Status {
    if constexpr (kIsFloatType<D>) {
      using C = typename DTypeTraits<D>::Compute;
      C clo = C(lo), chi = C(hi);
      map_elements<D>(a.in[0], a.out[0], [=](C x) {
        C v = x < clo ? clo : x;
        return v > chi ? chi : v;
      });
      return Status::ok();
    } else if constexpr (kIsIntType<D>) {
      using C = typename DTypeTraits<D>::Compute;
      const double tmin = double(std::numeric_limits<C>::min());
      const double tmax = double(std::numeric_limits<C>::max());
      // Saturate before converting: every value here is exactly an integer in C's range (the
      // i64 maximum 2^63-1 is not a double, so that end is handled by the comparison).
      auto to_bound = [&](double v) -> C {
        if (v <= tmin) return std::numeric_limits<C>::min();
        if (v >= tmax) return std::numeric_limits<C>::max();
        return static_cast<C>(v);
      };
      C ilo = to_bound(std::ceil(lo)), ihi = to_bound(std::floor(hi));
      map_elements<D>(a.in[0], a.out[0], [=](C x) {
        C v = x < ilo ? ilo : x;
        return v > ihi ? ihi : v;
      });
      return Status::ok();
    } else {
      return unsupported_dtype(a, D);
    }
  });
}

Status ref_Identity(const KernelArgs& a) {
  FUSEBOX_CHECK(a.in[0].nbytes() == a.out[0].nbytes() && a.in[0].dtype() == a.out[0].dtype())
      << "identity result does not match operand";
  if (a.in[0].nbytes()) std::memcpy(a.out[0].raw(), a.in[0].raw(), a.in[0].nbytes());
  return Status::ok();
}

Status ref_Cast(const KernelArgs& a) {
  return visit_dtype(a.in[0].dtype(), [&]<DType From>() { return cast_from<From>(a); });
}

}  // namespace fusebox::cpu
