#include "backends/cuda/region_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/transform_plan.h"
#include "ir/check.h"
#include "ir/outline.h"
#include "ir/region_prologue.h"

namespace fusebox::cuda {

namespace {

// Blocks per launch: enough for every element, at most `cap_per_sm` per multiprocessor when
// FUSEBOX_CUDA_BLOCKS_PER_SM sets one (the grid-stride loops cover the rest).
constexpr int kDefaultUnroll = 2;

unsigned grid_for(int64_t work, int sms) {
  static const int64_t cap_per_sm = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_BLOCKS_PER_SM");
    return e ? std::max<int64_t>(0, std::atoll(e)) : 0;
  }();
  int64_t blocks = (work + kRegionThreads - 1) / kRegionThreads;
  if (cap_per_sm > 0) blocks = std::min<int64_t>(blocks, cap_per_sm * sms);
  return unsigned(std::clamp<int64_t>(blocks, 1, int64_t(1) << 30));
}

// Accesses in flight per thread in the flat kernel (FUSEBOX_CUDA_UNROLL overrides, 1 to 8).
int flat_unroll() {
  static const int unroll = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_UNROLL");
    return e ? std::clamp(std::atoi(e), 1, 8) : kDefaultUnroll;
  }();
  return unroll;
}

}  // namespace

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

MergedDims merge_dims(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides) {
  MergedDims m;
  m.strides.resize(strides.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool joins = !m.dims.empty();
    for (size_t k = 0; joins && k < strides.size(); ++k) joins = m.strides[k].back() == strides[k][d] * shape[d];
    if (joins) {
      m.dims.back() *= shape[d];
      for (size_t k = 0; k < strides.size(); ++k) m.strides[k].back() = strides[k][d];
    } else {
      m.dims.push_back(shape[d]);
      for (size_t k = 0; k < strides.size(); ++k) m.strides[k].push_back(strides[k][d]);
    }
  }
  return m;
}

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

namespace {

std::vector<int64_t> static_dims(const TensorType& t) {
  std::vector<int64_t> d;
  for (const Dim& x : t.shape) d.push_back(x.is_static() ? x.value() : -1);
  return d;
}

}  // namespace

std::string transform_region_unsupported(const Node& region) {
  std::string why;
  std::shared_ptr<const TransformPlan> plan = plan_transform_region(region, &why);
  if (!plan) return "its transform has no plan: " + why;
  return device_transform_unsupported(*plan);
}

std::string prologue_region_unsupported(const Node& region) {
  Expected<PrologueParts> parts = split_prologue(region);
  if (!parts) return parts.status().message();
  if (std::string why = transform_region_unsupported(parts->transform); !why.empty()) return why;
  for (int64_t d : static_dims(parts->read))
    if (d < 0) return "its transform's result has a symbolic size";
  Expected<std::string> source = region_source(*parts->region.body, RegionVariant{});
  return source ? "" : source.status().message();
}

Expected<std::shared_ptr<const Kernel>> RegionKernel::make_with_prologue(std::shared_ptr<Context> context, const Node& region) {
  FUSEBOX_ASSIGN_OR_RETURN(PrologueParts parts, split_prologue(region));
  std::string why;
  std::shared_ptr<const TransformPlan> plan = plan_transform_region(parts.transform, &why);
  if (!plan) return Status::unimplemented("the prologue's transform has no plan: " + why);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceTransform> t, make_device_transform(context.get(), *plan, "fb_pro"));
  std::shared_ptr<RegionKernel> k(new RegionKernel(std::move(context), parts.region.body));
  k->transform_ = std::move(t);
  k->prologue_ = RegionPrologue{parts.input, k->transform_.get()};
  k->read_shape_ = static_dims(parts.read);
  FUSEBOX_RETURN_IF_ERROR(region_source(*k->body_, RegionVariant{}, &k->prologue_).status());
  return std::shared_ptr<const Kernel>(std::move(k));
}

Expected<std::shared_ptr<const Kernel>> TransformKernel::make(std::shared_ptr<Context> context, const Node& region) {
  std::string why;
  std::shared_ptr<const TransformPlan> plan = plan_transform_region(region, &why);
  if (!plan) return Status::unimplemented("transform_region without a plan: " + why);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceTransform> t, make_device_transform(context.get(), *plan, "fb_tf"));
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context->function(transform_kernel_source(*t), "fb_transform"));
  return std::shared_ptr<const Kernel>(new TransformKernel(std::move(context), std::move(t), f));
}

Status TransformKernel::run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const {
  FUSEBOX_CHECK(in.size() == 1 && out.size() == 1 && out[0].dtype == transform_->out_dtype) << "transform operands";
  int64_t n = out[0].numel();
  if (n == 0) return Status::ok();
  FUSEBOX_RETURN_IF_ERROR(context_->make_current());
  void* src = in[0].data;
  void* dst = out[0].data;
  std::vector<void*> args = {&n, &src, &dst, const_cast<uint8_t*>(transform_->axes_arg.data())};
  const Driver& d = context_->driver();
  return d.check(d.cuLaunchKernel(function_, grid_for(n, context_->multiprocessors()), 1, 1, kRegionThreads, 1, 1, 0,
                                  context_->stream(), args.data(), nullptr),
                 "launching a CUDA transform");
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
  FUSEBOX_ASSIGN_OR_RETURN(std::string source, region_source(*body_, v, transform_ ? &prologue_ : nullptr));
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
  const size_t pk = transform_ ? prologue_.operand : size_t(-1);
  // The shape each operand stands for (the prologue's operand: the transform's result).
  auto shape_of = [&](size_t k) -> const std::vector<int64_t>& { return k == pk ? read_shape_ : in[k].shape; };
  for (size_t k = 0; k < in.size(); ++k) {
    const int64_t m = product(shape_of(k));
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
  if (transform_) args.push_back(const_cast<uint8_t*>(transform_->axes_arg.data()));
  std::vector<uint8_t> shape_arg;
  int64_t work = n;
  if (!broadcast) {
    v.vector = region_vector_width(*body_);
    for (size_t k = 0; k < pointers.size(); ++k) {
      const bool repeated = k < in.size() && ((v.repeated >> k) & 1u);
      const DType d = k < in.size() ? in[k].dtype : out[k - in.size()].dtype;
      if (!repeated && k != pk && reinterpret_cast<uintptr_t>(pointers[k]) % uintptr_t(v.vector * dtype_size(d)) != 0) v.vector = 1;
    }
    v.unroll = v.vector > 1 ? flat_unroll() : 1;
    work = ((n / v.vector) + v.unroll - 1) / v.unroll;
    if (work == 0) work = n;
  } else {
    // Strides of every operand over the output's dims; then dims merged where every operand
    // walks them contiguously, and dims of size 1 dropped.
    std::vector<std::vector<int64_t>> st;
    for (size_t k = 0; k < in.size(); ++k) st.push_back(strides_over(shape_of(k), shape));
    auto [dims, merged] = merge_dims(shape, st);
    if (dims.size() > size_t(kMaxStridedRank)) {
      return Status::unimplemented("CUDA region over " + std::to_string(dims.size()) + " broadcast dims (at most " +
                                   std::to_string(kMaxStridedRank) + ")");
    }
    v.rank = int(dims.size());
    v.index64 = n >= (int64_t(1) << 31);
    // V elements of a row per thread when the last dim is a multiple of V, every operand walks
    // it with stride 1 or repeats along it, and the row-walking pointers are aligned.
    const int width = region_vector_width(*body_);
    bool packs = width > 1 && v.rank > 0 && dims.back() % width == 0 && in.size() <= 64;
    for (size_t k = 0; packs && k < in.size(); ++k) {
      const int64_t s = merged[k].back();
      if (s != 0 && s != 1) packs = false;
      if (s == 0) v.inner_repeated |= uint64_t(1) << k;
      if (s == 1 && k != pk && reinterpret_cast<uintptr_t>(in[k].data) % uintptr_t(width * dtype_size(in[k].dtype)) != 0) packs = false;
    }
    for (size_t j = 0; packs && j < out.size(); ++j) {
      packs = reinterpret_cast<uintptr_t>(out[j].data) % uintptr_t(width * dtype_size(out[j].dtype)) == 0;
    }
    if (packs) {
      v.vector = width;
      work = n / width;
    } else {
      v.inner_repeated = 0;
    }
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
