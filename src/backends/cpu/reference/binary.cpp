// Reference kernels of the binary ops with numpy broadcasting (add .. or), where and expand.
//
// Integer semantics are total: add/sub/mul/pow wrap (computed in unsigned, so no signed
// overflow), div truncates with x/0 = 0 and INT_MIN/-1 = INT_MIN, mod is floor modulo with
// x mod 0 = 0. Floats: mod is floor modulo too (x mod 0 = NaN), max/min propagate NaN,
// comparisons follow IEEE (NaN is unequal to everything).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

namespace {

// out[i] = f(load(a[ia]), load(b[ib])) over the broadcast index space of the result; OutD is the
// result's dtype (bool for comparisons), f returns its Compute type.
template <DType D, DType OutD, typename F>
void broadcast_binary(const Array& a, const Array& b, Array& out, F f) {
  using T = DTypeTraits<D>;
  using OutT = DTypeTraits<OutD>;
  FUSEBOX_CHECK(out.dtype() == OutD && a.dtype() == D && b.dtype() == D) << "binary dtypes";
  const Storage<D>* pa = a.data<Storage<D>>();
  const Storage<D>* pb = b.data<Storage<D>>();
  Storage<OutD>* po = out.data<Storage<OutD>>();
  if (a.shape() == out.shape() && b.shape() == out.shape()) {
    for (int64_t i = 0; i < out.numel(); ++i) po[i] = OutT::store(f(T::load(pa[i]), T::load(pb[i])));
    return;
  }
  MultiIndex it(out.shape(), {broadcast_strides(a.shape(), out.shape()),
                              broadcast_strides(b.shape(), out.shape())});
  for (int64_t i = 0; !it.done(); it.next(), ++i) {
    po[i] = OutT::store(f(T::load(pa[it.offset(0)]), T::load(pb[it.offset(1)])));
  }
}

// Arithmetic ops (result dtype = operand dtype): float_f for floats, int_f for integers.
template <typename FloatF, typename IntF>
Status arith(const KernelArgs& a, FloatF float_f, IntF int_f) {
  return visit_dtype(a.in[0].dtype(), [&]<DType D>() -> Status {
    if constexpr (kIsFloatType<D>) {
      broadcast_binary<D, D>(a.in[0], a.in[1], a.out[0], float_f);
      return Status::ok();
    } else if constexpr (kIsIntType<D>) {
      broadcast_binary<D, D>(a.in[0], a.in[1], a.out[0], int_f);
      return Status::ok();
    } else {
      return unsupported_dtype(a, D);
    }
  });
}

// Comparisons on any dtype, result bool.
template <typename F>
Status compare(const KernelArgs& a, F f) {
  return visit_dtype(a.in[0].dtype(), [&]<DType D>() -> Status {
    broadcast_binary<D, DType::Bool>(a.in[0], a.in[1], a.out[0], f);
    return Status::ok();
  });
}

template <typename F>
Status logical(const KernelArgs& a, F f) {
  if (a.in[0].dtype() != DType::Bool) return unsupported_dtype(a, a.in[0].dtype());
  broadcast_binary<DType::Bool, DType::Bool>(a.in[0], a.in[1], a.out[0], f);
  return Status::ok();
}

template <typename T>
using Unsigned = std::make_unsigned_t<T>;

template <typename T>
T wrap_add(T x, T y) { return static_cast<T>(static_cast<Unsigned<T>>(Unsigned<T>(x) + Unsigned<T>(y))); }
template <typename T>
T wrap_sub(T x, T y) { return static_cast<T>(static_cast<Unsigned<T>>(Unsigned<T>(x) - Unsigned<T>(y))); }
template <typename T>
T wrap_mul(T x, T y) {
  // uint64 products never promote to a signed type; narrowing then keeps the low bits.
  return static_cast<T>(uint64_t(Unsigned<T>(x)) * uint64_t(Unsigned<T>(y)));
}

template <typename T>
T int_div(T x, T y) {
  if (y == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return wrap_sub(T(0), x);  // INT_MIN / -1 wraps to INT_MIN
  }
  return static_cast<T>(x / y);
}

template <typename T>
T int_mod(T x, T y) {
  if (y == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (y == -1) return 0;  // also avoids INT_MIN % -1
    T r = static_cast<T>(x % y);
    if (r != 0 && ((r < 0) != (y < 0))) r = static_cast<T>(r + y);
    return r;
  } else {
    return static_cast<T>(x % y);
  }
}

template <typename C>
C float_mod(C x, C y) {
  // numpy's rule: fmod, moved into the divisor's sign; a zero result takes the divisor's sign.
  C r = std::fmod(x, y);
  if (r != C(0)) {
    if ((r < C(0)) != (y < C(0))) r += y;
  } else {
    r = std::copysign(C(0), y);
  }
  return r;
}

template <typename T>
T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  uint64_t result = 1, b = uint64_t(int64_t(base));
  uint64_t e = uint64_t(int64_t(exp));
  while (e) {
    if (e & 1u) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);  // low bits of the 64-bit power: the power modulo 2^width
}

template <typename C>
C nan_max(C x, C y) {
  if (x != x) return x;
  if (y != y) return y;
  return x < y ? y : x;
}
template <typename C>
C nan_min(C x, C y) {
  if (x != x) return x;
  if (y != y) return y;
  return y < x ? y : x;
}

}  // namespace

Status ref_Add(const KernelArgs& a) {
  return arith(a, [](auto x, auto y) { return x + y; }, [](auto x, auto y) { return wrap_add(x, y); });
}

Status ref_Sub(const KernelArgs& a) {
  return arith(a, [](auto x, auto y) { return x - y; }, [](auto x, auto y) { return wrap_sub(x, y); });
}

Status ref_Mul(const KernelArgs& a) {
  return arith(a, [](auto x, auto y) { return x * y; }, [](auto x, auto y) { return wrap_mul(x, y); });
}

Status ref_Div(const KernelArgs& a) {
  return arith(a, [](auto x, auto y) { return x / y; }, [](auto x, auto y) { return int_div(x, y); });
}

Status ref_Pow(const KernelArgs& a) {
  return arith(a, [](auto x, auto y) { return std::pow(x, y); },
               [](auto x, auto y) { return int_pow(x, y); });
}

Status ref_Max(const KernelArgs& a) {
  return arith(a, [](auto x, auto y) { return nan_max(x, y); },
               [](auto x, auto y) { return x < y ? y : x; });
}

Status ref_Min(const KernelArgs& a) {
  return arith(a, [](auto x, auto y) { return nan_min(x, y); },
               [](auto x, auto y) { return y < x ? y : x; });
}

Status ref_Mod(const KernelArgs& a) {
  if (a.node.attr_bool("fmod")) {  // truncated: the result takes the dividend's sign (C fmod, %)
    return arith(a, [](auto x, auto y) { return std::fmod(x, y); }, [](auto x, auto y) {
      using T = decltype(x);
      if (y == 0) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (y == -1) return T(0);  // also avoids INT_MIN % -1
      }
      return static_cast<T>(x % y);
    });
  }
  return arith(a, [](auto x, auto y) { return float_mod(x, y); },
               [](auto x, auto y) { return int_mod(x, y); });
}

// Shifts by the bit width or more give 0 (C++ leaves them undefined; ONNX does not say).
Status ref_BitShift(const KernelArgs& a) {
  const bool left = a.node.attr_str("direction") == "left";
  return visit_dtype(a.in[0].dtype(), [&]<DType D>() -> Status {
    if constexpr (kIsIntType<D>) {
      using T = Storage<D>;
      if constexpr (std::is_unsigned_v<T>) {
        broadcast_binary<D, D>(a.in[0], a.in[1], a.out[0], [left](T x, T s) -> T {
          if (s >= T(8 * sizeof(T))) return T(0);
          return left ? static_cast<T>(x << s) : static_cast<T>(x >> s);
        });
        return Status::ok();
      }
    }
    return unsupported_dtype(a, D);
  });
}

Status ref_Equal(const KernelArgs& a) { return compare(a, [](auto x, auto y) { return x == y; }); }
Status ref_NotEqual(const KernelArgs& a) { return compare(a, [](auto x, auto y) { return x != y; }); }
Status ref_Less(const KernelArgs& a) { return compare(a, [](auto x, auto y) { return x < y; }); }
Status ref_LessEqual(const KernelArgs& a) { return compare(a, [](auto x, auto y) { return x <= y; }); }
Status ref_Greater(const KernelArgs& a) { return compare(a, [](auto x, auto y) { return x > y; }); }
Status ref_GreaterEqual(const KernelArgs& a) { return compare(a, [](auto x, auto y) { return x >= y; }); }

Status ref_And(const KernelArgs& a) { return logical(a, [](bool x, bool y) { return x && y; }); }
Status ref_Or(const KernelArgs& a) { return logical(a, [](bool x, bool y) { return x || y; }); }

Status ref_Where(const KernelArgs& a) {
  const Array& cond = a.in[0];
  const Array &x = a.in[1], &y = a.in[2];
  Array& out = a.out[0];
  FUSEBOX_CHECK(cond.dtype() == DType::Bool && x.dtype() == out.dtype() && y.dtype() == out.dtype())
      << "where dtypes";
  // A plain element copy: the selected branch's bits are stored unchanged.
  size_t size = size_t(dtype_size(out.dtype()));
  const bool* pc = cond.data<bool>();
  const uint8_t* px = static_cast<const uint8_t*>(x.raw());
  const uint8_t* py = static_cast<const uint8_t*>(y.raw());
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  MultiIndex it(out.shape(), {broadcast_strides(cond.shape(), out.shape()),
                              broadcast_strides(x.shape(), out.shape()),
                              broadcast_strides(y.shape(), out.shape())});
  for (size_t i = 0; !it.done(); it.next(), ++i) {
    const uint8_t* src = pc[it.offset(0)] ? px + size_t(it.offset(1)) * size : py + size_t(it.offset(2)) * size;
    std::memcpy(po + i * size, src, size);
  }
  return Status::ok();
}

Status ref_Expand(const KernelArgs& a) {
  const Array& x = a.in[0];
  Array& out = a.out[0];
  FUSEBOX_CHECK(x.dtype() == out.dtype()) << "expand dtypes";
  size_t size = size_t(dtype_size(out.dtype()));
  const uint8_t* px = static_cast<const uint8_t*>(x.raw());
  uint8_t* po = static_cast<uint8_t*>(out.raw());
  MultiIndex it(out.shape(), {broadcast_strides(x.shape(), out.shape())});
  for (size_t i = 0; !it.done(); it.next(), ++i) {
    std::memcpy(po + i * size, px + size_t(it.offset(0)) * size, size);
  }
  return Status::ok();
}

}  // namespace fusebox::cpu
