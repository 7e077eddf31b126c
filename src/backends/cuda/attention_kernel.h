// fused_attention on the GPU (ir/fused_attention_op.h defines it): one NVRTC-compiled kernel in
// the flash-attention style, so the Tq x Tk score matrix never exists in memory.
//
//   block   one (batch, head, tile of kAttentionWarps * QW queries); each warp owns QW queries
//   loop    over tiles of BK keys: the block copies K and V rows into shared memory (as float),
//           then per query lane j scores key j0 + j (q·k, · scale, + mask, the causal rule),
//           the warp takes the tile's max, rescales its running sum and accumulator by
//           e^(old max - new max) and adds e^(s - max) · v; each lane holds D / 32 columns
//   end     out = accumulator / sum; a query that saw no key gets 0 / 0 = NaN, as softmax over
//           -inf alone does; no keys at all (Tk = 0) gives 0, as the unfused empty product does
//
// q, k, v and the result are read and written through (batch, head, row) strides, so heads
// merged ([B,T,H*D]) or split ([B,H,T,D]) cost no transpose; the mask through four strides
// (0 where it broadcasts). Sizes, strides, scale and causality are kernel arguments: one source
// per (dtype, head-dim bucket), never recompiled for a new size.
//
// f16 and bf16 operands with head dims up to 128 (a multiple of 8) have a second source that
// does both products on tensor cores (attention_mma_source.cpp draws it): a block owns 64
// queries, each warp 16 of them, and loops over tiles of keys staged in shared memory as the
// dtype; the products are mma.sync m16n8k16 (f32 accumulation), the softmax the same online
// form in float (e^x as ex2.approx of x·log2 e), and the probabilities are rounded to the dtype
// before the second product.
// AttentionKernelChoice says when it runs.
//
// Accuracy: f32, f16 and bf16 operands, every sum and the softmax in float (CUDA's expf, no
// fast math, compiled as every fusebox kernel: no contraction), f16/bf16 rounded once at the
// store. The reference rounds q·k, the scaled and masked scores, the probabilities and the
// product separately (each in the dtype for f16/bf16) and divides before the second product;
// the sums here run in another order, so results differ by float reassociation (f32), or by the
// reference's own intermediate roundings (f16, bf16): tests/cuda/cuda_attention_test.cpp gives
// the tolerances.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

inline constexpr const char* kAttentionEntry = "fb_attention";
inline constexpr int kAttentionWarps = 4;
inline constexpr int kAttentionMaxHeadDim = 256;

// What one generated source computes; everything else is an argument.
struct AttentionVariant {
  DType dtype = DType::F32;
  int max_head_dim = 64;  // 64, 128 or 256: the head dims up to it run on this source
  bool mma = false;       // the tensor-core source (f16 and bf16, buckets 64 and 128)
  // BK; the mma source's tiles are double-buffered f16/bf16 rows (shared memory < 48 KiB)
  int keys_per_tile() const { return mma ? (max_head_dim > 64 ? 32 : 64) : max_head_dim > 128 ? 16 : 32; }
  int queries_per_warp() const { return mma ? 16 : max_head_dim > 128 ? 2 : 4; }  // QW (shared memory < 48 KiB)
  int queries_per_block() const { return kAttentionWarps * queries_per_warp(); }
  std::string key() const;
};

// Which source runs a fused_attention both could run, from FUSEBOX_CUDA_ATTENTION (read when a
// graph with fused_attention is lowered and when a kernel is made):
//   auto (unset or empty)  the tensor-core source for f16/bf16 wherever it covers the node, at
//                          every query length (on the H200 it is faster than the float source
//                          at one query too: 0.12 against 0.32 ms for bench/cuda_workloads.h's
//                          attention_decode_f16); the lowering keeps every fused_attention it
//                          covers
//   mma                    the same as auto (the name says which source runs)
//   simt                   the float source only: long queries are lowered to the unfused form
//                          again (cuBLASLt products and the row softmax), as before the
//                          tensor-core source existed; benchmarks compare the two this way
enum class AttentionKernelChoice { Auto, Mma, Simt };
// The choice FUSEBOX_CUDA_ATTENTION names; an error naming the variable for another value.
Expected<AttentionKernelChoice> attention_kernel_choice();

// Whether the tensor-core source runs attention of `dtype` and `head_dim` on a device of
// compute capability `arch` (90 for 9.0): f16 or bf16, head_dim a multiple of 8 up to 128,
// arch 80 or above (mma.sync m16n8k16, cp.async). At each run the operands and the result
// must also start at 16-byte aligned addresses; the float source runs them otherwise.
bool mma_attention_covers(DType dtype, int64_t head_dim, int arch);

// The kernel's one struct argument (every field 8 bytes, as the source's FbAttention).
struct AttentionArgs {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, head_dim = 0;
  int64_t q[3] = {}, k[3] = {}, v[3] = {}, out[3] = {};  // element strides of batch, head, row
  int64_t mask[4] = {};                                  // over (batch, head, query, key)
  int64_t causal = 0;
  double scale = 1.0;
};

std::string attention_source(const AttentionVariant& v);  // either source, by v.mma
std::string attention_mma_source(const AttentionVariant& v);
// What both sources start with: the prelude, FB_DMAX, FB_BK, FB_WARPS, the dtype's storage,
// the FbAttention argument struct, fb_neg_inf() and fb_attention_block() (a block's queries and
// operands).
std::string attention_source_head(const AttentionVariant& v);
// Every variant the backend can generate (the code generation test compiles each).
std::vector<AttentionVariant> all_attention_variants();

// One launch: the variant, the pointers (q, k, v, mask or null, out), the arguments, the grid.
struct AttentionLaunch {
  AttentionVariant variant;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* mask = nullptr;
  void* out = nullptr;
  AttentionArgs args;
  unsigned blocks = 0, threads = 0;  // blocks 0: nothing to do
};
// The launch of fused_attention `n` over these operands and result on a device of `arch`, the
// source picked by `choice`; an error for operands that do not fit each other (a batch
// broadcast, which the shape rule admits for symbolic sizes).
Expected<AttentionLaunch> plan_attention_launch(const Node& n, std::span<const BufferView> in, const BufferView& out,
                                                AttentionKernelChoice choice = AttentionKernelChoice::Auto, int arch = 90);

// Accept, or refuse with the reason (a dtype, a head dim above kAttentionMaxHeadDim).
Claim claim_attention(const Graph& g, const Node& n);

// The kernel of a claimed fused_attention; an error with the refusal's reason otherwise (or for
// a FUSEBOX_CUDA_ATTENTION value that names no choice).
Expected<std::shared_ptr<const Kernel>> make_attention_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n);

// Whether a fused kernel is the faster way for node `n` on a device of `arch`: always where the
// tensor-core source covers it (unless `choice` is Simt), else a static query length of at most
// kAttentionKernelMaxQueries (decoding and short prompts), where the float source is faster than
// the unfused form. Other nodes are lowered to the unfused primitives by the backend
// (cuda_backend.cpp).
inline constexpr int64_t kAttentionKernelMaxQueries = 16;
bool attention_kernel_pays(const Graph& g, const Node& n, AttentionKernelChoice choice, int arch);

}  // namespace fusebox::cuda
