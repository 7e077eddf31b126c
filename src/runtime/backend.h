// What the runtime needs from a backend: compile each node of a (fused) graph into a kernel
// once, then run kernels on host arrays. Kernels are immutable and may run on several threads.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "backends/cpu/region_program.h"
#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox {

class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  // `outputs` are allocated with the node's concrete result shapes; contents undefined.
  virtual Status run(std::span<const Array> inputs, std::span<Array> outputs) const = 0;
  virtual std::string_view kind() const = 0;  // "region", "elementwise", "reference"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual Expected<std::shared_ptr<const CompiledKernel>> compile(const Graph& g, const Node& n) const = 0;
};

// Fast CPU: elementwise_region nodes and lone element-wise ops through the region executor
// (generated code or the tiled interpreter, as `codegen` says); every other op through its
// reference kernel.
const Backend& cpu_backend(cpu::Codegen codegen = cpu::Codegen::Auto);
// Every node through the reference kernels: the oracle. A region runs its body op by op at
// full size.
const Backend& reference_backend();

}  // namespace fusebox
