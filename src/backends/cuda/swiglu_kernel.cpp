// fused_swiglu's claim (that of its product's cuBLASLt kernel), the gate kernel's source and
// the Kernel running both.
#include "backends/cuda/swiglu_kernel.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "backends/cuda/matmul_kernel.h"
#include "backends/cuda/prelude.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr int kGateThreads = 256;

constexpr std::string_view kGateBody = R"CUDA(
extern "C" __global__ void __launch_bounds__(256) fb_swiglu_gate(
    const fb_t* __restrict__ h, fb_t* __restrict__ y, i64 rows, i64 n, i64 off) {
  const i64 total = rows * n;
  for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += i64(gridDim.x) * blockDim.x) {
    const i64 r = e / n, c = e % n;
    const fb_t* row = h + r * 2 * n;
    const float g = FB_LOAD(row[off + c]), u = FB_LOAD(row[n - off + c]);
    y[e] = FB_STORE(FB_ROUND(fb_silu(g)) * u);
  }
}
)CUDA";

// The graph of the matmul that computes h = x · w (+ bias): fused_swiglu's operands, in its
// order, into [.., 2n] (w's last dim). Its one node is what the cuBLASLt kernel is made from.
Graph matmul_graph(const Graph& g, const Node& n) {
  Graph m("swiglu_matmul");
  std::vector<ValueId> inputs;
  for (size_t i = 0; i < n.inputs.size(); ++i) inputs.push_back(m.add_input("in" + std::to_string(i), g.type(n.inputs[i])));
  TensorType h = g.type(n.outputs[0]);
  h.shape.back() = g.type(n.inputs[1]).shape.back();
  const bool bias = n.inputs.size() == 3;
  Attrs attrs;
  if (bias) attrs.set("act", std::string("none"));
  m.add_output(m.add_node(bias ? Op::FusedMatmulBiasAct : Op::MatMul, inputs, {h}, attrs)[0]);
  return m;
}

class SwigluKernel final : public Kernel {
 public:
  SwigluKernel(std::shared_ptr<Context> context, std::shared_ptr<const Kernel> matmul, DType dtype, bool gate_first)
      : context_(std::move(context)), matmul_(std::move(matmul)), dtype_(dtype), gate_first_(gate_first) {}

  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(out.size() == 1 && !out[0].shape.empty()) << "fused_swiglu result";
    const BufferView& y = out[0];
    if (y.numel() == 0) return Status::ok();
    int64_t n = y.shape.back(), rows = y.numel() / n;
    BufferView h = y;
    h.shape.back() = 2 * n;
    h.strides.assign(h.shape.size(), 1);
    for (size_t i = h.shape.size(), s = 1; i-- > 0; s *= size_t(h.shape[i])) h.strides[i] = int64_t(s);
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> temporary, context_->allocate(h.nbytes()));
    h.data = temporary.get();
    FUSEBOX_RETURN_IF_ERROR(matmul_->run(stream, in, std::span<const BufferView>(&h, 1)));

    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, functions_.get(*context_, "gate", kSwigluEntry, [&] { return swiglu_gate_source(dtype_); }));
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    const Driver& d = context_->driver();
    int64_t off = gate_first_ ? 0 : n;
    void* data = h.data;
    void* result = y.data;
    void* args[5] = {&data, &result, &rows, &n, &off};
    const int64_t blocks = std::clamp<int64_t>((rows * n + kGateThreads - 1) / kGateThreads, 1,
                                               int64_t(context_->multiprocessors()) * 32);
    FUSEBOX_RETURN_IF_ERROR(d.check(d.cuLaunchKernel(f, unsigned(blocks), 1, 1, kGateThreads, 1, 1, 0, context_->stream(), args, nullptr),
                                    "launching the CUDA fused_swiglu gate kernel"));
    // A recorded graph writes the temporary on every replay: it must never go back to the pool.
    FUSEBOX_ASSIGN_OR_RETURN(const bool capturing, context_->capturing());
    if (capturing) {
      std::lock_guard<std::mutex> lock(mu_);
      recorded_.push_back(std::move(temporary));
    }
    return Status::ok();
  }
  std::string_view kind() const override { return "cuda_swiglu"; }

 private:
  std::shared_ptr<Context> context_;
  std::shared_ptr<const Kernel> matmul_;
  DType dtype_;
  bool gate_first_;
  mutable FunctionCache functions_;
  mutable std::mutex mu_;
  mutable std::vector<std::shared_ptr<void>> recorded_;  // temporaries of recorded runs
};

}  // namespace

std::string swiglu_gate_source(DType dtype) {
  FUSEBOX_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16) << "swiglu gate dtype";
  std::string s(prelude_source());
  s += "\n// ---- fused_swiglu gate " + std::string(dtype_name(dtype)) + "\n";
  s += float_storage_defines(dtype);
  s += kGateBody;
  return s;
}

Claim claim_swiglu(const Graph& g, const Node& n) {
  FUSEBOX_CHECK(n.op == Op::FusedSwiglu) << "claim_swiglu on " << n.info().keyword;
  const DType dtype = g.type(n.outputs[0]).dtype;
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16) {
    return Claim::refuse("fused_swiglu on " + std::string(dtype_name(dtype)) + ": the CUDA kernel runs f32, f16 and bf16");
  }
  const Graph m = matmul_graph(g, n);
  Claim c = claim_matmul(m, m.nodes()[0]);
  if (!c) c.reason = "fused_swiglu's product: " + c.reason;
  return c;
}

Expected<std::shared_ptr<const Kernel>> make_swiglu_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n,
                                                           bool allow_tf32) {
  if (Claim c = claim_swiglu(g, n); !c) return Status::unimplemented(c.reason);
  const Graph m = matmul_graph(g, n);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> matmul, make_matmul_kernel(context, m, m.nodes()[0], allow_tf32));
  return std::shared_ptr<const Kernel>(std::make_shared<SwigluKernel>(std::move(context), std::move(matmul),
                                                                      g.type(n.outputs[0]).dtype, n.attr_bool("gate_first")));
}

}  // namespace fusebox::cuda
