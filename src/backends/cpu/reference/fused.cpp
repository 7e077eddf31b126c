// Reference kernels of the fused contractions: the primitives of ir/fused_ops.h (and
// ir/fused_swiglu_op.h) run one at a time on their reference kernels, so a fused op computes
// exactly what its unfused form does.
#include "backends/cpu/reference/reference.h"
#include "ir/fused_ops.h"
#include "ir/fused_swiglu_op.h"

namespace fusebox::cpu {

namespace {

using UnfuseFn = std::vector<Node> (*)(Graph&, const Node&);

Status run_unfused(const KernelArgs& args, UnfuseFn unfuse = &unfused_nodes) {
  Graph g("fused");
  Node fused = args.node;
  fused.inputs.clear();
  for (size_t i = 0; i < args.in.size(); ++i) {
    fused.inputs.push_back(g.add_input("in" + std::to_string(i),
                                       TensorType{args.in[i].dtype(), make_shape(args.in[i].shape())}));
  }
  const Array& result = args.out[0];
  fused.outputs = {g.add_value(TensorType{result.dtype(), make_shape(result.shape())})};
  std::vector<Array> values(g.num_values());
  for (size_t i = 0; i < args.in.size(); ++i) values[static_cast<size_t>(fused.inputs[i])] = args.in[i];
  std::vector<Node> steps = unfuse(g, fused);
  values.resize(g.num_values());
  for (size_t s = 0; s < steps.size(); ++s) {
    const Node& n = steps[s];
    std::vector<Array> in;
    for (ValueId v : n.inputs) in.push_back(values[static_cast<size_t>(v)]);
    const TensorType& t = g.type(n.outputs[0]);
    Array out = s + 1 == steps.size() ? result : Array(t.dtype, static_dims(t.shape));
    FUSEBOX_RETURN_IF_ERROR(run_reference(n, in, std::span<Array>(&out, 1)));
    values[static_cast<size_t>(n.outputs[0])] = out;
  }
  return Status::ok();
}

}  // namespace

Status ref_FusedMatmulBiasAct(const KernelArgs& args) { return run_unfused(args); }
Status ref_FusedMatmulResidual(const KernelArgs& args) { return run_unfused(args); }
Status ref_FusedConvBiasAct(const KernelArgs& args) { return run_unfused(args); }
Status ref_FusedSwiglu(const KernelArgs& args) { return run_unfused(args, &unfused_swiglu_nodes); }

}  // namespace fusebox::cpu
