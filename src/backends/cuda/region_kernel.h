// An elementwise_region (or a lone element-wise op as a one-step body) on the GPU.
//
// At each run the kernel looks at the operands' sizes: all full-size or one element -> the flat
// variant (V-wide accesses when every pointer is aligned); otherwise broadcast strides over the
// output's dims, merged where contiguous, -> the strided variant of that rank. Each variant's
// source is compiled once (Context::function: memory, then disk, then NVRTC) and kept.
#pragma once

#include <map>
#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "backends/cuda/context.h"
#include "backends/cuda/region_codegen.h"
#include "backends/cuda/transform_codegen.h"

namespace fusebox::cuda {

class RegionKernel final : public Kernel {
 public:
  // Fails (unimplemented) when a step has no device code.
  static Expected<std::shared_ptr<const Kernel>> make(std::shared_ptr<Context> context, std::shared_ptr<const Graph> body);
  // A region with a prologue (region_prologue.h): operand k read through its transform.
  static Expected<std::shared_ptr<const Kernel>> make_with_prologue(std::shared_ptr<Context> context, const Node& region);

  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "cuda_region"; }

 private:
  RegionKernel(std::shared_ptr<Context> context, std::shared_ptr<const Graph> body)
      : context_(std::move(context)), body_(std::move(body)) {}
  Expected<CUfunction> function(const RegionVariant& v) const;

  std::shared_ptr<Context> context_;
  std::shared_ptr<const Graph> body_;
  // The prologue, when there is one: operand prologue_.operand is the transform's source.
  RegionPrologue prologue_;
  std::shared_ptr<const DeviceTransform> transform_;
  std::vector<int64_t> read_shape_;  // the transform's result: the shape operand k stands for
  mutable std::mutex mu_;
  mutable std::map<std::string, CUfunction> functions_;  // by RegionVariant::key()
};

// Broadcast strides (in elements) of an operand of `shape` read over `out` (numpy rules: 0 on
// stretched and missing leading dims).
std::vector<int64_t> strides_over(const std::vector<int64_t>& shape, const std::vector<int64_t>& out);

// Dims of `shape` (size-1 dims dropped) with every operand's strides over them, where adjacent
// dims that every operand walks contiguously are one dim: [N,C] + [C] is rank 2 at any rank.
struct MergedDims {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // per operand, per merged dim
};
MergedDims merge_dims(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides);

// The body a node runs as on the GPU: an elementwise_region's own body, or a lone element-wise
// op as a one-step body; null when the node is neither (or has a transform prologue).
std::shared_ptr<const Graph> region_body_of(const Graph& g, const Node& n);

// Why a region with a prologue cannot run on the GPU ("" when it can).
std::string prologue_region_unsupported(const Node& region);

// transform_region on the GPU: one thread per output element through the device transform.
class TransformKernel final : public Kernel {
 public:
  static Expected<std::shared_ptr<const Kernel>> make(std::shared_ptr<Context> context, const Node& region);
  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "cuda_transform"; }

 private:
  TransformKernel(std::shared_ptr<Context> c, std::shared_ptr<const DeviceTransform> t, CUfunction f)
      : context_(std::move(c)), transform_(std::move(t)), function_(f) {}
  std::shared_ptr<Context> context_;
  std::shared_ptr<const DeviceTransform> transform_;
  CUfunction function_;
};

// Why a transform_region cannot run on the GPU ("" when it can).
std::string transform_region_unsupported(const Node& region);

}  // namespace fusebox::cuda
