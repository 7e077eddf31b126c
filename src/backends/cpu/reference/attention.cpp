// Reference kernel of fused_attention: its unfused primitives (ir/fused_attention_op.h) run one at
// a time on their reference kernels, over the concrete shapes of this call (so a causal mask can
// be built), so the fused op computes exactly what its unfused form does.
#include "backends/cpu/reference/reference.h"
#include "ir/fused_attention_op.h"

namespace fusebox::cpu {

Status ref_FusedAttention(const KernelArgs& args) {
  Graph g("fused_attention");
  Node fused = args.node;
  fused.inputs.clear();
  for (size_t i = 0; i < args.in.size(); ++i) {
    fused.inputs.push_back(g.add_input("in" + std::to_string(i),
                                       TensorType{args.in[i].dtype(), make_shape(args.in[i].shape())}));
  }
  Array& result = args.out[0];
  fused.outputs = {g.add_value(TensorType{result.dtype(), make_shape(result.shape())})};
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<Node> steps, unfused_attention_nodes(g, fused));
  std::vector<Array> values(g.num_values());
  for (size_t i = 0; i < args.in.size(); ++i) values[static_cast<size_t>(fused.inputs[i])] = args.in[i];
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

}  // namespace fusebox::cpu
