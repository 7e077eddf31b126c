// Executable::run: inputs checked, shapes from the plan for these sizes, then every node's
// kernel on its backend's stream with copies where a value changes device.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "ir/bind_symbols.h"
#include "runtime/executable_plan.h"
#include "runtime/shape_plan.h"

namespace fusebox {

const Graph& Executable::graph() const { return plan_->graph; }
const FusionReport& Executable::report() const { return plan_->report; }
const Placement& Executable::placement() const { return plan_->placement; }
const std::vector<std::string>& Executable::output_names() const { return plan_->output_names; }
bool Executable::output_materialized(size_t slot) const { return plan_->graph.output_materialized(slot); }

PoolStats Executable::pool_stats() const {
  PoolStats total;
  for (const auto& b : plan_->placement.backends) {
    PoolStats s = b->pool_stats();
    total.allocations += s.allocations;
    total.reuses += s.reuses;
    total.cached_bytes += s.cached_bytes;
  }
  return total;
}

// Recorded runs (CUDA graphs) of device_io plans whose every kernel runs on the target's device:
//
//   run 1 with given input buffers and sizes   runs normally (kernels whose variant depends on
//                                              the sizes are generated on this run)
//   run 2                                      recorded: the stream records the plan's launches
//                                              into a graph, the buffers it used are kept with it
//   later runs                                 one replay, then each output copied out of the
//                                              recording's buffers into a fresh buffer
//
// A recording belongs to the input buffers it read (their addresses are in the graph), so a run
// with other buffers or sizes has its own; at most kMaxRecordings are kept. A plan whose buffers
// would exceed kMaxRecordedBytes is not recorded (it is bandwidth-bound: a launch is nothing to
// save there). FUSEBOX_CUDA_GRAPHS=0 turns recording off.
struct Executable::Recordings {
  struct Entry {
    std::vector<const void*> pointers;
    std::vector<int64_t> dims;
    std::mutex mu;  // one run through an entry at a time: replay and output copies stay paired
    int runs = 0;
    bool failed = false;
    std::shared_ptr<const RecordedWork> work;
    std::vector<Buffer> kept;     // every buffer the recorded run used
    std::vector<Buffer> outputs;  // the recording's output buffers
  };
  std::mutex mu;
  std::vector<std::shared_ptr<Entry>> entries;  // most recent first
  size_t recorded = 0, replays = 0;
};

namespace {
constexpr size_t kMaxRecordings = 8;
constexpr double kMaxRecordedBytes = 256.0 * (1 << 20);
}  // namespace

std::shared_ptr<Executable::Recordings> make_recordings() { return std::make_shared<Executable::Recordings>(); }

Executable::Stats Executable::stats() const {
  Stats s{shapes_->computed()};
  if (recordings_) {
    std::lock_guard<std::mutex> lock(recordings_->mu);
    s.recordings = recordings_->recorded;
    s.replays = recordings_->replays;
  }
  return s;
}

Expected<SymbolBindings> Executable::bind_inputs(std::span<const Array* const> inputs) const {
  const Graph& g = plan_->graph;
  const std::string fn = "@" + g.name();
  SymbolBindings bindings;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const ValueId v = g.inputs()[k];
    const std::string& name = g.value(v).name;
    if (!inputs[k]) return Status::invalid(fn + ": missing input %" + name);
    const TensorType& want = g.type(v);
    const Array& a = *inputs[k];
    if (a.dtype() != want.dtype) {
      return Status::invalid(fn + ": input %" + name + " must be " + want.to_string() + ", got " +
                             a.type_string() + " (dtype differs)");
    }
    if (a.rank() != want.rank()) {
      return Status::invalid(fn + ": input %" + name + " must be " + want.to_string() + ", got " +
                             a.type_string() + " (rank differs)");
    }
    for (int d = 0; d < a.rank(); ++d) {
      const Dim& dim = want.shape[static_cast<size_t>(d)];
      int64_t actual = a.shape()[static_cast<size_t>(d)];
      if (dim.is_static() && dim.value() != actual) {
        return Status::invalid(fn + ": input %" + name + " must be " + want.to_string() + ", got " +
                               a.type_string() + " (dim " + std::to_string(d) + ")");
      }
      if (dim.is_symbol()) {
        auto [pos, inserted] = bindings.emplace(dim.symbol_name(), actual);
        if (!inserted && pos->second != actual) {
          return Status::invalid(fn + ": symbol " + dim.symbol_name() + " is " + std::to_string(pos->second) +
                                 " from an earlier input but " + std::to_string(actual) + " in %" + name);
        }
      }
    }
  }
  return bindings;
}

namespace {

// Graph inputs in graph order; nullptr where `named` has none.
std::vector<const Array*> by_position(const Graph& g, const NamedArrays& named) {
  std::vector<const Array*> inputs;
  inputs.reserve(g.inputs().size());
  for (ValueId v : g.inputs()) {
    auto it = named.find(g.value(v).name);
    inputs.push_back(it == named.end() ? nullptr : &it->second);
  }
  return inputs;
}

Status unknown_inputs(const Graph& g, const NamedArrays& named) {
  for (const auto& [name, array] : named) {
    if (g.find_input(name) < 0) return Status::invalid("@" + g.name() + ": unknown input %" + name);
  }
  return Status::ok();
}

}  // namespace

Expected<SymbolBindings> Executable::bind(const NamedArrays& inputs) const {
  FUSEBOX_ASSIGN_OR_RETURN(SymbolBindings b, bind_inputs(by_position(plan_->graph, inputs)));
  FUSEBOX_RETURN_IF_ERROR(unknown_inputs(plan_->graph, inputs));
  return b;
}

// The cached plan for these input sizes: a hit checks only the dtypes (equal sizes passed every
// other check when the plan was made); a miss checks everything and infers every shape.
Expected<std::shared_ptr<const ShapePlan>> Executable::shapes_for(std::span<const Array* const> inputs) const {
  const Graph& g = plan_->graph;
  ShapeKey key;
  bool complete = true;
  for (const Array* a : inputs) {
    if (!a) {
      complete = false;
      break;
    }
    key.push_back(a->rank());
    key.insert(key.end(), a->shape().begin(), a->shape().end());
  }
  if (complete) {
    if (std::shared_ptr<const ShapePlan> hit = shapes_->find(key)) {
      bool dtypes_match = true;
      for (size_t k = 0; k < inputs.size(); ++k) dtypes_match &= inputs[k]->dtype() == g.type(g.inputs()[k]).dtype;
      if (dtypes_match) return hit;
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(SymbolBindings bindings, bind_inputs(inputs));
  std::vector<std::vector<int64_t>> input_dims;
  for (const Array* a : inputs) input_dims.push_back(a->shape());
  FUSEBOX_ASSIGN_OR_RETURN(ShapePlan plan, plan_shapes(g, std::move(bindings), input_dims));
  plan.key = key;
  auto shared = std::make_shared<const ShapePlan>(std::move(plan));
  if (complete) shapes_->insert(std::move(key), shared);
  return shared;
}

// After bind_symbols node i has run: the plan of the nodes up to the next one, with the symbols
// bound from the values it read (cached under the sizes and every value bound so far).
Expected<std::shared_ptr<const ShapePlan>> Executable::shapes_after_bind(const ShapePlan& shapes, size_t i,
                                                                         const BufferView& values) const {
  const Graph& g = plan_->graph;
  const Node& n = g.nodes()[i];
  if (!values.device.is_host()) return Status::internal("bind_symbols: its values are not in host memory");
  auto where = [&] { return "@" + g.name() + ": " + describe_node(g, n, value_display_names(g)); };
  Expected<std::vector<int64_t>> bound = symbol_values(
      n, Array::view(values.dtype, values.shape, values.data), shapes.dims[size_t(n.inputs[0])]);
  if (!bound) return bound.status().with_context(where());
  // The symbols' values (not v's: a count_nonzero bind reads a whole tensor) key the next step.
  ShapeKey key = shapes.key;
  key.push_back(-int64_t(i) - 1);
  key.insert(key.end(), bound->begin(), bound->end());
  if (std::shared_ptr<const ShapePlan> hit = shapes_->find(key)) return hit;
  ShapePlan next = shapes;
  Status added = bind_symbol_values(n, *bound, next.bindings);
  if (!added.is_ok()) return added.with_context(where());
  FUSEBOX_RETURN_IF_ERROR(extend_shapes(g, next));  // its errors name the node they are about
  next.key = key;
  auto shared = std::make_shared<const ShapePlan>(std::move(next));
  shapes_->insert(std::move(key), shared);
  return shared;
}

Expected<std::vector<Array>> Executable::run(const NamedArrays& inputs) const { return run_profiled(inputs, nullptr); }

Expected<std::vector<Array>> Executable::run(std::span<const Array> inputs) const {
  return run_profiled(inputs, nullptr);
}

Expected<std::vector<Array>> Executable::run_profiled(const NamedArrays& inputs,
                                                      std::vector<double>* node_seconds) const {
  const Graph& g = plan_->graph;
  std::vector<const Array*> ordered = by_position(g, inputs);
  // Names are unique, so every input found and no more given means no unknown name.
  if (inputs.size() != g.inputs().size() || std::count(ordered.begin(), ordered.end(), nullptr)) {
    FUSEBOX_RETURN_IF_ERROR(bind_inputs(ordered).status());
    FUSEBOX_RETURN_IF_ERROR(unknown_inputs(g, inputs));
  }
  return execute(ordered, node_seconds);
}

Expected<std::vector<Array>> Executable::run_profiled(std::span<const Array> inputs,
                                                      std::vector<double>* node_seconds) const {
  const Graph& g = plan_->graph;
  if (inputs.size() != g.inputs().size()) {
    std::string names;
    for (ValueId v : g.inputs()) names += (names.empty() ? "%" : ", %") + g.value(v).name;
    return Status::invalid("@" + g.name() + ": expects " + std::to_string(g.inputs().size()) + " inputs (" + names +
                           "), got " + std::to_string(inputs.size()));
  }
  std::vector<const Array*> ordered;
  for (const Array& a : inputs) ordered.push_back(&a);
  return execute(ordered, node_seconds);
}

namespace {

Status run_copy(const Copy& c, const Placement& p, const ShapePlan& shapes, std::vector<Buffer>& residents) {
  const ValueId v = p.resident_value[size_t(c.to)];
  const Backend& copier = *p.backends[size_t(c.backend)];
  const Backend& owner = *p.backends[size_t(p.resident_backend[size_t(c.to)])];
  FUSEBOX_ASSIGN_OR_RETURN(Buffer dst, owner.allocate(residents[size_t(c.from)].view().dtype, shapes.dims[size_t(v)]));
  const BufferView& src = residents[size_t(c.from)].view();
  Status s = c.to_host ? copier.copy_to_host(copier.stream(), src, dst.view())
                       : copier.copy_from_host(copier.stream(), src, dst.view());
  FUSEBOX_RETURN_IF_ERROR(s);
  // Synchronous for now: the host side of the copy may be released right after it.
  FUSEBOX_RETURN_IF_ERROR(copier.stream().sync());
  residents[size_t(c.to)] = std::move(dst);
  return Status::ok();
}

}  // namespace

Expected<std::vector<Array>> Executable::run_donating(std::span<const Array> inputs,
                                                      std::span<const Array> donated) const {
  const Graph& g = plan_->graph;
  if (inputs.size() != g.inputs().size()) return run_profiled(inputs, nullptr);  // its error
  std::vector<const Array*> ordered;
  for (const Array& a : inputs) ordered.push_back(&a);
  return execute(ordered, nullptr, donated);
}

const Array* Executable::donor_for(size_t i, ValueId v, std::span<const Array* const> inputs,
                                   std::span<const Array> donated, const std::vector<int64_t>& dims) const {
  const Graph& g = plan_->graph;
  const Placement& place = plan_->placement;
  const Node& n = g.nodes()[i];
  if (op_kind(n.op) > OpKind::Broadcast || !place.backends[size_t(place.node_backend[i])]->device().is_host()) {
    return nullptr;
  }
  for (size_t k = 0; k < donated.size() && k < place.output_resident.size(); ++k) {
    const Array& d = donated[k];
    if (d.empty_storage() || place.output_resident[k] != int(v) || d.dtype() != g.type(v).dtype || d.shape() != dims) {
      continue;
    }
    for (size_t m = 0; m < inputs.size(); ++m) {
      if (inputs[m]->raw() != d.raw()) continue;
      const int r = int(g.inputs()[m]);
      // Read by node i only: no other node, alias or copy sees the buffer after it is written.
      bool only_here = std::count(place.operands[i].begin(), place.operands[i].end(), r) > 0;
      for (size_t j = 0; only_here && j < g.nodes().size(); ++j) {
        if (j == i) continue;
        only_here = std::count(place.operands[j].begin(), place.operands[j].end(), r) == 0;
        for (const Copy& c : place.copies_before[j]) only_here = only_here && c.from != r;
      }
      for (const Copy& c : place.final_copies) only_here = only_here && c.from != r;
      if (only_here) return &d;
    }
  }
  return nullptr;
}

Expected<std::vector<Array>> Executable::execute(std::span<const Array* const> inputs,
                                                 std::vector<double>* node_seconds,
                                                 std::span<const Array> donated) const {
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<Buffer> out, run_plan(inputs, {}, node_seconds, donated));
  const Graph& g = plan_->graph;
  std::vector<Array> results;
  results.reserve(out.size());
  for (size_t k = 0; k < out.size(); ++k) {
    // A slot the IO output gate left unmaterialised is not read back: an empty array of its dtype.
    if (!g.output_materialized(k)) {
      results.emplace_back(g.type(g.outputs()[k]).dtype, std::vector<int64_t>{0});
      continue;
    }
    results.push_back(out[k].to_array());
  }
  return results;
}

Expected<std::vector<Buffer>> Executable::run_buffers(std::span<const Buffer> inputs) const {
  const Graph& g = plan_->graph;
  if (!plan_->device_io) {
    return Status::invalid("@" + g.name() + ": run_buffers needs a plan compiled with CompileOptions::device_io");
  }
  if (inputs.size() != g.inputs().size()) {
    return Status::invalid("@" + g.name() + ": expects " + std::to_string(g.inputs().size()) + " input buffers, got " +
                           std::to_string(inputs.size()));
  }
  const Device want = plan_->placement.backends[0]->device();
  std::vector<Array> shapes;  // descriptors for the checks: dtype and shape, memory never read
  shapes.reserve(inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const BufferView& b = inputs[k].view();
    if (!inputs[k] || b.device != want) {
      return Status::invalid("@" + g.name() + ": input %" + g.value(g.inputs()[k]).name + " must be a buffer on " +
                             want.to_string() + (inputs[k] ? ", got one on " + b.device.to_string() : ", got none"));
    }
    shapes.push_back(Array::view(b.dtype, b.shape, b.data));
  }
  std::vector<const Array*> ordered;
  for (const Array& a : shapes) ordered.push_back(&a);
  return run_recorded(ordered, inputs);
}

Expected<std::vector<Buffer>> Executable::run_recorded(std::span<const Array* const> inputs,
                                                       std::span<const Buffer> buffers) const {
  const Plan& plan = *plan_;
  const Placement& place = plan.placement;
  static const bool enabled = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_GRAPHS");
    return !(e && std::string(e) == "0");
  }();
  // Recordable: every kernel on the target's device, nothing copied but constants (uploaded
  // once, on the first run), at least two kernels (one launch saves nothing).
  // A plan whose sizes come from data (bind_symbols) may change sizes between runs: never recorded.
  bool recordable = enabled && recordings_ && !place.backends[0]->device().is_host() &&
                    place.final_copies.empty() && !plan.run_time_sizes;
  size_t kernels = 0;
  for (size_t i = 0; recordable && i < plan.graph.nodes().size(); ++i) {
    if (!plan.kernels[i]) continue;
    ++kernels;
    recordable = place.node_backend[i] == 0;
    for (const Copy& c : place.copies_before[i]) {
      const ValueId v = place.resident_value[size_t(c.to)];
      recordable = recordable && !c.to_host && size_t(c.from) == size_t(v) && plan.constants[size_t(v)];
    }
  }
  if (!recordable || kernels < 2) return run_plan(inputs, buffers, nullptr, {});
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const ShapePlan> shapes, shapes_for(inputs));
  double bytes = 0;
  for (size_t v = 0; v < shapes->dims.size(); ++v) {
    bytes += double(product(shapes->dims[v])) * dtype_size(plan.graph.type(ValueId(v)).dtype);
  }
  if (bytes > kMaxRecordedBytes) return run_plan(inputs, buffers, nullptr, {});

  std::shared_ptr<Recordings::Entry> entry;
  {
    std::vector<const void*> pointers;
    std::vector<int64_t> dims;
    for (const Buffer& b : buffers) {
      pointers.push_back(b.view().data);
      dims.push_back(int64_t(b.view().shape.size()));
      dims.insert(dims.end(), b.view().shape.begin(), b.view().shape.end());
    }
    std::lock_guard<std::mutex> lock(recordings_->mu);
    auto& list = recordings_->entries;
    for (size_t k = 0; k < list.size() && !entry; ++k) {
      if (list[k]->pointers == pointers && list[k]->dims == dims) {
        entry = list[k];
        list.erase(list.begin() + std::ptrdiff_t(k));
      }
    }
    if (!entry) {
      entry = std::make_shared<Recordings::Entry>();
      entry->pointers = std::move(pointers);
      entry->dims = std::move(dims);
    }
    list.insert(list.begin(), entry);
    if (list.size() > kMaxRecordings) list.pop_back();
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  if (!entry->work && (entry->failed || entry->runs++ == 0)) return run_plan(inputs, buffers, nullptr, {});
  const Backend& device = *place.backends[0];
  if (!entry->work) {
    FUSEBOX_RETURN_IF_ERROR(device.stream().sync());  // nothing of earlier runs is recorded
    if (!device.stream().begin_recording().is_ok()) {
      entry->failed = true;
      return run_plan(inputs, buffers, nullptr, {});
    }
    std::vector<Buffer> kept;
    Expected<std::vector<Buffer>> outs = run_plan(inputs, buffers, nullptr, {}, &kept);
    Expected<std::shared_ptr<const RecordedWork>> work = device.stream().end_recording();
    if (!outs || !work) {
      entry->failed = true;
      return run_plan(inputs, buffers, nullptr, {});
    }
    entry->work = *work;
    entry->kept = std::move(kept);
    entry->outputs = std::move(*outs);
    std::lock_guard<std::mutex> count(recordings_->mu);
    ++recordings_->recorded;
  }
  FUSEBOX_RETURN_IF_ERROR(entry->work->replay());
  {
    std::lock_guard<std::mutex> count(recordings_->mu);
    ++recordings_->replays;
  }
  // The recording's buffers are rewritten by its next replay: the caller gets copies.
  std::vector<Buffer> results;
  for (const Buffer& b : entry->outputs) {
    if (!b) {
      results.emplace_back();
      continue;
    }
    FUSEBOX_ASSIGN_OR_RETURN(Buffer copy, device.allocate(b.view().dtype, b.view().shape));
    FUSEBOX_RETURN_IF_ERROR(device.copy_on_device(device.stream(), b.view(), copy.view()));
    results.push_back(std::move(copy));
  }
  return results;
}

Status Executable::sync() const {
  for (const auto& b : plan_->placement.backends) FUSEBOX_RETURN_IF_ERROR(b->stream().sync());
  return Status::ok();
}

Expected<std::vector<Buffer>> Executable::run_plan(std::span<const Array* const> inputs,
                                                   std::span<const Buffer> input_buffers,
                                                   std::vector<double>* node_seconds,
                                                   std::span<const Array> donated,
                                                   std::vector<Buffer>* keep) const {
  const Plan& plan = *plan_;
  const Graph& g = plan.graph;
  const Placement& place = plan.placement;
  if (node_seconds) node_seconds->assign(g.nodes().size(), 0.0);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const ShapePlan> shapes, shapes_for(inputs));
  std::vector<Buffer> residents(place.resident_value.size());
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    residents[size_t(g.inputs()[k])] = input_buffers.empty() ? Buffer::wrap(*inputs[k]) : input_buffers[k];
  }
  std::vector<std::string> names;  // computed lazily for error messages
  auto where = [&](const Node& n) {
    if (names.empty()) names = value_display_names(g);
    return "@" + g.name() + ": " + describe_node(g, n, names);
  };
  // A constant crosses to a device once per plan; later runs reuse that copy.
  auto copy = [&](const Copy& c) -> Status {
    const ValueId v = place.resident_value[size_t(c.to)];
    const bool constant = !c.to_host && size_t(c.from) == size_t(v) && plan.constants[size_t(v)];
    if (!constant) return run_copy(c, place, *shapes, residents);
    std::lock_guard<std::mutex> lock(plan.uploads_mu);
    if (plan.uploaded.size() < residents.size()) plan.uploaded.resize(residents.size());
    if (!plan.uploaded[size_t(c.to)]) {
      FUSEBOX_RETURN_IF_ERROR(run_copy(c, place, *shapes, residents));
      plan.uploaded[size_t(c.to)] = residents[size_t(c.to)];
    }
    residents[size_t(c.to)] = plan.uploaded[size_t(c.to)];
    return Status::ok();
  };
  // Values dead after node i go back to their pools; a recorded run keeps every buffer instead
  // (its graph goes on using them).
  auto release = [&](size_t i) {
    for (int dead : plan.memory.release_after[i]) {
      if (keep) keep->push_back(residents[size_t(dead)]);
      residents[size_t(dead)] = Buffer();
    }
  };
  std::vector<BufferView> in, out;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (!plan.kernels[i] && !plan.aliases[i]) {
      residents[size_t(n.outputs[0])] = plan.constants[size_t(n.outputs[0])];
      continue;
    }
    for (const Copy& c : place.copies_before[i]) {
      Status s = copy(c);
      if (!s.is_ok()) return s.with_context(where(n));
    }
    // A bind_symbols node binds its symbols before its values may be released: the nodes
    // after it are planned with them.
    auto bind = [&]() -> Status {
      if (n.op != Op::BindSymbols) return Status::ok();
      FUSEBOX_ASSIGN_OR_RETURN(shapes,
                               shapes_after_bind(*shapes, i, residents[size_t(place.operands[i][1])].view()));
      return Status::ok();
    };
    if (plan.aliases[i]) {
      const ValueId v = n.outputs[0];
      residents[size_t(v)] = residents[size_t(place.operands[i][0])].reshaped(shapes->dims[size_t(v)]);
      FUSEBOX_RETURN_IF_ERROR(bind());
      release(i);
      continue;
    }
    const Backend& backend = *place.backends[size_t(place.node_backend[i])];
    in.clear();
    out.clear();
    for (int r : place.operands[i]) in.push_back(residents[size_t(r)].view());
    bool all_empty = true;
    for (ValueId v : n.outputs) {
      if (const Array* d = donated.empty() ? nullptr : donor_for(i, v, inputs, donated, shapes->dims[size_t(v)])) {
        Buffer b = Buffer::wrap(*d);
        out.push_back(b.view());
        residents[size_t(v)] = std::move(b);
        all_empty = all_empty && d->numel() == 0;
        continue;
      }
      Expected<Buffer> b = backend.allocate(g.type(v).dtype, shapes->dims[size_t(v)]);
      if (!b) return b.status().with_context(where(n));
      out.push_back(b->view());
      residents[size_t(v)] = std::move(*b);
      all_empty = all_empty && product(shapes->dims[size_t(v)]) == 0;
    }
    // Empty results leave nothing to compute, and kernels need not handle them: for an
    // [0, 2^40] result they would loop over the other dims for nothing.
    auto start = std::chrono::steady_clock::now();
    Status s = all_empty ? Status::ok() : plan.kernels[i]->run(backend.stream(), in, out);
    if (node_seconds) {
      // Device kernels are asynchronous: a profile waits for each (host kernels ran inline).
      if (!backend.device().is_host() && s.is_ok()) s = backend.stream().sync();
      (*node_seconds)[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (!s.is_ok()) {
      return Status(s.code() == StatusCode::kInvalidArgument ? StatusCode::kExecutionError : s.code(),
                    where(n) + ": " + s.message());
    }
    FUSEBOX_RETURN_IF_ERROR(bind());
    release(i);
  }
  for (const Copy& c : place.final_copies) FUSEBOX_RETURN_IF_ERROR(copy(c));
  // Host results are complete when returned; device results are ordered on their stream.
  if (!plan.device_io) FUSEBOX_RETURN_IF_ERROR(sync());
  std::vector<Buffer> results;
  results.reserve(place.output_resident.size());
  for (size_t k = 0; k < place.output_resident.size(); ++k) {
    results.push_back(g.output_materialized(k) ? residents[size_t(place.output_resident[k])] : Buffer());
  }
  return results;
}

}  // namespace fusebox
