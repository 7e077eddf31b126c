// The reductions' sources, claims and Kernel: one compiled source per (op, dtype) with a thread
// entry and a block entry, kept after first use; [outer, n, inner] from the buffers at each run.
#include "backends/cuda/reduce_kernel.h"

#include <algorithm>
#include <array>
#include <map>
#include <mutex>

#include "backends/cuda/pool_kernel.h"
#include "backends/cuda/prelude.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

std::optional<ReduceOp> reduce_op_of(Op op) {
  switch (op) {
    case Op::ReduceSum: return ReduceOp::Sum;
    case Op::ReduceMean: return ReduceOp::Mean;
    case Op::ReduceMax: return ReduceOp::Max;
    case Op::ReduceMin: return ReduceOp::Min;
    case Op::ReduceProd: return ReduceOp::Prod;
    case Op::ArgMax: return ReduceOp::ArgMax;
    case Op::ArgMin: return ReduceOp::ArgMin;
    default: return std::nullopt;
  }
}

const char* reduce_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
    case ReduceOp::Prod: return "prod";
    case ReduceOp::ArgMax: return "argmax";
    case ReduceOp::ArgMin: return "argmin";
  }
  return "?";
}

bool is_arg(ReduceOp op) { return op == ReduceOp::ArgMax || op == ReduceOp::ArgMin; }

constexpr DType kReduceDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64};

bool is_reduce_dtype(DType d) {
  return std::find(std::begin(kReduceDTypes), std::end(kReduceDTypes), d) != std::end(kReduceDTypes);
}

// The accumulator of each op: fb_init, fb_fold (value k of the row, in increasing k per
// thread), fb_combine (two threads' accumulators) and fb_finish (the stored result).
std::string accumulator_source(ReduceOp op, bool is_float) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
    case ReduceOp::Prod: {
      const bool prod = op == ReduceOp::Prod;
      const std::string t = is_float ? "double" : "u64";
      const std::string in = is_float ? "(double)v" : "u64(i64(v))";
      const std::string apply = prod ? " * " : " + ";
      std::string s = "struct Acc { " + t + " v; };\n";
      s += "__device__ __forceinline__ Acc fb_init() { Acc a; a.v = " + std::string(prod ? "1" : "0") + "; return a; }\n";
      s += "__device__ __forceinline__ void fb_fold(Acc& a, C v, i64) { a.v = a.v" + apply + in + "; }\n";
      s += "__device__ __forceinline__ void fb_combine(Acc& a, const Acc& b) { a.v = a.v" + apply + "b.v; }\n";
      std::string finish = !is_float ? "S(a.v)" : op == ReduceOp::Mean ? "fb_st64(a.v / (double)n)" : "fb_st64(a.v)";
      s += "typedef S Out;\n__device__ __forceinline__ Out fb_finish(const Acc& a, i64 n) { return " + finish + "; }\n";
      return s;
    }
    case ReduceOp::Max:
    case ReduceOp::Min: {
      const std::string better = op == ReduceOp::Max ? "v > a.v" : "v < a.v";
      std::string s = "struct Acc { C v; };\n";
      s += "__device__ __forceinline__ Acc fb_init() { Acc a; a.v = " + std::string(op == ReduceOp::Max ? "FB_LOWEST" : "FB_HIGHEST") + "; return a; }\n";
      // NaN, once in, stays; a NaN value wins.
      s += "__device__ __forceinline__ void fb_fold(Acc& a, C v, i64) { if (a.v != a.v) return; if (v != v || " + better + ") a.v = v; }\n";
      s += "__device__ __forceinline__ void fb_combine(Acc& a, const Acc& b) { fb_fold(a, b.v, 0); }\n";
      s += "typedef S Out;\n__device__ __forceinline__ Out fb_finish(const Acc& a, i64) { return fb_st(a.v); }\n";
      return s;
    }
    case ReduceOp::ArgMax:
    case ReduceOp::ArgMin: {
      const std::string better = op == ReduceOp::ArgMax ? ">" : "<";
      // i < 0: no value yet. The first NaN wins; otherwise the first strict extreme.
      std::string s = "struct Acc { C v; i64 i; };\n";
      s += "__device__ __forceinline__ Acc fb_init() { Acc a; a.v = C(0); a.i = -1; return a; }\n";
      s += "__device__ __forceinline__ void fb_fold(Acc& a, C v, i64 k) {\n"
           "  if (a.i < 0 || (a.v == a.v && (v != v || v " + better + " a.v))) { a.v = v; a.i = k; }\n}\n";
      s += "__device__ __forceinline__ void fb_combine(Acc& a, const Acc& b) {\n"
           "  if (b.i < 0) return;\n"
           "  if (a.i < 0) { a = b; return; }\n"
           "  const bool an = a.v != a.v, bn = b.v != b.v;\n"
           "  bool take;\n"
           "  if (an) take = bn && b.i < a.i;\n"
           "  else if (bn) take = true;\n"
           "  else take = b.v " + better + " a.v || (b.v == a.v && b.i < a.i);\n"
           "  if (take) a = b;\n}\n";
      s += "typedef i64 Out;\n__device__ __forceinline__ Out fb_finish(const Acc& a, i64) { return a.i; }\n";
      return s;
    }
  }
  return "";
}

constexpr const char* kReduceEntries = R"CUDA(
// The accumulators of a block combined in a tree (blockDim.x a power of two); every thread
// gets the result.
__device__ __forceinline__ Acc fb_block_reduce(Acc* part, const Acc& a) {
  part[threadIdx.x] = a;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) fb_combine(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  const Acc r = part[0];
  __syncthreads();
  return r;
}

// One thread per output: its n values folded in input order.
extern "C" __global__ void __launch_bounds__(FB_THREADS) fb_reduce_thread(const S* __restrict__ x, Out* __restrict__ y, i64 outer, i64 n, i64 inner) {
  const i64 total = outer * inner;
  for (i64 t = i64(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += i64(gridDim.x) * blockDim.x) {
    const i64 o = t / inner, in = t - o * inner;
    const S* row = x + o * n * inner + in;
    Acc a = fb_init();
    for (i64 k = 0; k < n; ++k) fb_fold(a, fb_ld(row[k * inner]), k);
    y[t] = fb_finish(a, n);
  }
}

// One block per output: strided shares, then a tree.
extern "C" __global__ void __launch_bounds__(FB_THREADS) fb_reduce_block(const S* __restrict__ x, Out* __restrict__ y, i64 outer, i64 n, i64 inner) {
  __shared__ Acc part[FB_THREADS];
  const i64 total = outer * inner;
  for (i64 t = blockIdx.x; t < total; t += gridDim.x) {
    const i64 o = t / inner, in = t - o * inner;
    const S* row = x + o * n * inner + in;
    Acc a = fb_init();
    for (i64 k = threadIdx.x; k < n; k += blockDim.x) fb_fold(a, fb_ld(row[k * inner]), k);
    a = fb_block_reduce(part, a);
    if (threadIdx.x == 0) y[t] = fb_finish(a, n);
  }
}

// Split: block b folds chunk b % chunks of output b / chunks into partial[b]...
extern "C" __global__ void __launch_bounds__(FB_THREADS) fb_reduce_split(const S* __restrict__ x, Acc* __restrict__ partial, i64 outer, i64 n, i64 inner, i64 chunks) {
  __shared__ Acc part[FB_THREADS];
  const i64 total = outer * inner, len = (n + chunks - 1) / chunks;
  for (i64 b = blockIdx.x; b < total * chunks; b += gridDim.x) {
    const i64 t = b / chunks, c = b - t * chunks;
    const i64 o = t / inner, in = t - o * inner;
    const S* row = x + o * n * inner + in;
    const i64 end = min(n, (c + 1) * len);
    Acc a = fb_init();
    for (i64 k = c * len + threadIdx.x; k < end; k += blockDim.x) fb_fold(a, fb_ld(row[k * inner]), k);
    a = fb_block_reduce(part, a);
    if (threadIdx.x == 0) partial[b] = a;
  }
}

// ...then one block per output combines its chunks' partials.
extern "C" __global__ void __launch_bounds__(FB_THREADS) fb_reduce_combine(const Acc* __restrict__ partial, Out* __restrict__ y, i64 total, i64 chunks, i64 n) {
  __shared__ Acc part[FB_THREADS];
  for (i64 t = blockIdx.x; t < total; t += gridDim.x) {
    Acc a = fb_init();
    for (i64 c = threadIdx.x; c < chunks; c += blockDim.x) fb_combine(a, partial[t * chunks + c]);
    a = fb_block_reduce(part, a);
    if (threadIdx.x == 0) y[t] = fb_finish(a, n);
  }
}
)CUDA";

// The reduced dims of a node's input (rank `rank`): `axes` (all when empty), or one `axis`.
Expected<std::vector<bool>> reduced_dims(const Node& n, int rank) {
  std::vector<bool> reduced(size_t(rank), false);
  std::vector<int64_t> axes = is_arg(*reduce_op_of(n.op)) ? std::vector<int64_t>{n.attr_i64("axis")} : n.attr_i64s("axes");
  if (axes.empty()) reduced.assign(size_t(rank), true);
  for (int64_t axis : axes) {
    std::optional<int> a = normalize_axis(axis, rank);
    if (!a) return Status::invalid("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
    reduced[size_t(*a)] = true;
  }
  return reduced;
}

// [outer, n, inner] of `shape` with `reduced` dims in the middle; nullopt when a kept dim of
// size other than 1 lies between two reduced dims of size other than 1.
std::optional<std::array<int64_t, 3>> reduce_view(const std::vector<int64_t>& shape, const std::vector<bool>& reduced) {
  int first = -1, last = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d] && shape[d] != 1) {
      if (first < 0) first = int(d);
      last = int(d);
    }
  }
  std::array<int64_t, 3> v{1, 1, 1};
  if (first < 0) {
    for (int64_t s : shape) v[0] *= s;
    return v;
  }
  for (int d = 0; d < int(shape.size()); ++d) {
    const int64_t s = shape[size_t(d)];
    if (d < first) v[0] *= s;
    else if (d > last) v[2] *= s;
    else if (!reduced[size_t(d)] && s != 1) return std::nullopt;
    else v[1] *= s;
  }
  return v;
}

class ReduceKernel final : public Kernel {
 public:
  ReduceKernel(std::shared_ptr<Context> context, const Node& n, ReduceOp op, std::vector<bool> reduced)
      : context_(std::move(context)), op_(op), reduced_(std::move(reduced)), keyword_(n.info().keyword) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(in.size() == 1 && out.size() == 1 && in[0].shape.size() == reduced_.size()) << keyword_ << " operands";
    const BufferView& x = in[0];
    std::optional<std::array<int64_t, 3>> view = reduce_view(x.shape, reduced_);
    if (!view) return Status::unimplemented(keyword_ + ": the reduced axes of this shape are not contiguous");
    auto [outer, n, inner] = *view;
    const int64_t total = outer * inner;
    FUSEBOX_CHECK(out[0].numel() == total) << keyword_ << " result size";
    if (total == 0) return Status::ok();
    if (n == 0 && (op_ == ReduceOp::Max || op_ == ReduceOp::Min)) return Status::invalid(keyword_ + ": cannot reduce an empty dim with max/min");
    if (n == 0 && is_arg(op_)) return Status::invalid(keyword_ + ": cannot take argmax/argmin of an empty dim");
    const ReduceVariant variant{op_, x.dtype};
    void* ptrs[2] = {x.data, out[0].data};
    int64_t sizes[4] = {outer, n, inner, 1};
    const Driver& d = context_->driver();
    const std::string launching = "launching the CUDA " + keyword_ + " kernel";
    auto grid = [](int64_t blocks) { return unsigned(std::min<int64_t>(blocks, int64_t(1) << 20)); };
    if (!reduce_by_block(total, n, inner)) {
      FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, function(variant, kReduceThreadEntry));
      FUSEBOX_RETURN_IF_ERROR(context_->make_current());
      void* args[5] = {&ptrs[0], &ptrs[1], &sizes[0], &sizes[1], &sizes[2]};
      return d.check(d.cuLaunchKernel(f, grid((total + kReduceThreads - 1) / kReduceThreads), 1, 1, kReduceThreads, 1, 1, 0,
                                      context_->stream(), args, nullptr),
                     launching);
    }
    // A power of two of threads up to n (at least a warp) a block.
    unsigned threads = 32;
    while (threads < unsigned(kReduceThreads) && int64_t(threads) < n) threads *= 2;
    const int64_t chunks = reduce_chunks(total, n, inner, context_->multiprocessors());
    if (chunks <= 1) {
      FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, function(variant, kReduceBlockEntry));
      FUSEBOX_RETURN_IF_ERROR(context_->make_current());
      void* args[5] = {&ptrs[0], &ptrs[1], &sizes[0], &sizes[1], &sizes[2]};
      return d.check(d.cuLaunchKernel(f, grid(total), 1, 1, threads, 1, 1, 0, context_->stream(), args, nullptr), launching);
    }
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction split, function(variant, kReduceSplitEntry));
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction combine, function(variant, kReduceCombineEntry));
    // The scratch goes back to the pool when this returns: the one stream orders its reuse
    // after both launches.
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> scratch, context_->allocate(size_t(total * chunks) * kReducePartialBytes));
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    void* partial = scratch.get();
    sizes[3] = chunks;
    void* split_args[6] = {&ptrs[0], &partial, &sizes[0], &sizes[1], &sizes[2], &sizes[3]};
    FUSEBOX_RETURN_IF_ERROR(
        d.check(d.cuLaunchKernel(split, grid(total * chunks), 1, 1, threads, 1, 1, 0, context_->stream(), split_args, nullptr), launching));
    int64_t combine_sizes[3] = {total, chunks, n};
    unsigned combine_threads = 32;
    while (combine_threads < unsigned(kReduceThreads) && int64_t(combine_threads) < chunks) combine_threads *= 2;
    void* combine_args[5] = {&partial, &ptrs[1], &combine_sizes[0], &combine_sizes[1], &combine_sizes[2]};
    return d.check(
        d.cuLaunchKernel(combine, grid(total), 1, 1, combine_threads, 1, 1, 0, context_->stream(), combine_args, nullptr), launching);
  }
  std::string_view kind() const override { return "cuda_reduce"; }

 private:
  Expected<CUfunction> function(const ReduceVariant& v, const char* entry) const {
    const std::string key = v.key() + "/" + entry;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    }
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context_->function(reduce_source(v), entry));
    std::lock_guard<std::mutex> lock(mu_);
    functions_.emplace(key, f);
    return f;
  }

  std::shared_ptr<Context> context_;
  ReduceOp op_;
  std::vector<bool> reduced_;
  std::string keyword_;
  mutable std::mutex mu_;
  mutable std::map<std::string, CUfunction> functions_;  // by ReduceVariant::key() and entry
};

}  // namespace

std::string ReduceVariant::key() const { return std::string(reduce_name(op)) + "/" + std::string(dtype_name(dtype)); }

std::string reduce_source(const ReduceVariant& v) {
  std::string s(prelude_source());
  s += "\n// ---- reduce kernel " + v.key() + "\n#define FB_THREADS " + std::to_string(kReduceThreads) + "\n";
  s += scalar_type_source(v.dtype);
  s += accumulator_source(v.op, is_float(v.dtype));
  s += kReduceEntries;
  return s;
}

std::vector<ReduceVariant> all_reduce_variants() {
  std::vector<ReduceVariant> out;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    for (DType d : kReduceDTypes) {
      if (op != ReduceOp::Mean || is_float(d)) out.push_back({op, d});
    }
  }
  return out;
}

// Long reduced extents get a block each: always when the rows are contiguous (inner == 1: the
// block reads them coalesced), else when there are too few outputs to fill the GPU by threads.
bool reduce_by_block(int64_t outputs, int64_t n, int64_t inner) { return n >= 64 && (inner == 1 || outputs < 16384); }

// Rows of at least 16384 elements when the outputs alone give fewer than 4 blocks per SM:
// chunks of at least 4096 elements, enough of them for 4 blocks per SM.
int64_t reduce_chunks(int64_t outputs, int64_t n, int64_t inner, int multiprocessors) {
  if (!reduce_by_block(outputs, n, inner) || n < 16384 || outputs <= 0) return 1;
  const int64_t want_blocks = 4 * int64_t(std::max(multiprocessors, 1));
  if (outputs >= want_blocks) return 1;
  const int64_t by_length = (n + 4095) / 4096, by_blocks = (want_blocks + outputs - 1) / outputs;
  return std::max<int64_t>(1, std::min(by_length, by_blocks));
}

std::optional<Claim> claim_reduce_op(const Graph& g, const Node& n) {
  std::optional<ReduceOp> op = reduce_op_of(n.op);
  if (!op) return std::nullopt;
  const std::string kw(n.info().keyword);
  const TensorType& x = g.type(n.inputs[0]);
  if (!is_reduce_dtype(x.dtype)) {
    return Claim::refuse(kw + " on " + std::string(dtype_name(x.dtype)) + ": the CUDA reductions run f32, f16, bf16, f64, i32 and i64");
  }
  if (*op == ReduceOp::Mean && !is_float(x.dtype)) return Claim::refuse(kw + " on " + std::string(dtype_name(x.dtype)) + ": a mean needs a float type");
  Expected<std::vector<bool>> reduced = reduced_dims(n, x.rank());
  if (!reduced) return Claim::refuse(kw + ": " + reduced.status().message());
  // Dims of static size 1 drop out; a symbolic dim counts as larger than 1.
  std::vector<int64_t> shape;
  for (const Dim& d : x.shape) shape.push_back(d.is_static() ? d.value() : 2);
  if (!reduce_view(shape, *reduced)) {
    return Claim::refuse(kw + " over " + x.to_string() + ": the reduced axes are not contiguous (a kept axis lies between them); "
                         "the CUDA reductions take [outer, reduced, inner]");
  }
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_reduce_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n) {
  std::optional<Claim> claim = claim_reduce_op(g, n);
  if (!claim) return Status::unimplemented(std::string(n.info().keyword) + " is not a reduction");
  if (!*claim) return Status::unimplemented(claim->reason);
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<bool> reduced, reduced_dims(n, g.type(n.inputs[0]).rank()));
  return std::shared_ptr<const Kernel>(std::make_shared<ReduceKernel>(std::move(context), n, *reduce_op_of(n.op), std::move(reduced)));
}

std::optional<Claim> claim_pool_or_reduce(const Graph& g, const Node& n) {
  if (std::optional<Claim> c = claim_pool_op(g, n)) return c;
  return claim_reduce_op(g, n);
}

Expected<std::shared_ptr<const Kernel>> make_pool_or_reduce_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n) {
  if (claim_pool_op(g, n)) return make_pool_kernel(std::move(context), g, n);
  return make_reduce_kernel(std::move(context), g, n);
}

}  // namespace fusebox::cuda
