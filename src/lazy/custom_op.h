// Custom ops of the lazy layer: user ops registered by name at any time (before or after tensors
// were used), each with shape/dtype inference, a CPU kernel, an optional CUDA kernel and an
// optional element-wise body. With a body the op is built from existing IR ops when its group is
// compiled, so it fuses into element-wise groups like a built-in op; without one it is a fusion
// boundary: its record runs alone and the lazy layer calls its kernel directly (on a GPU its CUDA
// kernel when it has one, else the CPU kernel on host copies of the operands).
//
//   lazy::CustomOpDef def;
//   def.name = "softplus";
//   def.infer = lazy::same_as_input(0);
//   def.cpu = [](const std::vector<Array>& in, const Attrs&, std::vector<Array>& out) { ...; return
//   Status::ok(); }; def.body = [](GraphBuilder& b, const std::vector<ValueId>& in, const Attrs&) ->
//   Expected<std::vector<ValueId>> {...}; lazy::register_custom_op(std::move(def)); Tensor y =
//   custom_op("softplus", {x});
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/attributes.h"
#include "ir/builder.h"

namespace fusebox::lazy {

struct CustomType {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

// Result types from operand types and attributes; an error names what is wrong.
using CustomInferFn = std::function<Expected<std::vector<CustomType>>(const std::vector<CustomType>&, const Attrs&)>;
// Fills `outputs` (allocated with the inferred types) from `inputs`; an error (or an exception)
// fails the block: the tensors it would compute read as ExecutionError.
using CustomCpuKernel = std::function<Status(const std::vector<Array>& inputs, const Attrs&, std::vector<Array>& outputs)>;
// A device kernel: operand and result views of device memory (contiguous, row-major, of the
// inferred types; results uninitialised), attributes and the device's stream (a CUstream, with the device's
// context current on the calling thread). It enqueues its work on that stream and returns; the
// results stay on the device for the next block. Called for a record on Device::cuda (the CPU
// kernel runs everywhere else); an error (or an exception) fails the block.
using CustomCudaKernel =
    std::function<Status(std::span<const BufferView> inputs, std::span<const BufferView> outputs,
                         const Attrs& attrs, void* stream)>;
// The op written with built-in element-wise IR ops: returns the results of the op.
using CustomBodyFn = std::function<Expected<std::vector<ValueId>>(GraphBuilder&, const std::vector<ValueId>&, const Attrs&)>;

struct CustomOpDef {
  std::string name;
  int min_inputs = 1, max_inputs = -1;  // -1: any number
  CustomInferFn infer;
  CustomCpuKernel cpu;
  CustomCudaKernel cuda;  // optional
  CustomBodyFn body;  // optional: element-wise, fusible
};

// A registered op (immutable); `id` tells registrations apart in the plan-cache key.
struct CustomOp {
  CustomOpDef def;
  uint32_t id = 0;
  bool fusible() const { return static_cast<bool>(def.body); }
};

// Registers an op; fails when the name is empty or taken, or inference or the CPU kernel is missing.
Status register_custom_op(CustomOpDef def);
// Removes the op of that name (records already made keep it); false when there was none.
bool unregister_custom_op(const std::string& name);
// The op registered under `name`, or nullptr.
std::shared_ptr<const CustomOp> find_custom_op(const std::string& name);

// Inference helper: one result with the type of operand `index`.
CustomInferFn same_as_input(size_t index);

}  // namespace fusebox::lazy

namespace fusebox::lazy {

// Runs the op's CPU kernel: allocates results of `types`, calls the kernel (an exception becomes
// an error) and checks it left the results' types alone. Errors name the op.
Expected<std::vector<Array>> run_custom_kernel(const CustomOp& op, const std::vector<Array>& inputs, const Attrs& attrs,
                                               const std::vector<CustomType>& types);

}  // namespace fusebox::lazy
