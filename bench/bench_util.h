// What the CPU benchmark suites share: deterministic non-zero inputs, the STREAM-style copy that
// measures the machine's bandwidth ceiling, and medians.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ir/array.h"

namespace fusebox::bench {

// Values in [-scale, scale] from a multiplicative hash of the index, written in parallel (so
// the pages are touched by the threads that later read them).
inline Array filled(std::vector<int64_t> shape, float scale) {
  Array a(DType::F32, std::move(shape));
  float* p = a.data<float>();
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = scale * float((i * 2654435761u) % 2001) / 1000.0f - scale;
  return a;
}
inline Array filled(int64_t n, float scale) { return filled(std::vector<int64_t>{n}, scale); }

// STREAM-style copy on all threads: a plain loop, plain stores.
inline void copy_plain(const float* s, float* d, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) d[i] = s[i];
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace fusebox::bench
