// Shape-producing and reshaping ONNX ops: Shape, Size, Constant, ConstantOfShape, Range,
// Reshape, Flatten, Squeeze, Unsqueeze.
//
// Shape turns an input's type into known ints (numbers, symbols such as N, or `?`), so the usual
// exporter pattern
//
//   Shape(x) -> Gather(0) -> Unsqueeze -> Concat([N], [256]) -> Reshape(y, .)
//
// becomes reshape(y) {shape = [N,256]} with nothing left to run. Reshape-like ops map to one
// fusebox reshape whose target names every size: numbers, symbols, and at most one -1.
#include <cmath>

#include "ir/size.h"
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// Above this many elements a ConstantOfShape is emitted as an expand of a scalar rather than
// materialised at import.
constexpr int64_t kMaxFoldedElements = 1 << 16;

Status convert_shape(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(TensorType t, ctx.type_of(n, 0));
  int64_t rank = t.rank();
  auto clamp = [&](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp(n.attr_int("start", 0)), end = clamp(n.attr_int("end", rank));
  KnownInts k{DType::I64, false, {}};
  for (int64_t i = start; i < end; ++i) k.elems.push_back(IntElem::from_dim(t.shape[size_t(i)]));
  return ctx.set_output_ints(n, 0, k);
}

Status convert_size(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(TensorType t, ctx.type_of(n, 0));
  std::optional<int64_t> count = num_elements(t.shape);
  KnownInts k{DType::I64, true, {count ? IntElem::of(*count) : IntElem::unknown()}};
  return ctx.set_output_ints(n, 0, k);
}

Status convert_constant(ImportContext& ctx, OnnxNode& n) {
  for (const char* refused : {"sparse_value", "value_string", "value_strings"}) {
    if (n.has_attr(refused)) {
      n.accept_attr(refused);
      return n.error(std::string("attribute '") + refused + "' is not supported");
    }
  }
  if (const onnx::TensorProto* t = n.attr_tensor("value")) {
    FUSEBOX_ASSIGN_OR_RETURN(Array a, tensor_to_array(*t, n.describe() + " value", ctx.external()));
    return ctx.set_output_constant(n, 0, std::move(a));
  }
  if (std::optional<float> f = n.attr_float("value_float")) {
    return ctx.set_output_constant(n, 0, Array::from_vector(DType::F32, {}, std::vector<float>{*f}));
  }
  if (std::optional<std::vector<float>> fs = n.attr_floats("value_floats")) {
    return ctx.set_output_constant(n, 0, Array::from_vector(DType::F32, {int64_t(fs->size())}, *fs));
  }
  if (std::optional<int64_t> i = n.attr_int("value_int")) {
    Array a(DType::I64, {});
    a.set_i64(0, *i);
    return ctx.set_output_constant(n, 0, std::move(a));
  }
  if (std::optional<std::vector<int64_t>> is = n.attr_ints("value_ints")) {
    Array a(DType::I64, {int64_t(is->size())});
    for (size_t k = 0; k < is->size(); ++k) a.set_i64(int64_t(k), (*is)[k]);
    return ctx.set_output_constant(n, 0, std::move(a));
  }
  if (!n.status().is_ok()) return n.status();
  return n.error("has no value attribute");
}

// Dims of a shape given as known ints (Expand, ConstantOfShape targets): numbers >= 0 or symbols.
Expected<Shape> dims_of(OnnxNode& n, const KnownInts& k, const std::string& what) {
  Shape s;
  for (const IntElem& e : k.elems) {
    Dim d = e.to_dim();
    if (d.is_dynamic()) return n.error(what + " " + k.to_string() + " must hold sizes >= 0 known at import time");
    s.push_back(d);
  }
  return s;
}

Status convert_constant_of_shape(ImportContext& ctx, OnnxNode& n) {
  Array value = Array::from_vector(DType::F32, {}, std::vector<float>{0.0f});
  if (const onnx::TensorProto* t = n.attr_tensor("value")) {
    FUSEBOX_ASSIGN_OR_RETURN(value, tensor_to_array(*t, n.describe() + " value", ctx.external()));
    if (value.numel() != 1) return n.error("attribute 'value' must hold one element, got " + value.type_string());
    value = value.reshaped({});
  }
  if (!ctx.ints(n, 0)) {
    // A shape known only at run time: the scalar expanded to sizes bound when the plan runs.
    ValueId scalar = ctx.builder().constant(value);
    FUSEBOX_ASSIGN_OR_RETURN(auto bound, ctx.run_time_shape(n, scalar, 0, "values"));
    if (bound) return ctx.set_output(n, 0, ctx.emit(Op::Expand, {bound->x}, {{"shape", bound->symbols}}));
  }
  FUSEBOX_ASSIGN_OR_RETURN(KnownInts k, ctx.require_ints(n, 0, "shape"));
  if (k.scalar) return n.error("shape must be a 1-D tensor");
  FUSEBOX_ASSIGN_OR_RETURN(Shape dims, dims_of(n, k, "shape"));
  std::optional<int64_t> count = num_elements(dims);
  if (count && *count <= kMaxFoldedElements) {
    Array a(value.dtype(), static_dims(dims));
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (value.dtype() == DType::I64) a.set_i64(i, value.get_i64(0));
      else a.set_f64(i, value.get_f64(0));
    }
    return ctx.set_output_constant(n, 0, std::move(a));
  }
  ValueId scalar = ctx.builder().constant(value);
  return ctx.set_output(n, 0, ctx.emit(Op::Expand, {scalar}, {{"shape", dims}}));
}

Status convert_range(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(Array start, ctx.require_constant(n, 0, "start"));
  FUSEBOX_ASSIGN_OR_RETURN(Array limit, ctx.require_constant(n, 1, "limit"));
  FUSEBOX_ASSIGN_OR_RETURN(Array delta, ctx.require_constant(n, 2, "delta"));
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1) return n.error("inputs must be scalars");
  double s = start.get_f64(0), l = limit.get_f64(0), d = delta.get_f64(0);
  if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d)) return n.error("delta must be non-zero and finite");
  double count = std::max(std::ceil((l - s) / d), 0.0);
  if (count > double(kMaxFoldedElements) * 64) return n.error("range is too long to fold");
  Array a(start.dtype(), {int64_t(count)});
  for (int64_t i = 0; i < a.numel(); ++i) {
    if (is_integer(start.dtype())) a.set_i64(i, start.get_i64(0) + i * delta.get_i64(0));
    else a.set_f64(i, s + double(i) * d);
  }
  return ctx.set_output_constant(n, 0, std::move(a));
}

// The product of dims [from, to) as one dim: a number when all are static, the dim itself when
// there is one, else unknown.
Dim dim_product(const Shape& s, int from, int to) {
  if (to - from == 1) return s[size_t(from)];
  std::optional<int64_t> p = 1;
  for (int i = from; i < to && p; ++i) {
    if (!s[size_t(i)].is_static()) return Dim::dynamic();
    p = size_mul(*p, s[size_t(i)].value());
  }
  // Over the size limit: so is the tensor, which the builder refuses when a node reads it.
  return p ? Dim(*p) : Dim::dynamic();
}

Status convert_reshape(ImportContext& ctx, OnnxNode& n) {
  bool allowzero = n.attr_int("allowzero", 0) != 0;
  if (!ctx.ints(n, 1)) {
    // A target known only at run time: its sizes are bound when the plan runs.
    FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
    FUSEBOX_ASSIGN_OR_RETURN(auto bound,
                             ctx.run_time_shape(n, x, 1, allowzero ? "reshape_allowzero" : "reshape"));
    if (bound) return ctx.set_output(n, 0, ctx.emit(Op::Reshape, {bound->x}, {{"shape", bound->symbols}}));
  }
  FUSEBOX_ASSIGN_OR_RETURN(KnownInts target, ctx.require_ints(n, 1, "shape"));
  if (target.scalar) return n.error("shape must be a 1-D tensor");
  // Known ints reshaped between rank 0 and rank 1 stay known.
  if (std::optional<KnownInts> data = ctx.ints(n, 0); data && target.all_numbers() && target.elems.size() <= 1) {
    size_t len = data->elems.size();
    bool to_scalar = target.elems.empty();
    int64_t m = to_scalar ? 1 : target.elems[0].number;
    if (m == 0 && !allowzero && !data->scalar) m = int64_t(len);
    if (to_scalar ? len == 1 : (m == -1 || m == int64_t(len))) {
      data->scalar = to_scalar;
      return ctx.set_output_ints(n, 0, *data);
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  Shape s;
  for (size_t i = 0; i < target.elems.size(); ++i) {
    const IntElem& e = target.elems[i];
    if (e.is_number() && e.number == 0 && !allowzero) {
      if (int(i) >= xt.rank()) return n.error("shape " + target.to_string() + " copies dim " + std::to_string(i) + " of a rank " + std::to_string(xt.rank()) + " input");
      s.push_back(xt.shape[i]);
    } else if (e.is_number() && e.number < -1) {
      return n.error("shape " + target.to_string() + " has a negative size");
    } else {
      s.push_back(e.to_dim());
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, x, s));
  return ctx.set_output(n, 0, y);
}

Status convert_flatten(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  int64_t axis = n.attr_int("axis", 1);
  if (axis < 0) axis += xt.rank();
  if (axis < 0 || axis > xt.rank()) return n.error("axis " + std::to_string(axis) + " is out of range for " + xt.to_string());
  Shape s{axis == 0 ? Dim(1) : dim_product(xt.shape, 0, int(axis)),
          axis == xt.rank() ? Dim(1) : dim_product(xt.shape, int(axis), xt.rank())};
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, x, s));
  return ctx.set_output(n, 0, y);
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, an input since.
Expected<std::vector<int64_t>> squeeze_axes(ImportContext& ctx, OnnxNode& n, bool* given) {
  *given = true;
  if (ctx.opset() >= 13) {
    if (!n.has_input(1)) {
      *given = false;
      return std::vector<int64_t>{};
    }
    return ctx.require_static_ints(n, 1, "axes");
  }
  std::optional<std::vector<int64_t>> a = n.attr_ints("axes");
  *given = a.has_value();
  return a.value_or(std::vector<int64_t>{});
}

Status convert_squeeze(ImportContext& ctx, OnnxNode& n) {
  bool given = false;
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> axes, squeeze_axes(ctx, n, &given));
  if (std::optional<KnownInts> k = ctx.ints(n, 0); k && !k->scalar && k->elems.size() == 1) {
    k->scalar = true;
    return ctx.set_output_ints(n, 0, *k);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  std::vector<bool> drop(size_t(xt.rank()), false);
  if (!given) {
    for (int i = 0; i < xt.rank(); ++i) {
      const Dim& d = xt.shape[size_t(i)];
      if (!d.is_static()) return n.error("without axes, every dim must be static to find the 1s; the input is " + xt.to_string());
      drop[size_t(i)] = d.value() == 1;
    }
  }
  for (int64_t a : axes) {
    FUSEBOX_ASSIGN_OR_RETURN(int ax, normalize_onnx_axis(n, a, xt.rank(), "axes entry"));
    const Dim& d = xt.shape[size_t(ax)];
    if (d.is_static() && d.value() != 1) return n.error("dim " + std::to_string(ax) + " of " + xt.to_string() + " is not 1");
    drop[size_t(ax)] = true;
  }
  Shape s;
  for (int i = 0; i < xt.rank(); ++i)
    if (!drop[size_t(i)]) s.push_back(xt.shape[size_t(i)]);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, x, s));
  return ctx.set_output(n, 0, y);
}

Status convert_unsqueeze(ImportContext& ctx, OnnxNode& n) {
  bool given = false;
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int64_t> axes, squeeze_axes(ctx, n, &given));
  if (!given) return n.error("axes are missing");
  FUSEBOX_ASSIGN_OR_RETURN(TensorType xt, ctx.type_of(n, 0));
  int out_rank = xt.rank() + int(axes.size());
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : axes) {
    FUSEBOX_ASSIGN_OR_RETURN(int ax, normalize_onnx_axis(n, a, out_rank, "axes entry"));
    if (inserted[size_t(ax)]) return n.error("axes entry " + std::to_string(a) + " is repeated");
    inserted[size_t(ax)] = true;
  }
  if (std::optional<KnownInts> k = ctx.ints(n, 0); k && k->scalar && axes.size() == 1) {
    k->scalar = false;
    return ctx.set_output_ints(n, 0, *k);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  Shape s;
  size_t next = 0;
  for (int i = 0; i < out_rank; ++i) s.push_back(inserted[size_t(i)] ? Dim(1) : xt.shape[next++]);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId y, ctx.reshape(n, x, s));
  return ctx.set_output(n, 0, y);
}

}  // namespace

void add_shape_converters(ConverterTable& table) {
  table["Shape"] = convert_shape;
  table["Size"] = convert_size;
  table["Constant"] = convert_constant;
  table["ConstantOfShape"] = convert_constant_of_shape;
  table["Range"] = convert_range;
  table["Reshape"] = convert_reshape;
  table["Flatten"] = convert_flatten;
  table["Squeeze"] = convert_squeeze;
  table["Unsqueeze"] = convert_unsqueeze;
}

}  // namespace fusebox::onnx_import
