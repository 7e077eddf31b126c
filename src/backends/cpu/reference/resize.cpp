// Reference kernel of resize (ONNX Resize without roi/antialias/extrapolation), on every axis.
//
// Each axis is handled alone: output index x maps to a source coordinate c (coordinate mode),
// then
//   nearest  one source index: nearest_mode applied to c, clamped to [0, in-1];
//   linear   two taps floor(c) and floor(c)+1 with weights 1-frac and frac, c clamped to
//            [0, in-1] first (as ONNX Runtime does, so borders repeat the edge pixel);
//   cubic    four taps floor(c)-1 .. floor(c)+2 with Keys' weights (see cubic_taps), c not
//            clamped; taps outside read the edge (or are dropped with exclude_outside).
// The n-linear result is the sum over all tap combinations of the product of the axis weights.
// A tap of weight exactly 0 is left out, so an axis with in == out and scale 1 reads exactly one
// element (N and C of an NCHW image are never mixed, even with a NaN next door).
//
// Coordinates are computed in float with ONNX Runtime's formulas and operation order (scale =
// float(out)/float(in) when sizes are given) so nearest picks the same pixel at the .5 and
// integer boundaries; weights and accumulation are in double, rounded once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/reference/resize_math.h"

namespace fusebox::cpu {

namespace {

bool next_index(std::vector<int64_t>& index, std::span<const int64_t> shape) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < shape[d]) return true;
    index[d] = 0;
  }
  return false;
}

// Copies element size `E` bytes from per-axis source offsets: the last axis as a loop over a
// table, every other axis once per output row (so the index arithmetic is per row, not per
// element). Rows are independent, so they are spread over the threads.
template <size_t E>
void gather_rows(const uint8_t* src, uint8_t* dst, const std::vector<std::vector<int64_t>>& source,
                 std::span<const int64_t> out_shape) {
  struct Elem {
    uint8_t b[E];
  };
  const size_t rank = out_shape.size();
  const int64_t width = out_shape[rank - 1];
  const int64_t rows = product(out_shape.subspan(0, rank - 1));
  const std::vector<int64_t>& cols = source[rank - 1];
  const auto* s = reinterpret_cast<const Elem*>(src);
  auto* d = reinterpret_cast<Elem*>(dst);
#pragma omp parallel for schedule(static) if (rows * width >= (int64_t(1) << 15))
  for (int64_t r = 0; r < rows; ++r) {
    int64_t base = 0, rest = r;
    for (size_t a = rank - 1; a-- > 0;) {
      const int64_t extent = out_shape[a];
      base += source[a][static_cast<size_t>(rest % extent)];
      rest /= extent;
    }
    Elem* out = d + r * width;
    for (int64_t c = 0; c < width; ++c) out[c] = s[base + cols[static_cast<size_t>(c)]];
  }
}

void resize_nearest(const Array& x, Array& y, const std::vector<float>& scales, Coordinate coord,
                    NearestMode mode) {
  size_t rank = x.shape().size();
  std::vector<int64_t> strides = contiguous_strides(x.shape());
  std::vector<std::vector<int64_t>> source(rank);  // per axis: input offset of each output index
  for (size_t d = 0; d < rank; ++d) {
    int64_t in = x.shape()[d], out = y.shape()[d];
    for (int64_t o = 0; o < out; ++o) {
      float c = source_coordinate(coord, o, scales[d], in, out);
      source[d].push_back(nearest_index(c, mode, in) * strides[d]);
    }
  }
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  if (rank == 0) {
    std::memcpy(dst, src, static_cast<size_t>(dtype_size(x.dtype())));
    return;
  }
  switch (dtype_size(x.dtype())) {
    case 1: return gather_rows<1>(src, dst, source, y.shape());
    case 2: return gather_rows<2>(src, dst, source, y.shape());
    case 4: return gather_rows<4>(src, dst, source, y.shape());
    case 8: return gather_rows<8>(src, dst, source, y.shape());
  }
  FUSEBOX_CHECK(false) << "resize: element size " << dtype_size(x.dtype());
}

// Next combination of taps (one per axis) for the output element at `index`.
bool next_choice(std::vector<int>& choice, const std::vector<AxisTaps>& taps,
                 const std::vector<int64_t>& index) {
  for (size_t d = choice.size(); d-- > 0;) {
    if (++choice[d] < taps[d].count[static_cast<size_t>(index[d])]) return true;
    choice[d] = 0;
  }
  return false;
}

template <DType D>
void resize_linear(const Array& x, Array& y, const std::vector<float>& scales, Coordinate coord) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  size_t rank = x.shape().size();
  std::vector<int64_t> strides = contiguous_strides(x.shape());
  std::vector<AxisTaps> taps;
  for (size_t d = 0; d < rank; ++d) {
    taps.push_back(linear_taps(coord, scales[d], x.shape()[d], y.shape()[d], strides[d]));
  }
  const S* src = x.data<S>();
  S* dst = y.data<S>();
  std::vector<int64_t> index(rank, 0);
  std::vector<int> choice(rank, 0);
  int64_t o = 0;
  do {
    double acc = 0;
    std::fill(choice.begin(), choice.end(), 0);
    do {
      double w = 1;
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        auto k = static_cast<size_t>(2 * index[d] + choice[d]);
        w *= taps[d].weight[k];
        off += taps[d].offset[k];
      }
      acc += w * static_cast<double>(T::load(src[off]));
    } while (next_choice(choice, taps, index));
    dst[o++] = store_double<D>(acc);
  } while (next_index(index, y.shape()));
}

// Cubic taps of one axis (ONNX Resize mode "cubic"): the coordinate c is not clamped; the taps
// are floor(c) - 1 .. floor(c) + 2 with Keys' coefficients for t = c - floor(c) and parameter A
// (cubic_coeff_a); taps outside [0, in) read the edge element, or with exclude_outside get weight
// 0 and the others are divided by their sum. Zero weights are left out, as in linear.
struct CubicTaps {
  std::vector<int64_t> offset;  // 4 per output index
  std::vector<double> weight;   // 4 per output index
  std::vector<int> count;       // 1 to 4 per output index
};

CubicTaps cubic_taps(Coordinate mode, float scale, int64_t in, int64_t out, int64_t stride, double a,
                     bool exclude_outside) {
  CubicTaps t;
  t.offset.resize(size_t(4 * out));
  t.weight.resize(size_t(4 * out));
  t.count.resize(size_t(out));
  for (int64_t x = 0; x < out; ++x) {
    const double c = source_coordinate(mode, x, scale, in, out);
    const double f = std::floor(c), r = c - f;
    const double s = 1 - r;
    const double w[4] = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                         ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
                         ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
    double taps_w[4], sum = 0;
    int64_t taps_i[4];
    for (int k = 0; k < 4; ++k) {
      // Far outside (a NaN or huge coordinate) every tap clamps to an edge.
      const double idx = std::clamp(f - 1 + k, -2.0, double(in) + 2);
      const bool outside = idx < 0 || idx >= double(in);
      taps_i[k] = std::clamp<int64_t>(int64_t(idx), 0, in - 1);
      taps_w[k] = exclude_outside && outside ? 0.0 : w[k];
      sum += taps_w[k];
    }
    int n = 0;
    for (int k = 0; k < 4; ++k) {
      double wk = exclude_outside ? taps_w[k] / sum : taps_w[k];
      if (wk == 0) continue;
      t.offset[size_t(4 * x + n)] = taps_i[k] * stride;
      t.weight[size_t(4 * x + n)] = wk;
      ++n;
    }
    if (n == 0) {  // every weight 0 (cannot happen for finite c): read the nearest edge
      t.offset[size_t(4 * x)] = taps_i[1] * stride;
      t.weight[size_t(4 * x)] = 0;
      n = 1;
    }
    t.count[size_t(x)] = n;
  }
  return t;
}

template <DType D>
void resize_cubic(const Array& x, Array& y, const std::vector<float>& scales, Coordinate coord, double a,
                  bool exclude_outside) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  size_t rank = x.shape().size();
  std::vector<int64_t> strides = contiguous_strides(x.shape());
  std::vector<CubicTaps> taps;
  for (size_t d = 0; d < rank; ++d) {
    taps.push_back(cubic_taps(coord, scales[d], x.shape()[d], y.shape()[d], strides[d], a, exclude_outside));
  }
  const S* src = x.data<S>();
  S* dst = y.data<S>();
  std::vector<int64_t> index(rank, 0);
  std::vector<int> choice(rank, 0);
  int64_t o = 0;
  auto next = [&]() {
    for (size_t d = rank; d-- > 0;) {
      if (++choice[d] < taps[d].count[size_t(index[d])]) return true;
      choice[d] = 0;
    }
    return false;
  };
  do {
    double acc = 0;
    std::fill(choice.begin(), choice.end(), 0);
    do {
      double w = 1;
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) {
        auto k = size_t(4 * index[d] + choice[d]);
        w *= taps[d].weight[k];
        off += taps[d].offset[k];
      }
      acc += w * static_cast<double>(T::load(src[off]));
    } while (next());
    dst[o++] = store_double<D>(acc);
  } while (next_index(index, y.shape()));
}

}  // namespace

Status ref_Resize(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  const Node& n = args.node;
  size_t rank = x.shape().size();
  FUSEBOX_CHECK(y.shape().size() == rank && y.dtype() == x.dtype()) << "resize: result type";
  if (y.numel() == 0) return Status::ok();
  for (size_t d = 0; d < rank; ++d) {
    if (x.shape()[d] == 0) {
      return Status::invalid("resize: cannot resize empty dim " + std::to_string(d) + " of " +
                             x.type_string() + " to " + std::to_string(y.shape()[d]));
    }
  }
  std::vector<float> scales = resize_scales(n, x.shape(), y.shape());
  for (float s : scales) {
    if (!(s > 0) || !std::isfinite(s)) return Status::invalid("resize: scales must be positive and finite");
  }
  Coordinate coord = parse_coordinate(n.attr_str("coordinate"));
  if (n.attr_str("mode") == "nearest") {
    resize_nearest(x, y, scales, coord, parse_nearest_mode(n.attr_str("nearest_mode")));
    return Status::ok();
  }
  if (x.dtype() == DType::Bool) {
    return Status::invalid("resize: " + n.attr_str("mode") + " mode needs a numeric input, got bool");
  }
  if (n.attr_str("mode") == "cubic") {
    const double a = n.attr_f64("cubic_coeff_a");
    const bool exclude = n.attr_bool("exclude_outside");
    visit_dtype(x.dtype(), [&]<DType D>() { resize_cubic<D>(x, y, scales, coord, a, exclude); });
    return Status::ok();
  }
  visit_dtype(x.dtype(), [&]<DType D>() { resize_linear<D>(x, y, scales, coord); });
  return Status::ok();
}

}  // namespace fusebox::cpu
