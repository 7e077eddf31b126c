// cuDNN 9, loaded at run time (loader.h): the table of entry points the convolution kernels use
// (conv_kernel.h, conv_transpose_kernel.h), resolved once per process. Types and constants come from the toolkit's
// cudnn.h, read only at build time; nothing links libcudnn. On machines where cuDNN ships in
// PyTorch's wheels (site-packages/nvidia/cudnn/lib) it is found there too. Loading needs no GPU.
//
// The legacy convolution API (cudnn_cnn.h) is used: deprecated in cuDNN 9 but still there, and
// enough for NCHW convolutions with a bias, a residual and a relu fused in one call.
#pragma once

// FUSEBOX_HAVE_CUDNN: the build found cuDNN's headers (cmake/Optional.cmake); without them the
// conv kernels refuse every node (conv_kernel.cpp).
#ifdef FUSEBOX_HAVE_CUDNN

#include <cudnn.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "backends/cuda/context.h"
#include "fusebox/status.h"

namespace fusebox::cuda {

#define FUSEBOX_CUDNN_FUNCTIONS(X)                \
  X(cudnnGetVersion)                              \
  X(cudnnGetErrorString)                          \
  X(cudnnCreate)                                  \
  X(cudnnSetStream)                               \
  X(cudnnCreateTensorDescriptor)                  \
  X(cudnnSetTensor4dDescriptor)                   \
  X(cudnnSetTensor4dDescriptorEx)                 \
  X(cudnnDestroyTensorDescriptor)                 \
  X(cudnnCreateFilterDescriptor)                  \
  X(cudnnSetFilter4dDescriptor)                   \
  X(cudnnDestroyFilterDescriptor)                 \
  X(cudnnCreateConvolutionDescriptor)             \
  X(cudnnSetConvolution2dDescriptor)              \
  X(cudnnSetConvolutionGroupCount)                \
  X(cudnnSetConvolutionMathType)                  \
  X(cudnnGetConvolution2dForwardOutputDim)        \
  X(cudnnDestroyConvolutionDescriptor)            \
  X(cudnnCreateActivationDescriptor)              \
  X(cudnnSetActivationDescriptor)                 \
  X(cudnnDestroyActivationDescriptor)             \
  X(cudnnGetConvolutionForwardAlgorithm_v7)       \
  X(cudnnFindConvolutionForwardAlgorithmEx)       \
  X(cudnnGetConvolutionForwardWorkspaceSize)      \
  X(cudnnConvolutionForward)                      \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)  \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize) \
  X(cudnnConvolutionBackwardData)                 \
  X(cudnnConvolutionBiasActivationForward)        \
  X(cudnnAddTensor)                               \
  X(cudnnActivationForward)

struct Cudnn {
#define FUSEBOX_CUDNN_MEMBER(f) decltype(&::f) f = nullptr;
  FUSEBOX_CUDNN_FUNCTIONS(FUSEBOX_CUDNN_MEMBER)
#undef FUSEBOX_CUDNN_MEMBER

  // "CUDNN_STATUS_NOT_SUPPORTED" (cudnnGetErrorString's text, or the number).
  std::string status_text(cudnnStatus_t s) const;
  // ok, or an execution error "<what>: <status_text>".
  Status check(cudnnStatus_t s, const std::string& what) const;
  // "9.19.0" (cudnnGetVersion's number spelled out).
  std::string version() const;
};

// The library, loaded on first call; an error names libcudnn and where it was searched for
// (PyTorch's wheels included), or the symbol it lacks, and is the same on every later call.
Expected<const Cudnn*> cudnn();

// One handle per GPU, shared by every cuDNN kernel on it, bound to the context's stream. A cuDNN
// handle must not be used by two threads at once: `mu` is held while a call is enqueued.
struct DnnDevice {
  cudnnHandle_t handle = nullptr;
  std::mutex mu;
};
Expected<DnnDevice*> dnn_device(Context& context, const Cudnn& dnn);

// The descriptors of one convolution (cross-correlation, accumulating in f32, f16 too: cuDNN's
// PSEUDO_HALF_CONFIG): tensors x [s0..s3] and y [s8..s11] and the filter w [s4..s7], dims given
// as N,C,H,W (filter K,C,R,S) whatever the format (NCHW, or NHWC: x and y channels-last, the
// filter K,R,S,C), a per-channel bias [1, s9, 1, 1] of y, and the convolution with the top/left
// pads on both sides.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};
struct ConvGeometry {
  int64_t pad_top, pad_left, stride_h, stride_w, dilation_h, dilation_w, groups;
};
// f16 on tensor cores; f32 with FMA math, or CUDNN_DEFAULT_MATH where TF32 is allowed (it lets
// cuDNN use TF32 tensor cores on Ampere and later).
inline cudnnMathType_t conv_math(DType dtype, bool tf32) {
  return dtype == DType::F16 ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}
// Creates and sets them (what was created stays in `p` on failure: destroy it then too).
Status make_conv_descriptors(const Cudnn& d, const std::array<int64_t, 12>& s, cudnnDataType_t type,
                             const ConvGeometry& g, cudnnMathType_t math, ConvDescriptors& p,
                             cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW);
void destroy_conv_descriptors(const Cudnn& d, ConvDescriptors& p);

}  // namespace fusebox::cuda

#endif  // FUSEBOX_HAVE_CUDNN
