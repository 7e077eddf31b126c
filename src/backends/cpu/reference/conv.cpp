// Reference kernels of conv2d and conv_transpose2d (NCHW, grouped), as direct loops with double
// accumulation, rounded once.
//
//   conv2d            y[n, o, oh, ow] = bias[o] + sum over c < C/g, ky, kx of
//                       x[n, g*C/g + c, oh*s_h - pad_t + ky*d_h, ow*s_w - pad_l + kx*d_w]
//                       * w[o, c, ky, kx]                   (g = o / (O/g); padding reads 0)
//   conv_transpose2d  the adjoint: every input element scatters
//                       y[n, g*O/g + o, ih*s_h - pad_t + ky*d_h, iw*s_w - pad_l + kx*d_w]
//                         += x[n, g*C/g + c, ih, iw] * w[g*C/g + c, o, ky, kx]
//                     positions outside the result are dropped; bias is added once per element.
//   conv2d_integer    conv2d's loops over (x - x_zp) and (w - w_zp[o]) in 64-bit integers,
//                     wrapped to i32
// The output sizes (output_padding included) come from the preallocated results.
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

namespace {

template <DType D>
constexpr bool kIsFloat = D == DType::F32 || D == DType::F64 || D == DType::F16 || D == DType::BF16;

struct ConvParams {
  int64_t stride[2];
  int64_t pad[2];  // top, left: the end pads only shape the result, which is given
  int64_t dilation[2];
  int64_t groups;
};

ConvParams read_params(const Node& node) {
  const auto& s = node.attr_i64s("stride");
  const auto& p = node.attr_i64s("pad");
  const auto& d = node.attr_i64s("dilation");
  FUSEBOX_CHECK(s.size() == 2 && p.size() == 4 && d.size() == 2) << "conv: attribute lengths";
  ConvParams c{{s[0], s[1]}, {p[0], p[1]}, {d[0], d[1]}, node.attr_i64("groups")};
  FUSEBOX_CHECK(c.groups >= 1) << "conv: groups";
  return c;
}

std::vector<double> to_double(const Array& a) {
  std::vector<double> v(static_cast<size_t>(a.numel()));
  visit_dtype(a.dtype(), [&]<DType D>() {
    using T = DTypeTraits<D>;
    const auto* p = a.data<typename T::Storage>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(T::load(p[i]));
  });
  return v;
}

void store_from_double(const std::vector<double>& v, Array& y) {
  visit_dtype(y.dtype(), [&]<DType D>() {
    using T = DTypeTraits<D>;
    if constexpr (kIsFloat<D>) {
      auto* p = y.data<typename T::Storage>();
      for (size_t i = 0; i < v.size(); ++i) p[i] = T::store(static_cast<typename T::Compute>(v[i]));
    }
  });
}

Status check_operands(const KernelArgs& args, const char* op) {
  const Array& x = args.in[0];
  const Array& w = args.in[1];
  const Array& y = args.out[0];
  FUSEBOX_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4) << op << ": operands must be rank 4";
  FUSEBOX_CHECK(w.dtype() == x.dtype() && y.dtype() == x.dtype()) << op << ": dtypes differ";
  if (!is_float(x.dtype())) {
    return Status::invalid(std::string(op) + ": input must be a float type, got " + x.type_string());
  }
  if (args.in.size() == 3) {
    FUSEBOX_CHECK(args.in[2].rank() == 1 && args.in[2].shape()[0] == y.shape()[1]) << op << ": bias shape";
  }
  return Status::ok();
}

// The direct loops of conv2d over values already converted to V (double, or centred int64),
// accumulated in V: one sum per result element, bias added last.
template <typename V>
std::vector<V> conv_loop(const ConvParams& p, std::span<const int64_t> xshape,
                         std::span<const int64_t> wshape, std::span<const int64_t> yshape,
                         const std::vector<V>& xs, const std::vector<V>& ws, const std::vector<V>& bias) {
  const int64_t N = xshape[0], C = xshape[1], H = xshape[2], W = xshape[3];
  const int64_t O = wshape[0], Cg = wshape[1], KH = wshape[2], KW = wshape[3];
  const int64_t OH = yshape[2], OW = yshape[3];
  FUSEBOX_CHECK(yshape[0] == N && yshape[1] == O) << "conv2d: result N, C";
  FUSEBOX_CHECK(Cg * p.groups == C && O % p.groups == 0) << "conv2d: channels vs groups";
  const int64_t Og = O / p.groups;
  std::vector<V> acc(static_cast<size_t>(N * O * OH * OW));
  size_t out = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < O; ++o) {
      int64_t c0 = (o / Og) * Cg;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          V sum = 0;
          for (int64_t c = 0; c < Cg; ++c) {
            const V* xplane = xs.data() + ((n * C + c0 + c) * H) * W;
            const V* wplane = ws.data() + ((o * Cg + c) * KH) * KW;
            for (int64_t ky = 0; ky < KH; ++ky) {
              int64_t ih = oh * p.stride[0] - p.pad[0] + ky * p.dilation[0];
              if (ih < 0 || ih >= H) continue;
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iw = ow * p.stride[1] - p.pad[1] + kx * p.dilation[1];
                if (iw < 0 || iw >= W) continue;
                sum += xplane[ih * W + iw] * wplane[ky * KW + kx];
              }
            }
          }
          acc[out++] = sum + bias[static_cast<size_t>(o)];
        }
      }
    }
  }
  return acc;
}

}  // namespace

Status ref_Conv2d(const KernelArgs& args) {
  FUSEBOX_RETURN_IF_ERROR(check_operands(args, "conv2d"));
  const Array& x = args.in[0];
  const Array& w = args.in[1];
  Array& y = args.out[0];
  const int64_t O = w.shape()[0];
  std::vector<double> bias =
      args.in.size() == 3 ? to_double(args.in[2]) : std::vector<double>(size_t(O), 0.0);
  std::vector<double> acc =
      conv_loop(read_params(args.node), x.shape(), w.shape(), y.shape(), to_double(x), to_double(w), bias);
  store_from_double(acc, y);
  return Status::ok();
}

// conv2d_integer x, w, x_zp, w_zp: the loops of conv2d over (x - x_zp) and (w - w_zp[o]) as
// 64-bit integers (exact), padding reading 0 (x_zp before centring), wrapped to i32.
Status ref_Conv2dInteger(const KernelArgs& args) {
  const Array& x = args.in[0];
  const Array& w = args.in[1];
  Array& y = args.out[0];
  FUSEBOX_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && y.dtype() == DType::I32)
      << "conv2d_integer: operands must be rank 4, the result i32";
  const int64_t O = w.shape()[0], per_o = w.numel() / std::max<int64_t>(O, 1);
  std::vector<int64_t> xs = int8_values(x), ws = int8_values(w);
  const std::vector<int64_t> zx = int8_values(args.in[2]), zw = int8_values(args.in[3]);
  FUSEBOX_CHECK(zx.size() == 1 && (zw.size() == 1 || int64_t(zw.size()) == O))
      << "conv2d_integer: zero point lengths";
  for (int64_t& v : xs) v -= zx[0];
  for (size_t i = 0; i < ws.size(); ++i) ws[i] -= zw[zw.size() == 1 ? 0 : i / size_t(per_o)];
  std::vector<int64_t> acc = conv_loop(read_params(args.node), x.shape(), w.shape(), y.shape(), xs, ws,
                                       std::vector<int64_t>(size_t(O), 0));
  int32_t* py = y.data<int32_t>();
  // Signed-to-narrower conversion is modular since C++20: the wrap is well defined.
  for (size_t i = 0; i < acc.size(); ++i) py[i] = static_cast<int32_t>(acc[i]);
  return Status::ok();
}

Status ref_ConvTranspose2d(const KernelArgs& args) {
  FUSEBOX_RETURN_IF_ERROR(check_operands(args, "conv_transpose2d"));
  const Array& x = args.in[0];
  const Array& w = args.in[1];
  Array& y = args.out[0];
  ConvParams p = read_params(args.node);
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t Og = w.shape()[1], KH = w.shape()[2], KW = w.shape()[3];
  int64_t O = y.shape()[1], OH = y.shape()[2], OW = y.shape()[3];
  FUSEBOX_CHECK(w.shape()[0] == C && C % p.groups == 0 && O == Og * p.groups && y.shape()[0] == N)
      << "conv_transpose2d: channels vs groups";
  int64_t Cg = C / p.groups;
  std::vector<double> xs = to_double(x), ws = to_double(w);
  std::vector<double> acc(static_cast<size_t>(y.numel()), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t ci = 0; ci < C; ++ci) {
      int64_t o0 = (ci / Cg) * Og;
      const double* xplane = xs.data() + ((n * C + ci) * H) * W;
      for (int64_t o = 0; o < Og; ++o) {
        const double* wplane = ws.data() + ((ci * Og + o) * KH) * KW;
        double* yplane = acc.data() + ((n * O + o0 + o) * OH) * OW;
        for (int64_t ih = 0; ih < H; ++ih) {
          for (int64_t ky = 0; ky < KH; ++ky) {
            int64_t oh = ih * p.stride[0] - p.pad[0] + ky * p.dilation[0];
            if (oh < 0 || oh >= OH) continue;
            for (int64_t iw = 0; iw < W; ++iw) {
              double xv = xplane[ih * W + iw];
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t ow = iw * p.stride[1] - p.pad[1] + kx * p.dilation[1];
                if (ow < 0 || ow >= OW) continue;
                yplane[oh * OW + ow] += xv * wplane[ky * KW + kx];
              }
            }
          }
        }
      }
    }
  }
  if (args.in.size() == 3) {
    std::vector<double> bias = to_double(args.in[2]);
    int64_t plane = OH * OW;
    for (int64_t i = 0; i < y.numel(); ++i) acc[static_cast<size_t>(i)] += bias[static_cast<size_t>((i / plane) % O)];
  }
  store_from_double(acc, y);
  return Status::ok();
}

}  // namespace fusebox::cpu
