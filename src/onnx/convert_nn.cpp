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

Expected<Window2d> read_window(ImportContext& ctx, OnnxNode& n, const TensorType& x,
                               std::vector<int64_t> kernel, bool has_dilation) {
  if (x.rank() != 4) {
    return n.error("only 2-D windows over NCHW inputs are supported, the input is " + x.to_string());
  }
  Window2d w;
  w.kernel = std::move(kernel);
  w.stride = n.attr_ints("strides").value_or(std::vector<int64_t>{1, 1});
  w.dilation = has_dilation ? n.attr_ints("dilations").value_or(std::vector<int64_t>{1, 1})
                            : std::vector<int64_t>{1, 1};
  std::vector<int64_t> pads = n.attr_ints("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (w.kernel.size() != 2) return n.error("kernel_shape needs 2 entries, got " + std::to_string(w.kernel.size()));
  if (w.stride.size() != 2) return n.error("strides needs 2 entries, got " + std::to_string(w.stride.size()));
  if (w.dilation.size() != 2) return n.error("dilations needs 2 entries, got " + std::to_string(w.dilation.size()));
  if (pads.size() != 4) return n.error("pads needs 4 entries, got " + std::to_string(pads.size()));
  for (size_t i = 0; i < 2; ++i) {
    if (w.kernel[i] < 1 || w.stride[i] < 1 || w.dilation[i] < 1) {
      return n.error("kernel_shape, strides and dilations must be >= 1");
    }
  }
  if (auto_pad == "NOTSET") {
    w.pads = pads;
  } else if (auto_pad == "VALID") {
    w.pads = {0, 0, 0, 0};
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    // out = ceil(in / stride); the padding that achieves it. With stride 1 it does not depend on
    // the input size, so symbolic sizes work; otherwise the size must be static.
    w.pads.assign(4, 0);
    for (size_t i = 0; i < 2; ++i) {
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
      w.pads[i + 2] = total - head;
    }
  } else {
    return n.error("attribute 'auto_pad' = \"" + auto_pad + "\" is not supported");
  }
  (void)ctx;
  return w;
}

namespace {

// The kernel size from the weight, checked against kernel_shape when given.
Expected<std::vector<int64_t>> conv_kernel(OnnxNode& n, const TensorType& w) {
  if (w.rank() != 4 || !w.shape[2].is_static() || !w.shape[3].is_static()) {
    return n.error("only 2-D convolution with a static [.,.,kh,kw] weight is supported, the weight is " +
                   w.to_string());
  }
  std::vector<int64_t> k{w.shape[2].value(), w.shape[3].value()};
  if (std::optional<std::vector<int64_t>> ks = n.attr_ints("kernel_shape"); ks && *ks != k) {
    return n.error("kernel_shape disagrees with the weight " + w.to_string());
  }
  return k;
}

Status convert_conv(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId w, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> k, conv_kernel(n, ctx.type(w)));
  FUSEBOX_ASSIGN_OR_RETURN(Window2d win, read_window(ctx, n, ctx.type(x), k, true));
  std::vector<ValueId> in{x, w};
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 2));
    in.push_back(b);
  }
  Attrs attrs{{"stride", win.stride}, {"pad", win.pads}, {"dilation", win.dilation},
              {"groups", n.attr_int("group", 1)}};
  return ctx.set_output(n, 0, ctx.emit(Op::Conv2d, std::move(in), std::move(attrs)));
}

Status convert_conv_transpose(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId w, ctx.value(n, 1));
  const TensorType xt = ctx.type(x);
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> k, conv_kernel(n, ctx.type(w)));
  // Read auto_pad ourselves: SAME for a transposed conv means output = input * stride.
  std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> out_pad = n.attr_ints("output_padding").value_or(std::vector<int64_t>{0, 0});
  std::optional<std::vector<int64_t>> out_shape = n.attr_ints("output_shape");
  if (out_pad.size() != 2) return n.error("output_padding needs 2 entries");
  std::vector<int64_t> stride = n.attr_ints("strides").value_or(std::vector<int64_t>{1, 1});
  std::vector<int64_t> dil = n.attr_ints("dilations").value_or(std::vector<int64_t>{1, 1});
  std::vector<int64_t> pads = n.attr_ints("pads").value_or(std::vector<int64_t>{0, 0, 0, 0});
  if (xt.rank() != 4) return n.error("only 2-D transposed convolution over NCHW is supported, the input is " + xt.to_string());
  if (stride.size() != 2 || dil.size() != 2 || pads.size() != 4) {
    return n.error("strides and dilations need 2 entries, pads 4");
  }
  if (out_shape && out_shape->size() == 4) out_shape = std::vector<int64_t>(out_shape->begin() + 2, out_shape->end());
  if (out_shape && out_shape->size() != 2) return n.error("output_shape needs 2 entries");
  bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (auto_pad == "VALID") pads = {0, 0, 0, 0};
  else if (auto_pad != "NOTSET" && !same) return n.error("attribute 'auto_pad' = \"" + auto_pad + "\" is not supported");
  if (out_shape || same) {
    // The total padding that gives the requested size. ONNX and ONNX Runtime split an odd total
    // differently, so only even totals (split evenly by both) are accepted.
    for (size_t i = 0; i < 2; ++i) {
      const Dim& in = xt.shape[2 + i];
      if (!in.is_static()) {
        return n.error("output_shape/auto_pad needs a static spatial size, the input is " + xt.to_string());
      }
      int64_t want = out_shape ? (*out_shape)[i] : in.value() * stride[i];
      int64_t total = stride[i] * (in.value() - 1) + out_pad[i] + (k[i] - 1) * dil[i] + 1 - want;
      if (total < 0) return n.error("output_shape is larger than the transposed convolution produces");
      if (total % 2 != 0) {
        return n.error("output_shape/auto_pad needs an odd total padding of " + std::to_string(total) +
                       ", which ONNX and ONNX Runtime place differently; refused");
      }
      pads[i] = pads[i + 2] = total / 2;
    }
  }
  if (std::optional<std::vector<int64_t>> ks = n.attr_ints("kernel_shape"); ks && *ks != k) {
    return n.error("kernel_shape disagrees with the weight");
  }
  std::vector<ValueId> in{x, w};
  if (n.has_input(2)) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, ctx.value(n, 2));
    in.push_back(b);
  }
  Attrs attrs{{"stride", stride}, {"pad", pads}, {"dilation", dil}, {"groups", n.attr_int("group", 1)},
              {"output_padding", out_pad}};
  return ctx.set_output(n, 0, ctx.emit(Op::ConvTranspose2d, std::move(in), std::move(attrs)));
}

Status convert_pool(ImportContext& ctx, OnnxNode& n) {
  bool is_max = n.op_type() == "MaxPool";
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  std::optional<std::vector<int64_t>> k = n.attr_ints("kernel_shape");
  if (!k) return n.error("attribute 'kernel_shape' is missing");
  FUSEBOX_ASSIGN_OR_RETURN(Window2d win, read_window(ctx, n, ctx.type(x), *k, is_max));
  bool ceil_mode = n.attr_int("ceil_mode", 0) != 0;
  Attrs attrs{{"kernel", win.kernel}, {"stride", win.stride}, {"pad", win.pads}, {"ceil_mode", ceil_mode}};
  if (is_max) {
    attrs.set("dilation", win.dilation);
    return convert_max_pool_2d(ctx, n, x, std::move(attrs));
  }
  if (std::optional<std::vector<int64_t>> d = n.attr_ints("dilations")) {
    for (int64_t v : *d)
      if (v != 1) return n.error("attribute 'dilations' other than 1 is not supported for AveragePool");
  }
  attrs.set("count_include_pad", n.attr_int("count_include_pad", 0) != 0);
  return ctx.set_output(n, 0, ctx.emit(Op::AvgPool2d, {x}, std::move(attrs)));
}

Status convert_global_pool(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (n.op_type() == "GlobalAveragePool") return ctx.set_output(n, 0, ctx.emit(Op::GlobalAvgPool, {x}));
  std::vector<int64_t> axes;
  for (int64_t a = 2; a < ctx.type(x).rank(); ++a) axes.push_back(a);
  if (axes.empty()) return n.error("input must be [N,C,spatial...], got " + ctx.type(x).to_string());
  return ctx.set_output(n, 0, ctx.emit(Op::ReduceMax, {x}, {{"axes", axes}, {"keepdims", true}}));
}

Status convert_batch_norm(ImportContext& ctx, OnnxNode& n) {
  double eps = n.attr_float("epsilon", 1e-5f);
  n.accept_attr("momentum");  // only used in training
  if (n.attr_int("training_mode", 0) != 0) return n.error("training_mode = 1 is not supported (inference only)");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  std::vector<ValueId> in{x};
  for (int i = 1; i < 5; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, i));
    // Opset 15 lets scale/bias and mean/var have other float types than X.
    if (ctx.type(v).dtype != ctx.type(x).dtype) v = ctx.emit(Op::Cast, {v}, {{"to", ctx.type(x).dtype}});
    in.push_back(v);
  }
  return ctx.set_output(n, 0, ctx.emit(Op::BatchNorm, std::move(in), {{"eps", eps}}));
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
