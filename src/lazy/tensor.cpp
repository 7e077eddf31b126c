// Tensor handles, creation, recording (Tensor::apply_multi) and reads (lazy/tensor.h).
#include "lazy/tensor.h"

#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "backends/registry/registry.h"
#include "ir/block_pool.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "lazy/log.h"
#include "lazy/observer.h"
#include "lazy/stream.h"
#include "lazy/trace.h"

namespace fusebox {
namespace lazy {

std::string Device::to_string() const {
  std::string s = kind == DeviceKind::Cpu ? "cpu" : "cuda:" + std::to_string(index);
  return fusion ? s : s + " (unfused)";
}

namespace {

// cuda:0's backend, made on first use (loading the driver and creating the GPU's context).
const Expected<std::shared_ptr<Backend>>& cuda_backend() {
  static const Expected<std::shared_ptr<Backend>> b = make_backend("cuda");
  return b;
}

}  // namespace

Status Device::availability() const {
  if (kind == DeviceKind::Cpu) return Status::ok();
  if (index != 0) return Status::unimplemented("device " + to_string() + " is not available: only cuda:0 is supported");
  if (cuda_backend()) return Status::ok();
  return Status::unimplemented("device " + to_string() +
                               " is not available: " + cuda_backend().status().message());
}

Expected<std::shared_ptr<Backend>> device_backend(const Device& device) {
  if (device.kind == DeviceKind::Cpu) return Status::internal("lazy: the CPU has no device backend");
  FUSEBOX_RETURN_IF_ERROR(device.availability());
  return *cuda_backend();
}

TensorState::TensorState(uint64_t id, DType dtype, std::vector<int64_t> shape, Device device)
    : id(id), dtype(dtype), shape(std::move(shape)), device(device) {
  memory_accounting::on_state(1, this->device);
}

TensorState::~TensorState() {
  memory_accounting::on_state(-1, device);
  memory_accounting::on_bytes(-int64_t(host_bytes_), device);
  memory_accounting::on_device_bytes(-int64_t(device_bytes_));
}

int64_t TensorState::numel() const { return product(shape); }
size_t TensorState::nbytes() const { return size_t(numel()) * size_t(dtype_size(dtype)); }

void TensorState::set_value(Array a) {
  value_ = std::move(a);
  host_bytes_ = value_.nbytes();
  memory_accounting::on_bytes(int64_t(host_bytes_), device);
  host_ready_.store(true, std::memory_order_release);
  ready.store(true, std::memory_order_release);
}

void TensorState::set_device_value(Buffer b) {
  device_ = std::move(b);
  device_bytes_ = device_.view().nbytes();
  memory_accounting::on_device_bytes(int64_t(device_bytes_));
  ready.store(true, std::memory_order_release);
}

void TensorState::set_error(Status s) {
  error_ = std::move(s);
  ready.store(true, std::memory_order_release);
}

Status TensorState::fetch_host() const {
  if (on_host()) return Status::ok();
  std::lock_guard<std::mutex> lock(copy_mu_);
  if (on_host()) return Status::ok();
  if (!copy_error_.is_ok()) return copy_error_;
  if (!device_) return Status::internal("lazy: tensor " + std::to_string(id) + " has no value");
  Status s = [&]() -> Status {
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> backend, device_backend(device));
    Array host(dtype, shape);
    FUSEBOX_RETURN_IF_ERROR(backend->copy_to_host(backend->stream(), device_.view(), host_view(host)));
    FUSEBOX_RETURN_IF_ERROR(backend->stream().sync());
    value_ = std::move(host);
    return Status::ok();
  }();
  if (!s.is_ok()) {
    copy_error_ = std::move(s);
    return copy_error_;
  }
  counters::add(&LazyStats::device_downloads);
  host_bytes_ = value_.nbytes();
  memory_accounting::on_bytes(int64_t(host_bytes_), device);
  host_ready_.store(true, std::memory_order_release);
  return Status::ok();
}

namespace {

// Device copies of one-element host values by (dtype, bytes): the scalars of `x * 0.5`, made anew
// at every op of a loop, are copied up once per value. Sharing is safe because the lazy layer
// never writes a device buffer in place. Bounded; never destroyed (its buffers go back to a pool
// that may be gone at exit).
class ScalarUploads {
 public:
  Expected<Buffer> get(const Backend& backend, const Array& v, bool* copied) {
    uint64_t bits = 0;
    std::memcpy(&bits, v.raw(), v.nbytes());
    const std::pair<int, uint64_t> key{int(v.dtype()), bits};
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) return it->second;
    FUSEBOX_ASSIGN_OR_RETURN(Buffer b, backend.allocate(v.dtype(), v.shape()));
    FUSEBOX_RETURN_IF_ERROR(backend.copy_from_host(backend.stream(), host_view(v), b.view()));
    *copied = true;
    if (map_.size() >= 4096) map_.clear();
    map_.emplace(key, b);
    return b;
  }
  static ScalarUploads& instance() {
    static ScalarUploads* u = new ScalarUploads();
    return *u;
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int, uint64_t>, Buffer> map_;
};

}  // namespace

Expected<Buffer> TensorState::device_value(const Backend& backend) const {
  std::lock_guard<std::mutex> lock(copy_mu_);
  if (device_) return device_;
  if (!copy_error_.is_ok()) return copy_error_;
  bool copied = true;
  Status s = [&]() -> Status {
    if (value_.numel() == 1 && value_.nbytes() <= sizeof(uint64_t) && shape.empty()) {
      copied = false;
      FUSEBOX_ASSIGN_OR_RETURN(device_, ScalarUploads::instance().get(backend, value_, &copied));
      return Status::ok();
    }
    FUSEBOX_ASSIGN_OR_RETURN(Buffer b, backend.allocate(dtype, shape));
    FUSEBOX_RETURN_IF_ERROR(backend.copy_from_host(backend.stream(), host_view(value_), b.view()));
    device_ = std::move(b);
    return Status::ok();
  }();
  if (!s.is_ok()) {
    copy_error_ = std::move(s);
    return copy_error_;
  }
  if (copied) counters::add(&LazyStats::device_uploads);
  device_bytes_ = device_.view().nbytes();
  memory_accounting::on_device_bytes(int64_t(device_bytes_));
  return device_;
}

}  // namespace lazy

namespace {

using lazy::StatePtr;
using lazy::TensorState;
using Operands = std::span<const Tensor* const>;

// A vector's operands as the pointers the recording path takes.
lazy::SmallVec<const Tensor*, 3> pointers_to(const std::vector<Tensor>& inputs) {
  lazy::SmallVec<const Tensor*, 3> out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) out.push_back(&t);
  return out;
}
Operands view(const lazy::SmallVec<const Tensor*, 3>& v) { return Operands(v.data(), v.size()); }

std::atomic<uint64_t> g_next_id{1};

StatePtr new_state(DType dtype, std::vector<int64_t> shape, lazy::Device device) {
  // A pooled block (ir/block_pool.h): a chain of small ops makes and drops two states per op.
  return std::allocate_shared<TensorState>(PoolAllocator<TensorState>(),
                                           g_next_id.fetch_add(1, std::memory_order_relaxed), dtype,
                                           std::move(shape), device);
}

Tensor error_tensor(Status s, lazy::Device device = lazy::Device::cpu()) {
  StatePtr st = new_state(DType::F32, {}, device);
  st->set_error(std::move(s));
  return Tensor(std::move(st));
}

Tensor computed(Array a, lazy::Device device) {
  if (Status why = device.availability(); !why.is_ok()) return error_tensor(std::move(why), device);
  StatePtr st = new_state(a.dtype(), a.shape(), device);
  st->set_value(std::move(a));
  return Tensor(std::move(st));
}

// The result type of the most common ops without building IR types: a float unary op without
// attributes, or a float binary arithmetic/comparison op. nullopt: ask shape inference.
std::optional<std::pair<DType, std::vector<int64_t>>> fast_result_type(Op op, Operands in,
                                                                       const Attrs& attrs) {
  if (!attrs.empty() || in.empty() || !is_float(in[0]->dtype()) || op == Op::Not || op == Op::And || op == Op::Or) {
    return std::nullopt;
  }
  const OpKind kind = op_kind(op);
  if (kind == OpKind::Elementwise && in.size() == 1 && op != Op::Cast) {
    return std::make_pair(in[0]->dtype(), in[0]->shape());
  }
  if (kind != OpKind::Broadcast || in.size() != 2 || op == Op::Where || op == Op::BatchNorm || op == Op::Expand ||
      op == Op::ElementwiseRegion || in[1]->dtype() != in[0]->dtype()) {
    return std::nullopt;
  }
  const std::vector<int64_t>& a = in[0]->shape();
  const std::vector<int64_t>& b = in[1]->shape();
  std::vector<int64_t> out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t da = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t db = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;  // the slow path words the error
    out[i] = da == 1 ? db : da;
  }
  const bool compare = op >= Op::Equal && op <= Op::GreaterEqual;
  return std::make_pair(compare ? DType::Bool : in[0]->dtype(), std::move(out));
}

std::vector<int64_t> all_axes(int rank) {
  std::vector<int64_t> axes;
  for (int i = 0; i < rank; ++i) axes.push_back(i);
  return axes;
}

}  // namespace

// ---- handles ----

Tensor::Tensor(lazy::StatePtr state) : state_(std::move(state)) {
  if (state_) state_->handles.fetch_add(1, std::memory_order_relaxed);
}
Tensor::Tensor(const Tensor& other) : Tensor(other.state_) {}
Tensor::Tensor(Tensor&& other) noexcept : state_(std::move(other.state_)) {}
Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) {
    if (other.state_) other.state_->handles.fetch_add(1, std::memory_order_relaxed);
    release();
    state_ = other.state_;
  }
  return *this;
}
Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}
Tensor::~Tensor() { release(); }

void Tensor::release() {
  if (!state_) return;
  if (state_->handles.fetch_sub(1, std::memory_order_acq_rel) == 1 && !state_->ready.load(std::memory_order_acquire)) {
    // The last handle of a pending tensor: its stream records the drop (when it is this thread's).
    lazy::Stream* producer = state_->producer.load(std::memory_order_acquire);
    for (lazy::Stream* s : lazy::thread_streams()) {
      if (s != producer) continue;
      s->drop(state_.get());
      break;
    }
  }
  state_.reset();
}

uint64_t Tensor::id() const { return state_ ? state_->id : 0; }
DType Tensor::dtype() const { return state_ ? state_->dtype : DType::F32; }
const std::vector<int64_t>& Tensor::shape() const {
  static const std::vector<int64_t> none;
  return state_ ? state_->shape : none;
}
int64_t Tensor::numel() const { return product(shape()); }
lazy::Device Tensor::device() const { return state_ ? state_->device : lazy::Device::cpu(); }
bool Tensor::is_computed() const { return state_ && state_->ready.load(std::memory_order_acquire); }

// ---- creation ----

Tensor Tensor::from_array(const Array& a, lazy::Device device) { return computed(a.clone(), device); }

Tensor Tensor::from_data(DType dtype, std::vector<int64_t> shape, const void* data, lazy::Device device) {
  Array a(dtype, std::move(shape));
  if (a.nbytes() > 0) std::memcpy(a.raw(), data, a.nbytes());
  return computed(std::move(a), device);
}

Tensor Tensor::full(std::vector<int64_t> shape, double value, DType dtype, lazy::Device device) {
  Array a(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, value);
  return computed(std::move(a), device);
}
Tensor Tensor::zeros(std::vector<int64_t> shape, DType dtype, lazy::Device device) { return full(std::move(shape), 0, dtype, device); }
Tensor Tensor::ones(std::vector<int64_t> shape, DType dtype, lazy::Device device) { return full(std::move(shape), 1, dtype, device); }
Tensor Tensor::scalar(double value, DType dtype, lazy::Device device) { return full({}, value, dtype, device); }

Tensor Tensor::arange(int64_t n, DType dtype, lazy::Device device) {
  Array a(dtype, {n});
  for (int64_t i = 0; i < n; ++i) a.set_f64(i, double(i));
  return computed(std::move(a), device);
}

Tensor Tensor::rand(std::vector<int64_t> shape, uint64_t seed, DType dtype, lazy::Device device) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  Array a(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, dist(gen));
  return computed(std::move(a), device);
}

Tensor Tensor::randn(std::vector<int64_t> shape, uint64_t seed, DType dtype, lazy::Device device) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  Array a(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, dist(gen));
  return computed(std::move(a), device);
}

// ---- recording ----

namespace {

// The operands' common device, or an error tensor naming the operand that is wrong. `where` is a
// view: the message is built only on an error.
std::optional<Tensor> check_operands(std::string_view where_view, Operands inputs, int min_inputs,
                                     int max_inputs, lazy::Device* device) {
  const auto where = [&] { return std::string(where_view); };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]->defined()) return error_tensor(Status::invalid(where() + ": operand " + std::to_string(i) + " is an empty tensor"));
    if (i == 0) *device = inputs[i]->device();
    if (!(inputs[i]->device() == *device)) {
      return error_tensor(Status::invalid(where() + ": operand " + std::to_string(i) + " is on " +
                                          inputs[i]->device().to_string() + ", operand 0 on " + device->to_string()));
    }
    const TensorState& s = *inputs[i]->state();
    if (s.ready.load(std::memory_order_acquire) && !s.error().is_ok()) return error_tensor(s.error(), *device);
  }
  if (int(inputs.size()) < min_inputs || (max_inputs >= 0 && int(inputs.size()) > max_inputs)) {
    return error_tensor(Status::invalid(where() + ": takes " + std::to_string(min_inputs) + ".." +
                                        std::to_string(max_inputs) + " operands, got " + std::to_string(inputs.size())));
  }
  if (Status why = device->availability(); !why.is_ok()) return error_tensor(std::move(why), *device);
  return std::nullopt;
}

}  // namespace

void Tensor::apply_into(Op op, std::span<const Tensor* const> inputs, Attrs attrs, int held, lazy::SmallVec<Tensor, 1>& out) {
  lazy::TraceSpan span("record");
  const OpInfo& info = op_info(op);
  lazy::Device device = lazy::Device::cpu();
  if (auto err = check_operands(info.keyword, inputs, info.min_inputs, info.max_inputs, &device)) {
    out.push_back(std::move(*err));
    return;
  }
  lazy::SmallVec<ResultType, 1> results;
  if (auto fast = fast_result_type(op, inputs, attrs)) {
    results.push_back(std::move(*fast));
  } else {
    const std::string where(info.keyword);
    Node probe{op, {}, {}, attrs, nullptr, {}};
    if (Status s = verify_attrs(probe); !s.is_ok()) return out.push_back(error_tensor(s, device));
    std::vector<TensorType> types;
    types.reserve(inputs.size());
    for (const Tensor* t : inputs) types.push_back({t->dtype(), make_shape(t->shape())});
    Expected<std::vector<TensorType>> inferred = infer_result_types(probe, types);
    if (!inferred) return out.push_back(error_tensor(inferred.status(), device));
    for (const TensorType& t : *inferred) {
      if (!is_static(t.shape)) {
        return out.push_back(error_tensor(Status::invalid(where + ": result shape " + t.to_string() + " is not known"), device));
      }
      results.emplace_back(t.dtype, static_dims(t.shape));
    }
  }
  for (size_t k = 0; k < results.size(); ++k) out.emplace_back();
  record(op, nullptr, inputs, std::move(attrs), held, std::span<ResultType>(results.data(), results.size()), device,
         std::span<Tensor>(out.data(), out.size()));
}

std::vector<Tensor> Tensor::apply_multi(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  lazy::SmallVec<Tensor, 1> out;
  apply_into(op, view(pointers_to(inputs)), std::move(attrs), 1, out);
  return std::vector<Tensor>(std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
}

std::vector<Tensor> custom_op_multi(const std::string& name, const std::vector<Tensor>& inputs, Attrs attrs) {
  lazy::TraceSpan span("record");
  std::shared_ptr<const lazy::CustomOp> op = lazy::find_custom_op(name);
  if (!op) return {error_tensor(Status::not_found("custom op '" + name + "' is not registered"))};
  const std::string where = "custom op '" + name + "'";
  lazy::Device device = lazy::Device::cpu();
  const lazy::SmallVec<const Tensor*, 3> operands = pointers_to(inputs);
  if (auto err = check_operands(where, view(operands), op->def.min_inputs, op->def.max_inputs, &device)) return {std::move(*err)};
  std::vector<lazy::CustomType> types;
  types.reserve(inputs.size());
  for (const Tensor& t : inputs) types.push_back({t.dtype(), t.shape()});
  Expected<std::vector<lazy::CustomType>> inferred = op->def.infer(types, attrs);
  if (!inferred) return {error_tensor(Status::invalid(where + ": " + inferred.status().message()), device)};
  if (inferred->empty()) return {error_tensor(Status::invalid(where + ": inference gave no result"), device)};
  std::vector<Tensor::ResultType> results;
  for (lazy::CustomType& t : *inferred) {
    for (int64_t d : t.shape) {
      if (d < 0) return {error_tensor(Status::invalid(where + ": inferred a negative size"), device)};
    }
    results.emplace_back(t.dtype, std::move(t.shape));
  }
  std::vector<Tensor> out(results.size());
  Tensor::record(Op::ElementwiseRegion, std::move(op), view(operands), std::move(attrs), 1, results, device, out);
  return out;
}

Tensor custom_op(const std::string& name, const std::vector<Tensor>& inputs, Attrs attrs) {
  std::vector<Tensor> out = custom_op_multi(name, inputs, std::move(attrs));
  if (out.size() != 1) {
    return error_tensor(Status::invalid("custom op '" + name + "' has " + std::to_string(out.size()) +
                                        " results; use custom_op_multi"));
  }
  return std::move(out[0]);
}

void Tensor::record(Op op, std::shared_ptr<const lazy::CustomOp> custom, std::span<const Tensor* const> inputs, Attrs attrs,
                    int held, std::span<ResultType> results, lazy::Device device, std::span<Tensor> out) {
  lazy::Stream& stream = lazy::current_stream(device);
  for (const Tensor* t : inputs) {
    TensorState& s = *t->state();
    if (!s.ready.load(std::memory_order_acquire)) {
      lazy::Stream* producer = s.producer.load(std::memory_order_acquire);
      if (producer && producer != &stream) {  // pending on another thread: drain its stream first
        s.no_inplace.store(true, std::memory_order_relaxed);
        (void)producer->flush();
      }
    }
    // Read from two streams (threads): one stream's pending records may still need the data
    // after the other's block would have written over it. A plain load first: once set, the
    // reader never changes, and a locked exchange per operand is a cost of its own.
    lazy::Stream* first = s.reader.load(std::memory_order_acquire);
    if (first == nullptr && s.reader.compare_exchange_strong(first, &stream, std::memory_order_acq_rel)) continue;
    if (first != &stream) s.no_inplace.store(true, std::memory_order_relaxed);
  }
  for (size_t k = 0; k < results.size(); ++k) {
    StatePtr s = new_state(results[k].first, std::move(results[k].second), device);
    s->producer.store(&stream, std::memory_order_release);
    out[k] = Tensor(std::move(s));
  }
  lazy::counters::add(&lazy::LazyStats::records);
  if (lazy::has_observers()) lazy::notify_record({device, op, inputs.size()});
  stream.emplace([&](lazy::Record& r) {
    r.op = op;
    r.custom = std::move(custom);
    r.attrs = std::move(attrs);
    r.inputs.reserve(inputs.size());
    r.status.reserve(inputs.size());
    for (const Tensor* t : inputs) {
      r.inputs.push_back(t->state());
      r.status.push_back(t->state()->handles.load(std::memory_order_relaxed) <= held ? lazy::InputStatus::ReadWrite
                                                                                   : lazy::InputStatus::ReadOnly);
    }
    r.outputs.reserve(out.size());
    for (const Tensor& t : out) r.outputs.push_back(t.state());
    if (lazy::log_level() >= lazy::LogLevel::Full) lazy::log_record(device, r);
  });
}

namespace {
// apply's result: the one tensor of a single-result op.
Tensor single_result(Op op, lazy::SmallVec<Tensor, 1>& out) {
  if (out.size() != 1) {
    return error_tensor(Status::invalid(std::string(op_keyword(op)) + " has " + std::to_string(out.size()) +
                                        " results; use Tensor::apply_multi"));
  }
  return std::move(out[0]);
}
}  // namespace

Tensor Tensor::apply(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
  return apply_one(op, view(pointers_to(inputs)), std::move(attrs), 1);
}

Tensor Tensor::apply_one(Op op, std::span<const Tensor* const> inputs, Attrs attrs, int held) {
  lazy::SmallVec<Tensor, 1> out;
  apply_into(op, inputs, std::move(attrs), held, out);
  return single_result(op, out);
}

// ---- reads ----

Expected<Array> Tensor::to_array() const {
  if (!state_) return Status::invalid("read of an empty tensor");
  if (!state_->ready.load(std::memory_order_acquire)) {
    lazy::Stream* producer = state_->producer.load(std::memory_order_acquire);
    if (producer) (void)producer->flush();
  }
  if (!state_->ready.load(std::memory_order_acquire)) {
    return Status::internal("tensor " + std::to_string(state_->id) + " was not computed");
  }
  if (!state_->error().is_ok()) return state_->error();
  if (Status s = state_->fetch_host(); !s.is_ok()) {
    return Status(StatusCode::kExecutionError,
                  "deferred work failed on " + state_->device.to_string() + ": " + s.message());
  }
  return state_->value().clone();
}

// ---- named ops ----

Tensor Tensor::gelu(bool tanh_approx) const {
  return apply(Op::Gelu, {*this}, {{"approximate", std::string(tanh_approx ? "tanh" : "none")}});
}
Tensor Tensor::clip(double lo, double hi) const { return apply(Op::Clip, {*this}, {{"min", lo}, {"max", hi}}); }
Tensor Tensor::cast(DType to) const { return apply(Op::Cast, {*this}, {{"to", to}}); }
Tensor Tensor::argmax(int64_t axis, bool keepdims) const {
  return apply(Op::ArgMax, {*this}, {{"axis", axis}, {"keepdims", keepdims}});
}
Tensor Tensor::reduce(Op op, const std::vector<int64_t>& axes, bool keepdims) const {
  return apply(op, {*this}, {{"axes", axes.empty() ? all_axes(rank()) : axes}, {"keepdims", keepdims}});
}
Tensor Tensor::reshape(std::vector<int64_t> shape) const { return apply(Op::Reshape, {*this}, {{"shape", make_shape(shape)}}); }
Tensor Tensor::expand(std::vector<int64_t> shape) const { return apply(Op::Expand, {*this}, {{"shape", make_shape(shape)}}); }
namespace {

// A slice of a computed tensor that is one contiguous block of it (every axis after the first one
// cut is whole, every axis before it has extent 1): the block's first element and shape, so the
// result is a view of the tensor's buffer. nullopt for any other slice (or invalid attributes:
// the recorded op words the error).
std::optional<std::pair<int64_t, std::vector<int64_t>>> contiguous_block(const std::vector<int64_t>& shape,
                                                                         const std::vector<int64_t>& starts,
                                                                         const std::vector<int64_t>& ends,
                                                                         const std::vector<int64_t>& axes) {
  const int rank = int(shape.size());
  if (ends.size() != starts.size() || (!axes.empty() && axes.size() != starts.size())) return std::nullopt;
  std::vector<int64_t> first(shape.size(), 0), out = shape;
  std::vector<bool> seen(shape.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    const std::optional<int> axis = normalize_axis(axes.empty() ? int64_t(i) : axes[i], rank);
    if (!axis || seen[size_t(*axis)]) return std::nullopt;
    seen[size_t(*axis)] = true;
    const SliceRange r = normalize_slice(shape[size_t(*axis)], starts[i], ends[i], 1);
    first[size_t(*axis)] = r.start;
    out[size_t(*axis)] = r.count;
  }
  // cut: the first axis the slice shortens (none: the whole tensor, a block already).
  size_t cut = 0;
  while (cut < shape.size() && out[cut] == shape[cut]) ++cut;
  if (cut < shape.size()) {
    for (size_t j = 0; j < cut; ++j) {
      if (shape[j] != 1) return std::nullopt;
    }
    for (size_t j = cut + 1; j < shape.size(); ++j) {
      if (out[j] != shape[j]) return std::nullopt;
    }
  }
  if (product(out) == 0) return std::make_pair(int64_t(0), out);
  const std::vector<int64_t> strides = contiguous_strides(shape);
  int64_t offset = 0;
  for (size_t j = 0; j < shape.size(); ++j) offset += first[j] * strides[j];
  return std::make_pair(offset, out);
}

}  // namespace

Tensor Tensor::slice(std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes) const {
  // Slicing a computed tensor along its leading axes (a minibatch, a row) records nothing: the
  // result is a view of the same buffer, so the bounds are run-time values by construction and a
  // loop over minibatches runs one cached plan (docs/lazy.md "Slices of computed tensors").
  if (state_ && state_->ready.load(std::memory_order_acquire) && state_->error().is_ok() &&
      state_->on_host() && !state_->value().empty_storage()) {
    if (auto block = contiguous_block(state_->shape, starts, ends, axes)) {
      Tensor view = computed(state_->value().part(block->first, std::move(block->second)), state_->device);
      if (view.state_ && view.state_->error().is_ok()) {
        // Two tensors share memory now: neither is ever written in place.
        state_->no_inplace.store(true, std::memory_order_relaxed);
        view.state_->no_inplace.store(true, std::memory_order_relaxed);
      }
      return view;
    }
  }
  Attrs a{{"starts", std::move(starts)}, {"ends", std::move(ends)}};
  if (!axes.empty()) a.set("axes", std::move(axes));
  return apply(Op::Slice, {*this}, std::move(a));
}
Tensor Tensor::pad(std::vector<int64_t> pads, double value) const {
  return apply(Op::Pad, {*this}, {{"pads", std::move(pads)}, {"value", value}});
}

// The operators' way in: their arguments are borrowed (no operand vector, no handle copies).
struct TensorOps {
  static Tensor apply(Op op, std::initializer_list<const Tensor*> in) {
    return Tensor::apply_one(op, Operands(in.begin(), in.size()), {}, 0);
  }
};

namespace {
Tensor apply2(Op op, const Tensor& a, const Tensor& b) { return TensorOps::apply(op, {&a, &b}); }
}  // namespace

Tensor operator+(const Tensor& a, const Tensor& b) { return apply2(Op::Add, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return apply2(Op::Sub, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return apply2(Op::Mul, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return apply2(Op::Div, a, b); }
Tensor operator-(const Tensor& a) { return a.neg(); }
Tensor operator+(const Tensor& a, double b) { return a + Tensor::scalar(b, a.dtype(), a.device()); }
Tensor operator-(const Tensor& a, double b) { return a - Tensor::scalar(b, a.dtype(), a.device()); }
Tensor operator*(const Tensor& a, double b) { return a * Tensor::scalar(b, a.dtype(), a.device()); }
Tensor operator/(const Tensor& a, double b) { return a / Tensor::scalar(b, a.dtype(), a.device()); }
Tensor operator+(double a, const Tensor& b) { return Tensor::scalar(a, b.dtype(), b.device()) + b; }
Tensor operator-(double a, const Tensor& b) { return Tensor::scalar(a, b.dtype(), b.device()) - b; }
Tensor operator*(double a, const Tensor& b) { return Tensor::scalar(a, b.dtype(), b.device()) * b; }
Tensor operator==(const Tensor& a, const Tensor& b) { return apply2(Op::Equal, a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return apply2(Op::NotEqual, a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return apply2(Op::Less, a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return apply2(Op::LessEqual, a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return apply2(Op::Greater, a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return apply2(Op::GreaterEqual, a, b); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return apply2(Op::And, a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return apply2(Op::Or, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return TensorOps::apply(Op::Where, {&cond, &a, &b});
}
Tensor matmul(const Tensor& a, const Tensor& b) { return apply2(Op::MatMul, a, b); }
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, std::vector<int64_t> stride, std::vector<int64_t> pad,
              int64_t groups) {
  std::vector<Tensor> in{x, w};
  if (bias.defined()) in.push_back(bias);
  return Tensor::apply(Op::Conv2d, in, {{"stride", std::move(stride)}, {"pad", std::move(pad)}, {"groups", groups}});
}
Tensor concat(const std::vector<Tensor>& parts, int64_t axis) { return Tensor::apply(Op::Concat, parts, {{"axis", axis}}); }
Tensor layer_norm(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps) {
  return Tensor::apply(Op::LayerNorm, {x, scale, shift}, {{"eps", eps}});
}
Tensor resize(const Tensor& x, std::vector<int64_t> sizes, const std::string& mode) {
  return Tensor::apply(Op::Resize, {x}, {{"sizes", make_shape(sizes)}, {"mode", mode}});
}
Tensor relu(const Tensor& x) { return x.relu(); }

Status flush() {
  Status first;
  for (lazy::Stream* s : lazy::thread_streams()) {
    Status e = s->flush();
    if (first.is_ok() && !e.is_ok()) first = e;
  }
  return first;
}

Status sync(lazy::Device device) {
  Status first;
  for (lazy::Stream* s : lazy::streams_of(device)) {
    Status e = s->flush();
    if (first.is_ok() && !e.is_ok()) first = e;
  }
  // A GPU's blocks were enqueued: wait for them, and report a failure of the device work.
  if (device.kind == lazy::DeviceKind::Cuda && first.is_ok() && device.available()) {
    Expected<std::shared_ptr<Backend>> backend = lazy::device_backend(device);
    if (!backend) return backend.status();
    if (Status e = (*backend)->stream().sync(); !e.is_ok()) {
      return Status(StatusCode::kExecutionError,
                    "deferred work failed on " + device.to_string() + ": " + e.message());
    }
  }
  return first;
}

}  // namespace fusebox
