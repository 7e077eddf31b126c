// Depthwise convolutions (groups = input channels = output channels, weights [C,1,kh,kw]) as one
// NVRTC kernel with the epilogue inside, in place of cuDNN's convolution and the epilogue pass.
//
//   why      cuDNN's legacy API runs NCHW depthwise convolutions far below the memory bandwidth
//            they need (efficientnet_b0 at batch 32 spent most of its time there, docs/cuda.md);
//            a depthwise convolution does kh*kw multiply-adds per result and reads each input
//            from the cache up to kh*kw times: few enough to run near the bandwidth when a
//            thread shares its loads among several results.
//   kernel   a thread computes R results along the width (4; FUSEBOX_CUDA_DEPTHWISE_OUTPUTS sets
//            1 to 8), loading each kernel row's inputs once for all R; kh, kw, strides, pads,
//            dilations, R, the layout, the dtype and the epilogue are constants of the source
//            (one compile per kind of node), sizes are arguments. NCHW: a block row per (n, c)
//            plane, threads along the plane; NHWC ([N,1,H,W,C]): a block row per (n, output
//            row), threads along (w / R, c). Taps in the padding are skipped (any pads,
//            asymmetric included).
//   math     f32 sums the taps with fmaf in row-major tap order, from zero; f16 loads to f32, sums
//            the same way and rounds the sum to f16 before the epilogue, as the result cuDNN
//            writes would be. The epilogue is conv_epilogue.h's (bias, residual, activation with
//            the reference's rounding).
//   choice   make_conv_kernel takes this kernel for every depthwise node unless
//            FUSEBOX_CUDA_DEPTHWISE=0 (read once), which keeps cuDNN's (for comparisons).
#pragma once

#include <array>
#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/context.h"
#include "fusebox/status.h"
#include "ir/epilogue.h"

namespace fusebox::cuda {

// What the kernel's source is made of: one depthwise node's constants.
struct DepthwiseConv {
  DType dtype = DType::F32;  // f32 or f16
  std::array<int64_t, 2> kernel{3, 3}, stride{1, 1}, dilation{1, 1};
  std::array<int64_t, 2> pad{0, 0};  // top, left (bottom and right only shape the result)
  bool nhwc = false;                 // activations [N,1,H,W,C], else NCHW
  Epilogue epilogue;
  int bias = -1, residual = -1;  // operand positions (-1: none)
};

// Whether the depthwise kernel should run conv node `n` of `g` (which claim_conv accepted); a
// refusal says why (not depthwise, a channel multiplier, weights of run-time size, turned off).
Status depthwise_fits(const Graph& g, const Node& n);

// The kernel's CUDA C++ source; its entry is fb_depthwise_conv.
std::string depthwise_source(const DepthwiseConv& c);

// The kernel of a node depthwise_fits accepted.
Expected<std::shared_ptr<const Kernel>> make_depthwise_kernel(std::shared_ptr<Context> context,
                                                              const DepthwiseConv& c);

// Depthwise convolutions this kernel ran so far in this process (tests check which way ran).
uint64_t depthwise_runs();

}  // namespace fusebox::cuda
