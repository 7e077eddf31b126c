#include "backends/cuda/region_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "ir/check.h"
#include "ir/outline.h"

namespace fusebox::cuda {

namespace {

// Broadcast strides of `shape` read over `out` (numpy rules), in elements.
std::vector<int64_t> strides_over(const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  std::vector<int64_t> s(out.size(), 0);
  int64_t step = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t d = shape.size() - 1 - i, od = out.size() - 1 - i;
    s[od] = shape[d] == 1 ? 0 : step;
    step *= shape[d];
  }
  return s;
}

// Blocks per launch: enough for every element, at most `cap_per_sm` per multiprocessor when
// FUSEBOX_CUDA_BLOCKS_PER_SM sets one (the grid-stride loops cover the rest).
unsigned grid_for(int64_t work, int sms) {
  static const int64_t cap_per_sm = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_BLOCKS_PER_SM");
    return e ? std::max<int64_t>(0, std::atoll(e)) : 0;
  }();
  int64_t blocks = (work + kRegionThreads - 1) / kRegionThreads;
  if (cap_per_sm > 0) blocks = std::min<int64_t>(blocks, cap_per_sm * sms);
  return unsigned(std::clamp<int64_t>(blocks, 1, int64_t(1) << 30));
}

}  // namespace

std::shared_ptr<const Graph> region_body_of(const Graph& g, const Node& n) {
  if (n.op == Op::ElementwiseRegion) {
    if (n.attr_i64("prologue_input") >= 0 || !n.body) return nullptr;
    return n.body;
  }
  if (n.outputs.size() != 1 || !is_region_step(g, n)) return nullptr;
  std::vector<DType> dtypes;
  for (ValueId v : n.inputs) dtypes.push_back(g.type(v).dtype);
  return std::make_shared<const Graph>(single_step_body(n, dtypes, g.type(n.outputs[0]).dtype));
}

Expected<std::shared_ptr<const Kernel>> RegionKernel::make(std::shared_ptr<Context> context, std::shared_ptr<const Graph> body) {
  // Generating the flat source checks that every step has device code.
  FUSEBOX_RETURN_IF_ERROR(region_source(*body, RegionVariant{}).status());
  return std::shared_ptr<const Kernel>(new RegionKernel(std::move(context), std::move(body)));
}

Expected<CUfunction> RegionKernel::function(const RegionVariant& v) const {
  const std::string key = v.key();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = functions_.find(key); it != functions_.end()) return it->second;
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::string source, region_source(*body_, v));
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context_->function(source, kRegionEntry));
  std::lock_guard<std::mutex> lock(mu_);
  functions_.emplace(key, f);
  return f;
}

Status RegionKernel::run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const {
  FUSEBOX_CHECK(!out.empty() && in.size() == body_->inputs().size() && out.size() == body_->outputs().size())
      << "region operands do not match its body";
  const std::vector<int64_t>& shape = out[0].shape;
  const int64_t n = product(shape);
  if (n == 0) return Status::ok();
  FUSEBOX_RETURN_IF_ERROR(context_->make_current());
  RegionVariant v;
  bool broadcast = false;
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t m = in[k].numel();
    if (m == n) continue;
    if (m == 1 && k < 64) v.repeated |= uint64_t(1) << k;
    else broadcast = true;
  }
  std::vector<void*> pointers;
  for (const BufferView& b : in) pointers.push_back(b.data);
  for (const BufferView& b : out) pointers.push_back(b.data);
  std::vector<void*> args;
  int64_t count = n;
  args.push_back(&count);
  for (void*& p : pointers) args.push_back(&p);
  std::vector<uint8_t> shape_arg;
  int64_t work = n;
  if (!broadcast) {
    v.vector = region_vector_width(*body_);
    for (size_t k = 0; k < pointers.size(); ++k) {
      const bool repeated = k < in.size() && ((v.repeated >> k) & 1u);
      const DType d = k < in.size() ? in[k].dtype : out[k - in.size()].dtype;
      if (!repeated && reinterpret_cast<uintptr_t>(pointers[k]) % uintptr_t(v.vector * dtype_size(d)) != 0) v.vector = 1;
    }
    work = (n + v.vector - 1) / v.vector;
  } else {
    // Strides of every operand over the output's dims; then dims merged where every operand
    // walks them contiguously, and dims of size 1 dropped.
    std::vector<std::vector<int64_t>> st;
    for (const BufferView& b : in) st.push_back(strides_over(b.shape, shape));
    std::vector<int64_t> dims;
    std::vector<std::vector<int64_t>> merged(in.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      bool joins = !dims.empty();
      for (size_t k = 0; joins && k < in.size(); ++k) joins = merged[k].back() == st[k][d] * shape[d];
      if (joins) {
        dims.back() *= shape[d];
        for (size_t k = 0; k < in.size(); ++k) merged[k].back() = st[k][d];
      } else {
        dims.push_back(shape[d]);
        for (size_t k = 0; k < in.size(); ++k) merged[k].push_back(st[k][d]);
      }
    }
    if (dims.size() > size_t(kMaxStridedRank)) {
      return Status::unimplemented("CUDA region over " + std::to_string(dims.size()) + " broadcast dims (at most " +
                                   std::to_string(kMaxStridedRank) + ")");
    }
    v.rank = int(dims.size());
    v.index64 = n >= (int64_t(1) << 31);
    auto put = [&](int64_t x) {
      if (v.index64) {
        const uint8_t* p = reinterpret_cast<const uint8_t*>(&x);
        shape_arg.insert(shape_arg.end(), p, p + 8);
      } else {
        const uint32_t y = uint32_t(x);
        const uint8_t* p = reinterpret_cast<const uint8_t*>(&y);
        shape_arg.insert(shape_arg.end(), p, p + 4);
      }
    };
    for (int64_t d : dims) put(d);
    for (size_t k = 0; k < in.size(); ++k) {
      for (int64_t s : merged[k]) put(s);
    }
    args.push_back(shape_arg.data());
  }
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, function(v));
  const Driver& d = context_->driver();
  return d.check(d.cuLaunchKernel(f, grid_for(work, context_->multiprocessors()), 1, 1, kRegionThreads, 1, 1, 0,
                                  context_->stream(), args.data(), nullptr),
                 "launching a CUDA region");
}

}  // namespace fusebox::cuda
