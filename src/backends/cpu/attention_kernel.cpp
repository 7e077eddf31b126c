#include "backends/cpu/attention_kernel.h"

#include <algorithm>
#include <cstring>

#include "backends/cpu/attention_tile.h"

namespace fusebox::cpu {

namespace {

using attention::Problem;

bool cpu_has(AttentionIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case AttentionIsa::Avx512: return __builtin_cpu_supports("avx512f");
    case AttentionIsa::Avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    default: return true;
  }
#else
  return isa == AttentionIsa::Generic || isa == AttentionIsa::Auto;
#endif
}

attention::BlockFn block_fn(AttentionIsa isa) {
  if (isa == AttentionIsa::Auto) isa = attention_isas().back();
  switch (isa) {
    case AttentionIsa::Avx512: return attention::avx512::block;
    case AttentionIsa::Avx2: return attention::avx2::block;
    default: return attention::generic::block;
  }
}

// Strides (batch, head, row) of a [B,T,H*D] or [B,H,T,D] operand with contiguous storage.
void head_strides(const std::vector<int64_t>& s, int64_t heads, int64_t d, int64_t* out) {
  if (s.size() == 3) {
    out[0] = s[1] * s[2];
    out[1] = d;
    out[2] = s[2];
  } else {
    out[0] = s[1] * s[2] * s[3];
    out[1] = s[2] * s[3];
    out[2] = d;
  }
  (void)heads;
}

int64_t seq_len(const std::vector<int64_t>& s) { return s.size() == 3 ? s[1] : s[2]; }

// Grow-only per-thread buffers for the packed Kᵀ and V (slot 0, 1): steady runs neither allocate
// nor fault pages in. The calling thread owns them for the run; the OpenMP team writes them.
float* packing_buffer(int slot, size_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[slot];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

class AttentionKernel final : public Kernel {
 public:
  explicit AttentionKernel(const Node& n) : node_(n) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return run_attention(node_, ins, outs[0]);
  }
  std::string_view kind() const override { return "attention"; }

 private:
  Node node_;
};

}  // namespace

const char* attention_isa_name(AttentionIsa isa) {
  switch (isa) {
    case AttentionIsa::Generic: return "generic";
    case AttentionIsa::Avx2: return "avx2";
    case AttentionIsa::Avx512: return "avx512";
    case AttentionIsa::Auto: break;
  }
  return "auto";
}

std::vector<AttentionIsa> attention_isas() {
  std::vector<AttentionIsa> out{AttentionIsa::Generic};
  for (AttentionIsa isa : {AttentionIsa::Avx2, AttentionIsa::Avx512})
    if (cpu_has(isa)) out.push_back(isa);
  return out;
}

Status run_attention(const Node& n, std::span<const Array> in, Array& out, AttentionIsa isa) {
  if (isa != AttentionIsa::Auto && !cpu_has(isa)) {
    return Status::invalid(std::string("attention: this processor has no ") + attention_isa_name(isa));
  }
  const Array &q = in[0], &k = in[1], &v = in[2];
  for (const Array* a : {&q, &k, &v, in.size() == 4 ? &in[3] : &q, static_cast<const Array*>(&out)}) {
    if (a->dtype() != DType::F32) return Status::invalid("attention: f32 only, got " + a->type_string());
  }
  Problem p;
  p.heads = n.attr_i64("heads");
  p.d = n.attr_i64("head_dim");
  p.batch = q.shape()[0];
  p.tq = seq_len(q.shape());
  p.tk = seq_len(k.shape());
  if (k.shape()[0] != p.batch || v.shape()[0] != p.batch || seq_len(v.shape()) != p.tk) {
    return Status::invalid("attention: q " + q.type_string() + ", k " + k.type_string() + " and v " + v.type_string() +
                           " differ in batch or key length");
  }
  if (out.numel() == 0) return Status::ok();
  p.q = q.data<float>();
  p.k = k.data<float>();
  p.v = v.data<float>();
  p.out = out.data<float>();
  head_strides(q.shape(), p.heads, p.d, p.q_s);
  head_strides(k.shape(), p.heads, p.d, p.k_s);
  head_strides(v.shape(), p.heads, p.d, p.v_s);
  head_strides(out.shape(), p.heads, p.d, p.o_s);
  p.scale = static_cast<float>(n.attr_f64("scale"));
  p.causal = n.attr_bool("causal");
  if (in.size() == 4) {
    const Array& m = in[3];
    const int64_t full[4] = {p.batch, p.heads, p.tq, p.tk};
    int64_t stride = 1;
    for (int d = 3, md = m.rank() - 1; d >= 0; --d, --md) {
      int64_t size = md >= 0 ? m.shape()[static_cast<size_t>(md)] : 1;
      if (size != 1 && size != full[d]) return Status::invalid("attention: mask " + m.type_string() + " does not broadcast to the scores");
      p.m_s[d] = size == 1 ? 0 : stride;
      stride *= size;
    }
    p.mask = m.data<float>();
  }
  if (p.tk == 0) {  // no keys: an empty softmax times an empty v is 0, as the unfused form gives
    std::fill(p.out, p.out + out.numel(), 0.0f);
    return Status::ok();
  }
  p.dp = attention::round_up(p.d, attention::kPad);
  p.kt_blocks = (p.tk + attention::kBlockK - 1) / attention::kBlockK;
  const int64_t bh = p.batch * p.heads, kb = attention::kBlockK;
  float* kt = packing_buffer(0, size_t(bh * p.kt_blocks * p.d * kb));
  float* vp = packing_buffer(1, size_t(bh * p.tk * p.dp));
  // Pack Kᵀ by key block and V rows contiguously, one (b,h) per iteration.
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < bh; ++t) {
    const int64_t b = t / p.heads, h = t % p.heads;
    float* dst = kt + t * p.kt_blocks * p.d * kb;
    const float* src = p.k + b * p.k_s[0] + h * p.k_s[1];
    for (int64_t jb = 0; jb < p.kt_blocks; ++jb) {
      float* tile = dst + jb * p.d * kb;
      const int64_t n = std::min(kb, p.tk - jb * kb);
      for (int64_t j = 0; j < n; ++j) {
        const float* row = src + (jb * kb + j) * p.k_s[2];
        for (int64_t x = 0; x < p.d; ++x) tile[x * kb + j] = row[x];
      }
      for (int64_t x = 0; x < p.d && n < kb; ++x) std::fill(tile + x * kb + n, tile + (x + 1) * kb, 0.0f);
    }
    float* vdst = vp + t * p.tk * p.dp;
    const float* vsrc = p.v + b * p.v_s[0] + h * p.v_s[1];
    for (int64_t j = 0; j < p.tk; ++j) {
      std::memcpy(vdst + j * p.dp, vsrc + j * p.v_s[2], sizeof(float) * size_t(p.d));
      std::fill(vdst + j * p.dp + p.d, vdst + (j + 1) * p.dp, 0.0f);
    }
  }
  p.kt = kt;
  p.v_packed = vp;
  const attention::BlockFn block = block_fn(isa);
  const int64_t qblocks = (p.tq + attention::kBlockQ - 1) / attention::kBlockQ;
  const int64_t tasks = bh * qblocks;
#pragma omp parallel
  {
    std::vector<float> scratch(attention::scratch_floats(p));
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t qb = t % qblocks, head = t / qblocks;
      const int64_t i0 = qb * attention::kBlockQ;
      block(p, head / p.heads, head % p.heads, i0, std::min(attention::kBlockQ, p.tq - i0), scratch.data());
    }
  }
  return Status::ok();
}

std::shared_ptr<const Kernel> make_attention_kernel(const Graph& g, const Node& n) {
  if (n.op != Op::FusedAttention || g.type(n.outputs[0]).dtype != DType::F32) return nullptr;
  return std::make_shared<AttentionKernel>(n);
}

}  // namespace fusebox::cpu
