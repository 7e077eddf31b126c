// Reference kernels of the normalisations: softmax, log_softmax, layer_norm, rms_norm and
// batch_norm (inference). All compute in double and round once into the result dtype.
//
// softmax and log_softmax subtract the slice's maximum first, so exp never overflows; a NaN in a
// slice makes the whole slice NaN. layer_norm and rms_norm normalise over the trailing axes
// [axis, rank); their scale and bias broadcast (numpy rules) against x.shape[axis:].
#include <cmath>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

namespace {

template <DType D>
double load_f64(const Array& a, int64_t i) {
  return double(DTypeTraits<D>::load(a.data<Storage<D>>()[i]));
}

// Calls f.template operator()<D>() for float dtypes; other dtypes are an internal error
// (shape inference admits floats only).
template <typename F>
Status visit_float(const KernelArgs& a, F&& f) {
  DType t = a.in[0].dtype();
  return visit_dtype(t, [&]<DType D>() -> Status {
    if constexpr (kIsFloatType<D>) {
      FUSEBOX_CHECK(a.out[0].dtype() == D && a.out[0].numel() == a.in[0].numel()) << "result type";
      for (const Array& in : a.in) FUSEBOX_CHECK(in.dtype() == D) << "operand dtypes differ";
      return f.template operator()<D>();
    } else {
      return Status::internal(std::string(a.node.info().keyword) + ": no reference kernel for dtype " +
                              std::string(dtype_name(D)));
    }
  });
}

struct AxisSplit {
  int64_t outer, n, inner;  // x viewed as [outer, n, inner]
};

Expected<AxisSplit> split_at_axis(const KernelArgs& a) {
  const auto& shape = a.in[0].shape();
  std::optional<int> axis = normalize_axis(a.node.attr_i64("axis"), a.in[0].rank());
  if (!axis) return Status::invalid("axis " + std::to_string(a.node.attr_i64("axis")) + " out of range");
  std::span<const int64_t> s(shape);
  return AxisSplit{product(s.first(size_t(*axis))), shape[size_t(*axis)],
                   product(s.subspan(size_t(*axis) + 1))};
}

Status softmax(const KernelArgs& a, bool log) {
  Expected<AxisSplit> split = split_at_axis(a);
  if (!split) return split.status();
  // Plain names, not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
  const int64_t outer = split->outer, n = split->n, inner = split->inner;
  return visit_float(a, [&]<DType D>() -> Status {
    Storage<D>* out = a.out[0].data<Storage<D>>();
    std::vector<double> shifted(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        int64_t base = o * n * inner + in;
        double m = -INFINITY;
        for (int64_t k = 0; k < n; ++k) {
          double v = load_f64<D>(a.in[0], base + k * inner);
          if (v != v) {
            m = v;
            break;
          }
          if (v > m) m = v;
        }
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) {
          shifted[size_t(k)] = load_f64<D>(a.in[0], base + k * inner) - m;
          sum += std::exp(shifted[size_t(k)]);
        }
        double log_sum = std::log(sum);
        for (int64_t k = 0; k < n; ++k) {
          double d = shifted[size_t(k)];
          out[base + k * inner] = store_f64<D>(log ? d - log_sum : std::exp(d) / sum);
        }
      }
    }
    return Status::ok();
  });
}

// Offsets into a scale/bias operand for each position of the normalised shape (row-major), or
// an error when the operand does not broadcast to that shape.
Expected<std::vector<int64_t>> param_offsets(const Array& p, std::span<const int64_t> norm_shape,
                                             const char* what) {
  bool ok = p.rank() <= int(norm_shape.size());
  for (int i = 0; ok && i < p.rank(); ++i) {
    int64_t d = p.shape()[size_t(i)], want = norm_shape[norm_shape.size() - size_t(p.rank()) + size_t(i)];
    ok = d == want || d == 1;
  }
  if (!ok) {
    return Status::invalid(std::string(what) + " " + p.type_string() +
                           " does not broadcast to the normalised shape");
  }
  std::vector<int64_t> offsets;
  offsets.reserve(size_t(product(norm_shape)));
  for (MultiIndex it(norm_shape, {broadcast_strides(p.shape(), norm_shape)}); !it.done(); it.next()) {
    offsets.push_back(it.offset(0));
  }
  return offsets;
}

// layer_norm (rms = false) and rms_norm (rms = true): x viewed as [outer, inner], each row
// normalised on its own.
Status norm(const KernelArgs& a, bool rms) {
  const Array& x = a.in[0];
  std::optional<int> axis = normalize_axis(a.node.attr_i64("axis"), x.rank());
  if (!axis) return Status::invalid("axis " + std::to_string(a.node.attr_i64("axis")) + " out of range");
  std::span<const int64_t> norm_shape = std::span(x.shape()).subspan(size_t(*axis));
  int64_t inner = product(norm_shape);
  int64_t outer = inner == 0 ? 0 : x.numel() / inner;
  double eps = a.node.attr_f64("eps");
  std::vector<int64_t> scale_at, bias_at;
  if (a.in.size() > 1) {
    Expected<std::vector<int64_t>> s = param_offsets(a.in[1], norm_shape, "scale");
    if (!s) return s.status();
    scale_at = std::move(*s);
  }
  if (a.in.size() > 2) {
    if (rms) return Status::invalid("rms_norm takes no bias");
    Expected<std::vector<int64_t>> b = param_offsets(a.in[2], norm_shape, "bias");
    if (!b) return b.status();
    bias_at = std::move(*b);
  }
  return visit_float(a, [&]<DType D>() -> Status {
    Storage<D>* out = a.out[0].data<Storage<D>>();
    for (int64_t o = 0; o < outer; ++o) {
      int64_t base = o * inner;
      double mean = 0, denom;
      if (rms) {
        double sq = 0;
        for (int64_t k = 0; k < inner; ++k) {
          double v = load_f64<D>(x, base + k);
          sq += v * v;
        }
        denom = std::sqrt(sq / double(inner) + eps);
      } else {
        double sum = 0, var = 0;
        for (int64_t k = 0; k < inner; ++k) sum += load_f64<D>(x, base + k);
        mean = sum / double(inner);
        for (int64_t k = 0; k < inner; ++k) {
          double d = load_f64<D>(x, base + k) - mean;
          var += d * d;
        }
        denom = std::sqrt(var / double(inner) + eps);
      }
      for (int64_t k = 0; k < inner; ++k) {
        double y = (load_f64<D>(x, base + k) - mean) / denom;
        if (!scale_at.empty()) y *= load_f64<D>(a.in[1], scale_at[size_t(k)]);
        if (!bias_at.empty()) y += load_f64<D>(a.in[2], bias_at[size_t(k)]);
        out[base + k] = store_f64<D>(y);
      }
    }
    return Status::ok();
  });
}

}  // namespace

Status ref_Softmax(const KernelArgs& a) { return softmax(a, false); }
Status ref_LogSoftmax(const KernelArgs& a) { return softmax(a, true); }
Status ref_LayerNorm(const KernelArgs& a) { return norm(a, false); }
Status ref_RmsNorm(const KernelArgs& a) { return norm(a, true); }

Status ref_BatchNorm(const KernelArgs& a) {
  // x is [N, C, spatial...]; scale, bias, mean and var are [C].
  const Array& x = a.in[0];
  if (x.rank() < 2) return Status::invalid("batch_norm input must be at least rank 2, got " + x.type_string());
  int64_t channels = x.shape()[1];
  static const char* kNames[] = {"x", "scale", "bias", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) {
    if (a.in[i].numel() != channels) {
      return Status::invalid(std::string("batch_norm ") + kNames[i] + " " + a.in[i].type_string() +
                             " does not have " + std::to_string(channels) + " channels");
    }
  }
  int64_t inner = product(std::span(x.shape()).subspan(2));
  int64_t batch = x.shape()[0];
  double eps = a.node.attr_f64("eps");
  return visit_float(a, [&]<DType D>() -> Status {
    Storage<D>* out = a.out[0].data<Storage<D>>();
    for (int64_t c = 0; c < channels; ++c) {
      double scale = load_f64<D>(a.in[1], c), bias = load_f64<D>(a.in[2], c);
      double mean = load_f64<D>(a.in[3], c), denom = std::sqrt(load_f64<D>(a.in[4], c) + eps);
      for (int64_t b = 0; b < batch; ++b) {
        int64_t base = (b * channels + c) * inner;
        for (int64_t k = 0; k < inner; ++k) {
          out[base + k] = store_f64<D>((load_f64<D>(x, base + k) - mean) / denom * scale + bias);
        }
      }
    }
    return Status::ok();
  });
}

}  // namespace fusebox::cpu
