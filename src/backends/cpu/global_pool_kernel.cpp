#include "backends/cpu/global_pool_kernel.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/row_kernels.h"
#include "backends/host_backend.h"
#include "ir/layout.h"

namespace fusebox::cpu {

namespace {

constexpr int64_t kBlock = 256;  // positions summed in f32 before the block's sum goes to double

// sum[l] += Σ_i x[i * stride + l] for l < N, i < count: N f32 accumulators, emptied into double
// every kBlock positions. They are vectors of 4 lanes (the baseline ISA's width) in a fully
// unrolled loop, so they stay in registers (8 of them for N = 32); a plain float array stays in
// memory, one load and store per element.
template <int N>
void add_lane_group(const float* x, int64_t count, int64_t stride, double* sum) {
  static_assert(N % 4 == 0);
  using V = float __attribute__((vector_size(16)));
  constexpr int kV = N / 4;
  for (int64_t i0 = 0; i0 < count; i0 += kBlock) {
    const int64_t i1 = std::min(count, i0 + kBlock);
    V acc[kV] = {};
    for (int64_t i = i0; i < i1; ++i) {
      const float* row = x + i * stride;
#pragma GCC unroll 8
      for (int v = 0; v < kV; ++v) {
        V t;
        std::memcpy(&t, row + 4 * v, sizeof(V));
        acc[v] += t;
      }
    }
    for (int v = 0; v < kV; ++v) {
      for (int l = 0; l < 4; ++l) sum[4 * v + l] += acc[v][l];
    }
  }
}

// The same for one lane.
void add_lane(const float* x, int64_t count, int64_t stride, double* sum) {
  for (int64_t i0 = 0; i0 < count; i0 += kBlock) {
    const int64_t i1 = std::min(count, i0 + kBlock);
    float acc = 0.f;
    for (int64_t i = i0; i < i1; ++i) acc += x[i * stride];
    *sum += acc;
  }
}

// sum[l] += Σ_i x[i * stride + l] for l < lanes, i < count: groups of 32 lanes, then 16, then
// one lane at a time.
void add_lanes(const float* x, int64_t count, int64_t stride, int64_t lanes, double* sum) {
  int64_t l = 0;
  for (; l + 32 <= lanes; l += 32) add_lane_group<32>(x + l, count, stride, sum + l);
  for (; l + 16 <= lanes; l += 16) add_lane_group<16>(x + l, count, stride, sum + l);
  for (; l < lanes; ++l) add_lane(x + l, count, stride, sum + l);
}

float mean(double sum, int64_t count) {
  return count > 0 ? static_cast<float>(sum / static_cast<double>(count))
                   : std::numeric_limits<float>::quiet_NaN();
}

class GlobalPoolKernel final : public Kernel {
 public:
  explicit GlobalPoolKernel(bool blocked) : blocked_(blocked) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    const Array& x = ins[0];
    Array& y = outs[0];
    const std::vector<int64_t>& s = x.shape();
    const float* src = x.data<float>();
    float* dst = y.data<float>();
    if (!blocked_) {
      if (x.rank() < 3 || y.numel() != s[0] * s[1])
        return Status::invalid("global_avg_pool: result " + y.type_string() + " for " + x.type_string());
      const int64_t planes = s[0] * s[1], size = x.numel() / std::max<int64_t>(planes, 1);
      const RowLoops& loops = row_loops(best_row_isa());  // the row kernels' per-ISA sum
#pragma omp parallel for schedule(static) if (x.numel() >= (int64_t(1) << 15))
      for (int64_t p = 0; p < planes; ++p) dst[p] = mean(loops.sum(src + p * size, size), size);
      return Status::ok();
    }
    if (x.rank() != 5 || y.numel() != s[0] * s[1] * s[4])
      return Status::invalid("global_avg_pool: blocked result " + y.type_string() + " for " +
                             x.type_string());
    const int64_t slabs = s[0] * s[1], positions = s[2] * s[3], lanes = s[4];
    // Work items: (slab, part of its positions, run of its lanes). With fewer slabs than threads
    // (NHWC at batch 1 is one slab), each slab's positions split into parts of whole 256-position
    // blocks, whose double sums are added afterwards; where that still leaves threads idle (7x7
    // positions are one block), its lanes split into runs of whole groups of 32.
    const bool parallel = x.numel() >= (int64_t(1) << 15);
    const int64_t threads = parallel ? omp_get_max_threads() : 1;
    const int64_t blocks = (positions + kBlock - 1) / kBlock;
    const int64_t parts =
        slabs >= threads ? 1 : std::clamp<int64_t>((threads + slabs - 1) / slabs, 1, blocks);
    const int64_t groups = (lanes + 31) / 32;
    const int64_t lane_runs =
        slabs * parts >= threads
            ? 1
            : std::clamp<int64_t>((threads + slabs * parts - 1) / (slabs * parts), 1, groups);
    std::vector<double> partial(static_cast<size_t>(slabs * parts * lanes), 0.0);
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t item = 0; item < slabs * parts * lane_runs; ++item) {
      const int64_t sp = item / lane_runs, slab = sp / parts, part = sp % parts, run = item % lane_runs;
      const int64_t p0 = std::min(positions, blocks * part / parts * kBlock);
      const int64_t p1 = std::min(positions, blocks * (part + 1) / parts * kBlock);
      const int64_t l0 = groups * run / lane_runs * 32,
                    l1 = std::min(lanes, groups * (run + 1) / lane_runs * 32);
      add_lanes(src + (slab * positions + p0) * lanes + l0, p1 - p0, lanes, l1 - l0,
                partial.data() + sp * lanes + l0);
    }
    for (int64_t slab = 0; slab < slabs; ++slab) {
      for (int64_t l = 0; l < lanes; ++l) {
        double sum = 0;
        for (int64_t part = 0; part < parts; ++part) sum += partial[(slab * parts + part) * lanes + l];
        dst[slab * lanes + l] = mean(sum, positions);
      }
    }
    return Status::ok();
  }
  std::string_view kind() const override { return "global_pool"; }

 private:
  bool blocked_;  // nChw<b>c or NHWC: rank 5, lanes last
};

}  // namespace

std::shared_ptr<const Kernel> make_global_pool_kernel(const Graph& g, const Node& n) {
  if (n.op != Op::GlobalAvgPool || g.type(n.inputs[0]).dtype != DType::F32) return nullptr;
  return std::make_shared<GlobalPoolKernel>(has_nchwc_layout(n));
}

}  // namespace fusebox::cpu
