#include "backends/cuda/conv_layout.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "backends/assign_blocked_layout.h"
#include "backends/cuda/conv_kernel.h"

namespace fusebox::cuda {

namespace {

// FUSEBOX_CUDA_NHWC (read once): -1 unset, 0 off, 1 on.
int nhwc_from_env() {
  static const int forced = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_NHWC");
    if (!e || !*e) return -1;
    return std::string_view(e) == "0" ? 0 : 1;
  }();
  return forced;
}

// Auto is NCHW: on an H100, NHWC ran resnet50 in f16 at batch 1 in 0.42 ms against 0.62, but
// efficientnet_b0 at batch 1 in 0.67 against 0.55 and both models at batch 32 slower (cuDNN's
// legacy heuristics, its NHWC depthwise convolutions; docs/benchmarks.md).
std::vector<DType> nhwc_dtypes(CudaConvLayout layout) {
  if (layout == CudaConvLayout::Auto && nhwc_from_env() == 1) layout = CudaConvLayout::Nhwc;
  if (layout == CudaConvLayout::Nhwc) return {DType::F16, DType::F32};
  return {};
}

}  // namespace

Expected<Graph> assign_conv_layout(const Graph& g, const CudaBackendOptions& options) {
  BlockedLayoutOptions layout;
  layout.block = kNhwcBlock;
  layout.dtypes = nhwc_dtypes(options.conv_layout);
  layout.bare_1x1_plain = false;
  layout.constant_weights = true;
  const bool has_conv = std::any_of(g.nodes().begin(), g.nodes().end(), [&](const Node& n) {
    return (n.op == Op::Conv2d || n.op == Op::FusedConvBiasAct) &&
           std::count(layout.dtypes.begin(), layout.dtypes.end(), g.type(n.inputs[0]).dtype);
  });
  if (!has_conv) return g;
  if (!cudnn_available().is_ok()) return g;  // the convolutions run on the CPU, in NCHW
  return assign_blocked_layout(g, layout);
}

}  // namespace fusebox::cuda
