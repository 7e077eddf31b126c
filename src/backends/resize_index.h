// The index arithmetic of resize (ONNX Runtime's formulas and operation order), shared by the
// CPU reference kernel and every backend's native transform-region kernel (transform_plan.h), so
// all pick the same source pixels and weights bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "ir/check.h"
#include "ir/graph.h"

namespace fusebox {


enum class Coordinate { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric };
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

inline Coordinate parse_coordinate(const std::string& s) {
  if (s == "align_corners") return Coordinate::kAlignCorners;
  if (s == "asymmetric") return Coordinate::kAsymmetric;
  if (s == "pytorch_half_pixel") return Coordinate::kPytorchHalfPixel;
  return Coordinate::kHalfPixel;
}

inline NearestMode parse_nearest_mode(const std::string& s) {
  if (s == "round_prefer_ceil") return NearestMode::kRoundPreferCeil;
  if (s == "floor") return NearestMode::kFloor;
  if (s == "ceil") return NearestMode::kCeil;
  return NearestMode::kRoundPreferFloor;
}

inline float source_coordinate(Coordinate mode, int64_t x, float scale, int64_t in, int64_t out) {
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
inline double clamp_coordinate(double c, int64_t in) {
  if (!(c > 0)) return 0;
  return std::min(c, static_cast<double>(in - 1));
}

inline int64_t nearest_index(float c, NearestMode mode, int64_t in) {
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

inline AxisTaps linear_taps(Coordinate mode, float scale, int64_t in, int64_t out, int64_t stride) {
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

// The per-axis scales of a resize node: its `scales`, or float(out) / float(in) per axis.
inline std::vector<float> resize_scales(const Node& n, std::span<const int64_t> in, std::span<const int64_t> out) {
  std::vector<float> scales(in.size());
  if (n.has_attr("scales")) {
    const auto& s = n.attr_f64s("scales");
    FUSEBOX_CHECK(s.size() == in.size()) << "resize: scales length";
    for (size_t d = 0; d < in.size(); ++d) scales[d] = static_cast<float>(s[d]);
  } else {
    for (size_t d = 0; d < in.size(); ++d) scales[d] = static_cast<float>(out[d]) / static_cast<float>(in[d]);
  }
  return scales;
}

// numpy 'reflect' padding: the index into an axis of size n for a position j outside [0, n).
// It mirrors about the edge elements without repeating them; the pattern has period 2(n-1),
// which also covers pads wider than the axis.
inline int64_t reflect_index(int64_t j, int64_t n) {
  if (n == 1) return 0;
  int64_t period = 2 * (n - 1);
  int64_t m = j % period;
  if (m < 0) m += period;
  return m < n ? m : period - m;
}

}  // namespace fusebox
