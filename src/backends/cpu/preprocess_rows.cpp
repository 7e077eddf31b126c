// Row tables of a transform plan and the rows they compute (preprocess_rows.h).
#include "backends/cpu/preprocess_rows.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "backends/cpu/transform_kernel.h"
#include "ir/check.h"

namespace fusebox::cpu {

namespace row_generic { const PreprocessLoops& preprocess_loops(); }
namespace row_avx2 { const PreprocessLoops& preprocess_loops(); }
namespace row_avx512 { const PreprocessLoops& preprocess_loops(); }

const PreprocessLoops& preprocess_loops(RowIsa isa) {
  FUSEBOX_CHECK(row_isa_available(isa)) << "pre-processing loops for " << row_isa_name(isa) << " on a processor without it";
  switch (isa) {
    case RowIsa::Avx512: return row_avx512::preprocess_loops();
    case RowIsa::Avx2: return row_avx2::preprocess_loops();
    case RowIsa::Generic: break;
  }
  return row_generic::preprocess_loops();
}

const PreprocessLoops& preprocess_loops() {
  static const PreprocessLoops& best = preprocess_loops(best_row_isa());
  return best;
}

namespace {

std::atomic<GatherUse>& gather_setting() {
  static std::atomic<GatherUse> use = [] {
    const char* e = std::getenv("FUSEBOX_GATHERS");
    if (e && std::string_view(e) == "0") return GatherUse::Never;
    if (e && std::string_view(e) == "1") return GatherUse::Always;
    return GatherUse::Auto;
  }();
  return use;
}

}  // namespace

void set_gather_use(GatherUse use) { gather_setting().store(use, std::memory_order_relaxed); }
GatherUse gather_use() { return gather_setting().load(std::memory_order_relaxed); }

std::vector<ByteWindow> byte_windows(const std::vector<int32_t>& off0, const std::vector<int32_t>& off1) {
  std::vector<ByteWindow> out(std::min(off0.size(), off1.size()) / 16);
  for (size_t b = 0; b < out.size(); ++b) {
    const auto first0 = off0.begin() + ptrdiff_t(16 * b), first1 = off1.begin() + ptrdiff_t(16 * b);
    const int32_t lo =
        std::min(*std::min_element(first0, first0 + 16), *std::min_element(first1, first1 + 16));
    const int32_t hi =
        std::max(*std::max_element(first0, first0 + 16), *std::max_element(first1, first1 + 16));
    if (hi - lo >= 128) continue;  // no mask: gathered
    ByteWindow& w = out[b];
    w.lo = lo;
    for (int32_t k = 0; k <= hi - lo; ++k) w.mask[k / 64] |= uint64_t(1) << (k % 64);
    for (ptrdiff_t i = 0; i < 16; ++i) {
      w.tap0[i] = uint8_t(first0[i] - lo);
      w.tap1[i] = uint8_t(first1[i] - lo);
    }
  }
  return out;
}

namespace {

// The one or two taps of an index, as (offset, weight, pad step); a constant tap has offset 0.
struct Taps {
  int n = 1;
  int64_t off[2] = {0, 0};
  double w[2] = {1, 0};
  int step = -1;  // the latest pad step among the taps
};

Taps taps_of(const TransformPlan::Axis& ax, size_t i) {
  Taps t;
  t.n = ax.count[i];
  for (int j = 0; j < t.n; ++j) {
    const size_t k = 2 * i + size_t(j);
    t.w[j] = ax.weight[k];
    if (ax.off[k] == kConst) t.step = std::max(t.step, int(ax.step[k]));
    else t.off[j] = ax.off[k];
  }
  if (t.n == 1) t.off[1] = t.off[0];
  return t;
}

bool has_two_taps(const TransformPlan::Axis& ax) {
  return std::any_of(ax.count.begin(), ax.count.end(), [](uint8_t c) { return c == 2; });
}

// One tap of weight 1 at every index: an axis that may join the row without changing any sum.
bool one_unit_tap(const TransformPlan::Axis& ax) {
  for (size_t i = 0; i < ax.count.size(); ++i) {
    if (ax.count[i] != 1 || ax.weight[2 * i] != 1.0) return false;
  }
  return true;
}

// The bits a pair of weights needs after the binary point (both in [0, 1], summing to at most
// 1), or more than 16 when they need more or break those bounds.
int pair_bits(double w0, double w1) {
  if (!(w0 >= 0 && w1 >= 0 && w0 + w1 <= 1)) return 17;
  for (int m = 0; m <= 16; ++m) {
    const double s0 = std::ldexp(w0, m), s1 = std::ldexp(w1, m);
    if (s0 == std::floor(s0) && s1 == std::floor(s1)) return m;
  }
  return 17;
}

// Whether every pad constant of the plan (true when it has none) is applied after its resize, one
// tap wide (a letterbox's border): such an element is the constant itself, and every other element
// interpolates source taps only, so the bilinear rows can compute a row and then write the constant columns
// over it. A constant inside an interpolation (a pad before the resize) is a term of the sum: not so.
bool pads_after_resize(const TransformPlan& p) {
  for (const TransformPlan::Axis& ax : p.axes) {
    for (size_t i = 0; i < ax.count.size(); ++i) {
      for (size_t j = 0; j < ax.count[i]; ++j) {
        const size_t k = 2 * i + j;
        if (ax.off[k] == kConst && (ax.count[i] != 1 || ax.step[k] <= p.resize_step)) return false;
      }
    }
  }
  return true;
}

// Sets t.f32_weights and the f32 copies when the rows' and the columns' weights need 16 bits
// after the binary point together (RowTables::f32_weights says why that gives the double sums).
void set_f32_weights(RowTables& t) {
  int row_bits = 0, col_bits = 0;
  for (size_t k = 0; k + 1 < t.row_w.size(); k += 2)
    row_bits = std::max(row_bits, pair_bits(t.row_w[k], t.row_w[k + 1]));
  for (size_t j = 0; j < t.col_w0.size(); ++j)
    col_bits = std::max(col_bits, pair_bits(t.col_w0[j], t.col_w1[j]));
  if (row_bits + col_bits > 16) return;
  t.f32_weights = true;
  t.row_w_f32.assign(t.row_w.begin(), t.row_w.end());
  t.col_w0_f32.assign(t.col_w0.begin(), t.col_w0.end());
  t.col_w1_f32.assign(t.col_w1.begin(), t.col_w1.end());
}

}  // namespace

std::optional<RowTables> row_tables(const TransformPlan& p, std::string* why, bool merge_rows) {
  auto fail = [why](const char* reason) -> std::optional<RowTables> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const size_t R = p.out_axes, A = p.axes.size();
  if (R < 2) return fail("the transform has fewer than two output axes");
  // The row axes [0, k]: axis 0, or with merge_rows also the leading axes of one unit tap while
  // they have size 1 or the axes after them interpolate along more than one (a CHW result:
  // channels and rows).
  size_t k = 0;
  auto column_splits = [&](size_t from) {
    int n = 0;
    for (size_t d = from; d < A; ++d) n += has_two_taps(p.axes[d]);
    return n;
  };
  while (merge_rows && k + 2 < R && one_unit_tap(p.axes[k]) &&
         (p.out_shape[k] == 1 || column_splits(k + 1) > 1))
    ++k;
  RowTables t;
  t.linear = p.linear;
  t.row_axes = int(k) + 1;
  t.rows = 1;
  for (size_t d = 0; d <= k; ++d) t.rows *= p.out_shape[d];
  t.cols = 1;
  for (size_t d = k + 1; d < R; ++d) t.cols *= p.out_shape[d];
  t.inner = p.out_shape[R - 1];
  // The reference sums the taps with the weight order's first axis outermost: the row's taps
  // must come before the column's, and only one column axis may split.
  int split_col = -1;
  for (size_t d = k + 1; d < A; ++d) {
    if (!has_two_taps(p.axes[d])) continue;
    if (d >= R || split_col >= 0) return fail("two column axes (or a phantom axis) interpolate");
    split_col = int(d);
  }
  if (split_col >= 0 && has_two_taps(p.axes[k]) &&
      p.axes[k].resize_pos > p.axes[size_t(split_col)].resize_pos) {
    return fail("the columns interpolate before the rows");
  }

  // Phantom axes (unit source axes) have one index: they add to every row.
  int64_t phantom_off = 0;
  int phantom_step = -1;
  for (size_t d = R; d < A; ++d) {
    Taps x = taps_of(p.axes[d], 0);
    phantom_off += x.off[0];
    phantom_step = std::max(phantom_step, x.step);
  }
  // Rows: the row-major walk over axes 0..k; the merged axes add their one offset.
  std::vector<size_t> row_index(k + 1, 0);
  for (int64_t r = 0; r < t.rows; ++r) {
    int64_t lead_off = 0;
    int lead_step = -1;
    for (size_t d = 0; d < k; ++d) {
      Taps m = taps_of(p.axes[d], row_index[d]);
      lead_off += m.off[0];
      lead_step = std::max(lead_step, m.step);
    }
    Taps x = taps_of(p.axes[k], row_index[k]);
    for (int j = 0; j < 2; ++j) {
      t.row_off.push_back(x.off[j] + lead_off + phantom_off);
      t.row_w.push_back(x.w[j]);
    }
    t.row_const.push_back(std::max({x.step, lead_step, phantom_step}));
    t.has_const = t.has_const || t.row_const.back() >= 0;
    for (size_t d = k + 1; d-- > 0;) {
      if (++row_index[d] < size_t(p.out_shape[d])) break;
      row_index[d] = 0;
    }
  }

  // Columns: the row-major walk over axes k+1..R-1, each index's taps summed.
  std::vector<size_t> index(R, 0);
  for (int64_t j = 0; j < t.cols; ++j) {
    int64_t off[2] = {0, 0};
    double w[2] = {1, 0};
    int step = -1;
    for (size_t d = k + 1; d < R; ++d) {
      Taps x = taps_of(p.axes[d], index[d]);
      step = std::max(step, x.step);
      off[0] += x.off[0];
      off[1] += x.off[1];
      if (int(d) == split_col) w[0] = x.w[0], w[1] = x.w[1];
    }
    for (int64_t o : off) {
      if (o < 0 || o > std::numeric_limits<int32_t>::max()) return fail("a column offset beyond 32 bits");
    }
    t.col_off0.push_back(int32_t(off[0]));
    t.col_off1.push_back(int32_t(off[1]));
    t.col_w0.push_back(w[0]);
    t.col_w1.push_back(w[1]);
    t.col_const.push_back(step);
    if (step >= 0) t.const_cols.push_back(int32_t(j)), t.has_const = true;
    for (size_t d = R; d-- > k + 1;) {
      if (++index[d] < size_t(p.out_shape[d])) break;
      index[d] = 0;
    }
  }
  t.col_lo = std::min(*std::min_element(t.col_off0.begin(), t.col_off0.end()),
                      *std::min_element(t.col_off1.begin(), t.col_off1.end()));
  t.col_hi = std::max(*std::max_element(t.col_off0.begin(), t.col_off0.end()),
                      *std::max_element(t.col_off1.begin(), t.col_off1.end()));
  if (p.src_dtype == DType::U8) t.col_windows = byte_windows(t.col_off0, t.col_off1);
  const bool f32_out = p.out_dtype == DType::F32;
  const bool nearest = !p.linear && (p.src_dtype == DType::U8 || p.src_dtype == DType::F32);
  const bool bilinear =
      p.linear && p.src_dtype == DType::U8 && p.resize_dtype == DType::F32 && pads_after_resize(p);
  t.own_loops = f32_out && (nearest || bilinear);
  if (bilinear) set_f32_weights(t);
  if (!t.own_loops && t.cols % transform_window_unit(p) != 0) return fail("the plan's own windows span several rows");
  return t;
}

void prefetch_row(const RowTables& t, const void* src, size_t esize, int64_t r) {
  if (r >= t.rows || t.row_const[size_t(r)] >= 0) return;
  constexpr size_t kLine = 64;
  for (int tap = 0; tap < 2; ++tap) {
    const int64_t off = t.row_off[2 * size_t(r) + size_t(tap)];
    if (tap == 1 && off == t.row_off[2 * size_t(r)]) break;
    const auto* lo = static_cast<const char*>(src) + size_t(off + t.col_lo) * esize;
    const auto* hi = static_cast<const char*>(src) + size_t(off + t.col_hi) * esize;
    for (const char* a = lo; a <= hi; a += kLine) __builtin_prefetch(a);
    __builtin_prefetch(hi);
  }
}

Status fill_rows(const TransformPlan& p, const RowTables& t, const Array& src, void* dst, int64_t r0, int64_t r1) {
  if (!t.own_loops) return run_transform_window(p, src, dst, r0 * t.cols, r1 * t.cols);
  const PreprocessLoops& loops = preprocess_loops();
  const auto* s8 = static_cast<const uint8_t*>(src.raw());
  const auto* s32 = static_cast<const float*>(src.raw());
  auto constant = [&](int step) { return float(p.const_value[size_t(step)]); };
  const size_t esize = size_t(dtype_size(p.src_dtype));
  for (int64_t r = r0; r < r1; ++r) {
    prefetch_row(t, src.raw(), esize, r + 1);
    float* out = static_cast<float*>(dst) + (r - r0) * t.cols;
    const size_t k = 2 * size_t(r);
    // A row or a column that reads a pad constant is that constant (nearest: its one tap;
    // bilinear: only pads after the resize get here, row_tables): the rows are computed whole,
    // a constant tap reading offset 0, and the constant columns written over them.
    if (const int rs = t.row_const[size_t(r)]; rs >= 0) {
      for (int64_t j = 0; j < t.cols; ++j) out[j] = constant(std::max(rs, t.col_const[size_t(j)]));
      continue;
    }
    if (t.f32_weights) {
      loops.bilinear_u8_f32(s8 + t.row_off[k], s8 + t.row_off[k + 1],
                            std::min(t.row_off[k], t.row_off[k + 1]), t.row_w_f32[k], t.row_w_f32[k + 1],
                            t.col_off0.data(), t.col_off1.data(), t.col_w0_f32.data(), t.col_w1_f32.data(),
                            out, t.cols, t.col_windows.data());
    } else if (t.linear) {
      loops.bilinear_u8(s8 + t.row_off[k], s8 + t.row_off[k + 1], std::min(t.row_off[k], t.row_off[k + 1]),
                        t.row_w[k], t.row_w[k + 1], t.col_off0.data(), t.col_off1.data(), t.col_w0.data(),
                        t.col_w1.data(), out, t.cols, t.col_windows.data());
    } else if (p.src_dtype == DType::U8) {
      loops.nearest_u8(s8 + t.row_off[k], t.row_off[k], t.col_off0.data(), out, t.cols, t.col_windows.data());
    } else {
      loops.nearest_f32(s32 + t.row_off[k], t.col_off0.data(), out, t.cols);
    }
    for (int32_t j : t.const_cols) out[j] = constant(t.col_const[size_t(j)]);
  }
  return Status::ok();
}

}  // namespace fusebox::cpu
