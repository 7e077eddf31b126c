// The conv kernels' epilogue: after cudnnConvolutionForward, one CUDA C++ kernel (NVRTC) adds the
// bias and the residual and applies the activation in place, one pass over the result, for every
// epilogue but bias + relu in exact f32, which cuDNN's fused call takes where it supports the
// shapes (cudnnConvolutionBiasActivationForward; conv_kernel.cpp says why), with the reference's
// semantics (prelude.h's device functions; leaky_relu, clip and hardsigmoid as reference/unary.cpp
// computes them, their parameters written into the source as exact floats) and its rounding: for
// f16 the sum is rounded to f16 after each add, as the unfused reference rounds each op's result.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/context.h"
#include "fusebox/status.h"
#include "ir/epilogue.h"

namespace fusebox::cuda {

// The prelude and the device functions of the epilogue for `dtype` (f32 or f16) and `e`: S (the
// element type), fb_in / fb_out (S to and from float) and fb_epilogue(t, bias, r, c, e), which
// adds bias[c] and r[e] (either may be null) to convolution result t and applies the activation.
std::string conv_epilogue_functions(DType dtype, const Epilogue& e);

// The kernel's source for `dtype` (f32 or f16) and epilogue `e`; its entry is fb_conv_epilogue.
std::string conv_epilogue_source(DType dtype, const Epilogue& e);

// Enqueues y[n, c, i] = act(y + bias[c] + r[n, c, i]) over `total` elements of NCHW y with
// `channels` channels of `plane` elements each; bias and r may be null.
Status run_conv_epilogue(Context& context, const std::string& source, int64_t total, int64_t channels,
                         int64_t plane, const void* bias, const void* residual, void* y);

}  // namespace fusebox::cuda
