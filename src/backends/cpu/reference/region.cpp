// Reference kernel of elementwise_region: the body runs op by op on full-size arrays, exactly as
// the unfused graph would (every operand first broadcast to the region's shape).
#include <cstring>
#include <map>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"
#include "ir/batch_region.h"
#include "ir/region_prologue.h"
#include "ir/shape_inference.h"

namespace fusebox::cpu {

namespace {

Array broadcast_to(const Array& a, const std::vector<int64_t>& shape) {
  Array out(a.dtype(), shape);
  std::vector<int64_t> strides = broadcast_strides(a.shape(), shape);
  size_t esize = size_t(dtype_size(a.dtype()));
  const auto* src = static_cast<const uint8_t*>(a.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  int64_t i = 0;
  for (MultiIndex it(shape, {strides}); !it.done(); it.next(), ++i) {
    std::memcpy(dst + size_t(i) * esize, src + size_t(it.offset(0)) * esize, esize);
  }
  return out;
}

}  // namespace

Status ref_ElementwiseRegion(const KernelArgs& args) {
  const Graph* body = args.node.body.get();
  if (!body) return Status::internal("elementwise_region without a body");
  if (prologue_input(args.node) >= 0) {
    // The transform first, whole, then the plain region over its result (ir/region_prologue.h).
    FUSEBOX_ASSIGN_OR_RETURN(PrologueParts parts, split_prologue(args.node));
    std::vector<int64_t> dims;
    for (const Dim& d : parts.read.shape) dims.push_back(d.value());
    std::vector<Array> read{Array(parts.read.dtype, dims)};
    FUSEBOX_RETURN_IF_ERROR(run_reference(parts.transform, args.in.subspan(parts.input, 1), read));
    std::vector<Array> in(args.in.begin(), args.in.end());
    in[parts.input] = std::move(read[0]);
    std::vector<Array> out(args.out.begin(), args.out.end());
    return run_reference(parts.region, in, out);
  }
  const std::vector<int64_t>& shape = args.out[0].shape();
  std::map<ValueId, Array> values;
  for (size_t i = 0; i < body->inputs().size(); ++i) values[body->inputs()[i]] = broadcast_to(args.in[i], shape);
  for (const Node& n : body->nodes()) {
    std::vector<Array> in;
    for (ValueId v : n.inputs) in.push_back(values.at(v));
    if (n.op == Op::Constant) {
      values[n.outputs[0]] = broadcast_to(n.attr_array("value"), shape);
      continue;
    }
    std::vector<Array> out;
    for (ValueId v : n.outputs) out.emplace_back(body->type(v).dtype, shape);
    FUSEBOX_RETURN_IF_ERROR(run_reference(n, in, out));
    for (size_t r = 0; r < out.size(); ++r) values[n.outputs[r]] = std::move(out[r]);
  }
  for (size_t r = 0; r < body->outputs().size(); ++r) {
    const Array& v = values.at(body->outputs()[r]);
    std::memcpy(args.out[r].raw(), v.raw(), v.nbytes());
  }
  return Status::ok();
}

// Reference kernel of transform_region: its steps run one by one on whole arrays, exactly as the
// unfused chain would.
Status ref_TransformRegion(const KernelArgs& args) {
  const Graph* body = args.node.body.get();
  if (!body) return Status::internal("transform_region without a body");
  std::map<ValueId, Array> values;
  values[body->inputs()[0]] = args.in[0];
  for (const Node& n : body->nodes()) {
    std::vector<Array> in;
    for (ValueId v : n.inputs) in.push_back(values.at(v));
    std::vector<Array> out;
    for (ValueId v : n.outputs) {
      const Shape& s = body->type(v).shape;
      std::vector<int64_t> dims;
      for (const Dim& d : s) dims.push_back(d.value());
      out.emplace_back(body->type(v).dtype, dims);
    }
    FUSEBOX_RETURN_IF_ERROR(run_reference(n, in, out));
    for (size_t r = 0; r < out.size(); ++r) values[n.outputs[r]] = std::move(out[r]);
  }
  const Array& v = values.at(body->outputs()[0]);
  FUSEBOX_CHECK(v.nbytes() == args.out[0].nbytes()) << "transform_region: result size";
  if (v.nbytes() > 0) std::memcpy(args.out[0].raw(), v.raw(), v.nbytes());
  return Status::ok();
}

// Reference kernel of reduction_region: the body runs node by node on whole arrays, exactly as
// the unfused graph would, each node at the shape inference gives it for these operands.
Status ref_ReductionRegion(const KernelArgs& args) {
  const Graph* body = args.node.body.get();
  if (!body) return Status::internal("reduction_region without a body");
  std::map<ValueId, Array> values;
  for (size_t i = 0; i < body->inputs().size(); ++i) values[body->inputs()[i]] = args.in[i];
  for (const Node& n : body->nodes()) {
    std::vector<Array> in;
    std::vector<TensorType> in_types;
    for (ValueId v : n.inputs) {
      in.push_back(values.at(v));
      in_types.push_back(TensorType{in.back().dtype(), make_shape(in.back().shape())});
    }
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> types, infer_result_types(n, in_types));
    std::vector<Array> out;
    for (const TensorType& t : types) out.emplace_back(t.dtype, static_dims(t.shape));
    FUSEBOX_RETURN_IF_ERROR(run_reference(n, in, out));
    for (size_t r = 0; r < out.size(); ++r) values[n.outputs[r]] = std::move(out[r]);
  }
  for (size_t r = 0; r < body->outputs().size(); ++r) {
    const Array& v = values.at(body->outputs()[r]);
    FUSEBOX_CHECK(v.nbytes() == args.out[r].nbytes()) << "reduction_region: result " << r << " size";
    if (v.nbytes() > 0) std::memcpy(args.out[r].raw(), v.raw(), v.nbytes());
  }
  return Status::ok();
}

// Reference kernel of batch_elementwise_region: each item's body (its region with the crop of
// its table row, then the per-item transform) runs node by node, and the item is copied into its
// slice of the result along `axis`, in table order (ir/batch_region.h).
Status ref_BatchElementwiseRegion(const KernelArgs& args) {
  FUSEBOX_ASSIGN_OR_RETURN(BatchTable t, batch_table(args.node));
  Array& out = args.out[0];
  const std::vector<int64_t>& od = out.shape();
  const size_t axis = size_t(t.axis), esize = size_t(dtype_size(out.dtype()));
  if (axis >= od.size()) return Status::invalid("batch_elementwise_region: axis outside the result");
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < axis; ++a) outer *= od[a];
  for (size_t a = axis + 1; a < od.size(); ++a) inner *= od[a];
  for (size_t i = 0; i < t.items; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(Graph body, batch_item_body(args.node, i));
    std::map<ValueId, Array> values;
    for (size_t j = 0; j < body.inputs().size(); ++j) values[body.inputs()[j]] = args.in[j];
    for (const Node& n : body.nodes()) {
      std::vector<Array> in, res;
      for (ValueId v : n.inputs) in.push_back(values.at(v));
      for (ValueId v : n.outputs) {
        std::vector<int64_t> dims;
        for (const Dim& d : body.type(v).shape) dims.push_back(d.value());
        res.emplace_back(body.type(v).dtype, dims);
      }
      FUSEBOX_RETURN_IF_ERROR(run_reference(n, in, res));
      for (size_t r = 0; r < res.size(); ++r) values[n.outputs[r]] = std::move(res[r]);
    }
    const Array& item = values.at(body.outputs()[0]);
    const int64_t extent = axis < item.shape().size() ? item.shape()[axis] : 0;
    if (item.nbytes() != size_t(outer * extent * inner) * esize || t.offsets[i] + extent > od[axis]) {
      return Status::invalid("batch_elementwise_region: item " + std::to_string(i) + " does not fit its slice");
    }
    const auto* src = static_cast<const uint8_t*>(item.raw());
    auto* dst = static_cast<uint8_t*>(out.raw());
    const size_t row = size_t(extent * inner) * esize;
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(dst + (size_t(o * od[axis] + t.offsets[i]) * size_t(inner)) * esize, src + size_t(o) * row, row);
    }
  }
  return Status::ok();
}

}  // namespace fusebox::cpu
