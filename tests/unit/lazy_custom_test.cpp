// Custom ops of the lazy layer: registration at any time (also after tensors were used), an
// element-wise body that fuses like a built-in op, a body-less op that is a fusion boundary run
// by its CPU kernel, kernel errors read as ExecutionError, and results equal to a plain loop.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

Tensor rnd(std::vector<int64_t> shape, uint64_t seed) { return Tensor::randn(std::move(shape), seed); }

// Registers the op, replacing one of the same name left by an earlier run of the test
// (--gtest_repeat).
Status fresh_op(lazy::CustomOpDef def) {
  lazy::unregister_custom_op(def.name);
  return lazy::register_custom_op(std::move(def));
}

double alpha(const Attrs& attrs) {
  const AttrValue* v = attrs.find("alpha");
  return v && std::holds_alternative<double>(*v) ? std::get<double>(*v) : 0.0;
}

float softplus(float x) { return std::log(1.0f + std::exp(x)); }

// softplus(x) = log(1 + exp(x)) on float32 operands.
Status softplus_cpu(const std::vector<Array>& in, const Attrs&, std::vector<Array>& out) {
  for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set_f64(i, softplus(float(in[0].get_f64(i))));
  return Status::ok();
}

Expected<std::vector<ValueId>> softplus_body(GraphBuilder& b, const std::vector<ValueId>& in, const Attrs&) {
  const ValueId one = b.scalar(b.type(in[0]).dtype, 1.0);
  return std::vector<ValueId>{b.op(Op::Log, {b.add(b.op(Op::Exp, {in[0]}), one)})};
}

std::atomic<int> g_cuda_calls{0};
Status never_called_cuda(std::span<const BufferView>, std::span<const BufferView>, const Attrs&, void*) {
  ++g_cuda_calls;
  return Status::ok();
}

lazy::CustomOpDef softplus_def(const std::string& name, bool with_body) {
  lazy::CustomOpDef def;
  def.name = name;
  def.min_inputs = def.max_inputs = 1;
  def.infer = lazy::same_as_input(0);
  def.cpu = softplus_cpu;
  def.cuda = never_called_cuda;
  if (with_body) def.body = softplus_body;
  return def;
}

// Poisoned expectation filled by a plain loop: relu(softplus(a * b) + 1).
Array expected_chain(const Array& a, const Array& b) {
  Array want(DType::F32, a.shape());
  want.fill_bytes(0xFF);
  for (int64_t i = 0; i < want.numel(); ++i) {
    want.set_f64(i, std::max(0.0f, softplus(float(a.get_f64(i)) * float(b.get_f64(i))) + 1.0f));
  }
  return want;
}

TEST_F(LazyTest, CustomOpWithBodyFusesIntoElementwiseGroup) {
  ASSERT_TRUE(fresh_op(softplus_def("test_softplus_fused", true)).is_ok());
  Tensor a = rnd({64, 32}, 11), b = rnd({64, 32}, 12);
  Tensor y = (custom_op("test_softplus_fused", {a * b}) + 1.0).relu();
  Array got = read(y);
  ASSERT_EQ(log->blocks.size(), 1u);
  EXPECT_TRUE(log->blocks[0].fused);
  EXPECT_EQ(log->blocks[0].fuser, "elementwise");
  EXPECT_EQ(log->kernels(), 1u);
  EXPECT_TRUE(arrays_close(got, expected_chain(read(a), read(b))));
  // Fusion off: the body compiled alone gives the same numbers.
  lazy::Device u = lazy::Device::cpu().unfused();
  Tensor ua = Tensor::from_array(read(a), u), ub = Tensor::from_array(read(b), u);
  Array plain = read((custom_op("test_softplus_fused", {ua * ub}) + 1.0).relu());
  EXPECT_TRUE(arrays_close(got, plain));
  EXPECT_EQ(g_cuda_calls.load(), 0);
}

TEST_F(LazyTest, CustomOpWithoutBodyIsFusionBoundary) {
  ASSERT_TRUE(fresh_op(softplus_def("test_softplus_cpu", false)).is_ok());
  Tensor a = rnd({40, 24}, 13), b = rnd({40, 24}, 14);
  Tensor y = (custom_op("test_softplus_cpu", {a * b}) + 1.0).relu();
  Array got = read(y);
  // mul alone, the custom op's CPU kernel alone, then add + relu fused.
  ASSERT_EQ(log->blocks.size(), 3u);
  EXPECT_FALSE(log->blocks[0].fused);
  EXPECT_FALSE(log->blocks[1].fused);
  EXPECT_EQ(log->blocks[1].kernels, std::vector<std::string>{"test_softplus_cpu"});
  EXPECT_TRUE(log->blocks[2].fused);
  EXPECT_EQ(log->kernels(), 3u);
  EXPECT_TRUE(arrays_close(got, expected_chain(read(a), read(b))));
  EXPECT_EQ(g_cuda_calls.load(), 0);
}

TEST_F(LazyTest, Weakness7CustomOpRegisteredAfterTensorOpsWereUsed) {
  // Tensors made, ops recorded and run, and ops still pending before the op exists.
  Tensor a = rnd({256}, 15), b = rnd({256}, 16);
  Array first = read((a * b).exp());
  EXPECT_EQ(first.numel(), 256);
  Tensor pending = a * b;
  EXPECT_FALSE(pending.is_computed());
  ASSERT_TRUE(fresh_op(softplus_def("test_softplus_late", true)).is_ok());
  ASSERT_TRUE(fresh_op(softplus_def("test_softplus_late_cpu", false)).is_ok());
  Array fused = read((custom_op("test_softplus_late", {pending}) + 1.0).relu());
  Array boundary = read((custom_op("test_softplus_late_cpu", {pending}) + 1.0).relu());
  const Array want = expected_chain(read(a), read(b));
  EXPECT_TRUE(arrays_close(fused, want));
  EXPECT_TRUE(arrays_close(boundary, want));
}

TEST_F(LazyTest, CustomKernelErrorIsExecutionErrorAtRead) {
  lazy::CustomOpDef def = softplus_def("test_failing", false);
  def.cpu = [](const std::vector<Array>&, const Attrs&, std::vector<Array>&) { return Status::invalid("kernel said no"); };
  ASSERT_TRUE(fresh_op(def).is_ok());
  def.name = "test_throwing";
  def.cpu = [](const std::vector<Array>&, const Attrs&, std::vector<Array>&) -> Status {
    throw std::runtime_error("out of cheese");
  };
  ASSERT_TRUE(fresh_op(def).is_ok());
  Tensor a = rnd({16}, 17);
  for (const char* name : {"test_failing", "test_throwing"}) {
    Tensor y = custom_op(name, {a * 2.0}).exp();
    Expected<Array> r = y.to_array();
    ASSERT_FALSE(r.has_value()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kExecutionError) << r.status().to_string();
    EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().to_string();
    (void)sync();
  }
  // The stream keeps working after the errors.
  Expected<float> ok = (a * 2.0).sum().item<float>();
  EXPECT_TRUE(ok.has_value());
  EXPECT_TRUE(sync().is_ok());
}

TEST_F(LazyTest, CustomOpBadUseIsStatusNotCrash) {
  lazy::CustomOpDef def = softplus_def("", true);
  EXPECT_FALSE(fresh_op(def).is_ok());
  def.name = "test_no_kernel";
  def.cpu = nullptr;
  EXPECT_NE(fresh_op(def).message().find("CPU kernel"), std::string::npos);
  ASSERT_TRUE(fresh_op(softplus_def("test_twice", true)).is_ok());
  EXPECT_NE(lazy::register_custom_op(softplus_def("test_twice", true)).message().find("already"), std::string::npos);

  Tensor a = rnd({8}, 18);
  Expected<Array> unknown = custom_op("test_never_registered", {a}).to_array();
  ASSERT_FALSE(unknown.has_value());
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  Expected<Array> arity = custom_op("test_twice", {a, a}).to_array();
  ASSERT_FALSE(arity.has_value());
  EXPECT_NE(arity.status().message().find("test_twice"), std::string::npos) << arity.status().to_string();

  // A body whose result type disagrees with inference: an ExecutionError at the read.
  lazy::CustomOpDef bad = softplus_def("test_bad_body", true);
  bad.body = [](GraphBuilder& b, const std::vector<ValueId>& in, const Attrs&) -> Expected<std::vector<ValueId>> {
    return std::vector<ValueId>{b.cast(in[0], DType::I32)};
  };
  ASSERT_TRUE(fresh_op(bad).is_ok());
  Expected<Array> r = custom_op("test_bad_body", {a * 3.0}).to_array();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kExecutionError);
  EXPECT_NE(r.status().message().find("test_bad_body"), std::string::npos) << r.status().to_string();
  (void)sync();

  // Unregistering: recorded work keeps its op, new records do not find it.
  Tensor pending = custom_op("test_twice", {a * 4.0});
  EXPECT_TRUE(lazy::unregister_custom_op("test_twice"));
  EXPECT_FALSE(lazy::unregister_custom_op("test_twice"));
  EXPECT_TRUE(pending.to_array().has_value());
  EXPECT_EQ(custom_op("test_twice", {a}).to_array().status().code(), StatusCode::kNotFound);
}

TEST_F(LazyTest, CustomOpsWithEqualShapesKeepTheirOwnPlans) {
  // Two ops of the same arity and types must not share a cached plan.
  lazy::CustomOpDef plus = softplus_def("test_plus_one", true);
  plus.body = [](GraphBuilder& b, const std::vector<ValueId>& in, const Attrs&) -> Expected<std::vector<ValueId>> {
    return std::vector<ValueId>{b.add(in[0], b.scalar(DType::F32, 1.0))};
  };
  lazy::CustomOpDef twice = softplus_def("test_times_two", true);
  twice.body = [](GraphBuilder& b, const std::vector<ValueId>& in, const Attrs&) -> Expected<std::vector<ValueId>> {
    return std::vector<ValueId>{b.mul(in[0], b.scalar(DType::F32, 2.0))};
  };
  ASSERT_TRUE(fresh_op(plus).is_ok());
  ASSERT_TRUE(fresh_op(twice).is_ok());
  Tensor a = rnd({100}, 19);
  const Array ea = read(a);
  for (int round = 0; round < 2; ++round) {
    Array p = read(custom_op("test_plus_one", {a.abs()}));
    Array t = read(custom_op("test_times_two", {a.abs()}));
    for (int64_t i = 0; i < 100; ++i) {
      EXPECT_FLOAT_EQ(float(p.get_f64(i)), std::abs(float(ea.get_f64(i))) + 1.0f);
      EXPECT_FLOAT_EQ(float(t.get_f64(i)), std::abs(float(ea.get_f64(i))) * 2.0f);
    }
  }
  EXPECT_EQ(lazy::stats().plan_hits, 2u);  // the second round reuses both plans
}

TEST_F(LazyTest, CustomOpsWithSeveralOperandsAndResults) {
  // Two results, no body: (min, max) of two operands, element by element.
  lazy::CustomOpDef minmax;
  minmax.name = "test_minmax";
  minmax.min_inputs = minmax.max_inputs = 2;
  minmax.infer = [](const std::vector<lazy::CustomType>& in, const Attrs&) -> Expected<std::vector<lazy::CustomType>> {
    if (in[0].shape != in[1].shape) return Status::invalid("operands differ in shape");
    return std::vector<lazy::CustomType>{in[0], in[0]};
  };
  minmax.cpu = [](const std::vector<Array>& in, const Attrs&, std::vector<Array>& out) {
    for (int64_t i = 0; i < in[0].numel(); ++i) {
      out[0].set_f64(i, std::min(in[0].get_f64(i), in[1].get_f64(i)));
      out[1].set_f64(i, std::max(in[0].get_f64(i), in[1].get_f64(i)));
    }
    return Status::ok();
  };
  // Two operands with a body and an attribute: x * y + alpha.
  lazy::CustomOpDef fma = softplus_def("test_mul_add", true);
  fma.min_inputs = fma.max_inputs = 2;
  fma.cpu = [](const std::vector<Array>& in, const Attrs& attrs, std::vector<Array>& out) {
    for (int64_t i = 0; i < in[0].numel(); ++i) out[0].set_f64(i, in[0].get_f64(i) * in[1].get_f64(i) + alpha(attrs));
    return Status::ok();
  };
  fma.body = [](GraphBuilder& b, const std::vector<ValueId>& in, const Attrs& attrs) -> Expected<std::vector<ValueId>> {
    return std::vector<ValueId>{b.add(b.mul(in[0], in[1]), b.scalar(DType::F32, alpha(attrs)))};
  };
  ASSERT_TRUE(fresh_op(minmax).is_ok());
  ASSERT_TRUE(fresh_op(fma).is_ok());
  Tensor a = rnd({12, 7}, 31), b = rnd({12, 7}, 32);
  std::vector<Tensor> mm = custom_op_multi("test_minmax", {a, b});
  ASSERT_EQ(mm.size(), 2u);
  Tensor y = custom_op("test_mul_add", {mm[0], mm[1].tanh()}, {{"alpha", 0.25}});
  Array lo = read(mm[0]), hi = read(mm[1]), got = read(y);
  const Array ea = read(a), eb = read(b);
  for (int64_t i = 0; i < ea.numel(); ++i) {
    const float l = std::min(float(ea.get_f64(i)), float(eb.get_f64(i))), h = std::max(float(ea.get_f64(i)), float(eb.get_f64(i)));
    EXPECT_FLOAT_EQ(float(lo.get_f64(i)), l);
    EXPECT_FLOAT_EQ(float(hi.get_f64(i)), h);
    EXPECT_NEAR(float(got.get_f64(i)), l * std::tanh(h) + 0.25f, 1e-5f);
  }
  EXPECT_FALSE(custom_op_multi("test_minmax", {a, a.reshape({7, 12})})[0].to_array().has_value());
  EXPECT_FALSE(custom_op("test_minmax", {a, b}).to_array().has_value());  // two results: use custom_op_multi
}

TEST_F(LazyTest, CustomOpsRegisteredWhileAnotherThreadRecords) {
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::thread worker([&] {
    Tensor x = rnd({64}, 33);
    const Array ex = read(x);
    for (int round = 0; !done.load() || round < 20; ++round) {
      Array y = read((x * 2.0).exp());
      for (int64_t i = 0; i < 64; ++i) bad += std::abs(float(y.get_f64(i)) - std::exp(2.0f * float(ex.get_f64(i)))) > 1e-3f;
    }
  });
  for (int i = 0; i < 20; ++i) {
    const std::string name = "test_concurrent_" + std::to_string(i);
    ASSERT_TRUE(fresh_op(softplus_def(name, i % 2 == 0)).is_ok());
    Tensor a = rnd({32}, 40 + uint64_t(i));
    Array got = read(custom_op(name, {a}));
    const Array ea = read(a);
    for (int64_t k = 0; k < 32; ++k) EXPECT_NEAR(float(got.get_f64(k)), softplus(float(ea.get_f64(k))), 1e-5f);
  }
  done = true;
  worker.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace fusebox::testing
