// The batch kernel (batch_kernel.h).
#include "backends/cpu/batch_kernel.h"

#include <omp.h>

#include <cstring>
#include <optional>

#include "backends/cpu/batch_rows.h"
#include "backends/cpu/prologue_kernel.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/transform_kernel.h"
#include "ir/batch_region.h"

namespace fusebox::cpu {

namespace {

std::vector<int64_t> static_dims(const TensorType& t) {
  std::vector<int64_t> d;
  for (const Dim& x : t.shape) d.push_back(x.value());
  return d;
}

struct ItemKernel {
  Graph body;                                   // keeps the item's nodes alive
  std::shared_ptr<const Kernel> region;         // the prologue kernel
  TensorType region_type;                       // its result
  std::optional<Node> post;                     // the per-item transform_region
  std::shared_ptr<const TransformPlan> plan;    // its plan; null: its steps one by one
};

class BatchKernel final : public Kernel {
 public:
  BatchKernel(BatchTable table, std::vector<ItemKernel> items) : table_(std::move(table)), items_(std::move(items)) {}

  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> outs = arrays_over(out);
    if (outs.size() != 1) return Status::internal("batch kernel: one result expected");
    const int64_t n = int64_t(items_.size());
    Status first_error = Status::ok();
    if (n >= omp_get_max_threads()) {
#pragma omp parallel for schedule(dynamic)
      for (int64_t i = 0; i < n; ++i) {
        Status s = run_item(stream, in, outs[0], size_t(i));
        if (!s.is_ok()) {
#pragma omp critical(fusebox_batch_error)
          if (first_error.is_ok()) first_error = s;
        }
      }
      return first_error;
    }
    for (size_t i = 0; i < items_.size(); ++i) FUSEBOX_RETURN_IF_ERROR(run_item(stream, in, outs[0], i));
    return Status::ok();
  }
  std::string_view kind() const override { return "region"; }

 private:
  // Item i's result goes to rows [offset, offset + extent) of `axis` of `y`.
  Status run_item(Stream& stream, std::span<const BufferView> in, Array& y, size_t i) const {
    const ItemKernel& it = items_[i];
    const std::vector<int64_t>& od = y.shape();
    const size_t axis = size_t(table_.axis), esize = size_t(dtype_size(y.dtype()));
    int64_t outer = 1, inner = 1;
    for (size_t a = 0; a < axis; ++a) outer *= od[a];
    for (size_t a = axis + 1; a < od.size(); ++a) inner *= od[a];
    const TensorType& item_type = it.post ? it.body.type(it.post->outputs[0]) : it.region_type;
    std::vector<int64_t> item_dims = static_dims(item_type);
    const int64_t extent = item_dims[axis];
    auto* base = static_cast<uint8_t*>(y.raw());
    // The item's slice of y is contiguous when every axis before `axis` has size 1.
    std::optional<Array> direct;
    if (outer == 1) direct = Array::view(y.dtype(), item_dims, base + size_t(table_.offsets[i] * inner) * esize);

    Array region_out = !it.post && direct ? *direct : Array(it.region_type.dtype, static_dims(it.region_type));
    std::vector<BufferView> region_views{host_view(region_out)};
    FUSEBOX_RETURN_IF_ERROR(it.region->run(stream, in, region_views));
    Array item = region_out;
    if (it.post) {
      item = direct ? *direct : Array(item_type.dtype, item_dims);
      if (it.plan) {
        FUSEBOX_RETURN_IF_ERROR(run_transform_plan(*it.plan, region_out, item));
      } else {
        std::vector<Array> src{region_out}, dst{item};
        FUSEBOX_RETURN_IF_ERROR(run_reference(*it.post, src, dst));
      }
    }
    if (direct) return Status::ok();
    const auto* src = static_cast<const uint8_t*>(item.raw());
    const size_t row = size_t(extent * inner) * esize;
    for (int64_t o = 0; o < outer; ++o) {
      std::memcpy(base + size_t((o * od[axis] + table_.offsets[i]) * inner) * esize, src + size_t(o) * row, row);
    }
    return Status::ok();
  }

  BatchTable table_;
  std::vector<ItemKernel> items_;
};

}  // namespace

Expected<std::shared_ptr<const Kernel>> make_batch_kernel(const Node& batch, Codegen codegen) {
  std::string why;  // the row path's reason for declining; the general path below has no limit it names
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> rows, make_batch_rows_kernel(batch, codegen, &why));
  if (rows) return rows;
  FUSEBOX_ASSIGN_OR_RETURN(BatchTable table, batch_table(batch));
  std::vector<ItemKernel> items;
  for (size_t i = 0; i < table.items; ++i) {
    ItemKernel it;
    FUSEBOX_ASSIGN_OR_RETURN(it.body, batch_item_body(batch, i));
    for (ValueId v : it.body.inputs()) {
      if (!is_static(it.body.type(v).shape)) return std::shared_ptr<const Kernel>();
    }
    const Node& region = it.body.nodes()[0];
    it.region_type = it.body.type(region.outputs[0]);
    if (!is_static(it.region_type.shape)) return std::shared_ptr<const Kernel>();
    FUSEBOX_ASSIGN_OR_RETURN(it.region, make_prologue_kernel(it.body, region, codegen));
    if (it.body.nodes().size() == 2) {
      it.post = it.body.nodes()[1];
      if (!is_static(it.body.type(it.post->outputs[0]).shape)) return std::shared_ptr<const Kernel>();
      it.plan = plan_transform_region(*it.post);
    }
    items.push_back(std::move(it));
  }
  return std::shared_ptr<const Kernel>(std::make_shared<BatchKernel>(std::move(table), std::move(items)));
}

}  // namespace fusebox::cpu
