// The fast CPU backend: elementwise_region nodes and lone element-wise ops through the region
// executor (generated code or the tile interpreter, as `codegen` says); every other op through
// its reference kernel. It claims every node: it is where the runtime places what a target
// backend refuses.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"

namespace fusebox {

struct CpuBackendOptions {
  cpu::Codegen codegen = cpu::Codegen::Auto;
  // Matmul and convolution through oneDNN. No effect yet: the oneDNN kernels are not wired in.
  bool onednn = true;
  bool operator==(const CpuBackendOptions&) const = default;
};

std::string_view codegen_name(cpu::Codegen c);  // "auto", "interpreter", "jit"
std::optional<cpu::Codegen> parse_codegen(std::string_view name);

namespace cpu {
std::shared_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options = {});
}  // namespace cpu

}  // namespace fusebox
