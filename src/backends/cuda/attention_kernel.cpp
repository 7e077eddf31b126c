// fused_attention's claim, its launch plan (strides from the operands' shapes at each run) and
// its Kernel: one compiled source per (dtype, head-dim bucket), kept after its first use.
#include "backends/cuda/attention_kernel.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "ir/check.h"

namespace fusebox::cuda {

namespace {

bool runs_dtype(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }

// Element strides (batch, head, row) of a contiguous [B,T,H*D] or [B,H,T,D] operand, and its T.
struct HeadStrides {
  int64_t s[3] = {};
  int64_t seq = 0;
};
HeadStrides head_strides(const std::vector<int64_t>& shape, int64_t head_dim) {
  HeadStrides h;
  if (shape.size() == 3) {
    h.s[0] = shape[1] * shape[2];
    h.s[1] = head_dim;
    h.s[2] = shape[2];
    h.seq = shape[1];
  } else {
    h.s[0] = shape[1] * shape[2] * shape[3];
    h.s[1] = shape[2] * shape[3];
    h.s[2] = shape[3];
    h.seq = shape[2];
  }
  return h;
}

int bucket_of(int64_t head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(std::shared_ptr<Context> context, Node node, AttentionKernelChoice choice)
      : context_(std::move(context)), node_(std::move(node)), choice_(choice) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(out.size() == 1) << "fused_attention results";
    FUSEBOX_ASSIGN_OR_RETURN(AttentionLaunch l, plan_attention_launch(node_, in, out[0], choice_, context_->arch()));
    if (!l.blocks) return Status::ok();
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, functions_.get(*context_, l.variant.key(), kAttentionEntry,
                                                          [&] { return attention_source(l.variant); }));
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    void* args[6] = {&l.q, &l.k, &l.v, &l.mask, &l.out, &l.args};
    const Driver& d = context_->driver();
    return d.check(d.cuLaunchKernel(f, l.blocks, 1, 1, l.threads, 1, 1, 0, context_->stream(), args, nullptr),
                   "launching the CUDA fused_attention kernel");
  }
  std::string_view kind() const override { return "cuda_attention"; }

 private:
  std::shared_ptr<Context> context_;
  Node node_;  // a copy: kernels outlive the graph they were compiled from
  AttentionKernelChoice choice_;
  mutable FunctionCache functions_;  // by AttentionVariant::key()
};

}  // namespace

Expected<AttentionKernelChoice> attention_kernel_choice() {
  const char* e = std::getenv("FUSEBOX_CUDA_ATTENTION");
  const std::string_view v = e ? e : "";
  if (v.empty() || v == "auto") return AttentionKernelChoice::Auto;
  if (v == "mma") return AttentionKernelChoice::Mma;
  if (v == "simt") return AttentionKernelChoice::Simt;
  return Status::invalid("fused_attention on cuda: FUSEBOX_CUDA_ATTENTION is '" + std::string(v) +
                         "', not one of auto, mma, simt");
}

bool mma_attention_covers(DType dtype, int64_t head_dim, int arch) {
  return arch >= 80 && (dtype == DType::F16 || dtype == DType::BF16) && head_dim > 0 && head_dim <= 128 &&
         head_dim % 8 == 0;
}

Expected<AttentionLaunch> plan_attention_launch(const Node& n, std::span<const BufferView> in, const BufferView& out,
                                                AttentionKernelChoice choice, int arch) {
  FUSEBOX_CHECK(in.size() == 3 || in.size() == 4) << "fused_attention operands";
  const BufferView &q = in[0], &k = in[1], &v = in[2];
  AttentionLaunch l;
  AttentionArgs& a = l.args;
  a.heads = n.attr_i64("heads");
  a.head_dim = n.attr_i64("head_dim");
  a.causal = n.attr_bool("causal") ? 1 : 0;
  a.scale = n.attr_f64("scale");
  a.batch = q.shape[0];
  const HeadStrides qs = head_strides(q.shape, a.head_dim), ks = head_strides(k.shape, a.head_dim),
                    vs = head_strides(v.shape, a.head_dim);
  a.tq = qs.seq;
  a.tk = ks.seq;
  if (k.shape[0] != a.batch || v.shape[0] != a.batch || vs.seq != a.tk) {
    return Status::invalid("fused_attention on cuda: q, k and v of shapes " + shape_to_string(make_shape(q.shape)) + ", " +
                           shape_to_string(make_shape(k.shape)) + " and " + shape_to_string(make_shape(v.shape)) +
                           " differ in batch or key length");
  }
  std::copy(qs.s, qs.s + 3, a.q);
  std::copy(ks.s, ks.s + 3, a.k);
  std::copy(vs.s, vs.s + 3, a.v);
  const HeadStrides os = head_strides(out.shape, a.head_dim);
  std::copy(os.s, os.s + 3, a.out);
  if (in.size() == 4) {
    const BufferView& m = in[3];
    const int64_t full[4] = {a.batch, a.heads, a.tq, a.tk};
    int64_t stride = 1;
    for (int d = 3, md = int(m.shape.size()) - 1; d >= 0; --d, --md) {
      const int64_t size = md >= 0 ? m.shape[size_t(md)] : 1;
      if (size != 1 && size != full[d]) {
        return Status::invalid("fused_attention on cuda: mask " + shape_to_string(make_shape(m.shape)) +
                               " does not broadcast to the scores");
      }
      a.mask[d] = size == 1 ? 0 : stride;
      stride *= size;
    }
    l.mask = m.data;
  }
  // cp.async copies 16 bytes: rows start 16-byte aligned when the head dim is a multiple of 8
  // and the buffers are (the pool's are; a view into one need not be).
  const bool mma = choice != AttentionKernelChoice::Simt && mma_attention_covers(q.dtype, a.head_dim, arch) &&
                   aligned16(q.data) &&
                   aligned16(k.data) && aligned16(v.data) && aligned16(out.data);
  l.variant = AttentionVariant{q.dtype, bucket_of(a.head_dim), mma};
  l.q = q.data;
  l.k = k.data;
  l.v = v.data;
  l.out = out.data;
  if (out.numel() == 0) return l;
  const int64_t qtiles = (a.tq + l.variant.queries_per_block() - 1) / l.variant.queries_per_block();
  const int64_t blocks = a.batch * a.heads * qtiles;
  if (blocks > INT_MAX) {
    return Status::unimplemented("fused_attention on cuda: " + std::to_string(blocks) + " query tiles (at most 2^31 - 1)");
  }
  l.blocks = unsigned(blocks);
  l.threads = unsigned(kAttentionWarps * 32);
  return l;
}

Claim claim_attention(const Graph& g, const Node& n) {
  FUSEBOX_CHECK(n.op == Op::FusedAttention) << "claim_attention on " << n.info().keyword;
  const TensorType& q = g.type(n.inputs[0]);
  if (!runs_dtype(q.dtype)) {
    return Claim::refuse("fused_attention on " + std::string(dtype_name(q.dtype)) +
                         ": the CUDA attention kernel runs f32, f16 and bf16");
  }
  const int64_t head_dim = n.attr_i64("head_dim");
  if (head_dim > kAttentionMaxHeadDim) {
    return Claim::refuse("fused_attention with head_dim " + std::to_string(head_dim) +
                         ": the CUDA attention kernel holds heads of up to " + std::to_string(kAttentionMaxHeadDim) +
                         " values in shared memory");
  }
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_attention_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n) {
  if (Claim c = claim_attention(g, n); !c) return Status::unimplemented(c.reason);
  FUSEBOX_ASSIGN_OR_RETURN(AttentionKernelChoice choice, attention_kernel_choice());
  return std::shared_ptr<const Kernel>(std::make_shared<AttentionKernel>(std::move(context), n, choice));
}

bool attention_kernel_pays(const Graph& g, const Node& n, AttentionKernelChoice choice, int arch) {
  if (choice != AttentionKernelChoice::Simt && mma_attention_covers(g.type(n.inputs[0]).dtype, n.attr_i64("head_dim"), arch)) {
    return true;
  }
  // The result is [B, Tq, H*D] with heads merged, [B, H, Tq, D] without: Tq is next to last.
  const Shape& y = g.type(n.outputs[0]).shape;
  if (y.size() < 2) return false;
  const Dim& tq = y[y.size() - 2];
  return tq.is_static() && tq.value() <= kAttentionKernelMaxQueries;
}

}  // namespace fusebox::cuda
