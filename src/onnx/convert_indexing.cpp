// ONNX ops that address data through an index tensor, and scans and determinants, each one
// fusebox op:
//
//   ScatterElements, Scatter (opset 9/10, the same op)   scatter_elements {axis, reduction}
//   ScatterND                                            scatter_nd {reduction}
//   GatherND                                             gather_nd {batch_dims}
//   ReverseSequence                                      reverse_sequence {batch_axis, time_axis}
//   CumSum                                               cumsum {axis, exclusive, reverse}; a
//                                                        run-time axis stays an operand
//   Det                                                  det
//
// Indices are run-time values: the kernels normalise negative ones and report an out-of-range
// one naming the node. Reductions none, add and mul map; max and min (opset 18) are refused.
#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

Expected<std::string> read_reduction(OnnxNode& n) {
  std::string r = n.attr_string("reduction", "none");
  if (r != "none" && r != "add" && r != "mul")
    return n.error("attribute 'reduction' = \"" + r + "\" is not supported");
  return r;
}

Status convert_scatter_elements(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(std::string reduction, read_reduction(n));
  int64_t axis = n.attr_int("axis", 0);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId data, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId idx, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId upd, ctx.value(n, 2));
  return ctx.set_output(
      n, 0, ctx.emit(Op::ScatterElements, {data, idx, upd}, {{"axis", axis}, {"reduction", reduction}}));
}

Status convert_scatter_nd(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(std::string reduction, read_reduction(n));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId data, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId idx, ctx.value(n, 1));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId upd, ctx.value(n, 2));
  return ctx.set_output(n, 0, ctx.emit(Op::ScatterNd, {data, idx, upd}, {{"reduction", reduction}}));
}

Status convert_gather_nd(ImportContext& ctx, OnnxNode& n) {
  int64_t batch_dims = n.attr_int("batch_dims", 0);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId data, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId idx, ctx.value(n, 1));
  return ctx.set_output(n, 0, ctx.emit(Op::GatherNd, {data, idx}, {{"batch_dims", batch_dims}}));
}

Status convert_reverse_sequence(ImportContext& ctx, OnnxNode& n) {
  int64_t batch_axis = n.attr_int("batch_axis", 1), time_axis = n.attr_int("time_axis", 0);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId lens, ctx.value(n, 1));
  return ctx.set_output(
      n, 0, ctx.emit(Op::ReverseSequence, {x, lens}, {{"batch_axis", batch_axis}, {"time_axis", time_axis}}));
}

Status convert_cumsum(ImportContext& ctx, OnnxNode& n) {
  bool exclusive = n.attr_int("exclusive", 0) != 0, reverse = n.attr_int("reverse", 0) != 0;
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  Attrs attrs{{"exclusive", exclusive}, {"reverse", reverse}};
  // A known axis becomes the attribute; one computed at run time stays an operand.
  if (const Array* a = ctx.constant(n, 1); a && a->numel() == 1) {
    attrs.set("axis", a->get_i64(0));
    return ctx.set_output(n, 0, ctx.emit(Op::CumSum, {x}, std::move(attrs)));
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId axis, ctx.value(n, 1));
  return ctx.set_output(n, 0, ctx.emit(Op::CumSum, {x, axis}, std::move(attrs)));
}

Status convert_det(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  return ctx.set_output(n, 0, ctx.emit(Op::Det, {x}));
}

}  // namespace

void add_indexing_converters(ConverterTable& table) {
  table["ScatterElements"] = convert_scatter_elements;
  table["Scatter"] = convert_scatter_elements;
  table["ScatterND"] = convert_scatter_nd;
  table["GatherND"] = convert_gather_nd;
  table["ReverseSequence"] = convert_reverse_sequence;
  table["CumSum"] = convert_cumsum;
  table["Det"] = convert_det;
}

}  // namespace fusebox::onnx_import
