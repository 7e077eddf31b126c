// The custom-op registry (custom_op.h). Registration takes a lock and never closes: a record
// holds its op by shared_ptr, so ops registered later cannot disturb recorded work.
#include "lazy/custom_op.h"

#include <mutex>
#include <unordered_map>

namespace fusebox::lazy {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const CustomOp>> ops;
  uint32_t next_id = 1;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

Status register_custom_op(CustomOpDef def) {
  if (def.name.empty()) return Status::invalid("register_custom_op: the op has no name");
  const std::string where = "register_custom_op '" + def.name + "': ";
  if (!def.infer) return Status::invalid(where + "no shape/dtype inference");
  if (!def.cpu) return Status::invalid(where + "no CPU kernel");
  if (def.min_inputs < 0 || (def.max_inputs >= 0 && def.max_inputs < def.min_inputs)) {
    return Status::invalid(where + "bad operand range " + std::to_string(def.min_inputs) + ".." +
                           std::to_string(def.max_inputs));
  }
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.ops.count(def.name)) return Status::invalid(where + "the name is already registered");
  auto op = std::make_shared<CustomOp>();
  op->id = r.next_id++;
  std::string name = def.name;
  op->def = std::move(def);
  r.ops.emplace(std::move(name), std::move(op));
  return Status::ok();
}

bool unregister_custom_op(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.ops.erase(name) > 0;
}

std::shared_ptr<const CustomOp> find_custom_op(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second;
}

CustomInferFn same_as_input(size_t index) {
  return [index](const std::vector<CustomType>& in, const Attrs&) -> Expected<std::vector<CustomType>> {
    if (index >= in.size()) {
      return Status::invalid("result type of operand " + std::to_string(index) + ", but the op has " +
                             std::to_string(in.size()) + " operand(s)");
    }
    return std::vector<CustomType>{in[index]};
  };
}

}  // namespace fusebox::lazy

namespace fusebox::lazy {

Expected<std::vector<Array>> run_custom_kernel(const CustomOp& op, const std::vector<Array>& inputs, const Attrs& attrs,
                                               const std::vector<CustomType>& types) {
  const std::string where = "custom op '" + op.def.name + "'";
  std::vector<Array> outputs;
  outputs.reserve(types.size());
  for (const CustomType& t : types) outputs.emplace_back(t.dtype, t.shape);
  Status s;
  try {
    s = op.def.cpu(inputs, attrs, outputs);
  } catch (const std::exception& e) {
    s = Status::execution(std::string("threw: ") + e.what());
  } catch (...) {
    s = Status::execution("threw an exception");
  }
  if (!s.is_ok()) return Status(StatusCode::kExecutionError, where + " CPU kernel: " + s.message());
  if (outputs.size() != types.size()) {
    return Status::execution(where + " CPU kernel: left " + std::to_string(outputs.size()) + " results, expected " +
                             std::to_string(types.size()));
  }
  for (size_t k = 0; k < types.size(); ++k) {
    if (outputs[k].dtype() != types[k].dtype || outputs[k].shape() != types[k].shape) {
      return Status::execution(where + " CPU kernel: result " + std::to_string(k) + " changed its type");
    }
  }
  return outputs;
}

}  // namespace fusebox::lazy
