// Selections by argmax, for ops that would need a sort or an index-returning pool (the IR has
// neither):
//
//   TopK(x, k)        k rounds along `axis` (static size n, constant k <= kMaxK); round r:
//                       cand  = where(taken, worst, x)                 worst: -inf / the type's
//                                                                      lowest (+ for smallest)
//                       a_r   = argmax(cand, axis, keepdims)           (argmin for largest = 0),
//                               or the first free position (argmax of !taken) when
//                               reduce_max(cand) == worst: every element left equals worst
//                       hot_r = eq(a_r, iota_n)                        one-hot of the pick
//                       v_r   = reduce_sum(where(hot_r, x, -0), axis)  exact: one term is x
//                       taken = taken | hot_r
//                     Values = concat(v_r), Indices = concat(a_r) along axis. argmax takes the
//                     first of equal elements, so ties come out in index order as ONNX requires;
//                     NaN (which fusebox's argmax and argmin both pick first) comes first, for
//                     largest and smallest alike.
//   MaxPool Indices   for each of the kernel's K taps a strided slice of the (zero-padded) input,
//                     stacked to [N, C, K, OH, OW]; hit = (tap == Y or both NaN) & valid (a
//                     constant: the tap is inside the input), the first hit by argmax over the
//                     taps (max_pool2d lets NaN win: a NaN window points at its first NaN), and its
//                     flattened NCHW index (storage_order 1: column-major H, W) by a one-hot sum
//                     over a constant [K, OH, OW] table, plus (n C + c) H W. Y stays max_pool2d.
#include <cstdint>
#include <limits>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// Bounds that keep the graphs small: k rounds of about ten nodes, K taps of one slice each.
constexpr int64_t kMaxK = 64;
constexpr int64_t kMaxTaps = 256;

ValueId scalar(ImportContext& ctx, DType dtype, double v) {
  Array a(dtype, {});
  a.set_f64(0, v);
  return ctx.builder().constant(a);
}

// Ones of `rank` with `size` at `axis`: the shape of an iota along one axis.
std::vector<int64_t> along(int rank, int axis, int64_t size) {
  std::vector<int64_t> s(size_t(rank), 1);
  s[size_t(axis)] = size;
  return s;
}

Array iota(const std::vector<int64_t>& shape) {
  Array a(DType::I64, shape);
  for (int64_t i = 0; i < a.numel(); ++i) a.set_i64(i, i);
  return a;
}

// x where the one-hot `hot` is set, summed along `axis` (keepdims): the picked element, exactly
// (the other terms are -0, which leaves every value, -0 included, as it is).
ValueId pick(ImportContext& ctx, ValueId x, ValueId hot, int axis) {
  DType dt = ctx.type(x).dtype;
  ValueId filler = scalar(ctx, dt, is_float(dt) ? -0.0 : 0.0);
  return ctx.emit(Op::ReduceSum, {ctx.emit(Op::Where, {hot, x, filler})},
                  {{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}});
}

template <typename T>
void set_extreme(Array& a, bool lowest) {
  a.data<T>()[0] = lowest ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
}

// The value at or below (largest) / at or above every element of a `dt` tensor.
ValueId worst_value(ImportContext& ctx, DType dt, bool largest) {
  Array a(dt, {});
  if (is_float(dt)) {
    a.set_f64(0, largest ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
    return ctx.builder().constant(a);
  }
  switch (dt) {
    case DType::I8: set_extreme<int8_t>(a, largest); break;
    case DType::U8: set_extreme<uint8_t>(a, largest); break;
    case DType::I16: set_extreme<int16_t>(a, largest); break;
    case DType::U16: set_extreme<uint16_t>(a, largest); break;
    case DType::I32: set_extreme<int32_t>(a, largest); break;
    case DType::U32: set_extreme<uint32_t>(a, largest); break;
    case DType::I64: set_extreme<int64_t>(a, largest); break;
    case DType::U64: set_extreme<uint64_t>(a, largest); break;
    default: break;  // floats above; bool is refused before
  }
  return ctx.builder().constant(a);
}

Status convert_topk(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.dtype == DType::Bool || xt.rank() == 0) return n.error("input must be a numeric tensor of rank >= 1, got " + xt.to_string());
  int64_t k = 0;
  if (ctx.opset() < 10) {
    std::optional<int64_t> ka = n.attr_int("k");
    if (!ka) return n.error("attribute 'k' is missing");
    k = *ka;
  } else {
    FUSEBOX_ASSIGN_OR_RETURN(double kv, ctx.require_scalar(n, 1, "K"));
    k = static_cast<int64_t>(kv);
  }
  const bool largest = ctx.opset() < 11 || n.attr_int("largest", 1) != 0;
  if (ctx.opset() >= 11) n.accept_attr("sorted");  // sorted output is a valid unsorted one too
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, n.attr_int("axis", -1), xt.rank(), "axis"));
  const Dim& d = xt.shape[size_t(axis)];
  if (!d.is_static()) return n.error("needs a static size along axis " + std::to_string(axis) + ", the input is " + xt.to_string());
  if (k < 1 || k > d.value()) {
    return n.error("k = " + std::to_string(k) + " must be in [1, " + std::to_string(d.value()) + "] (the axis size)");
  }
  if (k > kMaxK) {
    return n.error("k = " + std::to_string(k) + " is above " + std::to_string(kMaxK) +
                   ", the most rounds of argmax fusebox writes for TopK");
  }
  const Op arg = largest ? Op::ArgMax : Op::ArgMin;
  const Attrs along_axis{{"axis", int64_t(axis)}, {"keepdims", true}};
  ValueId worst = worst_value(ctx, xt.dtype, largest);
  ValueId positions = ctx.builder().constant(iota(along(xt.rank(), axis, d.value())));
  std::vector<ValueId> values, indices;
  ValueId taken = kNoValue;
  for (int64_t r = 0; r < k; ++r) {
    ValueId a = kNoValue;
    if (taken == kNoValue) {
      a = ctx.emit(arg, {x}, along_axis);
    } else {
      ValueId cand = ctx.emit(Op::Where, {taken, worst, x});
      // When every element left equals `worst`, argmax may land on a taken one: take the first
      // free position instead.
      ValueId extreme = ctx.emit(largest ? Op::ReduceMax : Op::ReduceMin, {cand},
                                 {{"axes", std::vector<int64_t>{axis}}, {"keepdims", true}});
      ValueId free = ctx.emit(Op::Cast, {ctx.emit(Op::Not, {taken})}, {{"to", DType::I32}});
      a = ctx.emit(Op::Where, {ctx.emit(Op::Equal, {extreme, worst}), ctx.emit(Op::ArgMax, {free}, along_axis),
                               ctx.emit(arg, {cand}, along_axis)});
    }
    ValueId hot = ctx.emit(Op::Equal, {a, positions});
    indices.push_back(a);
    values.push_back(pick(ctx, x, hot, axis));
    if (r + 1 < k) taken = taken == kNoValue ? hot : ctx.emit(Op::Or, {taken, hot});
  }
  auto joined = [&](const std::vector<ValueId>& parts) {
    return parts.size() == 1 ? parts[0] : ctx.emit(Op::Concat, parts, {{"axis", int64_t(axis)}});
  };
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 0, joined(values)));
  return ctx.set_output(n, 1, joined(indices));
}

// MaxPool's Indices output (see the file comment) from the pooled input xf (float) and Y.
Expected<ValueId> max_pool_indices(ImportContext& ctx, OnnxNode& n, ValueId xf, ValueId y, const Attrs& attrs,
                                   bool column_major) {
  const TensorType xt = ctx.type(xf), yt = ctx.type(y);
  for (const Shape& s : {xt.shape, yt.shape}) {
    for (const Dim& dim : s) {
      if (!dim.is_static()) return n.error("output 'Indices' needs a static input shape, the input is " + xt.to_string());
    }
  }
  auto ints = [&](const char* name) { return std::get<std::vector<int64_t>>(*attrs.find(name)); };
  const std::vector<int64_t> kernel = ints("kernel"), stride = ints("stride"), pad = ints("pad"), dil = ints("dilation");
  const int64_t batch = xt.shape[0].value(), ch = xt.shape[1].value(), h = xt.shape[2].value(), w = xt.shape[3].value();
  const int64_t oh = yt.shape[2].value(), ow = yt.shape[3].value(), taps = kernel[0] * kernel[1];
  if (taps > kMaxTaps) {
    return n.error("output 'Indices' is supported for kernels of at most " + std::to_string(kMaxTaps) + " taps, got " +
                   std::to_string(kernel[0]) + "x" + std::to_string(kernel[1]));
  }
  // Zero padding, extended at the end so that every tap's strided slice is in range (ceil_mode).
  std::vector<int64_t> pads{0, 0, pad[0], pad[1], 0, 0, pad[2], pad[3]};
  for (size_t i = 0; i < 2; ++i) {
    int64_t need = (kernel[i] - 1) * dil[i] + ((i == 0 ? oh : ow) - 1) * stride[i] + 1;
    int64_t have = (i == 0 ? h : w) + pad[i] + pad[i + 2];
    pads[6 + i] += std::max<int64_t>(0, need - have);
  }
  ValueId xp = ctx.emit(Op::Pad, {xf}, {{"pads", pads}});
  std::vector<ValueId> tap_values;
  Array valid(DType::Bool, {1, 1, taps, oh, ow}), table(DType::I64, {1, 1, taps, oh, ow});
  for (int64_t i = 0; i < kernel[0]; ++i) {
    for (int64_t j = 0; j < kernel[1]; ++j) {
      const int64_t t = i * kernel[1] + j;
      std::vector<int64_t> starts{i * dil[0], j * dil[1]};
      std::vector<int64_t> ends{starts[0] + (oh - 1) * stride[0] + 1, starts[1] + (ow - 1) * stride[1] + 1};
      ValueId s = ctx.emit(Op::Slice, {xp}, {{"starts", starts}, {"ends", ends}, {"axes", std::vector<int64_t>{2, 3}},
                                             {"steps", stride}});
      FUSEBOX_ASSIGN_OR_RETURN(ValueId s5, ctx.reshape(n, s, Shape{Dim(batch), Dim(ch), Dim(1), Dim(oh), Dim(ow)}));
      tap_values.push_back(s5);
      for (int64_t p = 0; p < oh; ++p) {
        for (int64_t q = 0; q < ow; ++q) {
          const int64_t row = p * stride[0] - pad[0] + i * dil[0], col = q * stride[1] - pad[1] + j * dil[1];
          const int64_t at = (t * oh + p) * ow + q;
          valid.data<bool>()[at] = row >= 0 && row < h && col >= 0 && col < w;
          table.set_i64(at, column_major ? row + col * h : row * w + col);
        }
      }
    }
  }
  ValueId stacked = tap_values.size() == 1 ? tap_values[0] : ctx.emit(Op::Concat, tap_values, {{"axis", int64_t(2)}});
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y5, ctx.reshape(n, y, Shape{Dim(batch), Dim(ch), Dim(1), Dim(oh), Dim(ow)}));
  // max_pool2d lets NaN win: a NaN Y is matched by the first NaN tap.
  ValueId nan_pair = ctx.emit(Op::And, {ctx.emit(Op::NotEqual, {y5, y5}), ctx.emit(Op::NotEqual, {stacked, stacked})});
  ValueId same = ctx.emit(Op::Or, {ctx.emit(Op::Equal, {stacked, y5}), nan_pair});
  ValueId hit = ctx.emit(Op::And, {same, ctx.builder().constant(valid)});
  ValueId first = ctx.emit(Op::ArgMax, {ctx.emit(Op::Cast, {hit}, {{"to", DType::I32}})},
                           {{"axis", int64_t(2)}, {"keepdims", true}});
  ValueId hot = ctx.emit(Op::Equal, {first, ctx.builder().constant(iota({1, 1, taps, 1, 1}))});
  ValueId local = pick(ctx, ctx.builder().constant(table), hot, 2);
  if (local == kNoValue) return local;
  FUSEBOX_ASSIGN_OR_RETURN(local, ctx.reshape(n, local, yt.shape));
  Array offset(DType::I64, {batch, ch, 1, 1});
  for (int64_t c = 0; c < batch * ch; ++c) offset.set_i64(c, c * h * w);
  return ctx.emit(Op::Add, {local, ctx.builder().constant(offset)});
}

}  // namespace

Status convert_max_pool_2d(ImportContext& ctx, OnnxNode& n, ValueId x, Attrs attrs, bool lifted) {
  const int64_t storage_order = n.attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) {
    return n.error("attribute 'storage_order' must be 0 or 1, got " + std::to_string(storage_order));
  }
  // 8-bit integers pool in f32, which holds them exactly.
  const DType dt = ctx.type(x).dtype;
  const bool via_float = dt == DType::U8 || dt == DType::I8;
  ValueId xf = via_float ? ctx.emit(Op::Cast, {x}, {{"to", DType::F32}}) : x;
  ValueId y = ctx.emit(Op::MaxPool2d, {xf}, attrs);
  if (y == kNoValue) return ctx.set_output(n, 0, y);
  // A lifted 1-D pool's outputs lose the size-1 height; its flat indices are the 1-D ones.
  auto set = [&](int i, ValueId v) -> Status {
    if (!lifted) return ctx.set_output(n, i, v);
    FUSEBOX_ASSIGN_OR_RETURN(ValueId dropped, drop_lifted_axis(ctx, n, v));
    return ctx.set_output(n, i, dropped);
  };
  FUSEBOX_RETURN_IF_ERROR(set(0, via_float ? ctx.emit(Op::Cast, {y}, {{"to", dt}}) : y));
  if (!n.has_output(1)) return Status::ok();
  FUSEBOX_ASSIGN_OR_RETURN(ValueId indices, max_pool_indices(ctx, n, xf, y, attrs, storage_order == 1));
  return set(1, indices);
}

void add_topk_converters(ConverterTable& table) { table["TopK"] = convert_topk; }

}  // namespace fusebox::onnx_import
