// The converters: one function per ONNX op type (or family), each reading its node through
// OnnxNode (which refuses anything left unread) and defining the node's outputs in the context.
// A converter returns an error naming the node for anything it cannot express exactly.
#pragma once

#include <map>
#include <string>

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
// DFT, STFT as products with constant cos/sin matrices; MelWeightMatrix folded (convert_signal.cpp).
void add_signal_converters(ConverterTable& table);
// TopK as rounds of argmax (convert_topk.cpp).
void add_topk_converters(ConverterTable& table);

// Every converter, by ONNX op type.
const ConverterTable& converters();

// Shared helpers.
// An axis attribute/input normalised to [0, rank), or an error naming the node.
Expected<int> normalize_onnx_axis(const OnnxNode& n, int64_t axis, int rank, const std::string& what);
// The 2-D window attributes of Conv/ConvTranspose/pools resolved to explicit pads
// [top, left, bottom, right] (auto_pad SAME_UPPER/SAME_LOWER/VALID included).
struct Window2d {
  std::vector<int64_t> kernel, stride, dilation, pads;
};
Expected<Window2d> read_window(ImportContext& ctx, OnnxNode& n, const TensorType& x,
                               std::vector<int64_t> kernel, bool has_dilation);

// MaxPool over [N,C,H,W] with max_pool2d's attributes (convert_topk.cpp): Y, with 8-bit integer
// inputs pooled in f32, and the Indices output when the node has one.
Status convert_max_pool_2d(ImportContext& ctx, OnnxNode& n, ValueId x, Attrs attrs);

}  // namespace fusebox::onnx_import
