// Reference kernels of the pooling ops on NCHW inputs: max_pool2d, avg_pool2d and
// global_avg_pool. Output sizes come from the preallocated results (shape inference applied
// ceil_mode), so the kernels only sweep windows:
//
//   window (oh, ow) covers input rows  oh*stride_h - pad_top  + ky*dilation_h, ky < kernel_h
//                          and columns ow*stride_w - pad_left + kx*dilation_w, kx < kernel_w
//
// Positions outside the input are padding: never the max (as if -inf), never summed. Averages
// accumulate in double and round once.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"
#include "ir/layout.h"

namespace fusebox::cpu {

namespace {

template <DType D>
constexpr bool kIsFloat = D == DType::F32 || D == DType::F64 || D == DType::F16 || D == DType::BF16;

struct Window {
  int64_t kernel[2];
  int64_t stride[2];
  int64_t pad_begin[2];
  int64_t pad_end[2];
  int64_t dilation[2];
};

Window read_window(const Node& node, bool has_dilation) {
  const auto& k = node.attr_i64s("kernel");
  const auto& s = node.attr_i64s("stride");
  const auto& p = node.attr_i64s("pad");
  FUSEBOX_CHECK(k.size() == 2 && s.size() == 2 && p.size() == 4) << "pool: attribute lengths";
  Window w{{k[0], k[1]}, {s[0], s[1]}, {p[0], p[1]}, {p[2], p[3]}, {1, 1}};
  if (has_dilation) {
    const auto& d = node.attr_i64s("dilation");
    FUSEBOX_CHECK(d.size() == 2) << "pool: dilation length";
    w.dilation[0] = d[0];
    w.dilation[1] = d[1];
  }
  return w;
}

Status check_nchw(const Array& x, const Array& y, const char* op) {
  FUSEBOX_CHECK(x.rank() == 4 && y.rank() == 4 && x.dtype() == y.dtype()) << op << ": NCHW types";
  FUSEBOX_CHECK(x.shape()[0] == y.shape()[0] && x.shape()[1] == y.shape()[1]) << op << ": N and C";
  if (!is_float(x.dtype())) {
    return Status::invalid(std::string(op) + ": input must be a float type, got " + x.type_string());
  }
  return Status::ok();
}

template <DType D>
void max_pool(const Array& x, Array& y, const Window& w) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  using C = typename T::Compute;
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t H = x.shape()[2], W = x.shape()[3], OH = y.shape()[2], OW = y.shape()[3];
  const S* src = x.data<S>();
  S* dst = y.data<S>();
  for (int64_t p = 0; p < planes; ++p) {
    const S* plane = src + p * H * W;
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        C best = -std::numeric_limits<C>::infinity();
        bool found_nan = false;
        for (int64_t ky = 0; ky < w.kernel[0] && !found_nan; ++ky) {
          int64_t ih = oh * w.stride[0] - w.pad_begin[0] + ky * w.dilation[0];
          if (ih < 0 || ih >= H) continue;
          for (int64_t kx = 0; kx < w.kernel[1]; ++kx) {
            int64_t iw = ow * w.stride[1] - w.pad_begin[1] + kx * w.dilation[1];
            if (iw < 0 || iw >= W) continue;
            C v = T::load(plane[ih * W + iw]);
            if (v != v) {  // NaN wins
              best = v;
              found_nan = true;
              break;
            }
            if (v > best) best = v;
          }
        }
        dst[(p * OH + oh) * OW + ow] = T::store(best);
      }
    }
  }
}

template <DType D>
void avg_pool(const Array& x, Array& y, const Window& w, bool count_include_pad) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  using C = typename T::Compute;
  int64_t planes = x.shape()[0] * x.shape()[1];
  int64_t H = x.shape()[2], W = x.shape()[3], OH = y.shape()[2], OW = y.shape()[3];
  const S* src = x.data<S>();
  S* dst = y.data<S>();
  for (int64_t p = 0; p < planes; ++p) {
    const S* plane = src + p * H * W;
    for (int64_t oh = 0; oh < OH; ++oh) {
      int64_t h0 = oh * w.stride[0] - w.pad_begin[0];
      // The part of the window inside the padded extent [-pad_begin, H + pad_end).
      int64_t padded_h = std::min(h0 + w.kernel[0], H + w.pad_end[0]) - h0;
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t w0 = ow * w.stride[1] - w.pad_begin[1];
        int64_t padded_w = std::min(w0 + w.kernel[1], W + w.pad_end[1]) - w0;
        double sum = 0;
        int64_t count = 0;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + w.kernel[0], H); ++ih) {
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + w.kernel[1], W); ++iw) {
            sum += static_cast<double>(T::load(plane[ih * W + iw]));
            ++count;
          }
        }
        int64_t divisor = count_include_pad ? padded_h * padded_w : count;
        // A window with nothing to average (only possible on an empty input) is NaN, as 0/0.
        double mean = divisor > 0 ? sum / static_cast<double>(divisor) : std::numeric_limits<double>::quiet_NaN();
        dst[(p * OH + oh) * OW + ow] = T::store(static_cast<C>(mean));
      }
    }
  }
}

template <DType D>
void global_avg_pool(const Array& x, Array& y, int64_t planes, int64_t plane_size) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  using C = typename T::Compute;
  const S* src = x.data<S>();
  S* dst = y.data<S>();
  // Planes are independent and each is summed in order, so threads change nothing but the time.
#pragma omp parallel for schedule(static) if (planes * plane_size >= (int64_t(1) << 15))
  for (int64_t p = 0; p < planes; ++p) {
    double sum = 0;
    for (int64_t i = 0; i < plane_size; ++i) sum += static_cast<double>(T::load(src[p * plane_size + i]));
    double mean = plane_size > 0 ? sum / static_cast<double>(plane_size) : std::numeric_limits<double>::quiet_NaN();
    dst[p] = T::store(static_cast<C>(mean));
  }
}

// The same means over x in nChw<b>c: one slab [H*W, b] per (n, c/b), each channel's sum taken in
// the plain kernel's order, so both layouts give the same bits.
template <DType D>
void global_avg_pool_nchwc(const Array& x, Array& y, int64_t slabs, int64_t plane_size, int64_t b) {
  using T = DTypeTraits<D>;
  using S = typename T::Storage;
  using C = typename T::Compute;
  const S* src = x.data<S>();
  S* dst = y.data<S>();
#pragma omp parallel for schedule(static) if (slabs * plane_size * b >= (int64_t(1) << 15))
  for (int64_t s = 0; s < slabs; ++s) {
    std::vector<double> sum(size_t(b), 0.0);
    const S* slab = src + s * plane_size * b;
    for (int64_t i = 0; i < plane_size; ++i) {
      for (int64_t lane = 0; lane < b; ++lane) sum[lane] += static_cast<double>(T::load(slab[i * b + lane]));
    }
    for (int64_t lane = 0; lane < b; ++lane) {
      double mean = plane_size > 0 ? sum[lane] / static_cast<double>(plane_size)
                                   : std::numeric_limits<double>::quiet_NaN();
      dst[s * b + lane] = T::store(static_cast<C>(mean));
    }
  }
}

}  // namespace

Status ref_MaxPool2d(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  FUSEBOX_RETURN_IF_ERROR(check_nchw(x, y, "max_pool2d"));
  Window w = read_window(args.node, true);
  visit_dtype(x.dtype(), [&]<DType D>() {
    if constexpr (kIsFloat<D>) max_pool<D>(x, y, w);
  });
  return Status::ok();
}

Status ref_AvgPool2d(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  FUSEBOX_RETURN_IF_ERROR(check_nchw(x, y, "avg_pool2d"));
  Window w = read_window(args.node, false);
  bool include_pad = args.node.attr_bool("count_include_pad");
  visit_dtype(x.dtype(), [&]<DType D>() {
    if constexpr (kIsFloat<D>) avg_pool<D>(x, y, w, include_pad);
  });
  return Status::ok();
}

Status ref_GlobalAvgPool(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  FUSEBOX_CHECK(x.rank() >= 3 && y.rank() == x.rank() && x.dtype() == y.dtype()) << "global_avg_pool: types";
  if (!is_float(x.dtype())) {
    return Status::invalid("global_avg_pool: input must be a float type, got " + x.type_string());
  }
  if (has_nchwc_layout(args.node)) {
    FUSEBOX_CHECK(x.rank() == 5 && y.numel() == x.shape()[0] * x.shape()[1] * x.shape()[4]) << "global_avg_pool: nchwc";
    visit_dtype(x.dtype(), [&]<DType D>() {
      if constexpr (kIsFloat<D>) {
        global_avg_pool_nchwc<D>(x, y, x.shape()[0] * x.shape()[1], x.shape()[2] * x.shape()[3], x.shape()[4]);
      }
    });
    return Status::ok();
  }
  int64_t planes = x.shape()[0] * x.shape()[1];
  FUSEBOX_CHECK(y.numel() == planes) << "global_avg_pool: result size";
  int64_t plane_size = product(std::span<const int64_t>(x.shape()).subspan(2));
  visit_dtype(x.dtype(), [&]<DType D>() {
    if constexpr (kIsFloat<D>) global_avg_pool<D>(x, y, planes, plane_size);
  });
  return Status::ok();
}

}  // namespace fusebox::cpu
