// Reference kernels of the reductions: reduce_{sum,mean,max,min,prod} and argmax/argmin.
//
// Float sums, means and products accumulate in double in row-major input order and round once
// into the result dtype. Integer sums and products wrap in 64-bit unsigned arithmetic and then
// narrow (the same as wrapping at the element width). max/min and the arg-reductions treat NaN
// as the extreme value: it wins, and the first NaN is the one argmax/argmin report (numpy).
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

namespace {

// Where each input element lands in the (keepdims-free) result: for each input dim, the stride of
// the result along it, 0 on reduced dims. `count` is how many inputs meet in one result.
struct ReduceMap {
  std::vector<int64_t> out_strides;
  int64_t count = 1;
  int64_t out_numel = 1;
};

Expected<ReduceMap> reduce_map(const KernelArgs& a) {
  const std::vector<int64_t>& shape = a.in[0].shape();
  int rank = static_cast<int>(shape.size());
  std::vector<bool> reduced(shape.size(), false);
  const std::vector<int64_t>& axes = a.node.attr_i64s("axes");
  if (axes.empty()) reduced.assign(shape.size(), true);
  for (int64_t axis : axes) {
    std::optional<int> n = normalize_axis(axis, rank);
    if (!n) return Status::invalid("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
    reduced[size_t(*n)] = true;
  }
  std::vector<int64_t> kept;
  ReduceMap m;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) m.count *= shape[d];
    else kept.push_back(shape[d]);
  }
  std::vector<int64_t> kept_strides = contiguous_strides(kept);
  m.out_strides.assign(shape.size(), 0);
  for (size_t d = 0, k = 0; d < shape.size(); ++d) {
    if (!reduced[d]) m.out_strides[d] = kept_strides[k++];
  }
  m.out_numel = product(kept);
  FUSEBOX_CHECK(m.out_numel == a.out[0].numel()) << "reduction result size";
  return m;
}

// Folds every input element into acc[result index] with combine(acc, x).
template <DType D, typename Acc, typename F>
void fold(const Array& x, const ReduceMap& m, std::vector<Acc>& acc, F combine) {
  const Storage<D>* px = x.data<Storage<D>>();
  MultiIndex it(x.shape(), {m.out_strides});
  for (int64_t i = 0; !it.done(); it.next(), ++i) {
    Acc& slot = acc[size_t(it.offset(0))];
    slot = combine(slot, DTypeTraits<D>::load(px[i]));
  }
}

enum class Kind { Sum, Mean, Prod, Max, Min };

template <DType D>
Status reduce_typed(const KernelArgs& a, const ReduceMap& m, Kind kind) {
  using C = typename DTypeTraits<D>::Compute;
  Storage<D>* out = a.out[0].data<Storage<D>>();
  size_t n = size_t(m.out_numel);
  if (kind == Kind::Max || kind == Kind::Min) {
    // Start from the identity of max/min; NaN, once in, stays (NaN propagates).
    bool is_max = kind == Kind::Max;
    if (m.count == 0 && n > 0) return Status::invalid("cannot reduce an empty dim with max/min");
    C lowest = std::numeric_limits<C>::lowest(), highest = std::numeric_limits<C>::max();
    if constexpr (kIsFloatType<D>) {
      highest = std::numeric_limits<C>::infinity();
      lowest = -highest;
    }
    std::vector<C> acc(n, is_max ? lowest : highest);
    fold<D>(a.in[0], m, acc, [is_max](C s, C x) {
      if (s != s) return s;
      if (x != x) return x;
      return (is_max ? x > s : x < s) ? x : s;
    });
    for (size_t i = 0; i < n; ++i) out[i] = DTypeTraits<D>::store(acc[i]);
    return Status::ok();
  }
  bool prod = kind == Kind::Prod;
  if constexpr (kIsFloatType<D>) {
    std::vector<double> acc(n, prod ? 1.0 : 0.0);
    if (prod) fold<D>(a.in[0], m, acc, [](double s, C x) { return s * double(x); });
    else fold<D>(a.in[0], m, acc, [](double s, C x) { return s + double(x); });
    // A mean over no elements is 0/0 = NaN, as in numpy.
    for (size_t i = 0; i < n; ++i) {
      out[i] = store_f64<D>(kind == Kind::Mean ? acc[i] / double(m.count) : acc[i]);
    }
    return Status::ok();
  } else {
    if (kind == Kind::Mean) return unsupported_dtype(a, D);
    std::vector<uint64_t> acc(n, prod ? 1u : 0u);
    if (prod) fold<D>(a.in[0], m, acc, [](uint64_t s, C x) { return s * uint64_t(int64_t(x)); });
    else fold<D>(a.in[0], m, acc, [](uint64_t s, C x) { return s + uint64_t(int64_t(x)); });
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<Storage<D>>(acc[i]);
    return Status::ok();
  }
}

Status reduce(const KernelArgs& a, Kind kind) {
  Expected<ReduceMap> m = reduce_map(a);
  if (!m) return m.status();
  FUSEBOX_CHECK(a.out[0].dtype() == a.in[0].dtype()) << "reduction dtype";
  return visit_dtype(a.in[0].dtype(), [&]<DType D>() -> Status {
    if constexpr (D == DType::Bool) return unsupported_dtype(a, D);
    else return reduce_typed<D>(a, *m, kind);
  });
}

// argmax/argmin along one axis: the input is [outer, n, inner]; the result [outer, inner].
Status arg_reduce(const KernelArgs& a, bool is_max) {
  const Array& x = a.in[0];
  int rank = x.rank();
  std::optional<int> axis = normalize_axis(a.node.attr_i64("axis"), rank);
  if (!axis) return Status::invalid("axis " + std::to_string(a.node.attr_i64("axis")) + " out of range");
  const auto& shape = x.shape();
  int64_t outer = product(std::span(shape).first(size_t(*axis)));
  int64_t n = shape[size_t(*axis)];
  int64_t inner = product(std::span(shape).subspan(size_t(*axis) + 1));
  FUSEBOX_CHECK(a.out[0].dtype() == DType::I64 && a.out[0].numel() == outer * inner) << "arg result";
  if (n == 0 && outer * inner > 0) return Status::invalid("cannot take argmax/argmin of an empty dim");
  int64_t* out = a.out[0].data<int64_t>();
  return visit_dtype(x.dtype(), [&]<DType D>() -> Status {
    if constexpr (D == DType::Bool) {
      return unsupported_dtype(a, D);
    } else {
      using C = typename DTypeTraits<D>::Compute;
      const Storage<D>* px = x.data<Storage<D>>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t in = 0; in < inner; ++in) {
          const Storage<D>* row = px + o * n * inner + in;
          int64_t best = 0;
          C best_v = DTypeTraits<D>::load(row[0]);
          for (int64_t k = 1; k < n && best_v == best_v; ++k) {
            C v = DTypeTraits<D>::load(row[k * inner]);
            if (v != v || (is_max ? v > best_v : v < best_v)) {
              best = k;
              best_v = v;
            }
          }
          out[o * inner + in] = best;
        }
      }
      return Status::ok();
    }
  });
}

}  // namespace

Status ref_ReduceSum(const KernelArgs& a) { return reduce(a, Kind::Sum); }
Status ref_ReduceMean(const KernelArgs& a) { return reduce(a, Kind::Mean); }
Status ref_ReduceMax(const KernelArgs& a) { return reduce(a, Kind::Max); }
Status ref_ReduceMin(const KernelArgs& a) { return reduce(a, Kind::Min); }
Status ref_ReduceProd(const KernelArgs& a) { return reduce(a, Kind::Prod); }
Status ref_ArgMax(const KernelArgs& a) { return arg_reduce(a, true); }
Status ref_ArgMin(const KernelArgs& a) { return arg_reduce(a, false); }

}  // namespace fusebox::cpu
