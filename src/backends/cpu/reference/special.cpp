// Reference kernels of the opaque ops: constant, fft_magnitude and peaks (the IO output gate),
// bind_symbols, nonzero, nms_select and unique_select.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"
#include "ir/bind_symbols.h"
#include "ir/non_max_suppression.h"
#include "ir/unique_slices.h"

namespace fusebox::cpu {

namespace {

Status float_only(const KernelArgs& a, DType t) {
  return Status::internal(std::string(a.node.info().keyword) + ": no reference kernel for dtype " +
                          std::string(dtype_name(t)));
}

}  // namespace

Status ref_Constant(const KernelArgs& a) {
  const Array& value = a.node.attr_array("value");
  Array& out = a.out[0];
  if (value.dtype() != out.dtype() || value.shape() != out.shape()) {
    return Status::internal("constant: value " + value.type_string() + " does not match the result " +
                            out.type_string());
  }
  if (out.nbytes()) std::memcpy(out.raw(), value.raw(), out.nbytes());
  return Status::ok();
}

// |DFT| of each row along the last axis, bins 0..n/2, as a direct sum in double. The angle is
// 2*pi*((k*t) mod n)/n: reducing k*t first keeps the argument of cos/sin below 2*pi, so large
// k*t lose no precision and every implementation can reproduce the same angles.
Status ref_FftMagnitude(const KernelArgs& a) {
  const Array& x = a.in[0];
  Array& out = a.out[0];
  FUSEBOX_CHECK(x.rank() >= 1 && out.rank() == x.rank() && out.dtype() == x.dtype()) << "fft result type";
  int64_t n = x.shape().back();
  int64_t bins = out.shape().back();
  FUSEBOX_CHECK(bins == n / 2 + 1) << "fft result has " << bins << " bins for length " << n;
  int64_t rows = out.numel() / bins;
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  return visit_dtype(x.dtype(), [&]<DType D>() -> Status {
    if constexpr (!kIsFloatType<D>) {
      return float_only(a, D);
    } else {
      const Storage<D>* px = x.data<Storage<D>>();
      Storage<D>* po = out.data<Storage<D>>();
      for (int64_t r = 0; r < rows; ++r) {
        const Storage<D>* row = px + r * n;
        for (int64_t k = 0; k < bins; ++k) {
          double re = 0, im = 0;
          for (int64_t t = 0; t < n; ++t) {
            double angle = kTwoPi * double((k * t) % n) / double(n);
            double v = double(DTypeTraits<D>::load(row[t]));
            re += v * std::cos(angle);
            im -= v * std::sin(angle);
          }
          po[r * bins + k] = store_f64<D>(std::hypot(re, im));
        }
      }
      return Status::ok();
    }
  });
}

// The k largest local maxima of each row along the last axis, largest first (equal values: lower
// index first). i is a local maximum when x[i] > x[i-1] (or i is first) and x[i] >= x[i+1] (or i
// is last); NaN never is one, and a NaN neighbour fails the comparison. Missing slots get value 0
// and index -1.
Status ref_Peaks(const KernelArgs& a) {
  const Array& x = a.in[0];
  Array& values = a.out[0];
  Array& indices = a.out[1];
  int64_t k = a.node.attr_i64("k");
  if (k < 1) return Status::invalid("peaks: k must be >= 1, got " + std::to_string(k));
  FUSEBOX_CHECK(x.rank() >= 1 && values.dtype() == x.dtype() && indices.dtype() == DType::I64 &&
                values.shape().back() == k && indices.numel() == values.numel())
      << "peaks result types";
  int64_t n = x.shape().back();
  int64_t rows = values.numel() / k;
  return visit_dtype(x.dtype(), [&]<DType D>() -> Status {
    if constexpr (!kIsFloatType<D>) {
      return float_only(a, D);
    } else {
      using C = typename DTypeTraits<D>::Compute;
      const Storage<D>* px = x.data<Storage<D>>();
      Storage<D>* pv = values.data<Storage<D>>();
      int64_t* pi = indices.data<int64_t>();
      std::vector<std::pair<C, int64_t>> found;
      for (int64_t r = 0; r < rows; ++r) {
        const Storage<D>* row = px + r * n;
        auto at = [&](int64_t i) { return DTypeTraits<D>::load(row[i]); };
        found.clear();
        for (int64_t i = 0; i < n; ++i) {
          C v = at(i);
          if (v != v) continue;
          if (i > 0 && !(v > at(i - 1))) continue;
          if (i + 1 < n && !(v >= at(i + 1))) continue;
          found.emplace_back(v, i);
        }
        // Stable: among equal values the lower index (found first) stays first.
        std::stable_sort(found.begin(), found.end(),
                         [](const auto& p, const auto& q) { return p.first > q.first; });
        for (int64_t j = 0; j < k; ++j) {
          bool have = j < int64_t(found.size());
          pv[r * k + j] = have ? row[found[size_t(j)].second] : DTypeTraits<D>::store(C(0));
          pi[r * k + j] = have ? found[size_t(j)].second : -1;
        }
      }
      return Status::ok();
    }
  });
}

// x unchanged; the values are checked here (the runtime binds them as the plan runs).
Status ref_BindSymbols(const KernelArgs& a) {
  FUSEBOX_RETURN_IF_ERROR(symbol_values(a.node, a.in[1], a.in[0].shape()).status());
  return ref_Identity(a);  // reads operand 0 only
}

// The coordinates of x's non-zero elements (ir/bind_symbols.h), in one pass; the result's column
// count (bound before it ran) must be their number.
Status ref_NonZero(const KernelArgs& a) {
  Array& out = a.out[0];
  const int64_t columns = out.shape()[1];
  const int64_t found = write_nonzero_coordinates(a.in[0], out.data<int64_t>(), columns);
  if (found != columns) {
    return Status::execution("nonzero: the operand has " + std::to_string(found) +
                             " non-zero elements, the result's count is " + std::to_string(columns));
  }
  return Status::ok();
}

// Per batch and class the boxes kept, in the order kept, then -1.
Status ref_NmsSelect(const KernelArgs& a) {
  auto operand = [&](size_t i) { return i < a.in.size() ? &a.in[i] : nullptr; };
  FUSEBOX_ASSIGN_OR_RETURN(
      NmsParams p, nms_params(operand(2), operand(3), operand(4), a.node.attr_bool("center_point_box")));
  Array& out = a.out[0];
  const int64_t batches = out.shape()[0], classes = out.shape()[1], count = out.shape()[2];
  std::vector<std::vector<int64_t>> kept =
      nms_keep(a.in[0].data<float>(), a.in[1].data<float>(), batches, classes, count, p);
  int64_t* o = out.data<int64_t>();
  for (size_t bc = 0; bc < kept.size(); ++bc, o += count) {
    std::fill(o, o + count, int64_t(-1));
    std::copy(kept[bc].begin(), kept[bc].end(), o);
  }
  return Status::ok();
}

// First occurrences in output order then -1, the inverse, the counts then 0.
Status ref_UniqueSelect(const KernelArgs& a) {
  const UniqueResult r = unique_slices(a.in[0], int(a.node.attr_i64("axis")), a.node.attr_bool("sorted"));
  const size_t count = r.inverse.size();
  int64_t *first = a.out[0].data<int64_t>(), *inverse = a.out[1].data<int64_t>(),
          *counts = a.out[2].data<int64_t>();
  std::fill(first, first + count, int64_t(-1));
  std::fill(counts, counts + count, int64_t(0));
  std::copy(r.first.begin(), r.first.end(), first);
  std::copy(r.inverse.begin(), r.inverse.end(), inverse);
  std::copy(r.counts.begin(), r.counts.end(), counts);
  return Status::ok();
}

}  // namespace fusebox::cpu
