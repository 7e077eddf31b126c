// fusebox::Tensor: an eager-looking tensor whose ops are recorded, not run. Work runs at a read
// (to_vector, item, to_array), sync(device), flush(), when a tensor still pending on another
// thread is used, or when a stream holds kMaxPendingRecords records. Then fusers group the
// pending records into segments compiled by the normal Session pipeline (docs/lazy.md).
//
//   Tensor a = Tensor::randn({1024}, 1), b = Tensor::randn({1024}, 2);
//   Tensor y = (a * b + 1.0).relu();            // recorded: mul, add, relu
//   Expected<std::vector<float>> v = y.to_vector<float>();  // one fused kernel runs here
//
// Reads return Expected: an error while running deferred work (a bad shape found at run time,
// an unavailable device) comes back there as a Status, never as a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/attributes.h"
#include "ir/op_info.h"
#include "lazy/custom_op.h"
#include "lazy/state.h"

namespace fusebox {


class Tensor {
 public:
  Tensor() = default;  // an empty handle (defined() is false)
  Tensor(const Tensor& other);
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(const Tensor& other);
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor();

  // ---- creation (computed at once on the host; no record) ----
  static Tensor from_array(const Array& a, lazy::Device device = lazy::Device::cpu());  // copies
  static Tensor from_data(DType dtype, std::vector<int64_t> shape, const void* data, lazy::Device device = lazy::Device::cpu());
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, std::vector<int64_t> shape,
                            DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu()) {
    return from_array(Array::from_vector(dtype, std::move(shape), values), device);
  }
  static Tensor full(std::vector<int64_t> shape, double value, DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu());
  static Tensor zeros(std::vector<int64_t> shape, DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu());
  static Tensor ones(std::vector<int64_t> shape, DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu());
  static Tensor arange(int64_t n, DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu());
  // Uniform in [0, 1) / standard normal, reproducible from the seed.
  static Tensor rand(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu());
  static Tensor randn(std::vector<int64_t> shape, uint64_t seed, DType dtype = DType::F32, lazy::Device device = lazy::Device::cpu());

  // ---- any op of ops.def (the generic form; wrappers below) ----
  static std::vector<Tensor> apply_multi(Op op, const std::vector<Tensor>& inputs, Attrs attrs = {});
  static Tensor apply(Op op, const std::vector<Tensor>& inputs, Attrs attrs = {});

  // ---- properties ----
  bool defined() const { return state_ != nullptr; }
  uint64_t id() const;
  DType dtype() const;
  const std::vector<int64_t>& shape() const;
  int rank() const { return int(shape().size()); }
  int64_t numel() const;
  lazy::Device device() const;
  bool is_computed() const;  // its value (or error) exists: reading it runs nothing

  // ---- reads (run what is pending for this tensor) ----
  Expected<Array> to_array() const;
  template <typename T>
  Expected<std::vector<T>> to_vector() const {
    Expected<Array> a = to_array();
    if (!a) return a.status();
    std::vector<T> out(size_t(a->numel()));
    for (int64_t i = 0; i < a->numel(); ++i) {
      if constexpr (std::is_integral_v<T>) out[size_t(i)] = T(a->get_i64(i));
      else out[size_t(i)] = T(a->get_f64(i));
    }
    return out;
  }
  template <typename T>
  Expected<T> item() const {
    Expected<std::vector<T>> v = to_vector<T>();
    if (!v) return v.status();
    if (v->size() != 1) return Status::invalid("item: the tensor has " + std::to_string(v->size()) + " elements, not 1");
    return (*v)[0];
  }

  // ---- element-wise ----
  Tensor neg() const { return un(Op::Neg); }
  Tensor abs() const { return un(Op::Abs); }
  Tensor exp() const { return un(Op::Exp); }
  Tensor log() const { return un(Op::Log); }
  Tensor sqrt() const { return un(Op::Sqrt); }
  Tensor rsqrt() const { return un(Op::Rsqrt); }
  Tensor reciprocal() const { return un(Op::Reciprocal); }
  Tensor tanh() const { return un(Op::Tanh); }
  Tensor sigmoid() const { return un(Op::Sigmoid); }
  Tensor relu() const { return un(Op::Relu); }
  Tensor gelu(bool tanh_approx = false) const;
  Tensor silu() const { return un(Op::Silu); }
  Tensor erf() const { return un(Op::Erf); }
  Tensor sin() const { return un(Op::Sin); }
  Tensor cos() const { return un(Op::Cos); }
  Tensor floor() const { return un(Op::Floor); }
  Tensor ceil() const { return un(Op::Ceil); }
  Tensor round() const { return un(Op::Round); }
  Tensor logical_not() const { return un(Op::Not); }
  Tensor clip(double lo, double hi) const;
  Tensor cast(DType to) const;
  Tensor pow(const Tensor& e) const { return apply(Op::Pow, {*this, e}); }
  Tensor maximum(const Tensor& o) const { return apply(Op::Max, {*this, o}); }
  Tensor minimum(const Tensor& o) const { return apply(Op::Min, {*this, o}); }

  // ---- reductions (empty axes: every axis) ----
  Tensor sum(std::vector<int64_t> axes = {}, bool keepdims = false) const { return reduce(Op::ReduceSum, axes, keepdims); }
  Tensor mean(std::vector<int64_t> axes = {}, bool keepdims = false) const { return reduce(Op::ReduceMean, axes, keepdims); }
  Tensor max(std::vector<int64_t> axes = {}, bool keepdims = false) const { return reduce(Op::ReduceMax, axes, keepdims); }
  Tensor min(std::vector<int64_t> axes = {}, bool keepdims = false) const { return reduce(Op::ReduceMin, axes, keepdims); }
  Tensor prod(std::vector<int64_t> axes = {}, bool keepdims = false) const { return reduce(Op::ReduceProd, axes, keepdims); }
  Tensor argmax(int64_t axis, bool keepdims = false) const;
  Tensor softmax(int64_t axis = -1) const { return apply(Op::Softmax, {*this}, {{"axis", axis}}); }
  Tensor log_softmax(int64_t axis = -1) const { return apply(Op::LogSoftmax, {*this}, {{"axis", axis}}); }

  // ---- movement ----
  Tensor reshape(std::vector<int64_t> shape) const;
  Tensor transpose(std::vector<int64_t> perm) const { return apply(Op::Transpose, {*this}, {{"perm", std::move(perm)}}); }
  Tensor slice(std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes = {}) const;
  Tensor expand(std::vector<int64_t> shape) const;
  Tensor flip(std::vector<int64_t> axes) const { return apply(Op::Flip, {*this}, {{"axes", std::move(axes)}}); }
  Tensor pad(std::vector<int64_t> pads, double value = 0.0) const;

  const lazy::StatePtr& state() const { return state_; }
  explicit Tensor(lazy::StatePtr state);  // takes one handle on the state

 private:
  friend std::vector<Tensor> custom_op_multi(const std::string&, const std::vector<Tensor>&, Attrs);
  friend struct TensorOps;  // the operators' borrowed-operand path (tensor.cpp)
  using ResultType = std::pair<DType, std::vector<int64_t>>;
  // Checks the operands, infers the result types and records: `out` gets one tensor per result,
  // or one error tensor. Most ops have one result, which `out` keeps inline. `held` is 1 when
  // `inputs` are handles held for this call (a vector of operands), 0 when they are borrowed.
  static void apply_into(Op op, std::span<const Tensor* const> inputs, Attrs attrs, int held, lazy::SmallVec<Tensor, 1>& out);
  // Records `op` (or the custom op) with results of the given types (their shapes are moved
  // out), operands already checked; out[k] becomes the handle of result k. An input is
  // ReadWrite when no handle but the `held` one of the call is alive (lazy::InputStatus): the
  // same status whether the operands were copied for the call or borrowed.
  static void record(Op op, std::shared_ptr<const lazy::CustomOp> custom, std::span<const Tensor* const> inputs, Attrs attrs,
                     int held, std::span<ResultType> results, lazy::Device device, std::span<Tensor> out);
  // apply for a single-result op (else an error tensor).
  static Tensor apply_one(Op op, std::span<const Tensor* const> inputs, Attrs attrs, int held);
  Tensor un(Op op) const {
    const Tensor* in[1] = {this};
    return apply_one(op, in, {}, 0);
  }
  Tensor reduce(Op op, const std::vector<int64_t>& axes, bool keepdims) const;
  void release();

  lazy::StatePtr state_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
// A scalar operand becomes a rank-0 input of the tensor's dtype (a run-time value, so a loop
// with a changing scalar reuses its plans).
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator&&(const Tensor& a, const Tensor& b);
Tensor operator||(const Tensor& a, const Tensor& b);

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), std::vector<int64_t> stride = {1, 1},
              std::vector<int64_t> pad = {0, 0, 0, 0}, int64_t groups = 1);
Tensor concat(const std::vector<Tensor>& parts, int64_t axis);
Tensor layer_norm(const Tensor& x, const Tensor& scale, const Tensor& shift, double eps = 1e-5);
Tensor resize(const Tensor& x, std::vector<int64_t> sizes, const std::string& mode = "nearest");
Tensor relu(const Tensor& x);
// A custom op registered with lazy::register_custom_op (lazy/custom_op.h), by name.
std::vector<Tensor> custom_op_multi(const std::string& name, const std::vector<Tensor>& inputs, Attrs attrs = {});
Tensor custom_op(const std::string& name, const std::vector<Tensor>& inputs, Attrs attrs = {});

// Runs every pending record of this thread's streams (all devices).
Status flush();
// Runs every pending record of every thread's stream of the device and waits for them; returns
// the first deferred error of those streams (then cleared).
Status sync(lazy::Device device = lazy::Device::cpu());

}  // namespace fusebox
