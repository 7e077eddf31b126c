// Data-movement ONNX ops: Transpose, Concat, Slice, Split, Gather, Expand, Pad. Each folds when
// its data is known ints (shape vectors), else maps to the fusebox op of the same name; their
// index-valued inputs (starts, pads, shape, ...) must be known at import time and become
// attributes.
#include <limits>

#include "ir/shape_inference.h"
#include "ir/size.h"
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Status convert_transpose(ImportContext& ctx, OnnxNode& n) {
  std::optional<std::vector<int64_t>> perm = n.attr_ints("perm");
  if (std::optional<KnownInts> k = ctx.ints(n, 0); k && (!perm || perm->size() <= 1)) {
    return ctx.set_output_ints(n, 0, *k);  // a vector transposed is itself
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  if (!perm) {
    perm.emplace();
    for (int i = ctx.type(x).rank(); i-- > 0;) perm->push_back(i);
  }
  return ctx.set_output(n, 0, ctx.emit(Op::Transpose, {x}, {{"perm", *perm}}));
}

Status convert_concat(ImportContext& ctx, OnnxNode& n) {
  std::optional<int64_t> axis = n.attr_int("axis");
  if (!axis) return n.error("attribute 'axis' is missing");
  if (n.num_inputs() < 1) return n.error("needs at least one input");
  KnownInts folded{DType::I64, false, {}};
  bool foldable = true;
  for (int i = 0; i < n.num_inputs() && foldable; ++i) {
    std::optional<KnownInts> k = ctx.ints(n, i);
    foldable = k && !k->scalar && (*axis == 0 || *axis == -1);
    if (foldable) {
      folded.dtype = k->dtype;
      folded.elems.insert(folded.elems.end(), k->elems.begin(), k->elems.end());
    }
  }
  if (foldable) return ctx.set_output_ints(n, 0, folded);
  std::vector<ValueId> in;
  for (int i = 0; i < n.num_inputs(); ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx.value(n, i));
    in.push_back(v);
  }
  return ctx.set_output(n, 0, ctx.emit(Op::Concat, std::move(in), {{"axis", *axis}}));
}

// A slice bound given as known ints: a number, or the symbol of the sliced dim itself (which
// means "to the end", the only use exporters make of it).
Expected<int64_t> slice_bound(OnnxNode& n, const IntElem& e, const Dim& dim, const char* what) {
  if (e.is_number()) return e.number;
  if (e.kind == IntElem::Kind::Symbol && dim.is_symbol() && dim.symbol_name() == e.symbol) return kMax;
  return n.error(std::string(what) + " depends on a run-time size (" + e.to_string() + ")");
}

Status convert_slice(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(TensorType xt, ctx.type_of(n, 0));
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    std::optional<std::vector<int64_t>> s = n.attr_ints("starts"), e = n.attr_ints("ends");
    if (!s || !e) return n.error("attributes 'starts' and 'ends' are required");
    starts = *s;
    ends = *e;
    axes = n.attr_ints("axes").value_or(std::vector<int64_t>{});
  } else {
    FUSEBOX_ASSIGN_OR_RETURN(KnownInts s, ctx.require_ints(n, 1, "starts"));
    FUSEBOX_ASSIGN_OR_RETURN(KnownInts e, ctx.require_ints(n, 2, "ends"));
    if (n.has_input(3)) {
      FUSEBOX_ASSIGN_OR_RETURN(axes, ctx.require_static_ints(n, 3, "axes"));
    }
    if (n.has_input(4)) {
      FUSEBOX_ASSIGN_OR_RETURN(steps, ctx.require_static_ints(n, 4, "steps"));
    }
    if (s.elems.size() != e.elems.size()) return n.error("starts and ends differ in length");
    for (size_t i = 0; i < s.elems.size(); ++i) {
      int64_t axis = axes.size() > i ? axes[i] : int64_t(i);
      std::optional<int> ax = normalize_axis(axis, xt.rank());
      Dim dim = ax ? xt.shape[size_t(*ax)] : Dim::dynamic();
      FUSEBOX_ASSIGN_OR_RETURN(int64_t b, slice_bound(n, s.elems[i], dim, "starts"));
      FUSEBOX_ASSIGN_OR_RETURN(int64_t en, slice_bound(n, e.elems[i], dim, "ends"));
      starts.push_back(b);
      ends.push_back(en);
    }
  }
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size() || ends.size() != starts.size()) {
    return n.error("starts, ends, axes and steps must have the same length");
  }
  if (std::optional<KnownInts> k = ctx.ints(n, 0); k && !k->scalar && starts.size() == 1 && (axes[0] == 0 || axes[0] == -1)) {
    if (steps[0] == 0) return n.error("steps must not be 0");
    SliceRange r = normalize_slice(int64_t(k->elems.size()), starts[0], ends[0], steps[0]);
    KnownInts out{k->dtype, false, {}};
    for (int64_t i = 0; i < r.count; ++i) out.elems.push_back(k->elems[size_t(r.start + i * steps[0])]);
    return ctx.set_output_ints(n, 0, out);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  Attrs attrs{{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}};
  return ctx.set_output(n, 0, ctx.emit(Op::Slice, {x}, std::move(attrs)));
}

Status convert_split(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  FUSEBOX_ASSIGN_OR_RETURN(int axis, normalize_onnx_axis(n, n.attr_int("axis", 0), xt.rank(), "axis"));
  std::vector<int64_t> sizes;
  if (ctx.opset() >= 13) {
    if (n.has_input(1)) {
      FUSEBOX_ASSIGN_OR_RETURN(sizes, ctx.require_static_ints(n, 1, "split"));
    }
  } else {
    sizes = n.attr_ints("split").value_or(std::vector<int64_t>{});
  }
  int outputs = n.num_outputs();
  std::optional<int64_t> num_outputs = n.attr_int("num_outputs");
  if (num_outputs && *num_outputs != outputs) return n.error("num_outputs disagrees with the node's outputs");
  if (outputs < 1) return n.error("has no outputs");
  const Dim& dim = xt.shape[size_t(axis)];
  if (sizes.empty()) {
    if (!dim.is_static()) return n.error("an even split needs a static dim, the input is " + xt.to_string());
    int64_t chunk = (dim.value() + outputs - 1) / outputs;
    if (!num_outputs && dim.value() % outputs != 0) {
      return n.error("dim " + std::to_string(dim.value()) + " does not split evenly into " + std::to_string(outputs));
    }
    for (int i = 0; i < outputs; ++i) sizes.push_back(std::min(chunk, dim.value() - chunk * i));
  }
  if (int(sizes.size()) != outputs) return n.error("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(outputs) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return n.error("split sizes must be >= 0");
    total += s;
  }
  if (dim.is_static() && total != dim.value()) return n.error("split sizes add up to " + std::to_string(total) + ", the dim is " + dim.to_string());
  int64_t offset = 0;
  for (int i = 0; i < outputs; ++i) {
    Attrs attrs{{"starts", std::vector<int64_t>{offset}}, {"ends", std::vector<int64_t>{offset + sizes[size_t(i)]}},
                {"axes", std::vector<int64_t>{axis}}};
    offset += sizes[size_t(i)];
    FUSEBOX_RETURN_IF_ERROR(ctx.set_output(n, i, ctx.emit(Op::Slice, {x}, std::move(attrs))));
  }
  return Status::ok();
}

Status convert_gather(ImportContext& ctx, OnnxNode& n) {
  int64_t axis = n.attr_int("axis", 0);
  std::optional<KnownInts> data = ctx.ints(n, 0), idx = ctx.ints(n, 1);
  if (data && idx && !data->scalar && (axis == 0 || axis == -1) && idx->all_numbers()) {
    KnownInts out{data->dtype, idx->scalar, {}};
    int64_t len = int64_t(data->elems.size());
    for (int64_t i : idx->numbers()) {
      if (i < -len || i >= len) return n.error("index " + std::to_string(i) + " is out of range for " + data->to_string());
      out.elems.push_back(data->elems[size_t(i < 0 ? i + len : i)]);
    }
    return ctx.set_output_ints(n, 0, out);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId i, ctx.value(n, 1));
  return ctx.set_output(n, 0, ctx.emit(Op::Gather, {x, i}, {{"axis", axis}}));
}

Status convert_expand(ImportContext& ctx, OnnxNode& n) {
  if (!ctx.ints(n, 1)) {
    // A shape known only at run time: its sizes are bound when the plan runs (1 still broadcasts).
    FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
    FUSEBOX_ASSIGN_OR_RETURN(auto bound, ctx.run_time_shape(n, x, 1, "values"));
    if (bound) return ctx.set_output(n, 0, ctx.emit(Op::Expand, {bound->x}, {{"shape", bound->symbols}}));
  }
  FUSEBOX_ASSIGN_OR_RETURN(KnownInts k, ctx.require_ints(n, 1, "shape"));
  if (k.scalar) return n.error("shape must be a 1-D tensor");
  Shape dims;
  for (const IntElem& e : k.elems) {
    Dim d = e.to_dim();
    if (d.is_dynamic()) return n.error("shape " + k.to_string() + " must hold sizes >= 0 known at import time");
    dims.push_back(d);
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, ctx.emit(Op::Expand, {x}, {{"shape", dims}}));
}

// Pad: positive pads map to fusebox pad; negative pads (ONNX allows them: they crop) become a
// slice after the padding.
Status convert_pad(ImportContext& ctx, OnnxNode& n) {
  std::string mode = n.attr_string("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") return n.error("attribute 'mode' = \"" + mode + "\" is not supported");
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  int rank = xt.rank();
  std::vector<int64_t> pads, axes;
  double value = 0;
  if (ctx.opset() < 11) {
    std::optional<std::vector<int64_t>> p = n.attr_ints("pads");
    if (!p) return n.error("attribute 'pads' is required");
    pads = *p;
    value = n.attr_float("value", 0.0f);
  } else {
    FUSEBOX_ASSIGN_OR_RETURN(pads, ctx.require_static_ints(n, 1, "pads"));
    if (n.has_input(2)) {
      FUSEBOX_ASSIGN_OR_RETURN(Array v, ctx.require_constant(n, 2, "constant_value"));
      if (v.numel() > 1) return n.error("constant_value must be a scalar");
      if (v.numel() == 1) value = v.get_f64(0);
    }
    if (n.has_input(3)) {
      FUSEBOX_ASSIGN_OR_RETURN(axes, ctx.require_static_ints(n, 3, "axes"));
    }
  }
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size()) {
    return n.error("pads has " + std::to_string(pads.size()) + " entries, expected " + std::to_string(2 * axes.size()));
  }
  std::vector<int64_t> grow(size_t(2 * rank), 0), crop(size_t(2 * rank), 0);
  size_t k = axes.size();
  for (size_t i = 0; i < k; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(int ax, normalize_onnx_axis(n, axes[i], rank, "axes entry"));
    for (size_t side = 0; side < 2; ++side) {
      int64_t p = pads[i + side * k];
      // Beyond the size limit either way is an error (and -INT64_MIN would overflow).
      if (p > kMaxSize || p < -kMaxSize) {
        return n.error("pads entry " + std::to_string(p) + " is beyond the size limit 2^48");
      }
      (p >= 0 ? grow : crop)[size_t(ax) + side * size_t(rank)] = p >= 0 ? p : -p;
    }
  }
  ValueId y = x;
  bool any_grow = false, any_crop = false;
  for (size_t i = 0; i < grow.size(); ++i) {
    any_grow |= grow[i] != 0;
    any_crop |= crop[i] != 0;
  }
  if (any_grow) y = ctx.emit(Op::Pad, {y}, {{"pads", grow}, {"mode", mode}, {"value", value}});
  if (any_crop && y != kNoValue) {
    std::vector<int64_t> starts, ends, slice_axes;
    for (int d = 0; d < rank; ++d) {
      int64_t b = crop[size_t(d)], e = crop[size_t(d + rank)];
      if (b == 0 && e == 0) continue;
      starts.push_back(b);
      ends.push_back(e == 0 ? kMax : -e);
      slice_axes.push_back(d);
    }
    y = ctx.emit(Op::Slice, {y}, {{"starts", starts}, {"ends", ends}, {"axes", slice_axes}});
  }
  return ctx.set_output(n, 0, y);
}

}  // namespace

void add_tensor_converters(ConverterTable& table) {
  table["Transpose"] = convert_transpose;
  table["Concat"] = convert_concat;
  table["Slice"] = convert_slice;
  table["Split"] = convert_split;
  table["Gather"] = convert_gather;
  table["Expand"] = convert_expand;
  table["Pad"] = convert_pad;
}

}  // namespace fusebox::onnx_import
