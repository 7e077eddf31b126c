#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <vector>

#include "backends/assign_blocked_layout.h"
#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/batch_kernel.h"
#include "backends/cpu/column_reduce_kernel.h"
#include "backends/cpu/contraction_kernel.h"
#include "backends/cpu/global_pool_kernel.h"
#include "backends/cpu/onednn/onednn_kernels.h"
#include "backends/cpu/prologue_kernel.h"
#include "backends/cpu/reduction_kernel.h"
#include "backends/cpu/reference_backend.h"
#include "backends/cpu/row_kernels.h"
#include "backends/cpu/transform_kernel.h"
#include "backends/cpu/transform_step_kernel.h"
#include "backends/host_backend.h"
#include "ir/reduction_region.h"
#include "ir/region_prologue.h"

namespace fusebox {

std::string_view codegen_name(cpu::Codegen c) {
  switch (c) {
    case cpu::Codegen::Interpreter: return "interpreter";
    case cpu::Codegen::Jit: return "jit";
    case cpu::Codegen::Auto: break;
  }
  return "auto";
}

std::optional<cpu::Codegen> parse_codegen(std::string_view name) {
  for (cpu::Codegen c : {cpu::Codegen::Auto, cpu::Codegen::Interpreter, cpu::Codegen::Jit}) {
    if (codegen_name(c) == name) return c;
  }
  return std::nullopt;
}

std::string cpu_layout_name(int64_t nchwc_block) {
  if (nchwc_block == CpuBackendOptions::kAutoBlock) return "auto";
  if (nchwc_block == 0) return "nchw";
  if (nchwc_block == CpuBackendOptions::kNhwc) return "nhwc";
  return "nchw" + std::to_string(nchwc_block) + "c";
}

std::optional<int64_t> parse_cpu_layout(std::string_view name) {
  for (int64_t b : {CpuBackendOptions::kAutoBlock, int64_t(0), int64_t(4), int64_t(8), int64_t(16),
                    CpuBackendOptions::kNhwc}) {
    if (cpu_layout_name(b) == name) return b;
  }
  return std::nullopt;
}

namespace cpu {

namespace {

class RegionKernel final : public Kernel {
 public:
  RegionKernel(std::shared_ptr<const RegionProgram> p, bool region) : program_(std::move(p)), region_(region) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return program_->run(ins, outs);
  }
  std::string_view kind() const override { return region_ ? "region" : "elementwise"; }

 private:
  std::shared_ptr<const RegionProgram> program_;
  bool region_;
};

// A transform_region as one pass over its output (transform_kernel.h).
class TransformKernel final : public Kernel {
 public:
  explicit TransformKernel(std::shared_ptr<const TransformPlan> p) : plan_(std::move(p)) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return run_transform_plan(*plan_, ins[0], outs[0]);
  }
  std::string_view kind() const override { return "transform"; }

 private:
  std::shared_ptr<const TransformPlan> plan_;
};

static_assert(CpuBackendOptions::kNhwc == kNhwcBlock);

class CpuBackend final : public HostBackend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options) : options_(options) {}
  std::string_view name() const override { return "cpu"; }
  Claim claims(const Graph&, const Node&) const override { return Claim::accept(); }
  Expected<Graph> lower(const Graph& fused) const override {
    FUSEBOX_ASSIGN_OR_RETURN(Graph g, unfuse_unrunnable_reductions(fused));
    if (!options_.onednn || !onednn::available() || options_.nchwc_block == 0) return g;
    bool has_conv = std::any_of(g.nodes().begin(), g.nodes().end(), [](const Node& n) {
      return n.op == Op::Conv2d || n.op == Op::FusedConvBiasAct || n.op == Op::Conv2dInteger;
    });
    if (!has_conv) return g;
    int64_t block = options_.nchwc_block;
    if (block == CpuBackendOptions::kAutoBlock) {
      // With AVX-512 oneDNN runs its brgemm convolutions on NHWC, and no channel count is left
      // out: PaddleOCR cls 1.65 -> 1.18 ms, det 15.6 -> 14.9 ms on one thread against nChw16c
      // (docs/benchmarks.md, "Channels-last"). Elsewhere the host's block.
      int64_t preferred = onednn::preferred_nchwc_block();
      block = preferred == 16 ? CpuBackendOptions::kNhwc : preferred;
    }
    BlockedLayoutOptions layout;
    layout.block = block;
    // oneDNN's int8 convolutions read and write NHWC (reorders around each one otherwise); they
    // run only where their result is exact (onednn/integer.cpp), elsewhere the reference would
    // pay the layout's conversions for nothing.
    layout.integer_convs = block == CpuBackendOptions::kNhwc && onednn::int8_exact();
    return assign_blocked_layout(g, layout);
  }
  // A reduction region the row kernel cannot run (a step with neither a tile loop nor generated
  // code, in this build or with the interpreter asked for; a body it does not cover) runs as its
  // body's nodes, each on its own kernel, as if it had not been fused: the reference kernels
  // would run the body a node at a time on one thread, far slower than the unfused graph.
  Expected<Graph> unfuse_unrunnable_reductions(const Graph& g) const {
    auto unrunnable = [&](const Node& n) {
      return n.op == Op::ReductionRegion && n.body &&
             !make_reduction_kernel(g, n, best_row_isa(), options_.codegen);
    };
    if (std::none_of(g.nodes().begin(), g.nodes().end(), unrunnable)) return g;
    Graph out = g;
    FUSEBOX_RETURN_IF_ERROR(inline_reduction_regions(out, unrunnable).status());
    return out;
  }

  Expected<std::shared_ptr<const Kernel>> compile(const Graph& g, const Node& n) const override {
    std::vector<TensorType> in;
    for (ValueId v : n.inputs) in.push_back(g.type(v));
    if (n.op == Op::TransformRegion) {
      // Chains the plan does not cover run their steps one by one (the reference kernel).
      if (auto plan = plan_transform_region(n)) return std::shared_ptr<const Kernel>(std::make_shared<TransformKernel>(std::move(plan)));
      return make_reference_kernel(n);
    }
    if (n.op == Op::ReductionRegion) {
      // lower() unfused the regions the row kernel does not take; a graph compiled without it
      // runs such a body's nodes one by one (the reference).
      if (auto rows = make_reduction_kernel(g, n, best_row_isa(), options_.codegen)) return rows;
      return make_reference_kernel(n);
    }
    if (prologue_input(n) >= 0) return make_prologue_kernel(g, n, options_.codegen);
    // A lone resize, transpose, slice, pad or flip: one pass over its output.
    if (auto step = make_transform_step_kernel(g, n)) return step;
    if (n.op == Op::BatchElementwiseRegion) {
      FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> batch, make_batch_kernel(n, options_.codegen));
      return batch ? batch : make_reference_kernel(n);  // shapes not static: item by item, reference
    }
    bool region = n.op == Op::ElementwiseRegion;
    if (region || (n.outputs.size() == 1 && RegionProgram::supports(n, in, g.type(n.outputs[0])))) {
      FUSEBOX_ASSIGN_OR_RETURN(auto program, RegionProgram::compile(n, in, options_.codegen));
      return std::shared_ptr<const Kernel>(std::make_shared<RegionKernel>(std::move(program), region));
    }
    // Softmax and the norms (plain or fused with a residual), f32 over the last axis.
    if (std::shared_ptr<const Kernel> rows = make_row_kernel(g, n, best_row_isa())) return rows;
    // A lone reduction over the trailing axes, f32: the reduction kernel's passes; over axes
    // before the last, f32 or f64: columns accumulated as the reference does.
    if (auto reduce = make_row_reduce_kernel(g, n, best_row_isa(), options_.codegen)) return reduce;
    if (auto reduce = make_column_reduce_kernel(g, n)) return reduce;
    if (auto attention = make_attention_kernel(g, n)) return attention;
    if (auto pool = make_global_pool_kernel(g, n)) return pool;
    if (options_.onednn) {
      FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> k,
                               make_onednn_kernel(g, n, options_.codegen, options_.winograd));
      if (k) return k;
    }
    return make_reference_kernel(n);
  }

 private:
  CpuBackendOptions options_;
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_shared<CpuBackend>(options);
}

}  // namespace cpu
}  // namespace fusebox
