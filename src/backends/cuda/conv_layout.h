// The CUDA backend's convolution layout: asked for (CudaBackendOptions::conv_layout = Nhwc,
// FUSEBOX_CUDA_NHWC=1, `fusebox run --cuda-nhwc`), the backend's lowering keeps CNN activations
// channels-last (NHWC, [N,1,H,W,C]; ir/layout.h) from one cuDNN convolution to the next, through
// the shared blocked-layout lowering (backends/assign_blocked_layout.h). cuDNN's tensor-core
// convolutions work in NHWC and, given NCHW, transpose around the call; measured on an H100, that
// made resnet50 in f16 at batch 1 1.47x faster, and efficientnet_b0 and batch 32 slower, so the
// default stays NCHW (conv_layout.cpp).
//
// What runs in NHWC on the GPU: conv2d / fused_conv_bias_act whose weights are graph constants
// (conv_kernel.h reorders them to cuDNN's K,R,S,C once), max / average / global-average pooling
// (pool_kernel.h), element-wise ops and regions (broadcasting by strides: a bias [1,C,1,1]
// becomes [1,1,1,1,C]); to_nchwc / to_nchw (layout_kernel.h) convert where a value enters or
// leaves, and a one-pixel value [N,C,1,1] (a squeeze-excite vector, the pooled features before
// the classifier) converts by reshape.
#pragma once

#include "backends/cuda/options.h"
#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox::cuda {

// `g` with the convolutions the options choose in NHWC, or `g` itself when none is.
Expected<Graph> assign_conv_layout(const Graph& g, const CudaBackendOptions& options);

}  // namespace fusebox::cuda
