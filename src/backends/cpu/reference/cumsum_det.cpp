// Reference kernels of cumsum (a running sum along one axis, given as the attribute or as a
// run-time operand: inclusive or exclusive, forward or reversed) and det (the determinant of
// each square matrix over the last two axes).
//
// cumsum adds in the dtype's compute type (f16/bf16 in float, rounded at each stored element;
// integers wrap). det factorises each matrix in double by LU decomposition with partial pivoting
// (the row of the largest magnitude is swapped up, each swap flips the sign); the determinant is
// the signed product of the pivots, rounded once. A singular matrix gives 0; NaN propagates.
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

Status ref_CumSum(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  const std::span<const int64_t> shape = x.shape();
  // The axis: the attribute, or the run-time operand (range-checked here).
  const int64_t given = args.in.size() == 2 ? args.in[1].get_i64(0) : args.node.attr_i64("axis");
  const std::optional<int> normalized = normalize_axis(given, x.rank());
  if (!normalized) {
    return Status::invalid("cumsum: axis " + std::to_string(given) + " is out of range for rank " +
                           std::to_string(x.rank()));
  }
  const size_t axis = size_t(*normalized);
  const bool exclusive = args.node.attr_bool("exclusive"), reverse = args.node.attr_bool("reverse");
  const int64_t len = shape[axis], inner = product(shape.subspan(axis + 1));
  const int64_t outer = product(shape.subspan(0, axis));
  return visit_dtype(x.dtype(), [&]<DType D>() -> Status {
    using T = DTypeTraits<D>;
    if constexpr (D == DType::Bool) {
      return unsupported_dtype(args, D);
    } else {
      const Storage<D>* px = x.data<Storage<D>>();
      Storage<D>* py = y.data<Storage<D>>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          typename T::Compute sum{};
          for (int64_t s = 0; s < len; ++s) {
            const int64_t k = reverse ? len - 1 - s : s;
            const int64_t at = (o * len + k) * inner + i;
            const typename T::Compute v = T::load(px[at]);
            if (exclusive) py[at] = T::store(sum);
            if constexpr (kIsIntType<D>) {  // wraps, through unsigned arithmetic
              sum = static_cast<typename T::Compute>(uint64_t(int64_t(sum)) + uint64_t(int64_t(v)));
            } else {
              sum = sum + v;
            }
            if (!exclusive) py[at] = T::store(sum);
          }
        }
      }
      return Status::ok();
    }
  });
}

Status ref_Det(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  const int64_t m = x.shape().back(), count = y.numel();
  return visit_dtype(x.dtype(), [&]<DType D>() -> Status {
    if constexpr (!kIsFloatType<D>) {
      return unsupported_dtype(args, D);
    } else {
      const Storage<D>* px = x.data<Storage<D>>();
      Storage<D>* py = y.data<Storage<D>>();
      std::vector<double> a(size_t(m * m));
      for (int64_t b = 0; b < count; ++b) {
        for (int64_t i = 0; i < m * m; ++i) a[size_t(i)] = double(DTypeTraits<D>::load(px[b * m * m + i]));
        double det = 1;
        for (int64_t c = 0; c < m; ++c) {
          int64_t pivot = c;
          for (int64_t r = c + 1; r < m; ++r) {
            if (std::fabs(a[size_t(r * m + c)]) > std::fabs(a[size_t(pivot * m + c)])) pivot = r;
          }
          if (pivot != c) {
            for (int64_t k = 0; k < m; ++k) std::swap(a[size_t(c * m + k)], a[size_t(pivot * m + k)]);
            det = -det;
          }
          const double p = a[size_t(c * m + c)];
          det *= p;
          if (p == 0) break;  // singular: the determinant is 0 (times the sign)
          for (int64_t r = c + 1; r < m; ++r) {
            const double f = a[size_t(r * m + c)] / p;
            for (int64_t k = c; k < m; ++k) a[size_t(r * m + k)] -= f * a[size_t(c * m + k)];
          }
        }
        py[b] = store_f64<D>(det);
      }
      return Status::ok();
    }
  });
}

}  // namespace fusebox::cpu
