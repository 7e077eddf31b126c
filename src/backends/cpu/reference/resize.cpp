// Reference kernel of resize (ONNX Resize without roi/antialias/extrapolation), on every axis.
//
// Each axis is handled alone: output index x maps to a source coordinate c (coordinate mode),
// then
//   nearest  one source index: nearest_mode applied to c, clamped to [0, in-1];
//   linear   two taps floor(c) and floor(c)+1 with weights 1-frac and frac, c clamped to
//            [0, in-1] first (as ONNX Runtime does, so borders repeat the edge pixel).
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

namespace fusebox::cpu {

namespace {

enum class Coordinate { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

Coordinate parse_coordinate(const std::string& s) {
  if (s == "align_corners") return Coordinate::kAlignCorners;
  if (s == "asymmetric") return Coordinate::kAsymmetric;
  if (s == "pytorch_half_pixel") return Coordinate::kPytorchHalfPixel;
  return Coordinate::kHalfPixel;
}

NearestMode parse_nearest_mode(const std::string& s) {
  if (s == "round_prefer_ceil") return NearestMode::kRoundPreferCeil;
  if (s == "floor") return NearestMode::kFloor;
  if (s == "ceil") return NearestMode::kCeil;
  return NearestMode::kRoundPreferFloor;
}

float source_coordinate(Coordinate mode, int64_t x, float scale, int64_t in, int64_t out) {
  float xf = static_cast<float>(x);
  switch (mode) {
    case Coordinate::kHalfPixel:
      return (xf + 0.5f) / scale - 0.5f;
    case Coordinate::kPytorchHalfPixel:
      return out > 1 ? (xf + 0.5f) / scale - 0.5f : 0.0f;
    case Coordinate::kAlignCorners:
      return out == 1 ? 0.0f : xf * (static_cast<float>(in) - 1) / (static_cast<float>(out) - 1);
    case Coordinate::kAsymmetric:
      return xf / scale;
  }
  return 0.0f;
}

// A coordinate clamped to [0, in-1] (NaN goes to 0), safe to convert to int64.
double clamp_coordinate(double c, int64_t in) {
  if (!(c > 0)) return 0;
  return std::min(c, static_cast<double>(in - 1));
}

int64_t nearest_index(float c, NearestMode mode, int64_t in) {
  double v = c;
  double f = std::floor(v);
  switch (mode) {
    case NearestMode::kRoundPreferFloor: v = (v - f == 0.5) ? f : std::round(v); break;
    case NearestMode::kRoundPreferCeil: v = (v - f == 0.5) ? f + 1 : std::round(v); break;
    case NearestMode::kFloor: v = f; break;
    case NearestMode::kCeil: v = std::ceil(v); break;
  }
  return static_cast<int64_t>(clamp_coordinate(v, in));
}

// Up to two (source index, weight) taps per output index of one axis.
struct AxisTaps {
  std::vector<int64_t> offset;  // 2 per output index: source index * input stride
  std::vector<double> weight;   // 2 per output index
  std::vector<int> count;       // 1 or 2 per output index
};

AxisTaps linear_taps(Coordinate mode, float scale, int64_t in, int64_t out, int64_t stride) {
  AxisTaps t;
  t.offset.resize(static_cast<size_t>(2 * out));
  t.weight.resize(static_cast<size_t>(2 * out));
  t.count.resize(static_cast<size_t>(out));
  for (int64_t x = 0; x < out; ++x) {
    double c = clamp_coordinate(source_coordinate(mode, x, scale, in, out), in);
    int64_t lo = static_cast<int64_t>(c);
    int64_t hi = std::min(lo + 1, in - 1);
    double w_hi = c - static_cast<double>(lo);
    auto k = static_cast<size_t>(2 * x);
    if (hi == lo || w_hi == 0) {
      t.offset[k] = lo * stride;
      t.weight[k] = 1;
      t.count[static_cast<size_t>(x)] = 1;
    } else {
      t.offset[k] = lo * stride;
      t.weight[k] = static_cast<double>(hi) - c;
      t.offset[k + 1] = hi * stride;
      t.weight[k + 1] = w_hi;
      t.count[static_cast<size_t>(x)] = 2;
    }
  }
  return t;
}

// Integers round half away from zero and saturate (a u8 image stays in 0..255); floats round
// once from double.
template <DType D>
typename DTypeTraits<D>::Storage store_double(double v) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  if constexpr (D == DType::F32 || D == DType::F64 || D == DType::F16 || D == DType::BF16) {
    return T::store(static_cast<typename T::Compute>(v));
  } else if constexpr (D == DType::Bool) {
    return v != 0;
  } else {
    v = std::round(v);
    if (!(v == v)) return 0;
    if (v <= static_cast<double>(std::numeric_limits<S>::min())) return std::numeric_limits<S>::min();
    if (v >= static_cast<double>(std::numeric_limits<S>::max())) return std::numeric_limits<S>::max();
    return static_cast<S>(v);
  }
}

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
  std::vector<float> scales(rank);
  if (n.has_attr("scales")) {
    const auto& s = n.attr_f64s("scales");
    FUSEBOX_CHECK(s.size() == rank) << "resize: scales length";
    for (size_t d = 0; d < rank; ++d) scales[d] = static_cast<float>(s[d]);
  } else {
    for (size_t d = 0; d < rank; ++d) {
      scales[d] = static_cast<float>(y.shape()[d]) / static_cast<float>(x.shape()[d]);
    }
  }
  for (float s : scales) {
    if (!(s > 0) || !std::isfinite(s)) return Status::invalid("resize: scales must be positive and finite");
  }
  Coordinate coord = parse_coordinate(n.attr_str("coordinate"));
  if (n.attr_str("mode") == "nearest") {
    resize_nearest(x, y, scales, coord, parse_nearest_mode(n.attr_str("nearest_mode")));
    return Status::ok();
  }
  if (x.dtype() == DType::Bool) return Status::invalid("resize: linear mode needs a numeric input, got bool");
  visit_dtype(x.dtype(), [&]<DType D>() { resize_linear<D>(x, y, scales, coord); });
  return Status::ok();
}

}  // namespace fusebox::cpu
