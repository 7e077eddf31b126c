#include "backends/cpu/global_pool_kernel.h"

#include <algorithm>
#include <vector>

#include "backends/host_backend.h"
#include "ir/layout.h"

namespace fusebox::cpu {

namespace {

constexpr int64_t kBlock = 256;  // positions summed in f32 before the block's sum goes to double

// sum[l] += Σ_i x[i * stride + l] for l < lanes, i < count, in f32 blocks of kBlock positions.
void add_lanes(const float* x, int64_t count, int64_t stride, int64_t lanes, double* sum, float* block) {
  for (int64_t i0 = 0; i0 < count; i0 += kBlock) {
    const int64_t i1 = std::min(count, i0 + kBlock);
    std::fill(block, block + lanes, 0.f);
    for (int64_t i = i0; i < i1; ++i) {
      const float* row = x + i * stride;
      for (int64_t l = 0; l < lanes; ++l) block[l] += row[l];
    }
    for (int64_t l = 0; l < lanes; ++l) sum[l] += block[l];
  }
}

// The sum of count contiguous floats: 16 f32 lanes per block, the blocks' sums in double.
double sum_plane(const float* x, int64_t count) {
  constexpr int64_t kLanes = 16;
  double sum = 0;
  float lanes[kLanes];
  for (int64_t i0 = 0; i0 < count; i0 += kBlock) {
    const int64_t i1 = std::min(count, i0 + kBlock);
    std::fill(lanes, lanes + kLanes, 0.f);
    int64_t i = i0;
    for (; i + kLanes <= i1; i += kLanes) {
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += x[i + l];
    }
    double block = 0;
    for (; i < i1; ++i) block += x[i];
    for (float v : lanes) block += v;
    sum += block;
  }
  return sum;
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
#pragma omp parallel for schedule(static) if (x.numel() >= (int64_t(1) << 15))
      for (int64_t p = 0; p < planes; ++p) dst[p] = mean(sum_plane(src + p * size, size), size);
      return Status::ok();
    }
    if (x.rank() != 5 || y.numel() != s[0] * s[1] * s[4])
      return Status::invalid("global_avg_pool: blocked result " + y.type_string() + " for " +
                             x.type_string());
    const int64_t slabs = s[0] * s[1], positions = s[2] * s[3], lanes = s[4];
    // Work items: (slab, run of channels). One slab with many lanes (NHWC at batch 1) splits
    // into runs of at least 64 channels so both halves of a row go to different threads.
    const int64_t run = slabs > 1 || lanes < 128 ? lanes : std::max<int64_t>(64, (lanes / 2 + 15) / 16 * 16);
    const int64_t runs_per_slab = (lanes + run - 1) / run;
#pragma omp parallel if (x.numel() >= (int64_t(1) << 15))
    {
      std::vector<double> sum(static_cast<size_t>(run));
      std::vector<float> block(static_cast<size_t>(run));
#pragma omp for schedule(static)
      for (int64_t item = 0; item < slabs * runs_per_slab; ++item) {
        const int64_t slab = item / runs_per_slab, l0 = (item % runs_per_slab) * run;
        const int64_t n = std::min(run, lanes - l0);
        std::fill(sum.begin(), sum.begin() + n, 0.0);
        add_lanes(src + slab * positions * lanes + l0, positions, lanes, n, sum.data(), block.data());
        for (int64_t l = 0; l < n; ++l) dst[slab * lanes + l0 + l] = mean(sum[l], positions);
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
