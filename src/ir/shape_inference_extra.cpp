// Shape inference of gather_nd, scatter_elements, scatter_nd, reverse_sequence, cumsum, det,
// nms_select and unique_select (ONNX GatherND, ScatterElements, ScatterND, ReverseSequence, CumSum,
// Det, NonMaxSuppression, Unique). Sizes are compared
// where both are known; an unknown or symbolic size against a number is left to the run-time
// inference, which sees concrete shapes. Index values are checked by the reference kernels.
#include "ir/shape_inference_extra.h"

#include <string>

namespace fusebox {

namespace {

using Types = std::vector<TensorType>;

Status fail(const Node& n, const std::string& msg) {
  return Status::invalid(std::string(n.info().keyword) + ": " + msg);
}

// Two sizes that may still be equal at run time.
bool may_equal(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.value() == b.value();
  if (a.is_symbol() && b.is_symbol()) return a == b;
  return true;
}

bool is_index_type(DType t) { return t == DType::I32 || t == DType::I64; }

Status check_reduction(const Node& n, const TensorType& data) {
  if (n.attr_str("reduction") != "none" && data.dtype == DType::Bool) {
    return fail(n, "reduction '" + n.attr_str("reduction") + "' needs numeric data, got " + data.to_string());
  }
  return Status::ok();
}

// The last dim of an index tensor of rank >= 1: the length of each index tuple, static.
Expected<int64_t> tuple_length(const Node& n, const TensorType& idx) {
  if (!is_index_type(idx.dtype) || idx.rank() < 1) {
    return fail(n, "indices must be i32 or i64 of rank >= 1, got " + idx.to_string());
  }
  const Dim& k = idx.shape.back();
  if (!k.is_static())
    return fail(n, "the last dim of indices (the index length) must be static, got " + idx.to_string());
  return k.value();
}

Expected<Types> infer_gather_nd(const Node& n, const TensorType& data, const TensorType& idx) {
  FUSEBOX_ASSIGN_OR_RETURN(int64_t k, tuple_length(n, idx));
  const int64_t b = n.attr_i64("batch_dims"), r = data.rank(), q = idx.rank();
  if (b < 0 || b >= q || b >= r) {
    return fail(n, "batch_dims " + std::to_string(b) +
                       " must be in [0, min(rank of data, rank of indices)), got " + data.to_string() +
                       " and " + idx.to_string());
  }
  if (k < 1 || k > r - b) {
    return fail(n, "the index length " + std::to_string(k) + " must be in [1, " + std::to_string(r - b) +
                       "] for data " + data.to_string() + " with batch_dims " + std::to_string(b));
  }
  Shape out;
  for (int64_t d = 0; d < b; ++d) {
    const Dim &dd = data.shape[size_t(d)], &id = idx.shape[size_t(d)];
    if (!may_equal(dd, id)) {
      return fail(n, "batch dim " + std::to_string(d) + " differs: data " + data.to_string() + ", indices " +
                         idx.to_string());
    }
    out.push_back(dd.is_static() ? dd : id);
  }
  out.insert(out.end(), idx.shape.begin() + b, idx.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + b + k, data.shape.end());
  return Types{TensorType{data.dtype, out}};
}

Expected<Types> infer_scatter_elements(const Node& n, const TensorType& data, const TensorType& idx,
                                       const TensorType& upd) {
  if (data.rank() < 1) return fail(n, "data must have rank >= 1, got " + data.to_string());
  if (!is_index_type(idx.dtype) || idx.rank() != data.rank()) {
    return fail(n, "indices must be i32 or i64 of the data's rank, got " + idx.to_string() + " for data " +
                       data.to_string());
  }
  if (upd.dtype != data.dtype || upd.rank() != idx.rank()) {
    return fail(n, "updates must have the data's dtype and the indices' shape, got " + upd.to_string());
  }
  std::optional<int> axis = normalize_axis(n.attr_i64("axis"), data.rank());
  if (!axis)
    return fail(n, "axis " + std::to_string(n.attr_i64("axis")) + " out of range for " + data.to_string());
  for (size_t d = 0; d < idx.shape.size(); ++d) {
    if (!may_equal(idx.shape[d], upd.shape[d])) {
      return fail(n, "updates " + upd.to_string() + " and indices " + idx.to_string() + " differ in shape");
    }
    const Dim &i = idx.shape[d], &x = data.shape[d];
    if (int(d) != *axis && i.is_static() && x.is_static() && i.value() > x.value()) {
      return fail(n, "indices " + idx.to_string() + " are larger than data " + data.to_string() +
                         " along axis " + std::to_string(d));
    }
  }
  FUSEBOX_RETURN_IF_ERROR(check_reduction(n, data));
  return Types{data};
}

Expected<Types> infer_scatter_nd(const Node& n, const TensorType& data, const TensorType& idx,
                                 const TensorType& upd) {
  FUSEBOX_ASSIGN_OR_RETURN(int64_t k, tuple_length(n, idx));
  if (k < 1 || k > data.rank()) {
    return fail(n, "the index length " + std::to_string(k) + " must be in [1, " +
                       std::to_string(data.rank()) + "] for data " + data.to_string());
  }
  // updates: indices.shape[:-1] + data.shape[k:]
  Shape want(idx.shape.begin(), idx.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + k, data.shape.end());
  bool ok = upd.dtype == data.dtype && upd.shape.size() == want.size();
  for (size_t d = 0; ok && d < want.size(); ++d) ok = may_equal(upd.shape[d], want[d]);
  if (!ok) {
    return fail(n, "updates must be " + TensorType{data.dtype, want}.to_string() +
                       " (indices.shape[:-1] + data.shape[" + std::to_string(k) + ":]), got " +
                       upd.to_string());
  }
  FUSEBOX_RETURN_IF_ERROR(check_reduction(n, data));
  return Types{data};
}

Expected<Types> infer_reverse_sequence(const Node& n, const TensorType& x, const TensorType& lens) {
  const int64_t b = n.attr_i64("batch_axis"), t = n.attr_i64("time_axis");
  if (x.rank() < 2) return fail(n, "input must have rank >= 2, got " + x.to_string());
  if (b < 0 || b > 1 || t < 0 || t > 1 || b == t) {
    return fail(n, "batch_axis and time_axis must be 0 and 1 in some order, got " + std::to_string(b) +
                       " and " + std::to_string(t));
  }
  if (!is_index_type(lens.dtype) || lens.rank() != 1 || !may_equal(lens.shape[0], x.shape[size_t(b)])) {
    return fail(
        n, "sequence_lens must be i32 or i64 [batch], got " + lens.to_string() + " for " + x.to_string());
  }
  return Types{x};
}

// The axis is the attribute, or (when it is known only at run time) a one-element second operand
// that the kernel range-checks.
Expected<Types> infer_cumsum(const Node& n, std::span<const TensorType> in) {
  const TensorType& x = in[0];
  if (x.dtype == DType::Bool || x.rank() < 1)
    return fail(n, "input must be numeric of rank >= 1, got " + x.to_string());
  if (in.size() == 2) {
    const TensorType& a = in[1];
    bool one = a.rank() == 0 || (a.rank() == 1 && may_equal(a.shape[0], Dim(1)));
    if (!is_index_type(a.dtype) || !one)
      return fail(n, "the axis operand must be one i32 or i64, got " + a.to_string());
    if (n.attrs.find("axis")) return fail(n, "give the axis as the attribute or as the operand, not both");
    return Types{x};
  }
  if (!n.attrs.find("axis")) return fail(n, "needs the axis attribute or an axis operand");
  if (!normalize_axis(n.attr_i64("axis"), x.rank())) {
    return fail(n, "axis " + std::to_string(n.attr_i64("axis")) + " out of range for " + x.to_string());
  }
  return Types{x};
}

Expected<Types> infer_det(const Node& n, const TensorType& x) {
  if (!is_float(x.dtype) || x.rank() < 2)
    return fail(n, "input must be a float tensor [..., M, M], got " + x.to_string());
  if (!may_equal(x.shape[size_t(x.rank() - 2)], x.shape[size_t(x.rank() - 1)])) {
    return fail(n, "the last two dims must be equal (square matrices), got " + x.to_string());
  }
  return Types{TensorType{x.dtype, Shape(x.shape.begin(), x.shape.end() - 2)}};
}

// boxes f32[B,S,4], scores f32[B,C,S], then one-value (or empty) scalars: i64[B,C,S].
Expected<Types> infer_nms_select(const Node& n, std::span<const TensorType> in) {
  const TensorType &boxes = in[0], &scores = in[1];
  if (boxes.dtype != DType::F32 || boxes.rank() != 3 || !may_equal(boxes.shape[2], Dim(4)))
    return fail(n, "boxes must be f32[batches, count, 4], got " + boxes.to_string());
  if (scores.dtype != DType::F32 || scores.rank() != 3 || !may_equal(scores.shape[0], boxes.shape[0]) ||
      !may_equal(scores.shape[2], boxes.shape[1])) {
    return fail(n, "scores must be f32[batches, classes, count] matching boxes " + boxes.to_string() +
                       ", got " + scores.to_string());
  }
  const char* names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (size_t i = 2; i < in.size(); ++i) {
    const TensorType& t = in[i];
    const bool integer = i == 2;
    const bool dtype_ok = integer ? is_integer(t.dtype) : is_float(t.dtype);
    const bool one_or_none =
        t.rank() == 0 || (t.rank() == 1 && !(t.shape[0].is_static() && t.shape[0].value() > 1));
    if (!dtype_ok || !one_or_none) {
      return fail(n, std::string(names[i - 2]) + " must hold one " + (integer ? "integer" : "float") +
                         " value or none, got " + t.to_string());
    }
  }
  return Types{TensorType{DType::I64, Shape{scores.shape[0], scores.shape[1], boxes.shape[1]}}};
}

// x of rank >= 1 and 0 <= axis < rank: three i64[S], S the size of `axis`.
Expected<Types> infer_unique_select(const Node& n, const TensorType& x) {
  const int64_t axis = n.attr_i64("axis");
  if (axis < 0 || axis >= x.rank())
    return fail(n, "axis " + std::to_string(axis) + " out of range for " + x.to_string());
  const TensorType t{DType::I64, Shape{x.shape[size_t(axis)]}};
  return Types{t, t, t};
}

}  // namespace

Expected<std::vector<TensorType>> infer_extra_op(const Node& node, std::span<const TensorType> in) {
  switch (node.op) {
    case Op::GatherNd:
      return infer_gather_nd(node, in[0], in[1]);
    case Op::ScatterElements:
      return infer_scatter_elements(node, in[0], in[1], in[2]);
    case Op::ScatterNd:
      return infer_scatter_nd(node, in[0], in[1], in[2]);
    case Op::ReverseSequence:
      return infer_reverse_sequence(node, in[0], in[1]);
    case Op::CumSum:
      return infer_cumsum(node, in);
    case Op::Det:
      return infer_det(node, in[0]);
    case Op::NmsSelect:
      return infer_nms_select(node, in);
    case Op::UniqueSelect:
      return infer_unique_select(node, in[0]);
    default:
      break;
  }
  return Status::internal("infer_extra_op: not one of its ops");
}

}  // namespace fusebox
