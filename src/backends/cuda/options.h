// The cuda backend's options (BackendOptions::cuda, CompileOptions::cuda). Plain data: the
// registry and the runtime see it in every build, with or without the CUDA toolkit.
#pragma once

#include <cstdint>

namespace fusebox {

// Where CNN activations live between the CUDA backend's cuDNN convolutions
// (backends/cuda/conv_layout.h).
enum class CudaConvLayout : uint8_t {
  Auto,  // NCHW; FUSEBOX_CUDA_NHWC=1 asks for NHWC (measured faster only for resnet50 at batch 1)
  Nchw,  // as the graph has them
  Nhwc,  // NHWC for every convolution cuDNN runs (f32 and f16)
};

struct CudaBackendOptions {
  // f32 matmuls and convolutions may run on TF32 tensor cores (10-bit mantissa products, f32
  // sums): about 8x the f32 rate on Hopper, relative errors near 1e-3 instead of 1e-6. Off
  // unless the caller allows it; f16 and bf16 are unaffected.
  bool allow_tf32 = false;
  CudaConvLayout conv_layout = CudaConvLayout::Auto;
};

}  // namespace fusebox
