#include "backends/cuda/cuda_backend.h"

#include <algorithm>

#include "backends/cuda/attention_kernel.h"
#include "backends/cuda/batch_kernel.h"
#include "backends/cuda/batch_norm_kernel.h"
#include "backends/cuda/context.h"
#include "backends/cuda/conv_kernel.h"
#include "backends/cuda/conv_layout.h"
#include "backends/cuda/conv_transpose_kernel.h"
#include "backends/cuda/layout_kernel.h"
#include "backends/cuda/matmul_kernel.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/reduce_kernel.h"
#include "backends/cuda/reduction_kernel.h"
#include "backends/cuda/region_kernel.h"
#include "backends/cuda/row_kernel.h"
#include "backends/cuda/swiglu_kernel.h"
#include "backends/cuda/transform_step_kernel.h"
#include "ir/check.h"
#include "ir/fused_attention_op.h"

namespace fusebox::cuda {

namespace {

// A CUDA graph instantiated from a recording; replays on the context's stream.
class CudaGraph final : public RecordedWork {
 public:
  CudaGraph(std::shared_ptr<Context> c, CUgraph g, CUgraphExec e) : context_(std::move(c)), graph_(g), exec_(e) {}
  ~CudaGraph() override {
    context_->driver().cuGraphExecDestroy(exec_);
    context_->driver().cuGraphDestroy(graph_);
  }
  Status replay() const override {
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    return d.check(d.cuGraphLaunch(exec_, context_->stream()), "replaying a CUDA graph");
  }

 private:
  std::shared_ptr<Context> context_;
  CUgraph graph_;
  CUgraphExec exec_;
};

class CudaStream final : public Stream {
 public:
  explicit CudaStream(std::shared_ptr<Context> c) : context_(std::move(c)) {}
  Device device() const override { return context_->device(); }
  // The CUstream, with the device's context made current on the calling thread (a kernel launched
  // on the stream needs it).
  void* native_handle() const override {
    return context_->make_current().is_ok() ? context_->stream() : nullptr;
  }
  Status sync() override {
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    return d.check(d.cuStreamSynchronize(context_->stream()), "running work on " + context_->device().to_string());
  }
  // Relaxed capture: the memory pool may call cuMemAlloc while a plan is recorded.
  Status begin_recording() override {
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    return d.check(d.cuStreamBeginCapture(context_->stream(), CU_STREAM_CAPTURE_MODE_RELAXED), "recording a CUDA graph");
  }
  Expected<std::shared_ptr<const RecordedWork>> end_recording() override {
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    CUgraph graph = nullptr;
    FUSEBOX_RETURN_IF_ERROR(d.check(d.cuStreamEndCapture(context_->stream(), &graph), "recording a CUDA graph"));
    CUgraphExec exec = nullptr;
    if (Status s = d.check(d.cuGraphInstantiate(&exec, graph, 0), "instantiating a CUDA graph"); !s.is_ok()) {
      d.cuGraphDestroy(graph);
      return s;
    }
    return std::shared_ptr<const RecordedWork>(std::make_shared<CudaGraph>(context_, graph, exec));
  }

 private:
  std::shared_ptr<Context> context_;
};

// A value moved within device memory: reshape (when it is returned) and identity.
class DeviceCopyKernel final : public Kernel {
 public:
  explicit DeviceCopyKernel(std::shared_ptr<Context> c) : context_(std::move(c)) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(in.size() == 1 && out.size() == 1 && in[0].nbytes() == out[0].nbytes()) << "device copy sizes";
    if (!out[0].nbytes()) return Status::ok();
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    return d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(out[0].data), reinterpret_cast<CUdeviceptr>(in[0].data),
                                       out[0].nbytes(), context_->stream()),
                   "copying on the device");
  }
  std::string_view kind() const override { return "cuda_copy"; }

 private:
  std::shared_ptr<Context> context_;
};

// concat: each operand's rows copied into the result side by side (one 2-D copy per operand:
// `outer` rows of the operand's extent on the axis times the inner size).
class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(std::shared_ptr<Context> c, int64_t axis) : context_(std::move(c)), axis_(axis) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    const std::vector<int64_t>& shape = out[0].shape;
    const size_t axis = size_t(axis_ < 0 ? axis_ + int64_t(shape.size()) : axis_);
    FUSEBOX_CHECK(axis < shape.size()) << "concat axis";
    int64_t outer = 1, inner = 1;
    for (size_t a = 0; a < axis; ++a) outer *= shape[a];
    for (size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
    const size_t esize = size_t(dtype_size(out[0].dtype));
    const size_t dst_pitch = size_t(shape[axis] * inner) * esize;
    if (!dst_pitch || !outer) return Status::ok();
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    size_t at = 0;
    for (const BufferView& b : in) {
      const size_t width = size_t(b.shape[axis] * inner) * esize;
      if (width) {
        CUDA_MEMCPY2D c{};
        c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c.srcDevice = reinterpret_cast<CUdeviceptr>(b.data);
        c.srcPitch = width;
        c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c.dstDevice = reinterpret_cast<CUdeviceptr>(out[0].data) + at;
        c.dstPitch = dst_pitch;
        c.WidthInBytes = width;
        c.Height = size_t(outer);
        FUSEBOX_RETURN_IF_ERROR(d.check(d.cuMemcpy2DAsync(&c, context_->stream()), "concat on the device"));
      }
      at += width;
    }
    return Status::ok();
  }
  std::string_view kind() const override { return "cuda_copy"; }

 private:
  std::shared_ptr<Context> context_;
  int64_t axis_;
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<Context> c, const CudaBackendOptions& options)
      : context_(std::move(c)), options_(options), stream_(std::make_unique<CudaStream>(context_)) {}

  std::string_view name() const override { return "cuda"; }
  Device device() const override { return context_->device(); }

  // The convolutions' layout (conv_layout.h); then fused_attention stays one kernel where the
  // tensor-core source covers it (f16/bf16, head dims up to 128, any query count) and, on the
  // float source, for a few queries. Other long sequences run faster unfused (two cuBLASLt products and a row
  // softmax) than on the float source: on the H200, 8 x 16 heads x 1024 queries x 64 in f16 took 4.1 ms there
  // and 0.88 ms unfused (docs/cuda.md). FUSEBOX_CUDA_ATTENTION=simt restores that rule for every dtype.
  Expected<Graph> lower(const Graph& g) const override {
    FUSEBOX_ASSIGN_OR_RETURN(Graph out, assign_conv_layout(g, options_));
    if (std::none_of(out.nodes().begin(), out.nodes().end(),
                     [](const Node& n) { return n.op == Op::FusedAttention; }))
      return out;
    FUSEBOX_ASSIGN_OR_RETURN(AttentionKernelChoice choice, attention_kernel_choice());
    const int arch = context_->arch();
    FUSEBOX_RETURN_IF_ERROR(
        unfuse_attention(out, [&](const Graph& h, const Node& n) { return !attention_kernel_pays(h, n, choice, arch); })
            .status());
    return out;
  }

  Claim claims(const Graph& g, const Node& n) const override {
    if (n.op == Op::Reshape || n.op == Op::Identity || n.op == Op::Concat) return Claim::accept();
    if (std::shared_ptr<const Graph> body = region_body_of(g, n)) {
      Expected<std::string> source = region_source(*body, RegionVariant{});
      if (!source) return Claim::refuse(source.status().message());
      return Claim::accept();
    }
    if (n.op == Op::ElementwiseRegion) {
      const std::string why = prologue_region_unsupported(n);
      return why.empty() ? Claim::accept() : Claim::refuse(why);
    }
    if (n.op == Op::TransformRegion) {
      const std::string why = transform_region_unsupported(n);
      return why.empty() ? Claim::accept() : Claim::refuse(why);
    }
    if (n.op == Op::BatchElementwiseRegion) {
      const std::string why = batch_region_unsupported(n);
      return why.empty() ? Claim::accept() : Claim::refuse(why);
    }
    if (std::optional<Claim> row = claim_row_op(g, n)) return *row;
    if (is_cublaslt_op(n.op)) return claim_matmul(g, n);
    if (std::optional<Claim> c = claim_pool_or_reduce(g, n)) return *c;
    if (n.op == Op::Conv2d || n.op == Op::FusedConvBiasAct) return claim_conv(g, n);
    if (n.op == Op::ReductionRegion) return claim_reduction_region(g, n);
    if (n.op == Op::FusedAttention) return claim_attention(g, n);
    if (n.op == Op::FusedSwiglu) return claim_swiglu(g, n);
    if (is_transform_step_op(n.op)) return claim_transform_step(g, n);
    if (n.op == Op::BatchNorm) return claim_batch_norm(g, n);
    if (n.op == Op::ConvTranspose2d) return claim_conv_transpose(g, n);
    if (is_layout_op(n.op)) return claim_layout_op(g, n);
    return Claim::refuse("no CUDA kernel for " + std::string(n.info().keyword) + " yet");
  }

  Expected<std::shared_ptr<const Kernel>> compile(const Graph& g, const Node& n) const override {
    if (n.op == Op::Reshape || n.op == Op::Identity) return std::shared_ptr<const Kernel>(std::make_shared<DeviceCopyKernel>(context_));
    if (n.op == Op::Concat) return std::shared_ptr<const Kernel>(std::make_shared<ConcatKernel>(context_, n.attr_i64("axis")));
    if (std::shared_ptr<const Graph> body = region_body_of(g, n)) return RegionKernel::make(context_, std::move(body));
    if (n.op == Op::ElementwiseRegion) return RegionKernel::make_with_prologue(context_, n);
    if (n.op == Op::TransformRegion) return TransformKernel::make(context_, n);
    if (n.op == Op::BatchElementwiseRegion) return make_batch_kernel(context_, n);
    if (claim_row_op(g, n)) return make_row_kernel(context_, g, n);
    if (is_cublaslt_op(n.op)) return make_matmul_kernel(context_, g, n, options_.allow_tf32);
    if (claim_pool_or_reduce(g, n)) return make_pool_or_reduce_kernel(context_, g, n);
    if (n.op == Op::Conv2d || n.op == Op::FusedConvBiasAct) return make_conv_kernel(context_, g, n, options_.allow_tf32);
    if (n.op == Op::ReductionRegion) return make_reduction_kernel(context_, g, n);
    if (n.op == Op::FusedAttention) return make_attention_kernel(context_, g, n);
    if (n.op == Op::FusedSwiglu) return make_swiglu_kernel(context_, g, n, options_.allow_tf32);
    if (is_transform_step_op(n.op)) return make_transform_step_kernel(context_, g, n);
    if (n.op == Op::BatchNorm) return make_batch_norm_kernel(context_, g, n);
    if (n.op == Op::ConvTranspose2d) return make_conv_transpose_kernel(context_, g, n, options_.allow_tf32);
    if (is_layout_op(n.op)) return make_layout_kernel(context_, g, n);
    return Status::unimplemented("the CUDA backend does not run " + std::string(n.info().keyword));
  }

  Expected<Buffer> allocate(DType dtype, std::span<const int64_t> shape) const override {
    BufferView view;
    view.dtype = dtype;
    view.shape.assign(shape.begin(), shape.end());
    view.strides.assign(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) view.strides[i - 1] = view.strides[i] * shape[i];
    view.device = device();
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> memory, context_->allocate(view.nbytes()));
    view.data = memory.get();
    return Buffer(std::move(view), std::move(memory));
  }

  Status copy_from_host(Stream&, const BufferView& host, const BufferView& dst) const override {
    FUSEBOX_CHECK(host.nbytes() == dst.nbytes() && host.dtype == dst.dtype) << "copy sizes";
    if (!dst.nbytes()) return Status::ok();
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    return d.check(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst.data), host.data, dst.nbytes(), context_->stream()),
                   "copying to " + device().to_string());
  }

  Status copy_to_host(Stream&, const BufferView& src, const BufferView& host) const override {
    FUSEBOX_CHECK(host.nbytes() == src.nbytes() && host.dtype == src.dtype) << "copy sizes";
    if (!src.nbytes()) return Status::ok();
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    return d.check(d.cuMemcpyDtoHAsync(host.data, reinterpret_cast<CUdeviceptr>(src.data), src.nbytes(), context_->stream()),
                   "copying from " + device().to_string());
  }

  Status copy_on_device(Stream&, const BufferView& src, const BufferView& dst) const override {
    FUSEBOX_CHECK(src.nbytes() == dst.nbytes()) << "copy sizes";
    if (!dst.nbytes()) return Status::ok();
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    return d.check(d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst.data), reinterpret_cast<CUdeviceptr>(src.data),
                                       dst.nbytes(), context_->stream()),
                   "copying on " + device().to_string());
  }

  Stream& stream() const override { return *stream_; }
  PoolStats pool_stats() const override { return context_->pool_stats(); }

 private:
  std::shared_ptr<Context> context_;
  CudaBackendOptions options_;
  std::unique_ptr<CudaStream> stream_;
};

}  // namespace

Status cuda_available() {
  FUSEBOX_RETURN_IF_ERROR(nvrtc_version().status());
  return Context::get(0).status();
}

Expected<std::shared_ptr<Backend>> make_cuda_backend(int index, const CudaBackendOptions& options) {
  FUSEBOX_RETURN_IF_ERROR(nvrtc_version().status());
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Context> context, Context::get(index));
  return std::shared_ptr<Backend>(std::make_shared<CudaBackend>(std::move(context), options));
}

}  // namespace fusebox::cuda
