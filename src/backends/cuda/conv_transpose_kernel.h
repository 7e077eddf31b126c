// conv_transpose2d on the GPU: cuDNN's backward-data convolution (cudnnConvolutionBackwardData),
// which is a transposed convolution: y[n, o, ih*s - pad_top + ky*d, ...] += x[n, c, ih, ...] *
// w[c, o % Og, ky, ...] (src/backends/cpu/reference/conv.cpp). The weight [C, O/groups, KH, KW]
// is the filter of the forward convolution from y's shape to x's.
//
//   claimed  rank-4 NCHW f32 or f16 operands, any stride, dilation and groups, an optional bias
//            [O], and pads and output_padding with 0 <= pad_begin - pad_end + output_padding <
//            stride on each axis: cuDNN pads both sides alike (with pad_begin), and the forward
//            convolution of the typed result then gives back x's size exactly (the extra rows
//            of output_padding receive what the reference gives them). Refused otherwise, with
//            the reason.
//   math     as conv_kernel.h: f32 with CUDNN_FMA_MATH unless CudaBackendOptions::allow_tf32,
//            f16 on tensor cores accumulating in f32; no FFT or Winograd algorithm; a
//            deterministic algorithm first (ALGO_1), the atomic one (ALGO_0) only without it.
//   bias     added after the convolution (cudnnAddTensor): one more rounding than the
//            reference's double sum.
//   run      descriptors and algorithm per (x, w, y) shape, made at the first run of each and
//            kept; the result size is checked against the node's arithmetic and cuDNN's.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

// Whether the CUDA backend runs conv_transpose2d node `n` of `g` through cuDNN; a refusal says why.
Claim claim_conv_transpose(const Graph& g, const Node& n);

Expected<std::shared_ptr<const Kernel>> make_conv_transpose_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                                   const Node& n, bool allow_tf32 = false);

}  // namespace fusebox::cuda
