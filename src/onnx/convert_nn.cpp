// Neural-network ONNX ops: convolutions, pools, normalisations, matrix products, softmax and
// reductions. Window attributes (kernel_shape, strides, pads, dilations, auto_pad) resolve to the
// explicit [top, left, bottom, right] pads fusebox takes; the ONNX pads order for 2-D is the same.
#include <algorithm>
#include <limits>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

Expected<int> normalize_onnx_axis(const OnnxNode& n, int64_t axis, int rank, const std::string& what) {
  std::optional<int> a = normalize_axis(axis, rank);
  if (!a) return n.error(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return *a;
}

Expected<Window> read_window(ImportContext& ctx, OnnxNode& n, const TensorType& x,
                             std::vector<int64_t> kernel, bool has_dilation) {
  if (x.rank() < 3 || x.rank() > 5) {
    return n.error("only 1-D, 2-D and 3-D windows over [N,C,spatial...] inputs are supported, the input is " +
                   x.to_string());
  }
  const size_t axes = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t> ones(axes, 1);
  Window w;
  w.kernel = std::move(kernel);
  w.stride = n.attr_ints("strides").value_or(ones);
  w.dilation = has_dilation ? n.attr_ints("dilations").value_or(ones) : ones;
  std::vector<int64_t> pads = n.attr_ints("pads").value_or(std::vector<int64_t>(2 * axes, 0));
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  const std::string count = std::to_string(axes);
  if (w.kernel.size() != axes) return n.error("kernel_shape needs " + count + " entries, got " + std::to_string(w.kernel.size()));
  if (w.stride.size() != axes) return n.error("strides needs " + count + " entries, got " + std::to_string(w.stride.size()));
  if (w.dilation.size() != axes) return n.error("dilations needs " + count + " entries, got " + std::to_string(w.dilation.size()));
  if (pads.size() != 2 * axes) return n.error("pads needs " + std::to_string(2 * axes) + " entries, got " + std::to_string(pads.size()));
  for (size_t i = 0; i < axes; ++i) {
    if (w.kernel[i] < 1 || w.stride[i] < 1 || w.dilation[i] < 1) {
      return n.error("kernel_shape, strides and dilations must be >= 1");
    }
  }
  if (auto_pad == "NOTSET") {
    w.pads = pads;
  } else if (auto_pad == "VALID") {
    w.pads.assign(2 * axes, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // out = ceil(in / stride); the padding that achieves it. With stride 1 it does not depend on
    // the input size, so symbolic sizes work; otherwise the size must be static.
    w.pads.assign(2 * axes, 0);
    for (size_t i = 0; i < axes; ++i) {
      int64_t span = w.dilation[i] * (w.kernel[i] - 1) + 1;
      int64_t total;
      if (w.stride[i] == 1) {
        total = span - 1;
      } else {
        const Dim& in = x.shape[2 + i];
        if (!in.is_static()) {
          return n.error("auto_pad " + auto_pad + " with stride " + std::to_string(w.stride[i]) +
                         " needs a static spatial size, the input is " + x.to_string());
        }
        int64_t out = (in.value() + w.stride[i] - 1) / w.stride[i];
        total = std::max<int64_t>(0, (out - 1) * w.stride[i] + span - in.value());
      }
      int64_t head = auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
      w.pads[i] = head;
      w.pads[i + axes] = total - head;
    }
  } else {
    return n.error("attribute 'auto_pad' = \"" + auto_pad + "\" is not supported");
  }
  (void)ctx;
  return w;
}

Window Window::lifted() const {
  if (axes() != 1) return *this;
  return Window{{1, kernel[0]}, {1, stride[0]}, {1, dilation[0]}, {0, pads[0], 0, pads[1]}};
}

namespace {

// The kernel size from the weight ([., ., k] or [., ., kh, kw], static; [., ., kd, kh, kw] too
// when `allow_3d`), checked against kernel_shape when given.
Expected<std::vector<int64_t>> conv_kernel(OnnxNode& n, const TensorType& w, bool allow_3d = false) {
  bool ok = w.rank() == 3 || w.rank() == 4 || (allow_3d && w.rank() == 5);
  for (int i = 2; ok && i < w.rank(); ++i) ok = w.shape[i].is_static();
  if (!ok) {
    return n.error(std::string(allow_3d ? "only 1-D, 2-D and 3-D" : "only 1-D and 2-D") +
                   " convolution with a static [.,.,k] or [.,.,kh,kw] weight is supported, the weight is " +
                   w.to_string());
  }
  std::vector<int64_t> k;
  for (int i = 2; i < w.rank(); ++i) k.push_back(w.shape[i].value());
  if (std::optional<std::vector<int64_t>> ks = n.attr_ints("kernel_shape"); ks && *ks != k) {
    return n.error("kernel_shape disagrees with the weight " + w.to_string());
  }
  return k;
}

// The operands of a 1-D convolution as the 2-D one's (x, w and an optional bias).
Status lift_conv_operands(ImportContext& ctx, OnnxNode& n, std::vector<ValueId>& in) {
  for (size_t i = 0; i < 2; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(in[i], lift_1d(ctx, n, in[i]));
  }
  return Status::ok();
}

// The convolution's result; a lifted 1-D one loses its size-1 height again.
Status set_window_output(ImportContext& ctx, OnnxNode& n, ValueId y, bool lifted) {
  if (!lifted || y == kNoValue) return ctx.set_output(n, 0, y);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId dropped, drop_lifted_axis(ctx, n, y));
  return ctx.set_output(n, 0, dropped);
}

}  // namespace

Expected<ValueId> emit_conv(ImportContext& ctx, OnnxNode& n, ValueId x, ValueId w, std::vector<ValueId> rest,
                            Op op) {
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> k, conv_kernel(n, ctx.type(w)));
  if (ctx.type(x).rank() != ctx.type(w).rank()) {
    return n.error("input " + ctx.type(x).to_string() + " and weight " + ctx.type(w).to_string() + " differ in rank");
  }
  FUSEBOX_ASSIGN_OR_RETURN(Window read, read_window(ctx, n, ctx.type(x), k, true));
  const bool lifted = read.axes() == 1;
  const Window win = read.lifted();
  std::vector<ValueId> in{x, w};
  if (lifted) FUSEBOX_RETURN_IF_ERROR(lift_conv_operands(ctx, n, in));
  in.insert(in.end(), rest.begin(), rest.end());
  Attrs attrs{{"stride", win.stride}, {"pad", win.pads}, {"dilation", win.dilation},
              {"groups", n.attr_int("group", 1)}};
  ValueId y = ctx.emit(op, std::move(in), std::move(attrs));
  if (!lifted || y == kNoValue) return y;
  return drop_lifted_axis(ctx, n, y);
}

namespace {

Status convert_conv(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId w, ctx.value(n, 1));
  std::vector<ValueId> bias;
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 2));
    bias.push_back(b);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, emit_conv(ctx, n, x, w, std::move(bias)));
  return ctx.set_output(n, 0, y);
}

// ConvTranspose's pads for output_shape or SAME auto_pad, as ONNX defines them: the total padding
// that gives the requested size, split with the smaller half first for SAME_UPPER and the larger
// half first otherwise (halves rounded down). A negative total (a requested size beyond what the
// product reaches) gives negative pads: the output is extended there.
Status conv_transpose_pads(OnnxNode& n, const TensorType& xt, const std::vector<int64_t>& k,
                           const std::vector<int64_t>& stride, const std::vector<int64_t>& dil,
                           const std::vector<int64_t>& out_pad, const std::optional<std::vector<int64_t>>& out_shape,
                           bool upper, std::vector<int64_t>& pads) {
  const size_t axes = k.size();
  for (size_t i = 0; i < axes; ++i) {
    const Dim& in = xt.shape[2 + i];
    if (!in.is_static()) {
      return n.error("output_shape/auto_pad needs a static spatial size, the input is " + xt.to_string());
    }
    int64_t want = out_shape ? (*out_shape)[i] : in.value() * stride[i];
    int64_t total = stride[i] * (in.value() - 1) + out_pad[i] + (k[i] - 1) * dil[i] + 1 - want;
    int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor, as ONNX's reference
    pads[i] = upper ? half : total - half;
    pads[i + axes] = upper ? total - half : half;
  }
  return Status::ok();
}

Status convert_conv_transpose(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId w, ctx.value(n, 1));
  const TensorType xt = ctx.type(x);
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> k, conv_kernel(n, ctx.type(w), /*allow_3d=*/true));
  if (xt.rank() != ctx.type(w).rank()) {
    return n.error("input " + xt.to_string() + " and weight " + ctx.type(w).to_string() + " differ in rank");
  }
  const size_t axes = k.size();
  const std::vector<int64_t> ones(axes, 1);
  // Read auto_pad ourselves: SAME for a transposed conv means output = input * stride.
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> out_pad = n.attr_ints("output_padding").value_or(std::vector<int64_t>(axes, 0));
  std::optional<std::vector<int64_t>> out_shape = n.attr_ints("output_shape");
  std::vector<int64_t> stride = n.attr_ints("strides").value_or(ones);
  std::vector<int64_t> dil = n.attr_ints("dilations").value_or(ones);
  std::vector<int64_t> pads = n.attr_ints("pads").value_or(std::vector<int64_t>(2 * axes, 0));
  if (out_pad.size() != axes || stride.size() != axes || dil.size() != axes || pads.size() != 2 * axes) {
    return n.error("strides, dilations and output_padding need " + std::to_string(axes) + " entries, pads " +
                   std::to_string(2 * axes));
  }
  if (out_shape && out_shape->size() == axes + 2) out_shape = std::vector<int64_t>(out_shape->begin() + 2, out_shape->end());
  if (out_shape && out_shape->size() != axes) return n.error("output_shape needs " + std::to_string(axes) + " entries");
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "VALID") pads.assign(2 * axes, 0);
  else if (auto_pad != "NOTSET" && !same) return n.error("attribute 'auto_pad' = \"" + auto_pad + "\" is not supported");
  if (out_shape || same) {
    FUSEBOX_RETURN_IF_ERROR(conv_transpose_pads(n, xt, k, stride, dil, out_pad, out_shape, auto_pad == "SAME_UPPER", pads));
  }
  if (axes == 3) return convert_conv_transpose_3d(ctx, n, x, w, {k, stride, dil, pads}, out_pad);
  // Negative pads extend the output: the product runs unpadded there, then zeros are padded on
  // and the bias added over the whole result.
  std::vector<int64_t> extend(2 * axes, 0);
  bool extended = false;
  for (size_t i = 0; i < 2 * axes; ++i) {
    if (pads[i] < 0) {
      extend[i] = -pads[i];
      pads[i] = 0;
      extended = true;
    }
  }
  const bool lifted = axes == 1;
  if (lifted) {
    stride.insert(stride.begin(), 1);
    dil.insert(dil.begin(), 1);
    out_pad.insert(out_pad.begin(), 0);
    pads = {0, pads[0], 0, pads[1]};
    extend = {0, extend[0], 0, extend[1]};
  }
  std::vector<ValueId> in{x, w};
  if (lifted) FUSEBOX_RETURN_IF_ERROR(lift_conv_operands(ctx, n, in));
  std::optional<ValueId> bias;
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 2));
    if (extended) bias = b;
    else in.push_back(b);
  }
  Attrs attrs{{"stride", stride}, {"pad", pads}, {"dilation", dil}, {"groups", n.attr_int("group", 1)},
              {"output_padding", out_pad}};
  ValueId y = ctx.emit(Op::ConvTranspose2d, std::move(in), std::move(attrs));
  if (extended && y != kNoValue) {
    std::vector<int64_t> pad_all{0, 0, extend[0], extend[1], 0, 0, extend[2], extend[3]};
    y = ctx.emit(Op::Pad, {y}, {{"pads", pad_all}});
    if (bias && y != kNoValue) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId b4, ctx.reshape(n, *bias, Shape{ctx.type(*bias).shape[0], 1, 1}));
      y = ctx.emit(Op::Add, {y, b4});
    }
  }
  return set_window_output(ctx, n, y, lifted);
}

Status convert_pool(ImportContext& ctx, OnnxNode& n) {
  bool is_max = n.op_type() == "MaxPool";
  FUSEBOX_ASSIGN_OR_RETURN(TensorType xt, ctx.type_of(n, 0));
  if (xt.rank() == 5) return convert_pool_3d(ctx, n);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  std::optional<std::vector<int64_t>> k = n.attr_ints("kernel_shape");
  if (!k) return n.error("attribute 'kernel_shape' is missing");
  FUSEBOX_ASSIGN_OR_RETURN(Window read, read_window(ctx, n, ctx.type(x), *k, is_max));
  const bool lifted = read.axes() == 1;
  const Window win = read.lifted();
  if (lifted) {
    FUSEBOX_ASSIGN_OR_RETURN(x, lift_1d(ctx, n, x));
  }
  bool ceil_mode = n.attr_int("ceil_mode", 0) != 0;
  Attrs attrs{{"kernel", win.kernel}, {"stride", win.stride}, {"pad", win.pads}, {"ceil_mode", ceil_mode}};
  if (is_max) {
    attrs.set("dilation", win.dilation);
    return convert_max_pool_2d(ctx, n, x, std::move(attrs), lifted);
  }
  if (std::optional<std::vector<int64_t>> d = n.attr_ints("dilations")) {
    for (int64_t v : *d)
      if (v != 1) return n.error("attribute 'dilations' other than 1 is not supported for AveragePool");
  }
  attrs.set("count_include_pad", n.attr_int("count_include_pad", 0) != 0);
  return set_window_output(ctx, n, ctx.emit(Op::AvgPool2d, {x}, std::move(attrs)), lifted);
}

Status convert_global_pool(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (n.op_type() == "GlobalAveragePool") return ctx.set_output(n, 0, ctx.emit(Op::GlobalAvgPool, {x}));
  std::vector<int64_t> axes;
  for (int64_t a = 2; a < ctx.type(x).rank(); ++a) axes.push_back(a);
  if (axes.empty()) return n.error("input must be [N,C,spatial...], got " + ctx.type(x).to_string());
  return ctx.set_output(n, 0, ctx.emit(Op::ReduceMax, {x}, {{"axes", axes}, {"keepdims", true}}));
}

// BatchNormalization. In training mode (opset 14 on) Y normalises with the batch's own mean and
// population variance over every axis but the channels, computed in f32 for f16/bf16 inputs,
// and the running_mean / running_var outputs are input * momentum + batch * (1 - momentum).
Status convert_batch_norm(ImportContext& ctx, OnnxNode& n) {
  double eps = n.attr_float("epsilon", 1e-5f);
  const bool training = n.attr_int("training_mode", 0) != 0;
  if (!training) n.accept_attr("momentum");  // only used in training
  const double momentum = training ? n.attr_float("momentum", 0.9f) : 0.0;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  std::vector<ValueId> in{x};
  for (int i = 1; i < 5; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, i));
    // Opset 15 lets scale/bias and mean/var have other float types than X.
    if (ctx.type(v).dtype != xt.dtype) v = ctx.emit(Op::Cast, {v}, {{"to", xt.dtype}});
    in.push_back(v);
  }
  if (!training) return ctx.set_output(n, 0, ctx.emit(Op::BatchNorm, std::move(in), {{"eps", eps}}));
  if (!is_float(xt.dtype) || xt.rank() < 2) return n.error("input X must be a float [N, C, ...] tensor, got " + xt.to_string());
  std::vector<int64_t> axes{0};
  for (int64_t a = 2; a < xt.rank(); ++a) axes.push_back(a);
  const DType stat = xt.dtype == DType::F16 || xt.dtype == DType::BF16 ? DType::F32 : xt.dtype;
  ValueId xs = stat == xt.dtype ? x : ctx.emit(Op::Cast, {x}, {{"to", stat}});
  Attrs reduce{{"axes", axes}, {"keepdims", true}};
  ValueId mean = ctx.emit(Op::ReduceMean, {xs}, reduce);
  ValueId d = ctx.emit(Op::Sub, {xs, mean});
  ValueId var = ctx.emit(Op::ReduceMean, {ctx.emit(Op::Mul, {d, d})}, reduce);
  const Shape channels{xt.shape[1]};
  FUSEBOX_ASSIGN_OR_RETURN(mean, ctx.reshape(n, mean, channels));
  FUSEBOX_ASSIGN_OR_RETURN(var, ctx.reshape(n, var, channels));
  auto as = [&](ValueId v, DType t) { return ctx.type(v).dtype == t ? v : ctx.emit(Op::Cast, {v}, {{"to", t}}); };
  in[3] = as(mean, xt.dtype), in[4] = as(var, xt.dtype);
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 0, ctx.emit(Op::BatchNorm, std::move(in), {{"eps", eps}})));
  for (int i : {1, 2}) {
    if (!n.has_output(i)) continue;
    FUSEBOX_ASSIGN_OR_RETURN(ValueId running, ctx.value(n, i + 2));
    const DType t = ctx.type(running).dtype;
    ValueId batch = as(i == 1 ? mean : var, t);
    ValueId kept = ctx.emit(Op::Mul, {running, scalar_constant(ctx, t, momentum)});
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, i, ctx.emit(Op::Add, {kept, ctx.emit(Op::Mul, {batch, scalar_constant(ctx, t, 1 - momentum)})})));
  }
  return Status::ok();
}

Status convert_matmul(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId a, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 1));
  return ctx.set_output(n, 0, ctx.emit(Op::MatMul, {a, b}));
}

ValueId scalar_like(ImportContext& ctx, ValueId like, double v) {
  Array s(ctx.type(like).dtype, {});
  s.set_f64(0, v);
  return ctx.builder().constant(s);
}

// Y = alpha * A' B' + beta * C, as transpose / matmul / mul / add.
Status convert_gemm(ImportContext& ctx, OnnxNode& n) {
  double alpha = n.attr_float("alpha", 1.0f), beta = n.attr_float("beta", 1.0f);
  bool ta = n.attr_int("transA", 0) != 0, tb = n.attr_int("transB", 0) != 0;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId a, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 1));
  if (ctx.type(a).rank() != 2 || ctx.type(b).rank() != 2) {
    return n.error("A and B must be rank 2, got " + ctx.type(a).to_string() + " and " + ctx.type(b).to_string());
  }
  if (ta) a = ctx.emit(Op::Transpose, {a}, {{"perm", std::vector<int64_t>{1, 0}}});
  if (tb) b = ctx.emit(Op::Transpose, {b}, {{"perm", std::vector<int64_t>{1, 0}}});
  ValueId y = ctx.emit(Op::MatMul, {a, b});
  if (alpha != 1.0 && y != kNoValue) y = ctx.emit(Op::Mul, {y, scalar_like(ctx, y, alpha)});
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId c, ctx.value(n, 2));
    if (beta != 1.0) c = ctx.emit(Op::Mul, {c, scalar_like(ctx, c, beta)});
    if (beta != 0.0) y = ctx.emit(Op::Add, {y, c});
  }
  return ctx.set_output(n, 0, y);
}

// Opset 13+: softmax along one axis. Before 13: the input is flattened to 2-D at `axis` and the
// softmax runs over the second dim, i.e. over all dims from axis on.
Status convert_softmax(ImportContext& ctx, OnnxNode& n) {
  Op op = n.op_type() == "Softmax" ? Op::Softmax : Op::LogSoftmax;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  int64_t axis_attr = n.attr_int("axis", ctx.opset() >= 13 ? -1 : 1);
  if (xt.rank() == 0) return n.error("input must have rank >= 1");
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, axis_attr, xt.rank(), "axis"));
  if (ctx.opset() >= 13 || axis == xt.rank() - 1) {
    return ctx.set_output(n, 0, ctx.emit(op, {x}, {{"axis", int64_t(axis)}}));
  }
  auto product = [&](int from, int to) -> Dim {
    int64_t p = 1;
    for (int i = from; i < to; ++i) {
      if (!xt.shape[size_t(i)].is_static()) return (to - from == 1) ? xt.shape[size_t(i)] : Dim::dynamic();
      p *= xt.shape[size_t(i)].value();
    }
    return Dim(p);
  };
  Shape flat{product(0, axis), product(axis, xt.rank())};
  FUSEBOX_ASSIGN_OR_RETURN(ValueId f, ctx.reshape(n, x, flat));
  ValueId s = ctx.emit(op, {f}, {{"axis", int64_t(-1)}});
  if (s == kNoValue) return ctx.set_output(n, 0, s);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, s, xt.shape));
  return ctx.set_output(n, 0, y);
}

Status convert_layer_norm(ImportContext& ctx, OnnxNode& n) {
  int64_t axis = n.attr_int("axis", -1);
  double eps = n.attr_float("epsilon", 1e-5f);
  if (n.attr_int("stash_type", 1) != 1) return n.error("attribute 'stash_type' other than 1 (float) is not supported");
  std::vector<ValueId> in;
  for (int i = 0; i < 3; ++i) {
    if (!n.has_input(i)) continue;
    FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, i));
    in.push_back(v);
  }
  if (in.size() < 2 || !n.has_input(1)) return n.error("Scale input is missing");
  const TensorType xt = ctx.type(in[0]);
  ValueId x = in[0];
  FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 0, ctx.emit(Op::LayerNorm, std::move(in), {{"axis", axis}, {"eps", eps}})));
  if (!n.has_output(1) && !n.has_output(2)) return Status::ok();
  // Mean and InvStdDev (decomposed): over the axes from `axis` on, kept as size-1 dims, in float
  // (stash_type 1) as ONNX's function body computes them:
  //   Mean = ReduceMean(X), InvStdDev = Reciprocal(Sqrt(ReduceMean((X - Mean)^2) + epsilon)).
  FUSEBOX_ASSIGN_OR_RETURN(int first, normalize_onnx_axis(n, axis, xt.rank(), "axis"));
  std::vector<int64_t> axes;
  for (int i = first; i < xt.rank(); ++i) axes.push_back(i);
  Attrs reduce{{"axes", axes}, {"keepdims", true}};
  ValueId xs = xt.dtype == DType::F32 ? x : ctx.emit(Op::Cast, {x}, {{"to", DType::F32}});
  ValueId mean = ctx.emit(Op::ReduceMean, {xs}, reduce);
  if (n.has_output(1)) FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, 1, mean));
  if (!n.has_output(2)) return Status::ok();
  ValueId d = ctx.emit(Op::Sub, {xs, mean});
  ValueId var = ctx.emit(Op::ReduceMean, {ctx.emit(Op::Mul, {d, d})}, reduce);
  ValueId sd = ctx.emit(Op::Sqrt, {ctx.emit(Op::Add, {var, scalar_like(ctx, var, eps)})});
  return ctx.set_output(n, 2, ctx.emit(Op::Reciprocal, {sd}));
}

Status convert_reduce(ImportContext& ctx, OnnxNode& n) {
  const std::string& t = n.op_type();
  Op op = t == "ReduceMean" ? Op::ReduceMean : t == "ReduceSum" ? Op::ReduceSum : t == "ReduceMax" ? Op::ReduceMax
        : t == "ReduceMin" ? Op::ReduceMin : Op::ReduceProd;
  // Axes moved from an attribute to an input in opset 13 (ReduceSum) and 18 (the others).
  int64_t input_since = op == Op::ReduceSum ? 13 : 18;
  bool keepdims = n.attr_int("keepdims", 1) != 0;
  bool noop_empty = n.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<int64_t> axes;
  if (ctx.opset() >= input_since) {
    if (n.has_input(1)) {
      FUSEBOX_ASSIGN_OR_RETURN(axes, ctx.require_static_ints(n, 1, "axes"));
    }
  } else {
    axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (axes.empty() && noop_empty) return ctx.set_output(n, 0, x);
  // fusebox reads empty axes as "all axes", as ONNX does.
  return ctx.set_output(n, 0, ctx.emit(op, {x}, {{"axes", axes}, {"keepdims", keepdims}}));
}

Status convert_arg_reduce(ImportContext& ctx, OnnxNode& n) {
  Op op = n.op_type() == "ArgMax" ? Op::ArgMax : Op::ArgMin;
  int64_t axis = n.attr_int("axis", 0);
  bool keepdims = n.attr_int("keepdims", 1) != 0;
  bool last = n.attr_int("select_last_index", 0) != 0;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (!last) return ctx.set_output(n, 0, ctx.emit(op, {x}, {{"axis", axis}, {"keepdims", keepdims}}));
  // select_last_index (decomposed): the first extremum of x reversed along the axis, counted from
  // the end: (size - 1) - argmax(slice(x, step -1)).
  const TensorType xt = ctx.type(x);
  FUSEBOX_ASSIGN_OR_RETURN(int a, normalize_onnx_axis(n, axis, xt.rank(), "axis"));
  const Dim& size = xt.shape[size_t(a)];
  if (!size.is_static()) {
    return n.error("attribute 'select_last_index' = 1 needs a static size along the axis, the input is " + xt.to_string());
  }
  ValueId rev = ctx.emit(Op::Slice, {x},
                         {{"starts", std::vector<int64_t>{-1}},
                          {"ends", std::vector<int64_t>{std::numeric_limits<int64_t>::min()}},
                          {"axes", std::vector<int64_t>{a}},
                          {"steps", std::vector<int64_t>{-1}}});
  ValueId i = ctx.emit(op, {rev}, {{"axis", int64_t(a)}, {"keepdims", keepdims}});
  if (i == kNoValue) return ctx.set_output(n, 0, i);
  return ctx.set_output(n, 0, ctx.emit(Op::Sub, {scalar_like(ctx, i, double(size.value() - 1)), i}));
}

}  // namespace

void add_nn_converters(ConverterTable& table) {
  table["Conv"] = convert_conv;
  table["ConvTranspose"] = convert_conv_transpose;
  table["MaxPool"] = convert_pool;
  table["AveragePool"] = convert_pool;
  table["GlobalAveragePool"] = convert_global_pool;
  table["GlobalMaxPool"] = convert_global_pool;
  table["BatchNormalization"] = convert_batch_norm;
  table["MatMul"] = convert_matmul;
  table["Gemm"] = convert_gemm;
  table["Softmax"] = convert_softmax;
  table["LogSoftmax"] = convert_softmax;
  table["LayerNormalization"] = convert_layer_norm;
  for (const char* r : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"}) table[r] = convert_reduce;
  table["ArgMax"] = convert_arg_reduce;
  table["ArgMin"] = convert_arg_reduce;
}

}  // namespace fusebox::onnx_import
