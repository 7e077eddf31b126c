// Reference kernel of elementwise_region: the body runs op by op on full-size arrays, exactly as
// the unfused graph would (every operand first broadcast to the region's shape).
#include <cstring>
#include <map>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"
#include "ir/region_prologue.h"

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

}  // namespace fusebox::cpu
