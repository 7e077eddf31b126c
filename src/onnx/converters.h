// The converters: one function per ONNX op type (or family), each reading its node through
// OnnxNode (which refuses anything left unread) and defining the node's outputs in the context.
// A converter returns an error naming the node for anything it cannot express exactly.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "onnx/import_context.h"

namespace fusebox::onnx_import {

using Converter = Status (*)(ImportContext& ctx, OnnxNode& n);
using ConverterTable = std::map<std::string, Converter, std::less<>>;

// Element-wise ops, Cast, Where, Clip, variadic Max/Min/Sum/Mean (convert_elementwise.cpp).
void add_elementwise_converters(ConverterTable& table);
// Conv, ConvTranspose, pools, BatchNormalization, MatMul, Gemm, Softmax, LayerNormalization,
// reductions (convert_nn.cpp).
void add_nn_converters(ConverterTable& table);
// Resize and Upsample (convert_resize.cpp).
void add_resize_converters(ConverterTable& table);
// Shape, Size, Constant, ConstantOfShape, Range, Reshape, Flatten, Squeeze, Unsqueeze
// (convert_shape.cpp).
void add_shape_converters(ConverterTable& table);
// Transpose, Concat, Slice, Split, Gather, Expand, Pad (convert_tensor.cpp).
void add_tensor_converters(ConverterTable& table);
// Ops written as compositions of fusebox ops: Xor, IsNaN, IsInf, Sign, ThresholdedRelu, Shrink,
// Elu, Celu, CastLike, ReduceL1/L2/SumSquare/LogSum/LogSumExp (convert_decomposed.cpp).
void add_decomposed_converters(ConverterTable& table);
// Trilu, Hardmax, DepthToSpace, SpaceToDepth, EyeLike with constants computed from static sizes
// (convert_decomposed_tensor.cpp).
void add_decomposed_tensor_converters(ConverterTable& table);
// ScatterElements, Scatter, ScatterND, GatherND, ReverseSequence, CumSum, Det
// (convert_indexing.cpp).
void add_indexing_converters(ConverterTable& table);
// LRN, MeanVarianceNormalization as compositions (convert_decomposed_nn.cpp).
void add_decomposed_nn_converters(ConverterTable& table);
// Einsum as transpose/reshape/slice/reduce_sum/matmul (convert_einsum.cpp).
void add_einsum_converters(ConverterTable& table);
// HannWindow, HammingWindow, BlackmanWindow folded to constants (convert_window.cpp).
void add_window_converters(ConverterTable& table);
// QuantizeLinear, DequantizeLinear as element-wise compositions (convert_quantize.cpp).
void add_quantize_converters(ConverterTable& table);
// RNN, GRU, LSTM unrolled over the static sequence length (convert_recurrent.cpp).
void add_recurrent_converters(ConverterTable& table);
// Adagrad, Adam, Momentum of the ai.onnx.preview.training domain (convert_training.cpp).
void add_training_converters(ConverterTable& table);
// DFT, STFT as products with constant cos/sin matrices; MelWeightMatrix folded (convert_signal.cpp).
void add_signal_converters(ConverterTable& table);
// TopK as rounds of argmax (convert_topk.cpp).
void add_topk_converters(ConverterTable& table);
// If, Loop, Scan resolved at import: the branch its known condition picks, the body unrolled
// over a known trip count or sequence length (convert_control.cpp).
void add_control_converters(ConverterTable& table);

// The value as a graph value (a constant emitted), or an error naming the node and `what` (a
// sequence, an optional, or sizes known only at run time).
Expected<ValueId> as_value(ImportContext& ctx, OnnxNode& n, OnnxValue& v, const std::string& what);
// Converts `body` (a subgraph of node n) in a scope of its own, its inputs bound to `inputs` by
// position; returns what its outputs stand for. Errors inside name the node, `where` (the branch,
// the iteration) and the body's node.
Expected<std::vector<OnnxValue>> import_body(ImportContext& ctx, OnnxNode& n, const onnx::GraphProto& body,
                                             const std::vector<OnnxValue>& inputs, const std::string& where);

// The values, each given a size-1 axis at `axis`, concatenated along it (Loop's and Scan's scan
// outputs, ConcatFromSequence's new_axis).
Expected<ValueId> stack(ImportContext& ctx, OnnxNode& n, std::vector<ValueId> values, int64_t axis);

// SequenceConstruct, SequenceEmpty, SequenceAt, SequenceInsert, SequenceErase, SequenceLength,
// SplitToSequence, ConcatFromSequence, SequenceMap, Optional, OptionalHasElement,
// OptionalGetElement on sequences and optionals resolved at import (convert_sequence.cpp).
void add_sequence_converters(ConverterTable& table);

// Compress, NonZero, Unique, NonMaxSuppression: output sizes fixed by input values known at import
// (convert_data_dependent.cpp).
void add_data_dependent_converters(ConverterTable& table);

// GridSample, RoiAlign, MaxUnpool as gathers, scatters and element-wise math
// (convert_spatial.cpp).
void add_spatial_converters(ConverterTable& table);

// The domain of ONNX's training ops. The converter table keys an op of another domain than the
// default one as "<domain>:<op type>".
inline constexpr std::string_view kTrainingDomain = "ai.onnx.preview.training";
std::string converter_key(std::string_view domain, std::string_view op_type);

// TfIdfVectorizer over integer token ids as comparisons with the constant pool of n-grams
// (convert_tfidf.cpp).
void add_tfidf_converters(ConverterTable& table);

// Every converter, by ONNX op type (by converter_key for the training domain).
const ConverterTable& converters();

// Shared helpers.
// An axis attribute/input normalised to [0, rank), or an error naming the node.
Expected<int> normalize_onnx_axis(const OnnxNode& n, int64_t axis, int rank, const std::string& what);
// The window attributes of Conv/ConvTranspose/pools over [N,C,spatial...] (1 to 3 spatial axes)
// resolved per axis: kernel, stride, dilation, and explicit pads [begins..., ends...] (auto_pad
// SAME_UPPER/SAME_LOWER/VALID included). For 2-D that is fusebox's [top, left, bottom, right].
struct Window {
  std::vector<int64_t> kernel, stride, dilation, pads;
  size_t axes() const { return kernel.size(); }
  // A 1-D window as the 2-D one over [N,C,1,L] (others unchanged).
  Window lifted() const;
};
Expected<Window> read_window(ImportContext& ctx, OnnxNode& n, const TensorType& x,
                             std::vector<int64_t> kernel, bool has_dilation);

// Conv's product of x and w with the node's window attributes (kernel_shape, strides, pads,
// dilations, auto_pad, group); 1-D and 2-D. `rest` follows x and w as operands of `op`: conv2d's
// optional bias, or conv2d_integer's two zero points (ConvInteger and QLinearConv).
Expected<ValueId> emit_conv(ImportContext& ctx, OnnxNode& n, ValueId x, ValueId w,
                            std::vector<ValueId> rest = {}, Op op = Op::Conv2d);

// 1-D windows run as 2-D ones over a size-1 height (convert_window_dims.cpp): [N,C,L] ->
// [N,C,1,L] and back.
Expected<ValueId> lift_1d(ImportContext& ctx, OnnxNode& n, ValueId x);
Expected<ValueId> drop_lifted_axis(ImportContext& ctx, OnnxNode& n, ValueId y);
// MaxPool and AveragePool over [N,C,D,H,W] as two 2-D pools, (H,W) then D (both are separable).
Status convert_pool_3d(ImportContext& ctx, OnnxNode& n);
// ConvTranspose over [N,C,D,H,W] (convert_window_dims.cpp): one 2-D transposed product over
// (H, W) for every kernel depth at once, then one over D that places each depth's slice. `win`
// holds the resolved kernel, strides, dilations and pads [d0,h0,w0,d1,h1,w1] (negative pads
// extend the output with zeros); sets the node's output.
Status convert_conv_transpose_3d(ImportContext& ctx, OnnxNode& n, ValueId x, ValueId w, const Window& win,
                                 const std::vector<int64_t>& out_pad);
// A rank-0 constant of `dtype` holding v (convert_decomposed.cpp).
ValueId scalar_constant(ImportContext& ctx, DType dtype, double v);
// Activations written as compositions, as ONNX defines the ops of the same names
// (convert_decomposed.cpp): where(x > alpha, x, 0); where(x < 0, alpha * (exp(x) - 1), x);
// x / (1 + |x|); log(1 + exp(x)) in a form that cannot overflow.
ValueId emit_thresholded_relu(ImportContext& ctx, ValueId x, double alpha);
ValueId emit_elu(ImportContext& ctx, ValueId x, double alpha);
ValueId emit_softsign(ImportContext& ctx, ValueId x);
ValueId emit_softplus(ImportContext& ctx, ValueId x);

// MaxPool over [N,C,H,W] with max_pool2d's attributes (convert_topk.cpp): Y, with 8-bit integer
// inputs pooled in f32, and the Indices output when the node has one. `lifted`: x is a 1-D
// pool's [N,C,1,L] (lift_1d), and the outputs drop that height again.
Status convert_max_pool_2d(ImportContext& ctx, OnnxNode& n, ValueId x, Attrs attrs, bool lifted);

}  // namespace fusebox::onnx_import
