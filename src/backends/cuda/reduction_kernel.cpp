// reduction_region's Kernel: launch arguments from the buffers' shapes, sources per variant.
#include "backends/cuda/reduction_kernel.h"

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>

#include "backends/cuda/region_kernel.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

// numpy broadcasting of the operands' shapes: the row shape S (every operand broadcasts into it,
// and the region's reductions read values of that shape).
std::vector<int64_t> broadcast_of(std::span<const BufferView> in) {
  size_t rank = 0;
  for (const BufferView& b : in) rank = std::max(rank, b.shape.size());
  std::vector<int64_t> s(rank, 1);
  for (const BufferView& b : in) {
    for (size_t i = 0; i < b.shape.size(); ++i) {
      int64_t& d = s[rank - b.shape.size() + i];
      if (b.shape[i] != 1) d = b.shape[i];
    }
  }
  return s;
}

class ReductionKernel final : public Kernel {
 public:
  ReductionKernel(std::shared_ptr<Context> context, std::shared_ptr<const ReductionPlan> plan)
      : context_(std::move(context)), plan_(std::move(plan)) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(in.size() == plan_->body->inputs().size() && out.size() == plan_->body->outputs().size())
        << "reduction_region operands do not match its body";
    FUSEBOX_ASSIGN_OR_RETURN(ReductionLaunch l, plan_reduction_launch(*plan_, in));
    if (l.rows == 0) return Status::ok();
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, function(l.row_dims));
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    std::vector<void*> pointers;
    for (const BufferView& b : in) pointers.push_back(b.data);
    for (const BufferView& b : out) pointers.push_back(b.data);
    std::vector<void*> args;
    for (void*& p : pointers) args.push_back(&p);
    args.push_back(l.args.data());
    // One block per row, grid-stride beyond what the device holds at once.
    const int64_t blocks = std::min<int64_t>(l.rows, int64_t(context_->multiprocessors()) * (2048 / l.threads) * 4);
    const Driver& d = context_->driver();
    return d.check(d.cuLaunchKernel(f, unsigned(std::clamp<int64_t>(blocks, 1, INT_MAX)), 1, 1, l.threads, 1, 1, 0,
                                    context_->stream(), args.data(), nullptr),
                   "launching the CUDA reduction_region kernel");
  }
  std::string_view kind() const override { return "cuda_reduction"; }

 private:
  Expected<CUfunction> function(int row_dims) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = functions_.find(row_dims); it != functions_.end()) return it->second;
    }
    FUSEBOX_ASSIGN_OR_RETURN(std::string source, reduction_source(*plan_, row_dims));
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context_->function(source, kReductionEntry));
    std::lock_guard<std::mutex> lock(mu_);
    functions_.emplace(row_dims, f);
    return f;
  }

  std::shared_ptr<Context> context_;
  std::shared_ptr<const ReductionPlan> plan_;
  mutable std::mutex mu_;
  mutable std::map<int, CUfunction> functions_;  // by merged row dims
};

Expected<std::shared_ptr<const ReductionPlan>> plan_of(const Node& n) {
  if (n.op != Op::ReductionRegion || !n.body) return Status::unimplemented("not a reduction_region with a body");
  return plan_reduction(n.body, n.attr_i64("row_axes"));
}

}  // namespace

Expected<ReductionLaunch> plan_reduction_launch(const ReductionPlan& plan, std::span<const BufferView> in) {
  const std::vector<int64_t> s = broadcast_of(in);
  FUSEBOX_CHECK(int(s.size()) == plan.rank) << "reduction_region operands of rank " << s.size() << " for rows of rank " << plan.rank;
  const size_t lead = s.size() - size_t(plan.row_axes);
  ReductionLaunch l;
  l.rows = product(std::span(s).first(lead));
  l.n = product(std::span(s).subspan(lead));
  if (l.rows == 0) return l;
  std::vector<std::vector<int64_t>> lead_strides, row_strides;
  for (const BufferView& b : in) {
    const std::vector<int64_t> st = strides_over(b.shape, s);
    lead_strides.emplace_back(st.begin(), st.begin() + long(lead));
    row_strides.emplace_back(st.begin() + long(lead), st.end());
  }
  MergedDims leading = merge_dims(std::vector<int64_t>(s.begin(), s.begin() + long(lead)), lead_strides);
  MergedDims row = merge_dims(std::vector<int64_t>(s.begin() + long(lead), s.end()), row_strides);
  if (row.dims.empty()) {  // a row of one element
    row.dims.push_back(1);
    for (auto& st : row.strides) st.push_back(0);
  }
  if (leading.dims.size() > size_t(kMaxReductionDims) || row.dims.size() > size_t(kMaxReductionDims)) {
    return Status::unimplemented("reduction_region over " + std::to_string(leading.dims.size()) + " leading and " +
                                 std::to_string(row.dims.size()) + " row dims after merging: the CUDA kernel takes at most " +
                                 std::to_string(kMaxReductionDims) + " of each");
  }
  l.row_dims = int(row.dims.size());
  // FbRows, field by field (all i64, so no padding).
  const size_t K = std::max<size_t>(in.size(), 1);
  l.args = {l.rows, l.n, int64_t(leading.dims.size())};
  std::vector<int64_t> dims(kMaxReductionDims, 1);
  std::copy(leading.dims.begin(), leading.dims.end(), dims.begin());
  l.args.insert(l.args.end(), dims.begin(), dims.end());
  for (size_t k = 0; k < K; ++k) {
    std::vector<int64_t> st(kMaxReductionDims, 0);
    if (k < in.size()) std::copy(leading.strides[k].begin(), leading.strides[k].end(), st.begin());
    l.args.insert(l.args.end(), st.begin(), st.end());
  }
  l.args.insert(l.args.end(), row.dims.begin(), row.dims.end());
  for (size_t k = 0; k < K; ++k) {
    if (k < in.size()) l.args.insert(l.args.end(), row.strides[k].begin(), row.strides[k].end());
    else l.args.insert(l.args.end(), row.dims.size(), 0);
  }
  // A warp for a short row, up to kReductionThreads.
  l.threads = unsigned(std::clamp<int64_t>((l.n + 31) / 32 * 32, 32, kReductionThreads));
  return l;
}

Claim claim_reduction_region(const Graph&, const Node& n) {
  Expected<std::shared_ptr<const ReductionPlan>> plan = plan_of(n);
  if (!plan) return Claim::refuse(plan.status().message());
  // Generating the source checks that every step has device code.
  Expected<std::string> source = reduction_source(**plan, 1);
  if (!source) return Claim::refuse(source.status().message());
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_reduction_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n) {
  if (Claim c = claim_reduction_region(g, n); !c) return Status::unimplemented(c.reason);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const ReductionPlan> plan, plan_of(n));
  return std::shared_ptr<const Kernel>(std::make_shared<ReductionKernel>(std::move(context), std::move(plan)));
}

}  // namespace fusebox::cuda
