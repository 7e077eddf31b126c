// The CPU kernel of fused_attention (f32): blocked over query rows and key blocks with an online
// softmax (attention_tile.h draws it), so the Tq x Tk score matrix never exists in memory; its
// two products run in register tiles of its own, with the softmax between them on the same L1
// tile (bench/attention_bench.cpp compares the kernel with the two bare oneDNN matmuls). Work is
// spread over (batch, head, query block) with OpenMP. The inner loops exist for AVX-512, AVX2+FMA
// and plain 128-bit vectors, chosen at run time (or forced, for tests).
//
// Accuracy: the sums are reassociated (blocked, fused multiply-adds, e^x to 2e-7), so results
// match the reference (unfused primitives) to about 1e-5 relative; tests allow 2e-5 relative plus
// 2e-5 absolute at unit-scale inputs.
#pragma once

#include <memory>
#include <vector>

#include "backends/backend.h"
#include "ir/array.h"

namespace fusebox::cpu {

enum class AttentionIsa { Auto, Generic, Avx2, Avx512 };
const char* attention_isa_name(AttentionIsa isa);
// The instruction sets this processor runs (Generic always), best last.
std::vector<AttentionIsa> attention_isas();

// Runs fused_attention `n` (its attributes) over q, k, v[, mask] into `out` (preallocated with
// the result's shape). Errors for operands whose shapes do not fit (batch broadcasting, which
// the shape rule admits for symbolic sizes, is refused here).
Status run_attention(const Node& n, std::span<const Array> in, Array& out, AttentionIsa isa = AttentionIsa::Auto);

// The kernel for an f32 fused_attention node; null for other dtypes (the caller uses the
// reference kernel).
std::shared_ptr<const Kernel> make_attention_kernel(const Graph& g, const Node& n);

}  // namespace fusebox::cpu
