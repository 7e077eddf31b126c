// Running a segment: plan-cache lookup, exploration, one graph per group, runs (segment.h).
#include "lazy/segment.h"

#include <chrono>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>

#include "fusebox/session.h"
#include "ir/builder.h"
#include "lazy/custom_op.h"
#include "lazy/fuser.h"
#include "lazy/log.h"
#include "lazy/observer.h"
#include "lazy/relative_form.h"
#include "lazy/schedule.h"
#include "lazy/small_vec.h"
#include "lazy/trace.h"

namespace fusebox::lazy {
namespace {

struct CompiledGroup {
  Group group;
  bool skip = false;  // nothing it produces is needed: not run at all (dead stores)
  std::optional<Executable> exe;
  std::shared_ptr<const CustomOp> custom;  // a custom op without a body: its CPU kernel runs the block
  std::vector<int> inputs, outputs;  // relative tensor indices, in graph order
  std::vector<std::string> kernels;
};

struct Plan {
  uint32_t device = 0;  // Device::key(): a plan compiled for one device never runs on another
  std::vector<uint64_t> tokens;
  std::vector<int> order;  // the records' run order (schedule.h); empty: recorded order
  std::vector<CompiledGroup> groups;
  // Some group was compiled with concrete sizes: the plan holds only for the same dim sizes.
  bool size_specific = false;
  std::vector<int64_t> dim_sizes;
};

// The LRU store of plans, keyed by the relative form's hash and confirmed by its tokens.
class PlanStore {
 public:
  static uint64_t key(const RelativeForm& rf, const Device& device) {
    return rf.hash ^ (uint64_t(device.key()) * 0x9e3779b97f4a7c15ull);
  }
  std::shared_ptr<const Plan> find(const RelativeForm& rf, const Device& device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key(rf, device));
    if (it == map_.end()) return nullptr;
    const Plan& p = **it->second;
    if (p.device != device.key() || p.tokens != rf.tokens || (p.size_specific && p.dim_sizes != rf.dim_sizes)) {
      return nullptr;
    }
    lru_.splice(lru_.begin(), lru_, it->second);
    return *it->second;
  }
  void insert(uint64_t hash, std::shared_ptr<const Plan> plan) {
    std::lock_guard<std::mutex> lock(mu_);
    if (capacity_ == 0) return;
    auto it = map_.find(hash);
    if (it != map_.end()) {
      lru_.erase(it->second);
      map_.erase(it);
    }
    lru_.push_front(std::move(plan));
    map_[hash] = lru_.begin();
    while (lru_.size() > capacity_) {
      auto last = std::prev(lru_.end());
      for (auto m = map_.begin(); m != map_.end(); ++m) {
        if (m->second == last) {
          map_.erase(m);
          break;
        }
      }
      lru_.pop_back();
    }
  }
  PlanCacheInfo info() {
    std::lock_guard<std::mutex> lock(mu_);
    return {lru_.size(), capacity_};
  }
  void reset(size_t capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
    capacity_ = capacity;
  }

 private:
  std::mutex mu_;
  size_t capacity_ = 256;
  std::list<std::shared_ptr<const Plan>> lru_;
  std::unordered_map<uint64_t, std::list<std::shared_ptr<const Plan>>::iterator> map_;
};

PlanStore& plan_store() {
  static PlanStore* s = new PlanStore();
  return *s;
}

const Session& session() {
  static const Session* s = new Session(512);
  return *s;
}

Shape shape_for(const RelativeForm& rf, const TensorState& s, bool symbolic) {
  Shape out;
  for (int64_t d : s.shape) {
    const int id = symbolic ? rf.dim_id(d) : -1;
    out.push_back(id >= 0 ? Dim::symbol("d" + std::to_string(id)) : Dim(d));
  }
  return out;
}

// Dim-valued attributes written with the dim ids bound by the group's inputs; a size that is
// not bound stays a number, which makes the plan size-specific.
Attrs lift_dims(const RelativeForm& rf, const Attrs& attrs, const std::vector<bool>& bound, bool* literal) {
  Attrs out;
  for (const auto& [name, value] : attrs.entries()) {
    const Shape* dims = std::get_if<Shape>(&value);
    if (!dims) {
      out.set(name, value);
      continue;
    }
    Shape lifted;
    for (const Dim& d : *dims) {
      const int id = d.is_static() ? rf.dim_id(d.value()) : -1;
      if (id >= 0 && bound[size_t(id)]) {
        lifted.push_back(Dim::symbol("d" + std::to_string(id)));
      } else {
        if (d.is_static() && d.value() > 1) *literal = true;
        lifted.push_back(d);
      }
    }
    out.set(name, lifted);
  }
  return out;
}

// A custom op's element-wise body built into `b`; its results must have the recorded dtypes and ranks.
Expected<std::vector<ValueId>> custom_body(GraphBuilder& b, const Record& r, const std::vector<ValueId>& ins,
                                           const Attrs& attrs) {
  const std::string where = "custom op '" + r.custom->def.name + "' body";
  Expected<std::vector<ValueId>> outs = Status::internal(where + ": not run");
  try {
    outs = r.custom->def.body(b, ins, attrs);
  } catch (const std::exception& e) {
    return Status::invalid(where + " threw: " + e.what());
  }
  if (!outs) return Status::invalid(where + ": " + outs.status().message());
  if (!b.status().is_ok()) return Status::invalid(where + ": " + b.status().message());
  if (outs->size() != r.outputs.size()) {
    return Status::invalid(where + " gave " + std::to_string(outs->size()) + " results, inference " +
                           std::to_string(r.outputs.size()));
  }
  for (size_t k = 0; k < outs->size(); ++k) {
    const TensorType& t = b.type((*outs)[k]);
    if (t.dtype != r.outputs[k]->dtype || t.shape.size() != r.outputs[k]->shape.size()) {
      return Status::invalid(where + ": result " + std::to_string(k) + " is " + t.to_string() +
                             ", inference said another dtype or rank");
    }
  }
  return outs;
}

Expected<CompiledGroup> compile_group(const RelativeForm& rf, const std::vector<Record>& ops, const Group& g,
                                      const Device& device, bool symbolic, bool* size_specific) {
  CompiledGroup cg;
  cg.group = g;
  if (g.end == g.begin + 1 && ops[g.begin].custom && !ops[g.begin].custom->fusible()) {
    const Record& r = ops[g.begin];
    cg.custom = r.custom;
    cg.kernels.push_back(r.custom->def.name);
    bool needed = false;
    for (const StatePtr& s : r.outputs) needed = needed || rf.escapes(s.get(), g.begin, g.end);
    cg.skip = !needed;
    return cg;
  }
  GraphBuilder b("lazy_" + g.fuser);
  std::unordered_map<int, ValueId> local;
  std::vector<bool> bound(rf.dim_sizes.size(), false);
  bool literal = false;
  for (size_t i = g.begin; i < g.end; ++i) {
    const Record& r = ops[i];
    std::vector<ValueId> ins;
    for (const StatePtr& s : r.inputs) {
      const int t = rf.rel(s.get());
      auto it = local.find(t);
      if (it == local.end()) {
        const ValueId v = b.input("t" + std::to_string(t), s->dtype, shape_for(rf, *s, symbolic));
        for (int64_t d : s->shape) {
          if (const int id = rf.dim_id(d); id >= 0 && symbolic) bound[size_t(id)] = true;
        }
        it = local.emplace(t, v).first;
        cg.inputs.push_back(t);
      }
      ins.push_back(it->second);
    }
    Attrs attrs = symbolic ? lift_dims(rf, r.attrs, bound, &literal) : r.attrs;
    std::vector<ValueId> outs;
    if (r.custom) {
      FUSEBOX_ASSIGN_OR_RETURN(outs, custom_body(b, r, ins, attrs));
    } else {
      outs = b.op_results(r.op, std::move(ins), std::move(attrs));
    }
    if (!b.status().is_ok()) return b.status();
    if (outs.size() != r.outputs.size()) return Status::internal("lazy: result count changed for " + std::string(op_keyword(r.op)));
    for (size_t k = 0; k < outs.size(); ++k) local[rf.rel(r.outputs[k].get())] = outs[k];
  }
  for (size_t i = g.begin; i < g.end; ++i) {
    for (const StatePtr& s : ops[i].outputs) {
      if (!rf.escapes(s.get(), g.begin, g.end)) continue;  // dead store: never written
      const int t = rf.rel(s.get());
      b.output(local.at(t));
      cg.outputs.push_back(t);
    }
  }
  if (cg.outputs.empty()) {
    cg.skip = true;
    return cg;
  }
  FUSEBOX_ASSIGN_OR_RETURN(Graph graph, b.build());
  CompileOptions options;
  options.fuse = g.fused;
  // A cuda block is fused for the GPU and placed on it (what the cuda backend does not claim
  // runs on the CPU, with copies at its ends).
  // Its operands and results stay on the device (device_io): the next block reads them there.
  if (device.kind == DeviceKind::Cuda) {
    options.target = FusionTarget::Cuda;
    options.device_io = true;
  }
  FUSEBOX_ASSIGN_OR_RETURN(Executable exe, session().compile(graph, options));
  for (const Node& n : exe.graph().nodes()) {
    if (n.op != Op::Constant) cg.kernels.emplace_back(op_keyword(n.op));
  }
  cg.exe = std::move(exe);
  if (literal) *size_specific = true;
  return cg;
}

// `ops` are in the scheduled order `order` already.
Expected<std::shared_ptr<const Plan>> make_plan(RelativeForm& rf, const std::vector<Record>& ops,
                                                const Device& device, std::vector<int> order) {
  auto plan = std::make_shared<Plan>();
  plan->device = device.key();
  plan->order = std::move(order);
  std::vector<Group> groups;
  SegmentView view{&ops, [&rf](const TensorState* s, size_t b, size_t e) { return rf.escapes(s, b, e); }};
  if (device.fusion && !fusion_disabled_by_env()) {
    TraceSpan span("explore");
    std::vector<std::unique_ptr<Fuser>> fusers = make_fusers();
    groups = explore(view, fusers);
    span.set_detail(std::to_string(ops.size()) + " records, " + std::to_string(groups.size()) + " groups");
  } else {
    for (size_t i = 0; i < ops.size(); ++i) groups.push_back({i, i + 1, false, "unfused"});
  }
  for (const Group& g : groups) {
    TraceSpan span("compile");
    if (span.on()) span.set_detail(g.fuser + " [" + std::to_string(g.begin) + ", " + std::to_string(g.end) + ")");
    Expected<CompiledGroup> cg = compile_group(rf, ops, g, device, true, &plan->size_specific);
    if (!cg) {  // a kernel or pass that needs concrete sizes: compile this group with them
      plan->size_specific = true;
      cg = compile_group(rf, ops, g, device, false, &plan->size_specific);
    }
    if (!cg) return cg.status();
    plan->groups.push_back(std::move(*cg));
  }
  plan->tokens = rf.tokens;
  plan->dim_sizes = rf.dim_sizes;
  return std::shared_ptr<const Plan>(std::move(plan));
}

void fail_rest(const std::vector<Record>& ops, const Status& s) {
  for (const Record& r : ops) {
    for (const StatePtr& o : r.outputs) {
      if (!o->ready.load(std::memory_order_acquire)) o->set_error(s);
    }
  }
}

// Counters, observers and the basic log line of a block that ran.
void report_block(const std::vector<Record>& ops, const CompiledGroup& cg, const Device& device, bool hit,
                  double seconds) {
  counters::add(cg.group.fused ? &LazyStats::blocks_fused : &LazyStats::blocks_unfused);
  counters::add(&LazyStats::kernels, cg.kernels.size());
  if (has_observers()) {
    BlockEvent e;
    e.device = device;
    for (size_t i = cg.group.begin; i < cg.group.end; ++i) e.ops.push_back(ops[i].op);
    e.fused = cg.group.fused;
    e.fuser = cg.group.fuser;
    e.kernels = cg.kernels;
    e.kernel_count = cg.kernels.size();
    e.plan_cache_hit = hit;
    e.seconds = seconds;
    notify_block(e);
  }
  if (log_level() >= LogLevel::Basic) {
    std::string line = "block " + device.to_string() + ": " + std::to_string(cg.group.end - cg.group.begin) + " record(s) [";
    for (size_t i = cg.group.begin; i < cg.group.end; ++i) {
      if (i > cg.group.begin) line += ' ';
      line += record_name(ops[i]);
    }
    line += cg.group.fused ? "] fused by " + cg.group.fuser : std::string("] unfused");
    line += ", " + std::to_string(cg.kernels.size()) + " kernel(s) [";
    for (size_t k = 0; k < cg.kernels.size(); ++k) {
      if (k) line += ' ';
      line += cg.kernels[k];
    }
    line += std::string("], plan cache ") + (hit ? "hit" : "miss");
    log_line(line);
  }
}

// The ready value of an operand, or the error that stopped it.
Status operand_status(const TensorState& s) {
  if (!s.ready.load(std::memory_order_acquire))
    return Status::internal("lazy: an input of a block was not computed");
  return s.error();
}

// A custom op's device kernel on the record's operands, on the device: operands as device
// buffers, results allocated there and left there.
Status run_custom_on_device(const Record& r, const CustomOp& op, const Device& device) {
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, device_backend(device));
  std::vector<Buffer> ins, outs;
  std::vector<BufferView> in_views, out_views;
  for (const StatePtr& s : r.inputs) {
    FUSEBOX_ASSIGN_OR_RETURN(Buffer b, s->device_value(*backend));
    in_views.push_back(b.view());
    ins.push_back(std::move(b));
  }
  for (const StatePtr& s : r.outputs) {
    FUSEBOX_ASSIGN_OR_RETURN(Buffer b, backend->allocate(s->dtype, s->shape));
    out_views.push_back(b.view());
    outs.push_back(std::move(b));
  }
  void* stream = backend->stream().native_handle();
  if (!stream)
    return Status::internal("custom op '" + op.def.name + "': " + device.to_string() + " has no stream");
  Status s;
  try {
    s = op.def.cuda(in_views, out_views, r.attrs, stream);
  } catch (const std::exception& e) {
    s = Status::invalid(std::string("threw: ") + e.what());
  } catch (...) {
    s = Status::invalid("threw an exception that is not a std::exception");
  }
  if (!s.is_ok()) return Status(s.code(), "custom op '" + op.def.name + "' (cuda kernel): " + s.message());
  for (size_t k = 0; k < r.outputs.size(); ++k) r.outputs[k]->set_device_value(std::move(outs[k]));
  return Status::ok();
}

// A custom op without a body: its cuda kernel where the block runs on a GPU and the op has one,
// else its CPU kernel on the operands' host values.
Status run_custom(const std::vector<Record>& ops, const CompiledGroup& cg, const Device& device, bool hit) {
  const Record& r = ops[cg.group.begin];
  for (const StatePtr& s : r.inputs) FUSEBOX_RETURN_IF_ERROR(operand_status(*s));
  const auto start = std::chrono::steady_clock::now();
  if (device.kind == DeviceKind::Cuda && cg.custom->def.cuda) {
    FUSEBOX_RETURN_IF_ERROR(run_custom_on_device(r, *cg.custom, device));
  } else {
    std::vector<Array> inputs;
    for (const StatePtr& s : r.inputs) {
      FUSEBOX_RETURN_IF_ERROR(s->fetch_host());
      inputs.push_back(s->value());
    }
    std::vector<CustomType> types;
    for (const StatePtr& s : r.outputs) types.push_back({s->dtype, s->shape});
    Expected<std::vector<Array>> outs = run_custom_kernel(*cg.custom, inputs, r.attrs, types);
    if (!outs) return outs.status();
    for (size_t k = 0; k < r.outputs.size(); ++k) r.outputs[k]->set_value(std::move((*outs)[k]));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  counters::add(&LazyStats::allocations, r.outputs.size());
  report_block(ops, cg, device, hit, seconds);
  return Status::ok();
}

// A cuda block: operands as device buffers (a host value is copied up once), results left on the
// device. The work is enqueued; a failure of it comes back when a result is copied down.
Status run_device_group(const RelativeForm& rf, const std::vector<Record>& ops, const CompiledGroup& cg,
                        const Device& device, bool hit) {
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, device_backend(device));
  SmallVec<Buffer, 4> inputs;
  inputs.reserve(cg.inputs.size());
  for (int t : cg.inputs) {
    const TensorState& s = *rf.tensors[size_t(t)];
    FUSEBOX_RETURN_IF_ERROR(operand_status(s));
    FUSEBOX_ASSIGN_OR_RETURN(Buffer b, s.device_value(*backend));
    inputs.push_back(std::move(b));
  }
  const bool timed = has_observers();
  const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Expected<std::vector<Buffer>> outs =
      cg.exe->run_buffers(std::span<const Buffer>(inputs.data(), inputs.size()));
  if (!outs) return outs.status();
  // Observers see the block's time on the device: it is waited for.
  if (timed) FUSEBOX_RETURN_IF_ERROR(backend->stream().sync());
  const double seconds =
      timed ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() : 0.0;
  for (size_t k = 0; k < cg.outputs.size(); ++k) {
    if (!(*outs)[k]) return Status::internal("lazy: a result of a cuda block was not materialised");
    rf.tensors[size_t(cg.outputs[k])]->set_device_value(std::move((*outs)[k]));
  }
  counters::add(&LazyStats::allocations, cg.outputs.size());
  report_block(ops, cg, device, hit, seconds);
  return Status::ok();
}

Status run_group(const RelativeForm& rf, const std::vector<Record>& ops, const CompiledGroup& cg,
                 const Device& device, bool hit) {
  TraceSpan span("execute");
  if (span.on()) span.set_detail(cg.group.fuser + " " + std::to_string(cg.kernels.size()) + " kernel(s)");
  if (cg.custom) return run_custom(ops, cg, device, hit);
  if (device.kind == DeviceKind::Cuda) return run_device_group(rf, ops, cg, device, hit);
  // Blocks are mostly one to three operands and one result: their lists stay on the stack (a
  // flush with fusion off runs a block per record, so per-block allocations add up).
  SmallVec<Array, 4> inputs;
  inputs.reserve(cg.inputs.size());
  for (int t : cg.inputs) {
    const TensorState& s = *rf.tensors[size_t(t)];
    FUSEBOX_RETURN_IF_ERROR(operand_status(s));
    inputs.push_back(s.value());
  }
  // In place: an output may take the buffer of an input nobody reads after this block (no handle
  // at the flush, no later reader, not aliased, not shared with another thread) of its type.
  SmallVec<Array, 2> donated;
  SmallVec<uint8_t, 4> donor_used;
  for (size_t k = 0; k < cg.outputs.size(); ++k) donated.emplace_back();
  for (size_t m = 0; m < cg.inputs.size(); ++m) donor_used.push_back(0);
  for (size_t k = 0; k < cg.outputs.size(); ++k) {
    const TensorState& out = *rf.tensors[size_t(cg.outputs[k])];
    for (size_t m = 0; m < cg.inputs.size(); ++m) {
      const TensorState& in = *rf.tensors[size_t(cg.inputs[m])];
      if (donor_used[m] || rf.escapes(&in, cg.group.begin, cg.group.end) || in.no_inplace.load(std::memory_order_relaxed) ||
          in.dtype != out.dtype || in.shape != out.shape || in.value().empty_storage()) {
        continue;
      }
      donated[k] = inputs[m];
      donor_used[m] = 1;
      break;
    }
  }
  // Only observers see a block's time.
  const bool timed = has_observers();
  const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
  Expected<std::vector<Array>> outs = cg.exe->run_donating(std::span<const Array>(inputs.data(), inputs.size()),
                                                           std::span<const Array>(donated.data(), donated.size()));
  const double seconds =
      timed ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() : 0.0;
  if (!outs) return outs.status();
  size_t reused = 0;
  for (size_t k = 0; k < cg.outputs.size(); ++k) {
    const void* data = (*outs)[k].raw();
    if (!donated[k].empty_storage() && data == donated[k].raw()) {
      // Written in place: the tensor takes the donor's array itself. The returned one owns the
      // buffer through a wrapper of the donor, so a tensor updated in place at every step would
      // sit at the head of a chain of wrappers as long as the loop, freed recursively.
      ++reused;
      (*outs)[k] = donated[k];
    }
    // Results sharing memory with an input or another result are never written in place.
    bool aliased = false;
    for (size_t m = 0; m < inputs.size(); ++m) {
      if (!data || inputs[m].raw() != data || data == donated[k].raw()) continue;
      aliased = true;
      rf.tensors[size_t(cg.inputs[m])]->no_inplace.store(true, std::memory_order_relaxed);
    }
    for (size_t j = 0; j < cg.outputs.size(); ++j) aliased = aliased || (j != k && data && (*outs)[j].raw() == data);
    TensorState& s = *rf.tensors[size_t(cg.outputs[k])];
    if (aliased) s.no_inplace.store(true, std::memory_order_relaxed);
    s.set_value(std::move((*outs)[k]));
  }
  counters::add(&LazyStats::allocations, cg.outputs.size() - reused);
  counters::add(&LazyStats::inplace_reuses, reused);
  report_block(ops, cg, device, hit, seconds);
  return Status::ok();
}

}  // namespace

Status run_segment(std::vector<Record> ops, RelativeForm rf, const Device& device) {
  counters::add(&LazyStats::flushes);
  std::shared_ptr<const Plan> plan = plan_store().find(rf, device);
  const bool hit = plan != nullptr;
  if (hit) {
    counters::add(&LazyStats::plan_hits);
    if (!plan->order.empty()) apply_order(rf, ops, plan->order);
  } else {
    counters::add(&LazyStats::plan_misses);
    std::vector<int> order;
    if (device.fusion && !fusion_disabled_by_env()) order = chain_order(rf, ops);
    if (!order.empty() && !is_valid_order(rf, ops, order)) {
      if (log_level() >= LogLevel::Medium)
        log_line("schedule: the chain order failed its check; recorded order kept");
      order.clear();
    }
    if (!order.empty()) apply_order(rf, ops, order);
    Expected<std::shared_ptr<const Plan>> made = make_plan(rf, ops, device, std::move(order));
    if (!made) {
      Status s(StatusCode::kExecutionError, "deferred work failed: " + made.status().message());
      fail_rest(ops, s);
      return s;
    }
    plan = *made;
    plan_store().insert(PlanStore::key(rf, device), plan);
  }
  for (const CompiledGroup& cg : plan->groups) {
    if (cg.skip) continue;
    Status s = run_group(rf, ops, cg, device, hit);
    if (!s.is_ok()) {
      Status e(StatusCode::kExecutionError, "deferred work failed in a " + cg.group.fuser + " block: " + s.message());
      fail_rest(ops, e);
      return e;
    }
  }
  for (const Record& r : ops) {
    for (const StatePtr& o : r.outputs) o->producer.store(nullptr, std::memory_order_release);
  }
  return Status::ok();
}

PlanCacheInfo plan_cache_info() { return plan_store().info(); }
void set_plan_cache_capacity(size_t capacity) { plan_store().reset(capacity); }
void clear_plan_cache() { plan_store().reset(plan_store().info().capacity); }

}  // namespace fusebox::lazy
