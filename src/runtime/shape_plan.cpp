#include "runtime/shape_plan.h"

#include <algorithm>

#include "ir/array.h"
#include "runtime/file_io.h"

namespace fusebox {

namespace {

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Concrete result shapes must agree with what the graph declares (symbols substituted).
Status check_declared(const TensorType& declared, const std::vector<int64_t>& actual, const SymbolBindings& b) {
  Shape d = bind_shape(declared.shape, b);
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i].is_static() && d[i].value() != actual[i]) {
      return Status::execution("result is declared " + declared.to_string() + " but computes to " +
                               dims_string(actual));
    }
  }
  return Status::ok();
}

}  // namespace

Expected<ShapePlan> plan_shapes(const Graph& g, SymbolBindings bindings,
                                const std::vector<std::vector<int64_t>>& input_dims) {
  ShapePlan plan;
  plan.dims.resize(g.num_values());
  for (size_t k = 0; k < g.inputs().size(); ++k) plan.dims[size_t(g.inputs()[k])] = input_dims[k];
  plan.bindings = std::move(bindings);
  FUSEBOX_RETURN_IF_ERROR(extend_shapes(g, plan));
  return plan;
}

Status extend_shapes(const Graph& g, ShapePlan& plan) {
  std::vector<std::string> names;  // computed lazily for error messages
  auto where = [&](const Node& n) {
    if (names.empty()) names = value_display_names(g);
    return "@" + g.name() + ": " + describe_node(g, n, names);
  };
  std::vector<TensorType> in_types;
  const uint64_t max_bytes = max_tensor_bytes();
  const auto& nodes = g.nodes();
  for (size_t i = plan.planned; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    in_types.clear();
    for (ValueId v : n.inputs) in_types.push_back(TensorType{g.type(v).dtype, make_shape(plan.dims[size_t(v)])});
    Expected<std::vector<TensorType>> types = infer_result_types(n, in_types, &plan.bindings);
    if (!types) return Status::execution(where(n) + ": " + types.status().message());
    for (size_t r = 0; r < types->size(); ++r) {
      const TensorType& t = (*types)[r];
      if (!is_static(t.shape)) {
        return Status::execution(where(n) + ": result shape [" + shape_to_string(t.shape) +
                                 "] is not known at run time");
      }
      std::vector<int64_t> dims = static_dims(t.shape);
      Status ok = check_declared(g.type(n.outputs[r]), dims, plan.bindings);
      if (!ok.is_ok()) return ok.with_context(where(n));
      // Within the element limit but beyond memory (a reduce of f32[0,2^48] to f32[2^48]): a
      // message naming the node, not a failed allocation in the middle of the run.
      const uint64_t bytes = uint64_t(product(dims)) * uint64_t(dtype_size(t.dtype));
      if (bytes > max_bytes) {
        return Status::execution(where(n) + ": result " + std::to_string(r) + " " + t.to_string() +
                                 " needs " + format_byte_size(bytes) + ", over the " +
                                 format_byte_size(max_bytes) +
                                 " limit for a tensor (half the physical memory)");
      }
      plan.dims[size_t(n.outputs[r])] = std::move(dims);
    }
    if (n.op == Op::BindSymbols) {
      plan.planned = i + 1;
      return Status::ok();
    }
  }
  plan.planned = nodes.size();
  return Status::ok();
}

std::shared_ptr<const ShapePlan> ShapePlanCache::find(const ShapeKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].first != key) continue;
    std::rotate(entries_.begin(), entries_.begin() + long(i), entries_.begin() + long(i) + 1);
    return entries_.front().second;
  }
  return nullptr;
}

void ShapePlanCache::insert(ShapeKey key, std::shared_ptr<const ShapePlan> plan) {
  std::lock_guard<std::mutex> lock(mu_);
  ++computed_;
  // Two threads may have computed the same plan; keep one entry.
  std::erase_if(entries_, [&](const auto& e) { return e.first == key; });
  entries_.insert(entries_.begin(), {std::move(key), std::move(plan)});
  if (entries_.size() > capacity_) entries_.pop_back();
}

size_t ShapePlanCache::computed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return computed_;
}

}  // namespace fusebox
