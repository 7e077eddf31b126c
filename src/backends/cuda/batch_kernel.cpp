#include "backends/cuda/batch_kernel.h"

#include <algorithm>
#include <sstream>

#include "backends/cuda/prelude.h"
#include "backends/cuda/region_codegen.h"
#include "backends/cuda/region_kernel.h"
#include "backends/cuda/transform_codegen.h"
#include "backends/transform_plan.h"
#include "ir/batch_region.h"
#include "ir/check.h"
#include "ir/region_prologue.h"

namespace fusebox::cuda {

namespace {

std::vector<int64_t> dims_of(const TensorType& t) {
  std::vector<int64_t> d;
  for (const Dim& x : t.shape) d.push_back(x.is_static() ? x.value() : -1);
  return d;
}

bool all_static(const std::vector<int64_t>& d) { return std::find(d.begin(), d.end(), -1) == d.end(); }

// Everything the kernel is made of, per batch node.
struct BatchParts {
  BatchTable table;
  std::shared_ptr<const Graph> body;                         // the region body (parameter k a scalar)
  size_t prologue = 0;                                       // k
  std::vector<std::shared_ptr<const TransformPlan>> plans;  // per item: the crop transform
  std::shared_ptr<const TransformPlan> post;                // the layout transform, or null
  std::vector<int64_t> region_shape, item_shape;
  std::vector<std::vector<int64_t>> operand_strides;  // per region operand, over region_shape
};

Expected<BatchParts> split_batch(const Node& batch) {
  BatchParts p;
  FUSEBOX_ASSIGN_OR_RETURN(p.table, batch_table(batch));
  if (p.table.items == 0) return Status::unimplemented("a batch without items");
  for (size_t i = 0; i < p.table.items; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(Graph item, batch_item_body(batch, i));
    if (item.nodes().empty() || item.nodes().size() > 2) return Status::unimplemented("an item body of other than one region and one transform");
    const Node& region = item.nodes()[0];
    if (region.op != Op::ElementwiseRegion || region.outputs.size() != 1) return Status::unimplemented("an item whose first node is not a one-result region");
    if (region.inputs != item.inputs()) return Status::unimplemented("an item region that does not read the batch operands in order");
    FUSEBOX_ASSIGN_OR_RETURN(PrologueParts parts, split_prologue(region));
    std::string why;
    std::shared_ptr<const TransformPlan> plan = plan_transform_region(parts.transform, &why);
    if (!plan) return Status::unimplemented("an item crop without a transform plan: " + why);
    p.plans.push_back(std::move(plan));
    if (i > 0) continue;
    p.body = parts.region.body;
    p.prologue = parts.input;
    p.region_shape = dims_of(item.type(region.outputs[0]));
    const Node* post = item.nodes().size() == 2 ? &item.nodes()[1] : nullptr;
    if (post && (post->op != Op::TransformRegion || post->inputs[0] != region.outputs[0])) {
      return Status::unimplemented("an item's second node is not a transform of its region");
    }
    if (post) {
      p.post = plan_transform_region(*post, &why);
      if (!p.post) return Status::unimplemented("the item layout transform has no plan: " + why);
      if (p.post->src_dtype != p.post->out_dtype) return Status::unimplemented("an item layout transform that casts");
    }
    p.item_shape = post ? dims_of(item.type(post->outputs[0])) : p.region_shape;
    if (!all_static(p.region_shape) || !all_static(p.item_shape)) return Status::unimplemented("an item of symbolic size");
    for (size_t k = 0; k < region.inputs.size(); ++k) {
      const std::vector<int64_t> shape = k == p.prologue ? dims_of(parts.read) : dims_of(item.type(region.inputs[k]));
      if (!all_static(shape)) return Status::unimplemented("an operand of symbolic size");
      p.operand_strides.push_back(strides_over(shape, p.region_shape));
    }
  }
  const int64_t extent = p.item_shape[size_t(p.table.axis)];
  for (size_t i = 0; i < p.table.items; ++i) {
    if (p.table.offsets[i] != int64_t(i) * extent) return Status::unimplemented("items not written in table order");
  }
  return p;
}

// The kernel source; `item0` and `post` are the device functions (the same source for every item).
std::string source_of(const BatchParts& p, const DeviceTransform& item0, const DeviceTransform* post, DType out_dtype,
                      const std::vector<DType>& operand_storage) {
  std::ostringstream os;
  os << prelude_source() << "\n" << item0.source;
  if (post) os << post->source;
  // The region body as a device function: the one generated for plain regions, renamed.
  Expected<std::string> region = region_source(*p.body, RegionVariant{});
  FUSEBOX_CHECK(region.has_value()) << "batch body without device code";
  const std::string& r = *region;
  const size_t from = r.find("__device__ __forceinline__ void fb_body(");
  const size_t to = r.find("extern \"C\"");
  os << r.substr(from, to - from);
  const Graph& body = *p.body;
  const size_t K = body.inputs().size();
  const std::string O = storage_type_name(out_dtype);
  os << "extern \"C\" __global__ void __launch_bounds__(" << kRegionThreads << ") fb_batch(i64 n";
  for (size_t k = 0; k < K; ++k) os << ", const void* __restrict__ in" << k << "_";
  os << ", void* __restrict__ out_, const " << item0.name << "_axes* __restrict__ items";
  if (post) os << ", const " << post->name << "_axes post_axes";
  os << ") {\n";
  for (size_t k = 0; k < K; ++k) {
    os << "  const " << storage_type_name(operand_storage[k]) << "* __restrict__ in" << k << " = (const "
       << storage_type_name(operand_storage[k]) << "*)in" << k << "_;\n";
  }
  os << "  " << O << "* __restrict__ out = (" << O << "*)out_;\n";
  const std::vector<int64_t>& is = p.item_shape;
  const size_t axis = size_t(p.table.axis);
  int64_t inner = 1;
  for (size_t a = axis + 1; a < is.size(); ++a) inner *= is[a];
  const int64_t extent = is[axis], batch_axis = extent * int64_t(p.table.items);
  os << "  for (i64 e = i64(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += i64(gridDim.x) * blockDim.x) {\n";
  // e = (outer, c, inner) over the batch result with c on the batch axis.
  os << "    const i64 in_row = e % " << inner << "ll, c = (e / " << inner << "ll) % " << batch_axis << "ll, outer = e / "
     << inner * batch_axis << "ll;\n";
  os << "    const i64 item = c / " << extent << "ll;\n";
  os << "    const i64 ei = (outer * " << extent << "ll + (c - item * " << extent << "ll)) * " << inner << "ll + in_row;\n";
  os << "    const i64 r = " << (post ? post->name + "(ei, post_axes)" : std::string("ei")) << ";\n";
  os << "    i64 rest = r;\n";
  for (size_t k = 0; k < K; ++k) os << "    i64 o" << k << " = 0;\n";
  for (size_t d = p.region_shape.size(); d-- > 0;) {
    os << "    { const i64 x = rest % " << p.region_shape[d] << "ll; rest /= " << p.region_shape[d] << "ll;";
    for (size_t k = 0; k < K; ++k) {
      if (p.operand_strides[k][d]) os << " o" << k << " += x * " << p.operand_strides[k][d] << "ll;";
    }
    os << " }\n";
  }
  const DType yd = body.type(body.outputs()[0]).dtype;
  os << "    " << (yd == DType::F64 ? "double" : is_float(yd) ? "float" : yd == DType::Bool ? "bool" : storage_type_name(yd)) << " y0;\n";
  os << "    fb_body(";
  for (size_t k = 0; k < K; ++k) {
    const DType d = body.type(body.inputs()[k]).dtype;
    std::string value = k == p.prologue ? item0.name + "(o" + std::to_string(k) + ", in" + std::to_string(k) + ", items[item])"
                                        : "in" + std::to_string(k) + "[o" + std::to_string(k) + "]";
    switch (d) {
      case DType::F16: value = "fb_f16_load(" + value + ")"; break;
      case DType::BF16: value = "fb_bf16_load(" + value + ")"; break;
      case DType::Bool: value = "(" + value + " != 0)"; break;
      default: break;
    }
    os << (k ? ", " : "") << value;
  }
  os << ", y0);\n";
  switch (out_dtype) {
    case DType::F16: os << "    out[e] = fb_f16_store(y0);\n"; break;
    case DType::BF16: os << "    out[e] = fb_bf16_store(y0);\n"; break;
    case DType::Bool: os << "    out[e] = u8(y0 ? 1 : 0);\n"; break;
    default: os << "    out[e] = y0;\n"; break;
  }
  os << "  }\n}\n";
  return os.str();
}

class BatchKernel final : public Kernel {
 public:
  BatchKernel(std::shared_ptr<Context> c, CUfunction f, std::vector<std::shared_ptr<const DeviceTransform>> items,
              std::shared_ptr<void> item_args, std::shared_ptr<const DeviceTransform> post)
      : context_(std::move(c)), function_(f), items_(std::move(items)), item_args_(std::move(item_args)), post_(std::move(post)) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(out.size() == 1) << "batch kernel: one result";
    int64_t n = out[0].numel();
    if (n == 0) return Status::ok();
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    std::vector<void*> pointers;
    for (const BufferView& b : in) pointers.push_back(b.data);
    void* dst = out[0].data;
    void* items = item_args_.get();
    std::vector<void*> args = {&n};
    for (void*& p : pointers) args.push_back(&p);
    args.push_back(&dst);
    args.push_back(&items);
    if (post_) args.push_back(const_cast<uint8_t*>(post_->axes_arg.data()));
    const unsigned blocks = unsigned(std::min<int64_t>((n + kRegionThreads - 1) / kRegionThreads, int64_t(1) << 30));
    const Driver& d = context_->driver();
    return d.check(d.cuLaunchKernel(function_, blocks, 1, 1, kRegionThreads, 1, 1, 0, context_->stream(), args.data(), nullptr),
                   "launching a CUDA batch region");
  }
  std::string_view kind() const override { return "cuda_batch"; }

 private:
  std::shared_ptr<Context> context_;
  CUfunction function_;
  std::vector<std::shared_ptr<const DeviceTransform>> items_;  // keep the tables alive
  std::shared_ptr<void> item_args_;
  std::shared_ptr<const DeviceTransform> post_;
};

struct Built {
  BatchParts parts;
  std::vector<std::shared_ptr<const DeviceTransform>> items;
  std::shared_ptr<const DeviceTransform> post;
  std::string source;
};

Expected<Built> build(Context* context, const Node& batch) {
  Built b;
  FUSEBOX_ASSIGN_OR_RETURN(b.parts, split_batch(batch));
  for (size_t i = 0; i < b.parts.plans.size(); ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const DeviceTransform> t, make_device_transform(context, *b.parts.plans[i], "fb_item", /*index_only=*/false, TapWalk::Combos));
    if (i > 0 && t->source != b.items[0]->source) return Status::unimplemented("items whose crops differ in structure");
    b.items.push_back(std::move(t));
  }
  if (b.parts.post) {
    FUSEBOX_ASSIGN_OR_RETURN(b.post, make_device_transform(context, *b.parts.post, "fb_layout", /*index_only=*/true));
  }
  FUSEBOX_RETURN_IF_ERROR(region_source(*b.parts.body, RegionVariant{}).status());
  std::vector<DType> storage;
  for (size_t k = 0; k < b.parts.body->inputs().size(); ++k) {
    storage.push_back(k == b.parts.prologue ? b.items[0]->src_dtype : b.parts.body->type(b.parts.body->inputs()[k]).dtype);
  }
  if (b.parts.body->outputs().size() != 1) return Status::unimplemented("a batch body with several results");
  const DType out = batch.outputs.empty() ? DType::F32 : b.parts.body->type(b.parts.body->outputs()[0]).dtype;
  b.source = source_of(b.parts, *b.items[0], b.post.get(), out, storage);
  return b;
}

}  // namespace

std::string batch_region_unsupported(const Node& batch) {
  Expected<Built> b = build(nullptr, batch);
  return b ? "" : b.status().message();
}

Expected<std::string> batch_kernel_source(const Node& batch) {
  FUSEBOX_ASSIGN_OR_RETURN(Built b, build(nullptr, batch));
  return b.source;
}

Expected<std::shared_ptr<const Kernel>> make_batch_kernel(std::shared_ptr<Context> context, const Node& batch) {
  FUSEBOX_ASSIGN_OR_RETURN(Built b, build(context.get(), batch));
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context->function(b.source, "fb_batch"));
  // The per-item argument structs, side by side in device memory.
  std::vector<uint8_t> args;
  for (const auto& t : b.items) args.insert(args.end(), t->axes_arg.begin(), t->axes_arg.end());
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> item_args, context->allocate(args.size()));
  const Driver& d = context->driver();
  FUSEBOX_RETURN_IF_ERROR(context->make_current());
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(item_args.get()), args.data(), args.size(),
                                                      context->stream()),
                                  "uploading batch item tables"));
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuStreamSynchronize(context->stream()), "uploading batch item tables"));
  return std::shared_ptr<const Kernel>(std::make_shared<BatchKernel>(std::move(context), f, std::move(b.items),
                                                                     std::move(item_args), std::move(b.post)));
}

}  // namespace fusebox::cuda
