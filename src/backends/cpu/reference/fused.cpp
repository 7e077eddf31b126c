// Reference kernels of the fused ops: the primitives of ir/fused_ops.h (contractions),
// ir/fused_swiglu_op.h and ir/fused_norm_ops.h (normalisations) run one at a time on their reference kernels, so a fused
// op computes exactly what its unfused form does.
#include "backends/cpu/reference/reference.h"
#include "ir/fused_norm_ops.h"
#include "ir/fused_ops.h"
#include "ir/fused_swiglu_op.h"

namespace fusebox::cpu {

namespace {

// Runs the primitives `unfuse` gives for a copy of args.node whose operands and results are
// values of a scratch graph with the concrete types of args.in and args.out.
template <typename Unfuse>
Status run_unfused(const KernelArgs& args, Unfuse unfuse) {
  Graph g("fused");
  Node fused = args.node;
  fused.inputs.clear();
  fused.outputs.clear();
  for (size_t i = 0; i < args.in.size(); ++i) {
    fused.inputs.push_back(g.add_input("in" + std::to_string(i),
                                       TensorType{args.in[i].dtype(), make_shape(args.in[i].shape())}));
  }
  for (const Array& result : args.out) {
    fused.outputs.push_back(g.add_value(TensorType{result.dtype(), make_shape(result.shape())}));
  }
  std::vector<Node> steps = unfuse(g, fused);
  std::vector<Array> values(g.num_values());
  std::vector<bool> is_result(g.num_values(), false);
  for (size_t i = 0; i < args.in.size(); ++i) values[static_cast<size_t>(fused.inputs[i])] = args.in[i];
  for (size_t i = 0; i < args.out.size(); ++i) {
    values[static_cast<size_t>(fused.outputs[i])] = args.out[i];  // shares the result's storage
    is_result[static_cast<size_t>(fused.outputs[i])] = true;
  }
  for (const Node& n : steps) {
    std::vector<Array> in;
    for (ValueId v : n.inputs) in.push_back(values[static_cast<size_t>(v)]);
    const size_t v = static_cast<size_t>(n.outputs[0]);
    if (!is_result[v]) values[v] = Array(g.type(n.outputs[0]).dtype, static_dims(g.type(n.outputs[0]).shape));
    FUSEBOX_RETURN_IF_ERROR(run_reference(n, in, std::span<Array>(&values[v], 1)));
  }
  return Status::ok();
}

Status run_contraction(const KernelArgs& args) { return run_unfused(args, unfused_nodes); }
Status run_norm(const KernelArgs& args) { return run_unfused(args, unfused_norm_nodes); }

}  // namespace

Status ref_FusedMatmulBiasAct(const KernelArgs& args) { return run_contraction(args); }
Status ref_FusedMatmulResidual(const KernelArgs& args) { return run_contraction(args); }
Status ref_FusedConvBiasAct(const KernelArgs& args) { return run_contraction(args); }
Status ref_FusedResidualLayerNorm(const KernelArgs& args) { return run_norm(args); }
Status ref_FusedResidualRmsNorm(const KernelArgs& args) { return run_norm(args); }
Status ref_FusedSwiglu(const KernelArgs& args) { return run_unfused(args, unfused_swiglu_nodes); }

}  // namespace fusebox::cpu
