// The loops that run a transform plan (transform_kernel.h): element copies and row memcpy
// without interpolation; with it, per element the taps summed in the reference's order.
#include <algorithm>
#include <cstring>
#include <span>

#include "backends/cpu/preprocess_rows.h"
#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/resize_math.h"
#include "backends/cpu/transform_kernel.h"
#include "backends/transform_plan.h"

namespace fusebox::cpu {

namespace {

template <DType D>
double load_as(const void* p, int64_t i) {
  using T = DTypeTraits<D>;
  return static_cast<double>(T::load(static_cast<const typename T::Storage*>(p)[i]));
}
template <DType D>
void store_as(void* p, int64_t i, double v) {
  static_cast<typename DTypeTraits<D>::Storage*>(p)[i] = store_double<D>(v);
}
template <DType D>
double round_to(double v) {
  return static_cast<double>(DTypeTraits<D>::load(store_double<D>(v)));
}

using LoadFn = double (*)(const void*, int64_t);
using StoreFn = void (*)(void*, int64_t, double);
using RoundFn = double (*)(double);

// Loads, stores and the rounding of the interpolation: fixed for the common dtypes (so the
// compiler inlines them), through pointers for the rest.
template <DType S, DType O, DType R>
struct Fixed {
  double load(const void* p, int64_t i) const { return load_as<S>(p, i); }
  void store(void* p, int64_t i, double v) const { store_as<O>(p, i, v); }
  double round(double v) const { return round_to<R>(v); }
};
struct Dynamic {
  LoadFn l;
  StoreFn s;
  RoundFn r;
  double load(const void* p, int64_t i) const { return l(p, i); }
  void store(void* p, int64_t i, double v) const { s(p, i, v); }
  double round(double v) const { return r(v); }
};

constexpr int kMaxAxes = 16;

// The elements [e0, e1) of the plan's output that a call writes, to dst[0, e1 - e0); both ends
// are multiples of the path's row (transform_window_unit).
struct Window {
  int64_t e0, e1;
};

// Per element: a pad constant applied after the interpolation wins; otherwise the taps are
// summed in the reference's order (weight-order axes lexicographic, the last fastest).
template <typename IO>
void run_rows(const TransformPlan& p, const IO& io, const void* src, void* dst, Window win) {
  const size_t R = p.out_axes, A = p.axes.size();
  const int64_t width = R ? p.out_shape[R - 1] : 1;
  const int64_t r0 = win.e0 / width, r1 = win.e1 / width;
  const int post_after = p.linear ? p.resize_step : -1;
  std::vector<int> split_order;  // axes that may hold two taps, in weight order
  for (int d : p.weight_order) split_order.push_back(d);
#pragma omp parallel for schedule(static) if ((r1 - r0) * width >= (int64_t(1) << 14))
  for (int64_t r = r0; r < r1; ++r) {
    size_t index[kMaxAxes] = {};
    int64_t rest = r;
    for (size_t a = R ? R - 1 : 0; a-- > 0;) {
      index[a] = static_cast<size_t>(rest % p.out_shape[a]);
      rest /= p.out_shape[a];
    }
    for (int64_t c = 0; c < width; ++c) {
      if (R) index[R - 1] = static_cast<size_t>(c);
      int post = -1, pre = -1;
      int64_t base = 0;
      int splits = 0;
      int split_axes[kMaxAxes];
      for (size_t d = 0; d < A; ++d) {
        const auto& ax = p.axes[d];
        size_t k = 2 * index[d];
        if (ax.count[index[d]] == 2) continue;
        if (ax.off[k] == kConst) {
          int st = ax.step[k];
          if (st > post_after) post = std::max(post, st);
          else pre = std::max(pre, st);
        } else {
          base += ax.off[k];
        }
      }
      const int64_t o = r * width + c - win.e0;
      if (post >= 0) {
        io.store(dst, o, p.const_value[size_t(post)]);
        continue;
      }
      if (!p.linear) {
        io.store(dst, o, io.load(src, base));
        continue;
      }
      for (int d : split_order)
        if (p.axes[size_t(d)].count[index[d]] == 2) split_axes[splits++] = d;
      double acc = 0;
      for (int combo = 0; combo < (1 << splits); ++combo) {
        double w = 1;
        int64_t off = base;
        int cpre = pre;
        for (int s = 0; s < splits; ++s) {
          const auto& ax = p.axes[size_t(split_axes[s])];
          size_t k = 2 * index[size_t(split_axes[s])] + size_t((combo >> (splits - 1 - s)) & 1);
          w *= ax.weight[k];
          if (ax.off[k] == kConst) cpre = std::max(cpre, int(ax.step[k]));
          else off += ax.off[k];
        }
        acc += w * (cpre >= 0 ? p.const_value[size_t(cpre)] : io.load(src, off));
      }
      io.store(dst, o, io.round(acc));
    }
  }
}

// The interpolating path when the last output axis is the last axis of the interpolation's
// weight order (HWC -> CHW keeps W last): the taps of the other axes are combined once per row
// into at most kMaxCombos (offset, weight, constant) entries in the reference's summation order,
// and each element adds its own one or two taps to each. Same arithmetic as run_rows.
constexpr int kMaxCombos = 16;

// One way a row's taps reach the source: the element offset so far, the product of their
// weights, and the latest pad step passed before the resize (-1: none).
struct Combo {
  int64_t off;
  double w;
  int pre;
};

// Splits each of combos[0, n) into its two taps along `ax` at `index`, in place, back to front
// (c -> 2c, 2c+1: the reference's summation order); returns the new count.
int split_taps(Combo* combos, int n, const TransformPlan::Axis& ax, size_t index) {
  const size_t k = 2 * index;
  for (int c = n - 1; c >= 0; --c) {
    for (int j = 1; j >= 0; --j) {
      Combo e = combos[c];
      e.w *= ax.weight[k + size_t(j)];
      if (ax.off[k + size_t(j)] == kConst) e.pre = std::max(e.pre, int(ax.step[k + size_t(j)]));
      else e.off += ax.off[k + size_t(j)];
      combos[2 * c + j] = e;
    }
  }
  return 2 * n;
}

// Output element o from the row's tap combinations and the innermost axis's own one or two taps
// at `index`: a pad constant when a constant tap comes after the resize (`post`, or this axis's
// own), else the weighted sum in the reference's order, rounded once.
template <typename IO>
void store_combined(const TransformPlan& p, const IO& io, const void* src, void* dst, int64_t o, const Combo* combos,
                    int n, const TransformPlan::Axis& inner, size_t index, int post) {
  const size_t k = 2 * index;
  const int taps = inner.count[index];
  const int after = p.resize_step;
  if (taps == 1 && inner.off[k] == kConst && inner.step[k] > after) post = std::max(post, int(inner.step[k]));
  if (post >= 0) {
    io.store(dst, o, p.const_value[size_t(post)]);
    return;
  }
  double acc = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < taps; ++j) {
      const double w = combos[i].w * inner.weight[k + size_t(j)];
      int pre = combos[i].pre;
      if (inner.off[k + size_t(j)] == kConst) pre = std::max(pre, int(inner.step[k + size_t(j)]));
      acc += w * (pre >= 0 ? p.const_value[size_t(pre)] : io.load(src, combos[i].off + inner.off[k + size_t(j)]));
    }
  }
  io.store(dst, o, io.round(acc));
}

bool rows_combine(const TransformPlan& p) {
  if (!p.linear || p.out_axes == 0) return false;
  const int inner = int(p.out_axes) - 1;
  if (p.axes[size_t(inner)].resize_pos >= 0 && p.weight_order.back() != inner) return false;
  int outer_splits = 0;
  for (int d : p.weight_order) outer_splits += d != inner;
  return (1 << outer_splits) <= kMaxCombos;
}

template <typename IO>
void run_rows_combined(const TransformPlan& p, const IO& io, const void* src, void* dst, Window win) {
  const size_t R = p.out_axes, A = p.axes.size();
  const int64_t width = p.out_shape[R - 1];
  const int64_t r0 = win.e0 / width, r1 = win.e1 / width;
  const TransformPlan::Axis& inner = p.axes[R - 1];
  const int after = p.resize_step;
#pragma omp parallel for schedule(static) if ((r1 - r0) * width >= (int64_t(1) << 14))
  for (int64_t r = r0; r < r1; ++r) {
    size_t index[kMaxAxes] = {};
    int64_t rest = r;
    for (size_t a = R - 1; a-- > 0;) {
      index[a] = static_cast<size_t>(rest % p.out_shape[a]);
      rest /= p.out_shape[a];
    }
    Combo combos[kMaxCombos];
    int n = 1;
    combos[0] = {0, 1.0, -1};
    int post = -1;
    for (size_t d = 0; d < A; ++d) {
      if (d == R - 1) continue;
      const auto& ax = p.axes[d];
      size_t k = 2 * index[d];
      if (ax.count[index[d]] == 2) continue;
      if (ax.off[k] == kConst) {
        int st = ax.step[k];
        if (st > after) post = std::max(post, st);
        else combos[0].pre = std::max(combos[0].pre, st);
      } else {
        combos[0].off += ax.off[k];
      }
    }
    for (int d : p.weight_order) {
      if (size_t(d) == R - 1 || p.axes[size_t(d)].count[index[d]] != 2) continue;
      n = split_taps(combos, n, p.axes[size_t(d)], index[d]);
    }
    for (int64_t c = 0; c < width; ++c) {
      store_combined(p, io, src, dst, r * width + c - win.e0, combos, n, inner, size_t(c), post);
    }
  }
}

// Whether the last two output axes end the weight order, the second-last first (HWC images:
// W then C), so run_rows_combined2 may combine W's taps once per (row, w).
bool rows_combine2(const TransformPlan& p) {
  if (!p.linear || p.out_axes < 2) return false;
  const int w = int(p.out_axes) - 2, c = int(p.out_axes) - 1;
  std::vector<int> tail;
  int outer_splits = 0;
  for (int d : p.weight_order) {
    if (d == w || d == c) tail.push_back(d);
    else if (!tail.empty()) return false;
    else ++outer_splits;
  }
  if (tail.size() == 2 && tail[0] != w) return false;
  return (1 << outer_splits) <= kMaxCombos;
}

// run_rows_combined with rows over all but the last two axes: a narrow last axis (the 3
// channels of an HWC image) would otherwise pay the per-row work for every 3 elements.
template <typename IO>
void run_rows_combined2(const TransformPlan& p, const IO& io, const void* src, void* dst, Window win) {
  const size_t R = p.out_axes, A = p.axes.size();
  const int64_t W = p.out_shape[R - 2], C = p.out_shape[R - 1];
  const int64_t r0 = win.e0 / (W * C), r1 = win.e1 / (W * C);
  const TransformPlan::Axis& mid = p.axes[R - 2];
  const TransformPlan::Axis& inner = p.axes[R - 1];
  const int after = p.resize_step;
#pragma omp parallel for schedule(static) if ((r1 - r0) * W * C >= (int64_t(1) << 14))
  for (int64_t r = r0; r < r1; ++r) {
    size_t index[kMaxAxes] = {};
    int64_t rest = r;
    for (size_t a = R - 2; a-- > 0;) {
      index[a] = static_cast<size_t>(rest % p.out_shape[a]);
      rest /= p.out_shape[a];
    }
    Combo combos[kMaxCombos];
    int n = 1;
    combos[0] = {0, 1.0, -1};
    int post = -1;
    for (size_t d = 0; d < A; ++d) {
      if (d == R - 2 || d == R - 1) continue;
      const auto& ax = p.axes[d];
      size_t k = 2 * index[d];
      if (ax.count[index[d]] == 2) continue;
      if (ax.off[k] == kConst) {
        int st = ax.step[k];
        if (st > after) post = std::max(post, st);
        else combos[0].pre = std::max(combos[0].pre, st);
      } else {
        combos[0].off += ax.off[k];
      }
    }
    for (int d : p.weight_order) {
      if (size_t(d) >= R - 2 && size_t(d) < R) continue;
      if (p.axes[size_t(d)].count[index[d]] != 2) continue;
      n = split_taps(combos, n, p.axes[size_t(d)], index[d]);
    }
    for (int64_t x = 0; x < W; ++x) {
      const size_t kw = 2 * static_cast<size_t>(x);
      const int tw = mid.count[static_cast<size_t>(x)];
      int post2 = post;
      if (tw == 1 && mid.off[kw] == kConst && mid.step[kw] > after) post2 = std::max(post2, int(mid.step[kw]));
      Combo c2[2 * kMaxCombos];
      int n2 = 0;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < tw; ++j) {
          Combo e = combos[i];
          e.w *= mid.weight[kw + size_t(j)];
          if (mid.off[kw + size_t(j)] == kConst) e.pre = std::max(e.pre, int(mid.step[kw + size_t(j)]));
          else e.off += mid.off[kw + size_t(j)];
          c2[n2++] = e;
        }
      }
      for (int64_t c = 0; c < C; ++c) {
        store_combined(p, io, src, dst, (r * W + x) * C + c - win.e0, c2, n2, inner, size_t(c), post2);
      }
    }
  }
}

bool uses_combined2(const TransformPlan& p) { return rows_combine2(p) && p.out_shape[p.out_axes - 1] < 64; }

template <typename IO>
void run_any(const TransformPlan& p, const IO& io, const void* src, void* dst, Window win) {
  if (uses_combined2(p)) return run_rows_combined2(p, io, src, dst, win);
  if (rows_combine(p)) return run_rows_combined(p, io, src, dst, win);
  run_rows(p, io, src, dst, win);
}

// Same dtype, no interpolation: element copies, a whole row by memcpy when its map is a plain
// offset.
template <size_t E>
void copy_rows(const TransformPlan& p, const uint8_t* src, uint8_t* dst, Window win) {
  const size_t R = p.out_axes, A = p.axes.size();
  const int64_t width = R ? p.out_shape[R - 1] : 1;
  const int64_t r0 = win.e0 / width, r1 = win.e1 / width;
  const TransformPlan::Axis* inner = R ? &p.axes[R - 1] : nullptr;
  // An inner axis that reads its source at one step (a transpose of HWC to CHW reads every C-th
  // element) copies its rows of 4-byte elements by strided32 (vector permutes for step 3).
  // (A pad constant's tap, kConst = -1, never continues a positive step from offset >= 0.)
  int64_t inner_step = 0;
  if (E == 4 && inner && width > 1 && inner->off[0] != kConst) {
    inner_step = even_step(width, [inner](int64_t c) { return inner->off[2 * size_t(c)]; });
  }
  const PreprocessLoops& loops = preprocess_loops();
#pragma omp parallel for schedule(static) if ((r1 - r0) * width >= (int64_t(1) << 15))
  for (int64_t r = r0; r < r1; ++r) {
    int64_t base = 0, rest = r;
    int cstep = -1;
    for (size_t d = 0; d < A; ++d) {
      if (R && d == R - 1) continue;
      int64_t i = 0;
      if (d + 1 < R) {
        int64_t rows_below = 1;
        for (size_t b = d + 1; b + 1 < R; ++b) rows_below *= p.out_shape[b];
        i = (rest / rows_below) % p.out_shape[d];
      }
      size_t k = 2 * static_cast<size_t>(i);
      if (p.axes[d].off[k] == kConst) cstep = std::max(cstep, int(p.axes[d].step[k]));
      else base += p.axes[d].off[k];
    }
    uint8_t* out = dst + static_cast<size_t>(r * width - win.e0) * E;
    if (cstep < 0 && inner && inner->contiguous) {
      std::memcpy(out, src + static_cast<size_t>(base + inner->off[0]) * E, static_cast<size_t>(width) * E);
      continue;
    }
    if (cstep < 0 && inner_step > 0) {
      loops.strided32(reinterpret_cast<const uint32_t*>(src + static_cast<size_t>(base + inner->off[0]) * E),
                      inner_step, reinterpret_cast<uint32_t*>(out), width);
      continue;
    }
    for (int64_t c = 0; c < width; ++c) {
      int st = cstep;
      int64_t off = base;
      if (inner) {
        size_t k = 2 * static_cast<size_t>(c);
        if (inner->off[k] == kConst) st = std::max(st, int(inner->step[k]));
        else off += inner->off[k];
      }
      const uint8_t* from = st >= 0 ? p.const_bytes[size_t(st)].data() : src + static_cast<size_t>(off) * E;
      std::memcpy(out + static_cast<size_t>(c) * E, from, E);
    }
  }
}

}  // namespace

int64_t transform_window_unit(const TransformPlan& p) {
  if (p.out_axes == 0) return 1;
  const int64_t width = p.out_shape[p.out_axes - 1];
  const bool copies = !p.linear && p.src_dtype == p.out_dtype;
  return !copies && uses_combined2(p) ? p.out_shape[p.out_axes - 2] * width : width;
}

Status run_transform_plan(const TransformPlan& p, const Array& in, Array& out) {
  FUSEBOX_CHECK(out.dtype() == p.out_dtype) << "transform plan: dtypes";
  return run_transform_window(p, in, out.raw(), 0, out.numel());
}

Status run_transform_window(const TransformPlan& p, const Array& in, void* dst, int64_t e0, int64_t e1) {
  FUSEBOX_CHECK(in.dtype() == p.src_dtype) << "transform plan: dtypes";
  FUSEBOX_CHECK(p.axes.size() <= size_t(kMaxAxes)) << "transform plan: too many axes";
  if (e1 == e0) return Status::ok();
  const int64_t unit = transform_window_unit(p);
  FUSEBOX_CHECK(unit > 0 && e0 % unit == 0 && e1 % unit == 0 && e0 < e1) << "transform plan: window";
  const Window win{e0, e1};
  const void* src = in.raw();
  if (!p.linear && p.src_dtype == p.out_dtype) {
    auto* s = static_cast<const uint8_t*>(src);
    auto* d = static_cast<uint8_t*>(dst);
    switch (dtype_size(p.src_dtype)) {
      case 1: copy_rows<1>(p, s, d, win); return Status::ok();
      case 2: copy_rows<2>(p, s, d, win); return Status::ok();
      case 4: copy_rows<4>(p, s, d, win); return Status::ok();
      case 8: copy_rows<8>(p, s, d, win); return Status::ok();
    }
    FUSEBOX_CHECK(false) << "transform plan: element size";
  }
  const DType R = p.linear ? p.resize_dtype : p.out_dtype;
  if (p.src_dtype == DType::U8 && p.out_dtype == DType::F32 && R == DType::F32) {
    run_any(p, Fixed<DType::U8, DType::F32, DType::F32>{}, src, dst, win);
  } else if (p.src_dtype == DType::F32 && p.out_dtype == DType::F32 && R == DType::F32) {
    run_any(p, Fixed<DType::F32, DType::F32, DType::F32>{}, src, dst, win);
  } else if (p.src_dtype == DType::U8 && p.out_dtype == DType::U8 && R == DType::U8) {
    run_any(p, Fixed<DType::U8, DType::U8, DType::U8>{}, src, dst, win);
  } else {
    Dynamic io{};
    visit_dtype(p.src_dtype, [&]<DType D>() { io.l = &load_as<D>; });
    visit_dtype(p.out_dtype, [&]<DType D>() { io.s = &store_as<D>; });
    visit_dtype(R, [&]<DType D>() { io.r = &round_to<D>; });
    run_any(p, io, src, dst, win);
  }
  return Status::ok();
}

}  // namespace fusebox::cpu
