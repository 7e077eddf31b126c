#include "ir/unique_slices.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fusebox {

namespace {

// Three-way comparison of two elements of `a`.
int compare_elements(const Array& a, int64_t i, int64_t j) {
  if (!is_float(a.dtype())) {
    int64_t x = a.get_i64(i), y = a.get_i64(j);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  double x = a.get_f64(i), y = a.get_f64(j);
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) == std::isnan(y) ? 0 : std::isnan(x) ? 1 : -1;
  return x < y ? -1 : x > y ? 1 : 0;
}

// x seen as [outer, count, inner]: slice s holds x[o, s, i] in (o, i) row-major order.
struct Slices {
  int64_t outer = 1, count = 0, inner = 1;
  int64_t element(int64_t s, int64_t k) const { return (k / inner * count + s) * inner + k % inner; }
  int64_t size() const { return outer * inner; }
};

// Lexicographic order of two slices.
int compare_slices(const Array& x, const Slices& sl, int64_t s, int64_t t) {
  for (int64_t k = 0; k < sl.size(); ++k) {
    if (int c = compare_elements(x, sl.element(s, k), sl.element(t, k))) return c;
  }
  return 0;
}

}  // namespace

UniqueResult unique_slices(const Array& x, int axis, bool sorted) {
  Slices sl;
  for (int d = 0; d < x.rank(); ++d) {
    if (d < axis) sl.outer *= x.shape()[size_t(d)];
    if (d > axis) sl.inner *= x.shape()[size_t(d)];
  }
  sl.count = x.shape()[size_t(axis)];
  std::vector<int64_t> order(size_t(sl.count));
  std::iota(order.begin(), order.end(), 0);
  // Stable: among equal slices the first occurrence comes first.
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t s, int64_t t) { return compare_slices(x, sl, s, t) < 0; });
  std::vector<std::vector<int64_t>> groups;  // members of each unique slice, in ascending order
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || compare_slices(x, sl, order[k - 1], order[k]) != 0) groups.emplace_back();
    groups.back().push_back(order[k]);
  }
  if (!sorted) {
    std::stable_sort(
        groups.begin(), groups.end(),
        [](const std::vector<int64_t>& a, const std::vector<int64_t>& b) { return a.front() < b.front(); });
  }
  UniqueResult r;
  r.inverse.resize(size_t(sl.count));
  for (size_t u = 0; u < groups.size(); ++u) {
    r.first.push_back(groups[u].front());
    r.counts.push_back(int64_t(groups[u].size()));
    for (int64_t s : groups[u]) r.inverse[size_t(s)] = int64_t(u);
  }
  return r;
}

}  // namespace fusebox
