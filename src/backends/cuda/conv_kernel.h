// conv2d and fused_conv_bias_act on the GPU through cuDNN's legacy convolution API (cudnn.h).
//
//   claimed  NCHW (the plain layout) rank-4 operands of f32 or f16, or NHWC ones (layout =
//            "nhwc", activations [N,1,H,W,C], weights a graph constant reordered to cuDNN's
//            K,R,S,C filter order once when the kernel is made), any stride, dilation and
//            groups (depthwise included), symmetric pads (or asymmetric ones that give the
//            result cuDNN's symmetric top/left pads give), an optional per-channel bias [O], an
//            optional residual of the result's shape, and every activation of the epilogue.
//            Everything else is refused with the reason, so the CPU runs it.
//   math     f32 accumulates in f32 with CUDNN_FMA_MATH: CUDNN_DEFAULT_MATH lets cuDNN use TF32
//            tensor cores on Ampere and later (10 bits of mantissa), which the reference does
//            not. f16 runs on tensor cores (CUDNN_TENSOR_OP_MATH) accumulating in f32. Only the
//            GEMM-based and direct algorithms are chosen: FFT and Winograd round in transformed
//            space, so their errors scale with the largest value, not with each result.
//   1x1      a 1x1 convolution at stride 1 without pads or groups, NCHW, may run as one cuBLASLt
//            strided-batch product (lt_gemm.h): y[n] [K,H*W] = w [K,C] . x[n] [C,H*W], operands as
//            they lie (cuDNN's tensor-core convolutions reorder NCHW activations around the
//            product); cuDNN runs it where cuBLASLt has no algorithm. FUSEBOX_CUDA_CONV_GEMM=0
//            keeps cuDNN; =timed times both ways on the first run of each shape (three runs
//            each, into a scratch result) and keeps the faster (not yet run on a GPU).
//   epilogue the convolution, then one NVRTC kernel for bias, residual and activation
//            (conv_epilogue.h); exact f32 with a bias and relu takes cuDNN's
//            cudnnConvolutionBiasActivationForward instead (measured faster there;
//            FUSEBOX_CUDA_CONV_FUSED=1/0 forces either way).
//   run      descriptors and the algorithm are made per input shape at run time and kept in the
//            kernel: cudnnGetConvolutionForwardAlgorithm_v7's first allowed algorithm, or with
//            FUSEBOX_CUDA_CONV_ALGO=measure the fastest allowed one of
//            cudnnFindConvolutionForwardAlgorithmEx, timed once on the run's operands (into a
//            scratch result; not while a CUDA graph is recorded). The workspace comes from the
//            context's pool at every run. One cuDNN handle per GPU, bound to the context's stream.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string_view>

#include "backends/backend.h"
#include "backends/cuda/context.h"
#include "fusebox/status.h"

namespace fusebox::cuda {

// Ok when cuDNN is usable here (its headers were found at build time and the library loads),
// else why not.
Status cudnn_available();

// Whether the CUDA backend runs conv2d / fused_conv_bias_act node `n` of `g` through cuDNN; a
// refusal says why (cuDNN missing, the layout, the dtype, the pads).
Claim claim_conv(const Graph& g, const Node& n);

// The kernel of a node claim_conv accepted; `allow_tf32`: f32 may run on TF32 tensor cores.
Expected<std::shared_ptr<const Kernel>> make_conv_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                         const Node& n, bool allow_tf32 = false);

// Convolutions run so far in this process, by way (tests check which one ran).
struct ConvRuns {
  uint64_t fused = 0;     // one cudnnConvolutionBiasActivationForward
  uint64_t separate = 0;  // cudnnConvolutionForward and the epilogue's own calls
  uint64_t gemm = 0;      // a 1x1 convolution as one cuBLASLt product (and the epilogue's pass)
};
ConvRuns conv_runs();

// Whether `b` is row-major without gaps (size-1 dims may have any stride): what cuDNN's NCHW
// descriptors describe.
bool dense(const BufferView& b);
// Ok when every operand (null ones skipped) is dense and has at most 2^31-1 elements (cuDNN's
// 4-D descriptors and the depthwise kernel index in int32), else which is not, naming `kernel`.
Status dense_int32_operands(std::initializer_list<const BufferView*> operands, std::string_view kernel);
// The x, w and y shapes of a rank-4 convolution, keying its descriptors and algorithm.
using ConvShapes = std::array<int64_t, 12>;
ConvShapes conv_shapes(const BufferView& x, const BufferView& w, const BufferView& y);
// The same of an NHWC convolution (x and y [N,1,H,W,C]), as cuDNN's N, C, H, W.
ConvShapes nhwc_conv_shapes(const BufferView& x, const BufferView& w, const BufferView& y);
// "[2,3,5]", for messages.
std::string dims_text(const std::vector<int64_t>& s);

}  // namespace fusebox::cuda
