// The fast CPU backend: elementwise_region nodes and lone element-wise ops through the region
// executor (generated code or the tile interpreter, as `codegen` says); matmul, conv and pooling
// through oneDNN, CNN activations blocked between convolutions; every other op through its
// reference kernel. It claims every node: it is where the runtime places what a target
// backend refuses.
#pragma once

#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"

namespace fusebox {

struct CpuBackendOptions {
  cpu::Codegen codegen = cpu::Codegen::Auto;
  // Matmul, convolution and pooling through oneDNN.
  bool onednn = true;
  // CNN activations kept in the blocked layout nChw<b>c between oneDNN convolutions
  // (cpu/assign_blocked_layout.h; only with oneDNN): kAutoBlock picks the host's layout
  // (NHWC with AVX-512, else onednn::preferred_nchwc_block), 0 keeps every activation NCHW, 4, 8 or 16 force that block,
  // kNhwc channels-last (every value one block of all its channels).
  static constexpr int64_t kAutoBlock = -1;
  static constexpr int64_t kNhwc = -2;  // = kNhwcBlock (backends/assign_blocked_layout.h)
  int64_t nchwc_block = kAutoBlock;
  // 3x3 stride-1 convolutions through oneDNN's Winograd kernels where it has one (f32, AVX-512,
  // groups 1): 1.3-1.9x faster on ResNet-50's 3x3 layers, with about 1e-5 relative error where
  // the direct convolution has about 1e-6 (docs/benchmarks.md, "Winograd"). Off by default: the
  // default keeps results as exact as the unfused graph's.
  bool winograd = false;
  bool operator==(const CpuBackendOptions&) const = default;
};

std::string_view codegen_name(cpu::Codegen c);  // "auto", "interpreter", "jit"
std::optional<cpu::Codegen> parse_codegen(std::string_view name);
// "auto", "nchw", "nchw8c", ..., "nhwc" for CpuBackendOptions::nchwc_block; parse_cpu_layout reads them back.
std::string cpu_layout_name(int64_t nchwc_block);
std::optional<int64_t> parse_cpu_layout(std::string_view name);

namespace cpu {
std::shared_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});
}  // namespace cpu

}  // namespace fusebox
