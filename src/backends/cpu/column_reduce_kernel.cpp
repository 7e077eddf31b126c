#include "backends/cpu/column_reduce_kernel.h"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "ir/reduction_region.h"
#include "ir/shape.h"

namespace fusebox::cpu {

namespace {

enum class Kind { Sum, Mean, Prod, Max, Min };

std::optional<Kind> kind_of(Op op) {
  switch (op) {
    case Op::ReduceSum:
      return Kind::Sum;
    case Op::ReduceMean:
      return Kind::Mean;
    case Op::ReduceProd:
      return Kind::Prod;
    case Op::ReduceMax:
      return Kind::Max;
    case Op::ReduceMin:
      return Kind::Min;
    default:
      return std::nullopt;
  }
}

// One work item: `n` adjacent results from `x` (the first one's element at reduced index 0), each
// reduced row of the item read as one contiguous run of `n` elements; `acc` and `best` hold n
// values (sums and products; max and min).
template <typename T>
void reduce_columns(const T* x, T* y, int64_t reduced, int64_t inner, int64_t n, Kind kind, double* acc,
                    T* best) {
  if (kind == Kind::Max || kind == Kind::Min) {
    const bool is_max = kind == Kind::Max;
    std::fill(best, best + n,
              is_max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity());
    for (int64_t r = 0; r < reduced; ++r) {
      const T* row = x + r * inner;
      for (int64_t c = 0; c < n; ++c) {
        const T s = best[c], v = row[c];
        // The reference's fold: NaN, once in, stays; a NaN element wins.
        if (s != s) continue;
        if (v != v || (is_max ? v > s : v < s)) best[c] = v;
      }
    }
    std::copy(best, best + n, y);
    return;
  }
  std::fill(acc, acc + n, kind == Kind::Prod ? 1.0 : 0.0);
  for (int64_t r = 0; r < reduced; ++r) {
    const T* row = x + r * inner;
    if (kind == Kind::Prod) {
      for (int64_t c = 0; c < n; ++c) acc[c] *= double(row[c]);
    } else {
      for (int64_t c = 0; c < n; ++c) acc[c] += double(row[c]);
    }
  }
  // A mean over no elements is 0/0 = NaN, as in the reference.
  for (int64_t c = 0; c < n; ++c)
    y[c] = static_cast<T>(kind == Kind::Mean ? acc[c] / double(reduced) : acc[c]);
}

class ColumnReduceKernel final : public Kernel {
 public:
  ColumnReduceKernel(Kind kind, int first, int last) : kind_(kind), first_(first), last_(last) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    const std::vector<int64_t>& s = in[0].shape;
    auto extent = [&](size_t b, size_t e) {
      int64_t p = 1;
      for (size_t d = b; d < e; ++d) p *= s[d];
      return p;
    };
    const int64_t outer = extent(0, size_t(first_)), reduced = extent(size_t(first_), size_t(last_) + 1),
                  inner = extent(size_t(last_) + 1, s.size());
    if (out[0].numel() != outer * inner) return Status::internal("column reduction: result size");
    if (reduced == 0 && outer * inner > 0 && (kind_ == Kind::Max || kind_ == Kind::Min))
      return Status::invalid("cannot reduce an empty dim with max/min");
    if (in[0].dtype == DType::F32) return run_typed<float>(in[0], out[0], outer, reduced, inner);
    return run_typed<double>(in[0], out[0], outer, reduced, inner);
  }
  std::string_view kind() const override { return "column_reduce"; }

 private:
  template <typename T>
  Status run_typed(const BufferView& in, const BufferView& out, int64_t outer, int64_t reduced,
                   int64_t inner) const {
    const T* x = static_cast<const T*>(in.data);
    T* y = static_cast<T*>(out.data);
    // Items: (outer index, block of adjacent columns). Blocks are as wide as the threads allow
    // (whole rows when the outer indices keep every thread busy), so each reduced row of an
    // item is a long contiguous read, and its accumulators stay in cache.
    const bool parallel = outer * reduced * inner >= (int64_t(1) << 15);
    const int64_t threads = parallel ? omp_get_max_threads() : 1;
    const int64_t per_outer = std::max<int64_t>(1, (threads + outer - 1) / outer);
    const int64_t width =
        std::max<int64_t>(std::min<int64_t>(inner, 256), (inner + per_outer - 1) / per_outer);
    const int64_t blocks = (inner + width - 1) / width;
#pragma omp parallel if (parallel)
    {
      std::vector<double> acc(static_cast<size_t>(width));
      std::vector<T> best(static_cast<size_t>(width));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < outer * blocks; ++t) {
        const int64_t o = t / blocks, c0 = (t % blocks) * width;
        reduce_columns(x + o * reduced * inner + c0, y + o * inner + c0, reduced, inner,
                       std::min(width, inner - c0), kind_, acc.data(), best.data());
      }
    }
    return Status::ok();
  }

  Kind kind_;
  int first_, last_;  // the reduced run of axes
};

}  // namespace

std::shared_ptr<const Kernel> make_column_reduce_kernel(const Graph& g, const Node& n) {
  const std::optional<Kind> kind = kind_of(n.op);
  if (!kind || n.inputs.size() != 1 || n.outputs.size() != 1) return nullptr;
  const TensorType& x = g.type(n.inputs[0]);
  if ((x.dtype != DType::F32 && x.dtype != DType::F64) || g.type(n.outputs[0]).dtype != x.dtype)
    return nullptr;
  const int rank = x.rank();
  std::vector<bool> reduced(size_t(rank), false);
  const std::vector<int64_t>& axes = n.attr_i64s("axes");
  if (axes.empty()) return nullptr;  // every axis: trailing
  for (int64_t a : axes) {
    const std::optional<int> d = normalize_axis(a, rank);
    if (!d) return nullptr;
    reduced[size_t(*d)] = true;
  }
  const int first = int(std::find(reduced.begin(), reduced.end(), true) - reduced.begin());
  int last = first;
  while (last + 1 < rank && reduced[size_t(last) + 1]) ++last;
  if (last + 1 >= rank) return nullptr;  // ends at the last axis: trailing
  for (int d = last + 1; d < rank; ++d) {
    if (reduced[size_t(d)]) return nullptr;  // two runs
  }
  return std::make_shared<ColumnReduceKernel>(*kind, first, last);
}

}  // namespace fusebox::cpu
