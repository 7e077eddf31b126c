// Reductions on the GPU: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod, argmax
// and argmin over f32, f16, bf16, f64, i32 or i64 values, with the reference kernels' semantics
// (src/backends/cpu/reference/reduce.cpp).
//
// The input is viewed as [outer, n, inner] with the reduced axes in the middle: they must be
// contiguous once dims of size 1 are dropped (else the claim refuses). Two variants:
//
//   thread  one thread per output, folding its n values in input order: float sums, means and
//           products accumulate in double and round once (bit-exact with the reference);
//           integer sums and products wrap in 64 bits
//   block   one block per output when the reduced extent is long (reduce_by_block): each
//           thread folds a strided share, then a tree in shared memory combines the shares.
//           max, min and the arg reductions are still exact (NaN wins; the first NaN, and the
//           first of equal extremes, is the index reported); float sums, means and products
//           are double sums in another order, so the rounded result can differ by one ulp of
//           the dtype from the reference (at most when the double lies next to a rounding
//           boundary of the dtype)
//   split   when there are too few outputs to fill the GPU and their rows are very long
//           (reduce_chunks > 1): each row is cut into chunks, one block folds each chunk into
//           a partial accumulator in a scratch buffer, then one block per output combines its
//           partials (a second launch); exact as the block variant is
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

enum class ReduceOp { Sum, Mean, Max, Min, Prod, ArgMax, ArgMin };

// What one generated source computes; each source has every entry below.
struct ReduceVariant {
  ReduceOp op = ReduceOp::Sum;
  DType dtype = DType::F32;
  std::string key() const;
};

inline constexpr const char* kReduceThreadEntry = "fb_reduce_thread";
inline constexpr const char* kReduceBlockEntry = "fb_reduce_block";
inline constexpr const char* kReduceSplitEntry = "fb_reduce_split";
inline constexpr const char* kReduceCombineEntry = "fb_reduce_combine";
inline constexpr int kReduceThreads = 256;
// Bytes of scratch per partial accumulator (the largest: a value and an index).
inline constexpr int kReducePartialBytes = 16;

// The CUDA C++ source of one variant. Kernel arguments, all 8 bytes:
//   thread, block  (x, y, outer, n, inner)
//   split          (x, partial, outer, n, inner, chunks): partial holds outer*inner*chunks
//   combine        (partial, y, outer*inner, chunks, n)
// Every entry but thread takes a power-of-two block of at most kReduceThreads threads.
std::string reduce_source(const ReduceVariant& v);
// Every variant the backend can generate (the code generation test compiles each).
std::vector<ReduceVariant> all_reduce_variants();

// Whether [outer, n, inner] with `outputs` = outer * inner runs one block per output.
bool reduce_by_block(int64_t outputs, int64_t n, int64_t inner);
// How many chunks each row is split into on a GPU of `multiprocessors` (1: not split).
int64_t reduce_chunks(int64_t outputs, int64_t n, int64_t inner, int multiprocessors);

// nullopt when `n` is not a reduction; else accept, or refuse with the reason.
std::optional<Claim> claim_reduce_op(const Graph& g, const Node& n);
// The kernel of a claimed reduction; an error with the refusal's reason otherwise.
Expected<std::shared_ptr<const Kernel>> make_reduce_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n);

// The backend's hooks for pooling ops (pool_kernel.h) and reductions together: nullopt when
// `n` is neither.
std::optional<Claim> claim_pool_or_reduce(const Graph& g, const Node& n);
Expected<std::shared_ptr<const Kernel>> make_pool_or_reduce_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n);

}  // namespace fusebox::cuda
