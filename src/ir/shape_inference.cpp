#include "ir/shape_inference.h"

#include "ir/batch_region.h"
#include "ir/epilogue.h"
#include "ir/fused_attention_op.h"
#include "ir/layout.h"
#include "ir/region_prologue.h"
#include "ir/shape_inference_extra.h"
#include "ir/size.h"

#include <algorithm>
#include <array>
#include <set>

namespace fusebox {

namespace {

using Types = std::vector<TensorType>;

struct Ctx {
  const Node& node;
  std::span<const TensorType> in;
  const SymbolBindings* bindings;

  std::string_view op() const { return node.info().keyword; }
  Status fail(const std::string& msg) const {
    return Status::invalid(std::string(op()) + ": " + msg);
  }
  const TensorType& operand(size_t i) const { return in[i]; }
  Shape dims_attr(std::string_view name) const {
    const Shape& s = node.attr_dims(name);
    return bindings ? bind_shape(s, *bindings) : s;
  }
};

std::string type_str(const TensorType& t) { return t.to_string(); }


Expected<Types> infer_unary(const Ctx& c) {
  const TensorType& x = c.operand(0);
  switch (c.node.op) {
    case Op::Not:
      if (x.dtype != DType::Bool) return c.fail("operand must be bool, got " + type_str(x));
      return Types{x};
    case Op::Cast:
      return Types{TensorType{c.node.attr_dtype("to"), x.shape}};
    case Op::Identity:
      return Types{x};
    case Op::Neg:
    case Op::Abs:
    case Op::Relu:
    case Op::Clip:
      if (x.dtype == DType::Bool) return c.fail("operand must be numeric, got " + type_str(x));
      return Types{x};
    default:
      if (!is_float(x.dtype)) return c.fail("operand must be a float type, got " + type_str(x));
      return Types{x};
  }
}

Expected<Shape> broadcast_all(const Ctx& c) {
  Shape out = c.operand(0).shape;
  for (size_t i = 1; i < c.in.size(); ++i) {
    std::string why;
    std::optional<Shape> b = broadcast_shapes(out, c.operand(i).shape, &why);
    if (!b) return c.fail(why);
    out = *b;
  }
  return out;
}

Expected<Types> infer_binary(const Ctx& c) {
  const TensorType& a = c.operand(0);
  const TensorType& b = c.operand(1);
  if (a.dtype != b.dtype) {
    return c.fail("operand dtypes differ: " + type_str(a) + " vs " + type_str(b) +
                  " (insert a cast)");
  }
  FUSEBOX_ASSIGN_OR_RETURN(Shape shape, broadcast_all(c));
  switch (c.node.op) {
    case Op::Equal:
    case Op::NotEqual:
    case Op::Less:
    case Op::LessEqual:
    case Op::Greater:
    case Op::GreaterEqual:
      return Types{TensorType{DType::Bool, shape}};
    case Op::And:
    case Op::Or:
      if (a.dtype != DType::Bool) return c.fail("operands must be bool, got " + type_str(a));
      return Types{TensorType{DType::Bool, shape}};
    case Op::BitShift:
      if (!is_integer(a.dtype) || is_signed(a.dtype)) {
        return c.fail("operands must be unsigned integers, got " + type_str(a));
      }
      return Types{TensorType{a.dtype, shape}};
    default:
      if (a.dtype == DType::Bool) return c.fail("operands must be numeric, got " + type_str(a));
      return Types{TensorType{a.dtype, shape}};
  }
}

Expected<Types> infer_where(const Ctx& c) {
  if (c.operand(0).dtype != DType::Bool) {
    return c.fail("condition must be bool, got " + type_str(c.operand(0)));
  }
  if (c.operand(1).dtype != c.operand(2).dtype) {
    return c.fail("branch dtypes differ: " + type_str(c.operand(1)) + " vs " +
                  type_str(c.operand(2)));
  }
  FUSEBOX_ASSIGN_OR_RETURN(Shape shape, broadcast_all(c));
  return Types{TensorType{c.operand(1).dtype, shape}};
}

// Checks that a per-channel operand is [C] for the channel dim `channels`.
Status check_channel_vector(const Ctx& c, size_t i, const Dim& channels, const char* what) {
  const TensorType& t = c.operand(i);
  if (t.rank() != 1) return c.fail(std::string(what) + " must be rank 1, got " + type_str(t));
  if (t.dtype != c.operand(0).dtype) {
    return c.fail(std::string(what) + " dtype " + type_str(t) + " differs from the input's");
  }
  if (t.shape[0].is_static() && channels.is_static() && !(t.shape[0] == channels)) {
    return c.fail(std::string(what) + " has " + t.shape[0].to_string() + " elements, expected " +
                  channels.to_string() + " channels");
  }
  return Status::ok();
}

Expected<Types> infer_batch_norm(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (x.rank() < 2) return c.fail("input must be at least rank 2 [N,C,...], got " + type_str(x));
  if (!is_float(x.dtype)) return c.fail("input must be a float type, got " + type_str(x));
  static const char* kNames[] = {"", "scale", "bias", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) FUSEBOX_RETURN_IF_ERROR(check_channel_vector(c, i, x.shape[1], kNames[i]));
  return Types{x};
}

Expected<Types> infer_expand(const Ctx& c) {
  Shape target = c.dims_attr("shape");
  std::string why;
  std::optional<Shape> out = broadcast_shapes(c.operand(0).shape, target, &why);
  if (!out) return c.fail(why);
  return Types{TensorType{c.operand(0).dtype, *out}};
}

Expected<Types> infer_reshape(const Ctx& c) {
  const TensorType& x = c.operand(0);
  Shape target = c.dims_attr("shape");
  int unknown = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i].is_dynamic()) {
      if (unknown >= 0) return c.fail("shape has more than one -1");
      unknown = static_cast<int>(i);
    }
  }
  // Cancel symbols that appear on both sides; what remains must be static to check counts.
  std::multiset<std::string> syms;
  int64_t in_static = 1;
  bool in_dynamic = false;
  for (const Dim& d : x.shape) {
    if (d.is_static()) in_static *= d.value();  // the operand's size is checked: no overflow
    else if (d.is_symbol()) syms.insert(d.symbol_name());
    else in_dynamic = true;
  }
  int64_t out_static = 1;
  bool out_unmatched_symbol = false;
  for (size_t i = 0; i < target.size(); ++i) {
    const Dim& d = target[i];
    if (static_cast<int>(i) == unknown) continue;
    if (d.is_static()) {
      std::optional<int64_t> n = size_mul(out_static, d.value());
      if (!n) return c.fail("shape [" + shape_to_string(target) + "] has more than 2^48 elements");
      out_static = *n;
    } else if (auto it = syms.find(d.symbol_name()); it != syms.end()) {
      syms.erase(it);
    } else {
      out_unmatched_symbol = true;
    }
  }
  bool exact = !in_dynamic && syms.empty() && !out_unmatched_symbol;
  if (unknown >= 0) {
    if (exact) {
      if (out_static == 0 || in_static % out_static != 0) {
        return c.fail("cannot reshape " + type_str(x) + " to [" + shape_to_string(target) + "]");
      }
      target[static_cast<size_t>(unknown)] = Dim(in_static / out_static);
    }
  } else if (exact && in_static != out_static) {
    return c.fail("cannot reshape " + type_str(x) + " (" + std::to_string(in_static) +
                  " elements) to [" + shape_to_string(target) + "] (" + std::to_string(out_static) +
                  " elements)");
  }
  return Types{TensorType{x.dtype, target}};
}

Expected<Types> infer_transpose(const Ctx& c) {
  const TensorType& x = c.operand(0);
  const auto& perm = c.node.attr_i64s("perm");
  if (static_cast<int>(perm.size()) != x.rank()) {
    return c.fail("perm has " + std::to_string(perm.size()) + " entries for a rank " +
                  std::to_string(x.rank()) + " input");
  }
  std::vector<bool> seen(perm.size(), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[static_cast<size_t>(p)]) {
      return c.fail("perm is not a permutation of 0.." + std::to_string(x.rank() - 1));
    }
    seen[static_cast<size_t>(p)] = true;
    out.push_back(x.shape[static_cast<size_t>(p)]);
  }
  return Types{TensorType{x.dtype, out}};
}

}  // namespace

SliceRange normalize_slice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  // Saturate the INT64_MAX/MIN sentinels exporters use before adding dim.
  constexpr int64_t kBig = int64_t(1) << 62;
  start = std::clamp(start, -kBig, kBig);
  end = std::clamp(end, -kBig, kBig);
  step = std::clamp(step, -kBig, kBig);
  if (dim == 0) return {0, 0};
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return {start, end > start ? (end - start + step - 1) / step : 0};
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return {start, start > end ? (start - end - step - 1) / (-step) : 0};
}

namespace {

Expected<Types> infer_slice(const Ctx& c) {
  const TensorType& x = c.operand(0);
  const auto& starts = c.node.attr_i64s("starts");
  const auto& ends = c.node.attr_i64s("ends");
  std::vector<int64_t> axes, steps;
  if (c.node.has_attr("axes")) {
    axes = c.node.attr_i64s("axes");
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  steps = c.node.has_attr("steps") ? c.node.attr_i64s("steps") : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.fail("starts, ends, axes and steps must have the same length");
  }
  Shape out = x.shape;
  std::vector<bool> seen(static_cast<size_t>(x.rank()), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    std::optional<int> axis = normalize_axis(axes[i], x.rank());
    if (!axis) return c.fail("axis " + std::to_string(axes[i]) + " out of range for " + type_str(x));
    if (seen[static_cast<size_t>(*axis)]) return c.fail("axis " + std::to_string(*axis) + " repeated");
    seen[static_cast<size_t>(*axis)] = true;
    if (steps[i] == 0) return c.fail("step must not be 0");
    const Dim& d = x.shape[static_cast<size_t>(*axis)];
    out[static_cast<size_t>(*axis)] =
        d.is_static() ? Dim(normalize_slice(d.value(), starts[i], ends[i], steps[i]).count)
                    : Dim::dynamic();
  }
  return Types{TensorType{x.dtype, out}};
}

Expected<Types> infer_concat(const Ctx& c) {
  const TensorType& first = c.operand(0);
  std::optional<int> axis = normalize_axis(c.node.attr_i64("axis"), first.rank());
  if (!axis) return c.fail("axis " + std::to_string(c.node.attr_i64("axis")) + " out of range");
  Shape out = first.shape;
  Dim total = first.shape[static_cast<size_t>(*axis)];
  for (size_t i = 1; i < c.in.size(); ++i) {
    const TensorType& t = c.operand(i);
    if (t.dtype != first.dtype || t.rank() != first.rank()) {
      return c.fail("operand " + std::to_string(i) + " is " + type_str(t) + ", expected " +
                    std::string(dtype_name(first.dtype)) + " of rank " + std::to_string(first.rank()));
    }
    for (int d = 0; d < t.rank(); ++d) {
      if (d == *axis) continue;
      const Dim& a = out[static_cast<size_t>(d)];
      const Dim& b = t.shape[static_cast<size_t>(d)];
      if (a.is_static() && b.is_static() && a.value() != b.value()) {
        return c.fail("operand " + std::to_string(i) + " " + type_str(t) + " differs from " +
                      type_str(first) + " in dim " + std::to_string(d));
      }
      if (!a.is_static() && b.is_static()) out[static_cast<size_t>(d)] = b;
    }
    const Dim& add = t.shape[static_cast<size_t>(*axis)];
    if (total.is_static() && add.is_static()) {
      std::optional<int64_t> sum = size_add(total.value(), add.value());
      if (!sum) return c.fail("the concatenated dim " + std::to_string(*axis) + " is above 2^48");
      total = Dim(*sum);
    } else {
      total = Dim::dynamic();
    }
  }
  out[static_cast<size_t>(*axis)] = total;
  return Types{TensorType{first.dtype, out}};
}

Expected<Types> infer_pad(const Ctx& c) {
  const TensorType& x = c.operand(0);
  const auto& pads = c.node.attr_i64s("pads");
  if (static_cast<int>(pads.size()) != 2 * x.rank()) {
    return c.fail("pads needs " + std::to_string(2 * x.rank()) + " entries (begins then ends), got " +
                  std::to_string(pads.size()));
  }
  bool reflect = c.node.attr_str("mode") == "reflect";
  Shape out = x.shape;
  for (int d = 0; d < x.rank(); ++d) {
    int64_t b = pads[static_cast<size_t>(d)], e = pads[static_cast<size_t>(d + x.rank())];
    if (b < 0 || e < 0) return c.fail("pads must be >= 0");
    const Dim& dim = x.shape[static_cast<size_t>(d)];
    std::optional<int64_t> grown = size_add(b, e);
    if (grown && dim.is_static()) grown = size_add(dim.value(), *grown);
    if (!grown) {
      return c.fail("pads " + std::to_string(b) + " and " + std::to_string(e) + " make dim " + std::to_string(d) +
                    " larger than 2^48");
    }
    if (dim.is_static() && (b > 0 || e > 0)) {
      if (reflect && (b >= dim.value() || e >= dim.value())) {
        return c.fail("reflect pad of " + std::to_string(std::max(b, e)) + " needs dim " +
                      std::to_string(d) + " larger than " + std::to_string(std::max(b, e)));
      }
      if (!reflect && dim.value() == 0 && c.node.attr_str("mode") == "edge") {
        return c.fail("edge pad of an empty dim");
      }
    }
    if (b > 0 || e > 0) out[static_cast<size_t>(d)] = dim.is_static() ? Dim(*grown) : Dim::dynamic();
  }
  return Types{TensorType{x.dtype, out}};
}

Expected<Types> infer_gather(const Ctx& c) {
  const TensorType& x = c.operand(0);
  const TensorType& idx = c.operand(1);
  if (idx.dtype != DType::I32 && idx.dtype != DType::I64) {
    return c.fail("indices must be i32 or i64, got " + type_str(idx));
  }
  std::optional<int> axis = normalize_axis(c.node.attr_i64("axis"), x.rank());
  if (!axis) return c.fail("axis " + std::to_string(c.node.attr_i64("axis")) + " out of range for " + type_str(x));
  Shape out(x.shape.begin(), x.shape.begin() + *axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + *axis + 1, x.shape.end());
  return Types{TensorType{x.dtype, out}};
}

Expected<Types> infer_flip(const Ctx& c) {
  const TensorType& x = c.operand(0);
  std::vector<bool> seen(static_cast<size_t>(x.rank()), false);
  for (int64_t a : c.node.attr_i64s("axes")) {
    std::optional<int> axis = normalize_axis(a, x.rank());
    if (!axis) return c.fail("axis " + std::to_string(a) + " out of range for " + type_str(x));
    if (seen[static_cast<size_t>(*axis)]) return c.fail("axis " + std::to_string(a) + " repeated");
    seen[static_cast<size_t>(*axis)] = true;
  }
  return Types{x};
}

Expected<Types> infer_resize(const Ctx& c) {
  const TensorType& x = c.operand(0);
  bool has_sizes = c.node.has_attr("sizes"), has_scales = c.node.has_attr("scales");
  if (has_sizes == has_scales) return c.fail("give exactly one of sizes and scales");
  if (x.dtype == DType::Bool) return c.fail("operand must be numeric, got " + type_str(x));
  Shape out;
  if (has_sizes) {
    out = c.dims_attr("sizes");
    if (static_cast<int>(out.size()) != x.rank()) {
      return c.fail("sizes has " + std::to_string(out.size()) + " entries for " + type_str(x));
    }
    for (const Dim& d : out) {
      if (d.is_dynamic()) return c.fail("sizes must be numbers or symbols, not -1");
      if (d.is_static() && d.value() == 0) return c.fail("sizes must be positive");
    }
  } else {
    const auto& scales = c.node.attr_f64s("scales");
    if (static_cast<int>(scales.size()) != x.rank()) {
      return c.fail("scales has " + std::to_string(scales.size()) + " entries for " + type_str(x));
    }
    for (size_t i = 0; i < scales.size(); ++i) {
      if (!(scales[i] > 0) || scales[i] > 1e6) return c.fail("scales must be positive and finite");
      const Dim& d = x.shape[i];
      if (scales[i] == 1.0) {
        out.push_back(d);
      } else {
        double scaled = double(d.value()) * scales[i];
        if (d.is_static() && scaled > double(kMaxSize)) return c.fail("scales make dim " + std::to_string(i) + " larger than 2^48");
        out.push_back(d.is_static() ? Dim(static_cast<int64_t>(scaled)) : Dim::dynamic());
      }
    }
  }
  return Types{TensorType{x.dtype, out}};
}

// Normalised, sorted, unique reduction axes (empty attribute: all axes).
Expected<std::vector<int>> reduction_axes(const Ctx& c, const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (int64_t a : axes) {
    std::optional<int> axis = normalize_axis(a, rank);
    if (!axis) return c.fail("axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank));
    if (std::find(out.begin(), out.end(), *axis) != out.end()) {
      return c.fail("axis " + std::to_string(a) + " repeated");
    }
    out.push_back(*axis);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Shape reduced_shape(const Shape& s, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (int i = 0; i < static_cast<int>(s.size()); ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) out.push_back(s[static_cast<size_t>(i)]);
    else if (keepdims) out.push_back(Dim(1));
  }
  return out;
}

Expected<Types> infer_reduce(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (x.dtype == DType::Bool) return c.fail("operand must be numeric, got " + type_str(x));
  if (c.node.op == Op::ReduceMean && !is_float(x.dtype)) {
    return c.fail("operand must be a float type, got " + type_str(x));
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<int> axes, reduction_axes(c, c.node.attr_i64s("axes"), x.rank()));
  bool keep = c.node.attr_bool("keepdims");
  if (c.node.op == Op::ReduceMax || c.node.op == Op::ReduceMin) {
    for (int a : axes) {
      const Dim& d = x.shape[static_cast<size_t>(a)];
      if (d.is_static() && d.value() == 0) return c.fail("cannot reduce an empty dim with max/min");
    }
  }
  return Types{TensorType{x.dtype, reduced_shape(x.shape, axes, keep)}};
}

Expected<Types> infer_arg_reduce(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (x.dtype == DType::Bool) return c.fail("operand must be numeric, got " + type_str(x));
  std::optional<int> axis = normalize_axis(c.node.attr_i64("axis"), x.rank());
  if (!axis) return c.fail("axis " + std::to_string(c.node.attr_i64("axis")) + " out of range for " + type_str(x));
  const Dim& d = x.shape[static_cast<size_t>(*axis)];
  if (d.is_static() && d.value() == 0) return c.fail("cannot take argmax/argmin of an empty dim");
  return Types{TensorType{DType::I64, reduced_shape(x.shape, {*axis}, c.node.attr_bool("keepdims"))}};
}

Expected<Types> infer_softmax(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (!is_float(x.dtype)) return c.fail("operand must be a float type, got " + type_str(x));
  if (!normalize_axis(c.node.attr_i64("axis"), x.rank())) {
    return c.fail("axis " + std::to_string(c.node.attr_i64("axis")) + " out of range for " + type_str(x));
  }
  return Types{x};
}

Expected<Types> infer_norm(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (!is_float(x.dtype)) return c.fail("operand must be a float type, got " + type_str(x));
  std::optional<int> axis = normalize_axis(c.node.attr_i64("axis"), x.rank());
  if (!axis) return c.fail("axis " + std::to_string(c.node.attr_i64("axis")) + " out of range for " + type_str(x));
  Shape normalized(x.shape.begin() + *axis, x.shape.end());
  static const char* kNames[] = {"", "scale", "bias"};
  for (size_t i = 1; i < c.in.size(); ++i) {
    const TensorType& t = c.operand(i);
    if (t.dtype != x.dtype) return c.fail(std::string(kNames[i]) + " dtype differs: " + type_str(t));
    std::string why;
    std::optional<Shape> b = broadcast_shapes(normalized, t.shape, &why);
    if (!b || !(*b == normalized)) {
      return c.fail(std::string(kNames[i]) + " " + type_str(t) + " does not broadcast to the normalised shape [" +
                    shape_to_string(normalized) + "]");
    }
  }
  return Types{x};
}

// fused_residual_layer_norm x, r[, bias][, scale[, shift]] and fused_residual_rms_norm
// x, r[, bias][, scale] (ir/fused_norm_ops.h): one result, or two when the sum is also a result.
Expected<Types> infer_fused_norm(const Ctx& c) {
  const TensorType& x = c.operand(0);
  const bool layer = c.node.op == Op::FusedResidualLayerNorm;
  const bool has_bias = c.node.attr_bool("has_bias");
  const size_t fixed = has_bias ? 3 : 2;
  const size_t params = c.in.size() < fixed ? 0 : c.in.size() - fixed;
  if (c.in.size() < fixed || params > (layer ? 2u : 1u)) {
    return c.fail("takes x, r" + std::string(has_bias ? ", bias" : "") + (layer ? "[, scale[, shift]]" : "[, scale]") +
                  ", got " + std::to_string(c.in.size()) + " operands");
  }
  if (!is_float(x.dtype)) return c.fail("operand must be a float type, got " + type_str(x));
  if (c.operand(1) != x) return c.fail("residual " + type_str(c.operand(1)) + " differs from x " + type_str(x));
  if (has_bias) {
    const TensorType& b = c.operand(2);
    std::string why;
    std::optional<Shape> joined = broadcast_shapes(x.shape, b.shape, &why);
    if (b.dtype != x.dtype || !joined || !(*joined == x.shape)) {
      return c.fail("bias " + type_str(b) + " does not broadcast into " + type_str(x));
    }
  }
  std::optional<int> axis = normalize_axis(c.node.attr_i64("axis"), x.rank());
  if (!axis) return c.fail("axis " + std::to_string(c.node.attr_i64("axis")) + " out of range for " + type_str(x));
  Shape normalized(x.shape.begin() + *axis, x.shape.end());
  for (size_t i = c.in.size() - params; i < c.in.size(); ++i) {
    const TensorType& t = c.operand(i);
    const char* what = i + params == c.in.size() ? "scale" : "shift";
    std::string why;
    std::optional<Shape> b = broadcast_shapes(normalized, t.shape, &why);
    if (t.dtype != x.dtype || !b || !(*b == normalized)) {
      return c.fail(std::string(what) + " " + type_str(t) + " does not broadcast to the normalised shape [" +
                    shape_to_string(normalized) + "]");
    }
  }
  if (c.node.outputs.size() == 2) return Types{x, x};
  return Types{x};
}

Expected<Types> infer_global_avg_pool(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (x.rank() < 3) return c.fail("input must be [N,C,spatial...], got " + type_str(x));
  if (!is_float(x.dtype)) return c.fail("operand must be a float type, got " + type_str(x));
  Shape out = x.shape;
  for (size_t i = 2; i < out.size(); ++i) out[i] = Dim(1);
  return Types{TensorType{x.dtype, out}};
}

// Window attributes beyond this are nonsense and would overflow the size arithmetic.
constexpr int64_t kMaxWindowAttr = int64_t(1) << 30;

Status check_len(const Ctx& c, std::string_view name, size_t want) {
  if (!c.node.has_attr(name)) return Status::ok();
  const auto& v = c.node.attr_i64s(name);
  if (v.size() != want) {
    return c.fail(std::string(name) + " needs " + std::to_string(want) + " entries, got " +
                  std::to_string(v.size()));
  }
  for (int64_t x : v) {
    if (x > kMaxWindowAttr || x < -kMaxWindowAttr) {
      return c.fail(std::string(name) + " entry " + std::to_string(x) + " is out of range");
    }
  }
  return Status::ok();
}

// Output length of a pooling/convolution window sweep; nullopt when no window fits.
std::optional<int64_t> window_out(int64_t in, int64_t pad_total, int64_t kernel, int64_t stride,
                                  int64_t dilation, bool ceil_mode, int64_t pad_begin) {
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t avail = in + pad_total - span;
  if (avail < 0) return std::nullopt;
  int64_t out = (ceil_mode ? (avail + stride - 1) / stride : avail / stride) + 1;
  // The last window must start inside the input or the leading padding.
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

Expected<Types> infer_pool(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (x.rank() != 4) return c.fail("input must be NCHW (rank 4), got " + type_str(x));
  if (!is_float(x.dtype)) return c.fail("operand must be a float type, got " + type_str(x));
  FUSEBOX_RETURN_IF_ERROR(check_len(c, "kernel", 2));
  FUSEBOX_RETURN_IF_ERROR(check_len(c, "stride", 2));
  FUSEBOX_RETURN_IF_ERROR(check_len(c, "pad", 4));
  FUSEBOX_RETURN_IF_ERROR(check_len(c, "dilation", 2));
  const auto& k = c.node.attr_i64s("kernel");
  const auto& s = c.node.attr_i64s("stride");
  const auto& p = c.node.attr_i64s("pad");
  std::vector<int64_t> dil = c.node.has_attr("dilation") ? c.node.attr_i64s("dilation") : std::vector<int64_t>{1, 1};
  bool ceil_mode = c.node.attr_bool("ceil_mode");
  Shape out = x.shape;
  for (size_t i = 0; i < 2; ++i) {
    if (k[i] < 1 || s[i] < 1 || dil[i] < 1) return c.fail("kernel, stride and dilation must be >= 1");
    if (p[i] < 0 || p[i + 2] < 0) return c.fail("pads must be >= 0");
    if (p[i] >= k[i] * dil[i] || p[i + 2] >= k[i] * dil[i]) return c.fail("pad must be smaller than the window");
    const Dim& d = x.shape[2 + i];
    if (!d.is_static()) {
      out[2 + i] = Dim::dynamic();
      continue;
    }
    std::optional<int64_t> o = window_out(d.value(), p[i] + p[i + 2], k[i], s[i], dil[i], ceil_mode, p[i]);
    if (!o) return c.fail("window larger than the padded input " + type_str(x));
    out[2 + i] = Dim(*o);
  }
  return Types{TensorType{x.dtype, out}};
}

Expected<Types> infer_matmul(const Ctx& c) {
  const TensorType& a = c.operand(0);
  const TensorType& b = c.operand(1);
  if (a.dtype != b.dtype) return c.fail("operand dtypes differ: " + type_str(a) + " vs " + type_str(b));
  if (a.dtype == DType::Bool) return c.fail("operands must be numeric");
  if (a.rank() < 1 || b.rank() < 1) return c.fail("operands must be at least rank 1");
  Shape as = a.shape, bs = b.shape;
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), Dim(1));
  if (b_vec) bs.push_back(Dim(1));
  const Dim& k1 = as.back();
  const Dim& k2 = bs[bs.size() - 2];
  if (k1.is_static() && k2.is_static() && k1.value() != k2.value()) {
    return c.fail("contraction dims differ: " + type_str(a) + " x " + type_str(b));
  }
  Shape batch_a(as.begin(), as.end() - 2), batch_b(bs.begin(), bs.end() - 2);
  std::string why;
  std::optional<Shape> batch = broadcast_shapes(batch_a, batch_b, &why);
  if (!batch) return c.fail("batch dims: " + why);
  Shape out = *batch;
  if (!a_vec) out.push_back(as[as.size() - 2]);
  if (!b_vec) out.push_back(bs.back());
  return Types{TensorType{a.dtype, out}};
}

Expected<Types> infer_conv(const Ctx& c, bool transpose) {
  const TensorType& x = c.operand(0);
  const TensorType& w = c.operand(1);
  if (x.rank() != 4 || w.rank() != 4) {
    return c.fail("input and weight must be rank 4 (NCHW, " +
                  std::string(transpose ? "[C_in,C_out/g,kh,kw]" : "[C_out,C_in/g,kh,kw]") + "), got " +
                  type_str(x) + " and " + type_str(w));
  }
  if (!is_float(x.dtype) || w.dtype != x.dtype) {
    return c.fail("input and weight must share a float type, got " + type_str(x) + " and " + type_str(w));
  }
  FUSEBOX_RETURN_IF_ERROR(check_len(c, "stride", 2));
  FUSEBOX_RETURN_IF_ERROR(check_len(c, "pad", 4));
  FUSEBOX_RETURN_IF_ERROR(check_len(c, "dilation", 2));
  if (transpose) FUSEBOX_RETURN_IF_ERROR(check_len(c, "output_padding", 2));
  const auto& s = c.node.attr_i64s("stride");
  const auto& p = c.node.attr_i64s("pad");
  const auto& dil = c.node.attr_i64s("dilation");
  int64_t g = c.node.attr_i64("groups");
  if (g < 1) return c.fail("groups must be >= 1");
  for (size_t i = 0; i < 2; ++i) {
    if (s[i] < 1 || dil[i] < 1) return c.fail("stride and dilation must be >= 1");
    if (p[i] < 0 || p[i + 2] < 0) return c.fail("pads must be >= 0");
  }
  for (size_t i = 2; i < 4; ++i) {
    if (!w.shape[i].is_static() || w.shape[i].value() < 1 || w.shape[i].value() > kMaxWindowAttr) {
      return c.fail("kernel dims must be static and between 1 and 2^30");
    }
  }
  if (!w.shape[0].is_static() || !w.shape[1].is_static()) return c.fail("weight channel dims must be static");
  const Dim& cin = x.shape[1];
  int64_t w0 = w.shape[0].value(), w1 = w.shape[1].value();
  int64_t out_channels;
  if (!transpose) {
    if (w0 % g != 0) return c.fail("output channels " + std::to_string(w0) + " not divisible by groups " + std::to_string(g));
    if (cin.is_static() && cin.value() != w1 * g) {
      return c.fail("input has " + cin.to_string() + " channels, weight expects " + std::to_string(w1 * g) +
                    " (" + std::to_string(w1) + " x groups " + std::to_string(g) + ")");
    }
    out_channels = w0;
  } else {
    if (w0 % g != 0) return c.fail("input channels " + std::to_string(w0) + " not divisible by groups");
    if (cin.is_static() && cin.value() != w0) {
      return c.fail("input has " + cin.to_string() + " channels, weight expects " + std::to_string(w0));
    }
    out_channels = w1 * g;
  }
  if (c.in.size() == 3) FUSEBOX_RETURN_IF_ERROR(check_channel_vector(c, 2, Dim(out_channels), "bias"));
  Shape out{x.shape[0], Dim(out_channels), Dim(), Dim()};
  for (size_t i = 0; i < 2; ++i) {
    const Dim& d = x.shape[2 + i];
    int64_t k = w.shape[2 + i].value();
    if (!d.is_static()) {
      out[2 + i] = Dim::dynamic();
      continue;
    }
    if (!transpose) {
      std::optional<int64_t> o = window_out(d.value(), p[i] + p[i + 2], k, s[i], dil[i], false, p[i]);
      if (!o) return c.fail("kernel larger than the padded input " + type_str(x));
      out[2 + i] = Dim(*o);
    } else {
      int64_t op = c.node.attr_i64s("output_padding")[i];
      if (op < 0 || (op >= s[i] && op >= dil[i])) return c.fail("output_padding must be smaller than stride or dilation");
      // d <= 2^48 and every attribute <= 2^30: the sum cannot overflow; the result is checked.
      std::optional<int64_t> strided = size_mul(std::max<int64_t>(d.value() - 1, 0), s[i]);
      if (!strided) return c.fail("output dim " + std::to_string(2 + i) + " would be larger than 2^48");
      int64_t o = *strided - p[i] - p[i + 2] + dil[i] * (k - 1) + op + 1;
      if (o < 1) return c.fail("output would be empty");
      out[2 + i] = Dim(o);
    }
  }
  return Types{TensorType{x.dtype, out}};
}

// The epilogue operands of a fused contraction whose contraction result is `y`.
Status check_epilogue(const Ctx& c, const TensorType& y, int bias, int residual) {
  const Node& n = c.node;
  std::optional<EpilogueAct> act = parse_epilogue_act(n.attr_str("act"));
  if (!act) return c.fail("unknown act '" + n.attr_str("act") + "'");
  bool takes_alpha = *act == EpilogueAct::LeakyRelu || *act == EpilogueAct::Clip || *act == EpilogueAct::HardSigmoid;
  bool takes_beta = *act == EpilogueAct::Clip || *act == EpilogueAct::HardSigmoid;
  if ((n.attrs.has("act_alpha") && !takes_alpha) || (n.attrs.has("act_beta") && !takes_beta)) {
    return c.fail("act " + n.attr_str("act") + " takes no act_alpha/act_beta");
  }
  if (bias >= 0) {
    const TensorType& b = c.operand(static_cast<size_t>(bias));
    if (b.dtype != y.dtype) return c.fail("bias " + type_str(b) + " differs in dtype from the result " + type_str(y));
    if (n.op == Op::FusedConvBiasAct) {
      FUSEBOX_RETURN_IF_ERROR(check_channel_vector(c, static_cast<size_t>(bias), y.shape[1], "bias"));
    } else {
      bool along_last = b.rank() <= y.rank();
      for (int d = 0; along_last && d + 1 < b.rank(); ++d) along_last = b.shape[static_cast<size_t>(d)] == Dim(1);
      if (b.rank() > 0 && y.rank() > 0) {
        const Dim& last = b.shape.back();
        along_last = along_last && (last == Dim(1) || last == y.shape.back() || !last.is_static() ||
                                    !y.shape.back().is_static());
      }
      if (!along_last) return c.fail("bias " + type_str(b) + " does not broadcast along the last axis of " + type_str(y));
    }
  }
  if (residual >= 0) {
    const TensorType& r = c.operand(static_cast<size_t>(residual));
    bool same = r.dtype == y.dtype && r.rank() == y.rank();
    for (size_t d = 0; same && d < r.shape.size(); ++d) {
      const Dim& a = r.shape[d];
      const Dim& b = y.shape[d];
      same = a == b || !a.is_static() || !b.is_static();
    }
    if (!same) return c.fail("residual " + type_str(r) + " must have the result's type " + type_str(y));
  }
  return Status::ok();
}

// matmul_integer a, b, a_zp, b_zp and conv2d_integer x, w, x_zp, w_zp: 8-bit operands (u8 or
// i8, the two may differ), each zero point of its operand's dtype and a scalar or one per row of
// a ([M]), per column of b ([N]), per output channel of w ([O]); x's is a scalar. Shapes are
// matmul's and conv2d's; the result is i32.
Expected<Types> infer_integer_contraction(const Ctx& c) {
  const bool conv = c.node.op == Op::Conv2dInteger;
  for (size_t i = 0; i < 2; ++i) {
    const TensorType& t = c.operand(i);
    const TensorType& zp = c.operand(i + 2);
    if (t.dtype != DType::U8 && t.dtype != DType::I8)
      return c.fail("operands must be u8 or i8, got " + type_str(t));
    if (zp.dtype != t.dtype || zp.rank() > 1) {
      return c.fail("the zero point of " + type_str(t) + " must be a scalar or 1-D " +
                    std::string(dtype_name(t.dtype)) + ", got " + type_str(zp));
    }
  }
  const std::array<TensorType, 2> plain{TensorType{DType::F32, c.operand(0).shape},
                                        TensorType{DType::F32, c.operand(1).shape}};
  Ctx contraction{c.node, plain, c.bindings};
  FUSEBOX_ASSIGN_OR_RETURN(Types y, conv ? infer_conv(contraction, false) : infer_matmul(contraction));
  // The length a 1-D zero point must have, and what it counts.
  auto zp_len = [&](size_t i, const Dim& len, const char* what) -> Status {
    const TensorType& zp = c.operand(i);
    if (zp.rank() == 0) return Status::ok();
    const Dim& d = zp.shape[0];
    if (d == len || !d.is_static() || !len.is_static()) return Status::ok();
    return c.fail("a 1-D zero point has one value per " + std::string(what) + " (" + len.to_string() +
                  "), got " + type_str(zp));
  };
  const TensorType &a = c.operand(0), &b = c.operand(1);
  if (conv) {
    if (c.operand(2).rank() != 0)
      return c.fail("x's zero point must be a scalar, got " + type_str(c.operand(2)));
    FUSEBOX_RETURN_IF_ERROR(zp_len(3, b.shape[0], "output channel"));
  } else {
    if (c.operand(2).rank() == 1 && a.rank() < 2)
      return c.fail("a per-row zero point needs a of rank >= 2, got " + type_str(a));
    if (c.operand(3).rank() == 1 && b.rank() < 2)
      return c.fail("a per-column zero point needs b of rank >= 2, got " + type_str(b));
    if (a.rank() >= 2) FUSEBOX_RETURN_IF_ERROR(zp_len(2, a.shape[a.shape.size() - 2], "row of a"));
    if (b.rank() >= 2) FUSEBOX_RETURN_IF_ERROR(zp_len(3, b.shape.back(), "column of b"));
  }
  y[0].dtype = DType::I32;
  return y;
}

// fused_matmul_bias_act a, w[, bias] and fused_matmul_residual a, w, r[, bias].
Expected<Types> infer_fused_matmul(const Ctx& c) {
  Ctx mm{c.node, c.in.subspan(0, 2), c.bindings};
  FUSEBOX_ASSIGN_OR_RETURN(Types y, infer_matmul(mm));
  bool residual = c.node.op == Op::FusedMatmulResidual;
  int bias = c.in.size() == (residual ? 4u : 3u) ? static_cast<int>(c.in.size()) - 1 : -1;
  FUSEBOX_RETURN_IF_ERROR(check_epilogue(c, y[0], bias, residual ? 2 : -1));
  return y;
}

// fused_swiglu x, w[, bias] (ir/fused_swiglu_op.h): matmul's result with its last dim halved.
Expected<Types> infer_fused_swiglu(const Ctx& c) {
  Ctx mm{c.node, c.in.subspan(0, 2), c.bindings};
  FUSEBOX_ASSIGN_OR_RETURN(Types y, infer_matmul(mm));
  TensorType& t = y[0];
  if (!is_float(t.dtype)) return c.fail("operands must be a float type, got " + type_str(c.operand(0)));
  if (c.operand(1).rank() < 2) return c.fail("w must be at least rank 2, got " + type_str(c.operand(1)));
  const Dim last = t.shape.back();
  if (!last.is_static() || last.value() % 2 != 0) {
    return c.fail("the matmul result " + type_str(t) + " must have a known, even last dim (its two halves)");
  }
  if (c.in.size() == 3) {
    const TensorType& b = c.operand(2);
    bool along_last = b.dtype == t.dtype && b.rank() >= 1 && b.rank() <= t.rank();
    for (int d = 0; along_last && d + 1 < b.rank(); ++d) along_last = b.shape[static_cast<size_t>(d)] == Dim(1);
    along_last = along_last && (b.shape.back() == Dim(1) || b.shape.back() == last);
    if (!along_last) return c.fail("bias " + type_str(b) + " does not broadcast along the last axis of " + type_str(t));
  }
  t.shape.back() = Dim(last.value() / 2);
  return y;
}

// fused_conv_bias_act x, w[, bias][, r].
Expected<Types> infer_fused_conv(const Ctx& c) {
  bool residual = c.node.attr_bool("has_residual");
  size_t conv_operands = c.in.size() - (residual ? 1 : 0);
  if (conv_operands < 2) return c.fail("has_residual needs a residual operand after x and w");
  Ctx conv{c.node, c.in.subspan(0, 2), c.bindings};
  FUSEBOX_ASSIGN_OR_RETURN(Types y, infer_conv(conv, false));
  FUSEBOX_RETURN_IF_ERROR(check_epilogue(c, y[0], conv_operands == 3 ? 2 : -1,
                                         residual ? static_cast<int>(c.in.size()) - 1 : -1));
  return y;
}

// ---- the blocked layout nChw<b>c (ir/layout.h) ----------------------------------------------

Expected<Types> infer_to_nchwc(const Ctx& c) {
  const TensorType& x = c.operand(0);
  int64_t b = c.node.attr_i64("block");
  if (b < 1 || b > kMaxNchwcBlock) {
    return c.fail("block " + std::to_string(b) + " is not in [1, " + std::to_string(kMaxNchwcBlock) + "]");
  }
  std::optional<Shape> s = nchwc_shape(x.shape, b);
  if (!s) return c.fail("input must be [N,C,H,W] with a static C divisible by " + std::to_string(b) + ", got " + type_str(x));
  return Types{TensorType{x.dtype, *s}};
}

Expected<Types> infer_to_nchw(const Ctx& c) {
  const TensorType& x = c.operand(0);
  std::optional<Shape> s = nchw_shape(x.shape);
  if (!s) return c.fail("input must be [N,C/b,H,W,b] with a static b, got " + type_str(x));
  return Types{TensorType{x.dtype, *s}};
}

// A node with layout = "nchwc" infers as its plain form: its activations (x, and the residual of
// fused_conv_bias_act) are read as NCHW, and the result, blocked like x, must have a channel count
// the block divides. With layout = "nhwc" each activation is one block of its channels
// ([N,1,H,W,C]), the result too.
template <typename Plain>
Expected<Types> infer_in_layout(const Ctx& c, Plain plain) {
  if (!has_nchwc_layout(c.node)) return plain(c);
  std::vector<TensorType> logical(c.in.begin(), c.in.end());
  const bool residual = c.node.op == Op::FusedConvBiasAct && c.node.attr_bool("has_residual");
  const bool nhwc = has_nhwc_layout(c.node);
  for (size_t i = 0; i < logical.size(); ++i) {
    if (i != 0 && !(residual && i + 1 == logical.size())) continue;
    std::optional<Shape> s = nchw_shape(logical[i].shape);
    if (!s || (nhwc && logical[i].shape[1] != Dim(1))) {
      return c.fail(std::string("layout ") + (nhwc ? "nhwc: operand " + std::to_string(i) + " must be [N,1,H,W,C]"
                                                    : "nchwc: operand " + std::to_string(i) + " must be [N,C/b,H,W,b]") +
                    ", got " + type_str(logical[i]));
    }
    logical[i].shape = *s;
  }
  const Dim& block = c.operand(0).shape[4];
  Ctx plain_ctx{c.node, logical, c.bindings};
  FUSEBOX_ASSIGN_OR_RETURN(Types out, plain(plain_ctx));
  for (TensorType& t : out) {
    if (nhwc && !(t.rank() == 4 && t.shape[1].is_static() && t.shape[1].value() >= 1)) {
      return c.fail("layout nhwc: result " + type_str(t) + " has no static channel count");
    }
    std::optional<Shape> s = nchwc_shape(t.shape, nhwc ? t.shape[1].value() : block.value());
    if (!s) return c.fail("layout nchwc: result " + type_str(t) + " has no channel count divisible by " + block.to_string());
    t.shape = *s;
  }
  return out;
}

Expected<Types> infer_fft(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (x.rank() < 1 || !is_float(x.dtype)) return c.fail("operand must be a float tensor of rank >= 1, got " + type_str(x));
  Shape out = x.shape;
  const Dim& n = out.back();
  out.back() = n.is_static() ? Dim(n.value() / 2 + 1) : Dim::dynamic();
  return Types{TensorType{x.dtype, out}};
}

Expected<Types> infer_peaks(const Ctx& c) {
  const TensorType& x = c.operand(0);
  if (x.rank() < 1 || !is_float(x.dtype)) return c.fail("operand must be a float tensor of rank >= 1, got " + type_str(x));
  int64_t k = c.node.attr_i64("k");
  if (k < 1) return c.fail("k must be >= 1");
  Shape out = x.shape;
  out.back() = Dim(k);
  return Types{TensorType{x.dtype, out}, TensorType{DType::I64, out}};
}

// bind_symbols x, v: x unchanged; v holds one value per symbol (its values are read when the
// plan runs, not here).
Expected<Types> infer_bind_symbols(const Ctx& c) {
  const TensorType& v = c.operand(1);
  const Shape& symbols = c.node.attr_dims("symbols");
  for (const Dim& d : symbols) {
    if (!d.is_symbol())
      return c.fail("symbols must all be named symbols, got [" + shape_to_string(symbols) + "]");
  }
  if (c.node.attr_str("rule") == "count_nonzero") {  // v of any dtype and rank
    if (symbols.size() != 1)
      return c.fail("rule count_nonzero binds one symbol, got [" + shape_to_string(symbols) + "]");
    return Types{c.operand(0)};
  }
  if (v.dtype != DType::I64 && v.dtype != DType::I32)
    return c.fail("values must be i32 or i64, got " + type_str(v));
  const bool count_ok = v.rank() == 0 ? symbols.size() == 1
                                      : v.rank() == 1 && (!v.shape[0].is_static() ||
                                                          v.shape[0].value() == int64_t(symbols.size()));
  if (!count_ok) {
    return c.fail("values " + type_str(v) + " must hold one element per symbol (" +
                  std::to_string(symbols.size()) + ")");
  }
  return Types{c.operand(0)};
}

// nonzero x {count = [K]}: i64[rank, K] (a scalar is read as [1]).
Expected<Types> infer_nonzero(const Ctx& c) {
  const Shape count = c.dims_attr("count");
  if (count.size() != 1 || count[0].is_dynamic())
    return c.fail("count must be one size or symbol, got [" + shape_to_string(count) + "]");
  const int64_t rank = std::max<int64_t>(c.operand(0).rank(), 1);
  return Types{TensorType{DType::I64, Shape{Dim(rank), count[0]}}};
}

Expected<Types> infer_transform_region(const Ctx& c);
Expected<Types> infer_elementwise_region(const Ctx& c);

// A region with a prologue reads operand k through its transform: the plain region sees the
// transform's result there (ir/region_prologue.h).
Expected<Types> infer_prologue_region(const Ctx& c) {
  Expected<PrologueParts> parts = split_prologue(c.node);
  if (!parts) return c.fail(parts.status().message());
  if (parts->input >= c.in.size()) return c.fail("prologue_input is not an operand");
  FUSEBOX_ASSIGN_OR_RETURN(Types read, infer_transform_region(Ctx{parts->transform, c.in.subspan(parts->input, 1), c.bindings}));
  std::vector<TensorType> in(c.in.begin(), c.in.end());
  in[parts->input] = read[0];
  return infer_elementwise_region(Ctx{parts->region, in, c.bindings});
}

Expected<Types> infer_elementwise_region(const Ctx& c) {
  const Graph* body = c.node.body.get();
  if (!body) return c.fail("has no body");
  if (prologue_input(c.node) >= 0) return infer_prologue_region(c);
  if (body->inputs().size() != c.in.size()) {
    return c.fail("body takes " + std::to_string(body->inputs().size()) + " values but the region has " +
                  std::to_string(c.in.size()) + " operands");
  }
  for (size_t i = 0; i < c.in.size(); ++i) {
    DType want = body->type(body->inputs()[i]).dtype;
    if (c.operand(i).dtype != want) {
      return c.fail("operand " + std::to_string(i) + " is " + type_str(c.operand(i)) + " but the body reads " +
                    std::string(dtype_name(want)));
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(Shape shape, broadcast_all(c));
  Types out;
  for (ValueId v : body->outputs()) out.push_back(TensorType{body->type(v).dtype, shape});
  return out;
}

// The body maps its one parameter to its one result; the operand must have the parameter's type.
Expected<Types> infer_transform_region(const Ctx& c) {
  const Graph* body = c.node.body.get();
  if (!body) return c.fail("has no body");
  if (body->inputs().size() != 1 || body->outputs().size() != 1) {
    return c.fail("body must take one value and return one value");
  }
  const TensorType& param = body->type(body->inputs()[0]);
  const TensorType& x = c.operand(0);
  Shape want = c.bindings ? bind_shape(param.shape, *c.bindings) : param.shape;
  bool same = x.dtype == param.dtype && x.rank() == param.rank();
  for (size_t d = 0; same && d < want.size(); ++d) {
    if (x.shape[d].is_static() && want[d].is_static()) same = x.shape[d].value() == want[d].value();
  }
  if (!same) return c.fail("operand is " + type_str(x) + " but the body reads " + type_str(param));
  TensorType out = body->type(body->outputs()[0]);
  if (c.bindings) out.shape = bind_shape(out.shape, *c.bindings);
  return Types{out};
}

// The body's nodes inferred in order from the operand types: the results are what running the
// body one node at a time gives (ir/reduction_region.h).
Expected<Types> infer_reduction_region(const Ctx& c) {
  const Graph* body = c.node.body.get();
  if (!body) return c.fail("has no body");
  if (body->inputs().size() != c.in.size()) {
    return c.fail("body takes " + std::to_string(body->inputs().size()) + " values but the region has " +
                  std::to_string(c.in.size()) + " operands");
  }
  std::vector<TensorType> types(body->num_values());
  for (size_t i = 0; i < c.in.size(); ++i) {
    const TensorType& param = body->type(body->inputs()[i]);
    if (c.operand(i).dtype != param.dtype || c.operand(i).rank() != param.rank()) {
      return c.fail("operand " + std::to_string(i) + " is " + type_str(c.operand(i)) + " but the body reads " +
                    type_str(param));
    }
    types[static_cast<size_t>(body->inputs()[i])] = c.operand(i);
  }
  for (const Node& n : body->nodes()) {
    std::vector<TensorType> in;
    for (ValueId v : n.inputs) in.push_back(types[static_cast<size_t>(v)]);
    Expected<Types> r = infer_result_types(n, in, c.bindings);
    if (!r) return c.fail("body: " + r.status().message());
    for (size_t k = 0; k < n.outputs.size() && k < r->size(); ++k) types[static_cast<size_t>(n.outputs[k])] = (*r)[k];
  }
  Types out;
  for (ValueId v : body->outputs()) out.push_back(types[static_cast<size_t>(v)]);
  return out;
}

}  // namespace

Shape bind_shape(const Shape& s, const SymbolBindings& bindings) {
  Shape out = s;
  for (Dim& d : out) {
    if (!d.is_symbol()) continue;
    auto it = bindings.find(d.symbol_name());
    if (it != bindings.end()) d = Dim(it->second);
  }
  return out;
}

namespace {

Expected<Types> infer_by_op(const Ctx& c);

}  // namespace

// Every operand, every dims attribute (a target shape: expand, reshape, resize sizes) and every
// result holds to the size limit (ir/size.h), so neither the inference of one op nor a kernel
// sees a size that overflows.
Expected<std::vector<TensorType>> infer_result_types(const Node& node,
                                                     std::span<const TensorType> inputs,
                                                     const SymbolBindings* bindings) {
  const OpInfo& info = node.info();
  int n = static_cast<int>(inputs.size());
  if (n < info.min_inputs || (info.max_inputs >= 0 && n > info.max_inputs)) {
    std::string want = info.min_inputs == info.max_inputs
                           ? std::to_string(info.min_inputs)
                           : (info.max_inputs < 0 ? "at least " + std::to_string(info.min_inputs)
                                                  : std::to_string(info.min_inputs) + " to " +
                                                        std::to_string(info.max_inputs));
    return Status::invalid(std::string(info.keyword) + ": takes " + want + " operands, got " +
                           std::to_string(n));
  }
  Ctx c{node, inputs, bindings};
  for (size_t i = 0; i < inputs.size(); ++i) {
    Status s = check_size(inputs[i].shape);
    if (!s.is_ok()) return c.fail("operand " + std::to_string(i) + " " + s.message());
  }
  for (const auto& [name, value] : node.attrs.entries()) {
    if (!std::holds_alternative<Shape>(value)) continue;
    Status s = check_size(c.dims_attr(name));
    if (!s.is_ok()) return c.fail("attribute '" + name + "' " + s.message());
  }
  FUSEBOX_ASSIGN_OR_RETURN(Types types, infer_by_op(c));
  for (size_t i = 0; i < types.size(); ++i) {
    Status s = check_size(types[i].shape);
    if (!s.is_ok()) return c.fail("result " + std::to_string(i) + " " + s.message());
  }
  return types;
}

namespace {

Expected<Types> infer_by_op(const Ctx& c) {
  const Node& node = c.node;
  switch (node.op) {
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Log: case Op::Sqrt: case Op::Rsqrt:
    case Op::Reciprocal: case Op::Tanh: case Op::Sigmoid: case Op::Relu: case Op::LeakyRelu:
    case Op::Gelu: case Op::Silu: case Op::Erf: case Op::HardSigmoid: case Op::HardSwish:
    case Op::Sin: case Op::Cos: case Op::Tan: case Op::Asin: case Op::Acos: case Op::Atan:
    case Op::Sinh: case Op::Cosh: case Op::Asinh: case Op::Acosh: case Op::Atanh: case Op::Floor: case Op::Ceil: case Op::Round: case Op::Not:
    case Op::Clip: case Op::Identity: case Op::Cast:
      return infer_unary(c);
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Pow: case Op::Max:
    case Op::Min: case Op::Mod: case Op::Equal: case Op::NotEqual: case Op::Less:
    case Op::LessEqual: case Op::Greater: case Op::GreaterEqual: case Op::And: case Op::Or: case Op::BitShift:
      return infer_binary(c);
    case Op::Where: return infer_where(c);
    case Op::BatchNorm: return infer_batch_norm(c);
    case Op::Expand: return infer_expand(c);
    case Op::Reshape: return infer_reshape(c);
    case Op::Transpose: return infer_transpose(c);
    case Op::Slice: return infer_slice(c);
    case Op::Concat: return infer_concat(c);
    case Op::Pad: return infer_pad(c);
    case Op::Gather: return infer_gather(c);
    case Op::Flip: return infer_flip(c);
    case Op::ToNchwc: return infer_to_nchwc(c);
    case Op::ToNchw: return infer_to_nchw(c);
    case Op::Resize: return infer_resize(c);
    case Op::ReduceSum: case Op::ReduceMean: case Op::ReduceMax: case Op::ReduceMin:
    case Op::ReduceProd:
      return infer_reduce(c);
    case Op::ArgMax: case Op::ArgMin: return infer_arg_reduce(c);
    case Op::Softmax: case Op::LogSoftmax: return infer_softmax(c);
    case Op::LayerNorm: case Op::RmsNorm: return infer_norm(c);
    case Op::GlobalAvgPool: return infer_in_layout(c, infer_global_avg_pool);
    case Op::MaxPool2d: case Op::AvgPool2d: return infer_in_layout(c, infer_pool);
    case Op::MatMul: return infer_matmul(c);
    case Op::Conv2d: return infer_in_layout(c, [](const Ctx& plain) { return infer_conv(plain, false); });
    case Op::ConvTranspose2d: return infer_conv(c, true);
    case Op::MatMulInteger: return infer_integer_contraction(c);
    case Op::Conv2dInteger: return infer_in_layout(c, infer_integer_contraction);
    case Op::FusedMatmulBiasAct: case Op::FusedMatmulResidual: return infer_fused_matmul(c);
    case Op::FusedConvBiasAct: return infer_in_layout(c, infer_fused_conv);
    case Op::FusedResidualLayerNorm: case Op::FusedResidualRmsNorm: return infer_fused_norm(c);
    case Op::FusedSwiglu: return infer_fused_swiglu(c);
    case Op::FusedAttention: return infer_fused_attention(c.node, c.in);
    case Op::ElementwiseRegion: return infer_elementwise_region(c);
    case Op::TransformRegion: return infer_transform_region(c);
    case Op::ReductionRegion: return infer_reduction_region(c);
    case Op::BatchElementwiseRegion: return infer_batch_region(c.node, c.in);
    case Op::Constant: {
      const Array& a = node.attr_array("value");
      return Types{TensorType{a.dtype(), make_shape(a.shape())}};
    }
    case Op::FftMagnitude: return infer_fft(c);
    case Op::Peaks: return infer_peaks(c);
    case Op::BindSymbols:
      return infer_bind_symbols(c);
    case Op::NonZero:
      return infer_nonzero(c);
    case Op::GatherNd: case Op::ScatterElements: case Op::ScatterNd: case Op::ReverseSequence:
    case Op::CumSum: case Op::Det: case Op::NmsSelect: case Op::UniqueSelect:
      return infer_extra_op(node, c.in);
  }
  return Status::internal("infer_result_types: unhandled op");
}

}  // namespace

}  // namespace fusebox
