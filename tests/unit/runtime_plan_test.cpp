// The runtime's plan: runs by position and by name, shape plans computed once per set of sizes,
// the Session's plan cache, structural hashing, the backend registry, and placement on a second
// backend (a fake one that claims only `add`, on a device of its own so copies are exercised).
// Every result is compared with the reference backend on random inputs.
#include <atomic>
#include <cstring>
#include <thread>

#include "backends/array_pool.h"
#include "backends/cpu/reference_backend.h"
#include "backends/host_backend.h"
#include "backends/registry/registry.h"
#include "fusion/fuse.h"
#include "ir/parser.h"
#include "ir/structural_hash.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::arrays_close;
using testing::random_array;

Graph parse_one(const std::string& text) {
  Expected<Module> m = parse_module(text);
  EXPECT_TRUE(m) << m.status().to_string();
  return m ? m->functions[0] : Graph();
}

const char* kMlp = R"(func @mlp(%x: f32[N,8], %w: f32[8,4], %b: f32[4]) -> f32[N,4] {
  %0 = matmul %x, %w : f32[N,4]
  %1 = add %0, %b : f32[N,4]
  %2 = tanh %1 : f32[N,4]
  %3 = mul %2, %1 : f32[N,4]
  return %3
}
)";

std::vector<Array> mlp_inputs(int64_t n, uint64_t seed) {
  return {random_array(DType::F32, {n, 8}, seed), random_array(DType::F32, {8, 4}, seed + 1),
          random_array(DType::F32, {4}, seed + 2)};
}

NamedArrays named(const Graph& g, const std::vector<Array>& in) {
  NamedArrays m;
  for (size_t k = 0; k < in.size(); ++k) m[g.value(g.inputs()[k]).name] = in[k];
  return m;
}

std::vector<Array> reference(const Graph& g, const std::vector<Array>& in) {
  CompileOptions o;
  o.fuse = false;
  o.backend = "reference";
  Expected<Executable> exe = Session().compile(g, o);
  EXPECT_TRUE(exe) << exe.status().to_string();
  Expected<std::vector<Array>> out = exe->run(in);
  EXPECT_TRUE(out) << out.status().to_string();
  return out ? *out : std::vector<Array>();
}

void expect_all_close(const std::vector<Array>& got, const std::vector<Array>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(arrays_close(got[i], want[i], 1e-5, 1e-6)) << "output " << i;
}

// A reshape moves no data: its result is its operand's buffer under the new shape, so the plan
// allocates only for the kernels. A returned reshape is a view as well when its operand is a
// kernel's result nobody else gets; of an input, a constant or another result it is a copy the
// caller owns alone.
TEST(RuntimePlan, ReshapesAliasTheirOperandUnlessTheCallerWouldShareMemory) {
  Graph g = parse_one(
      R"(func @f(%x: f32[N,3,4]) -> (f32[N,12], f32[N,12], f32[N,12], f32[N,3,4], f32[N,12], f32[6]) {
  %c = constant {value = dense<f32[2,3]: [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>} : f32[2,3]
  %0 = relu %x : f32[N,3,4]
  %1 = reshape %0 {shape = [N, 12]} : f32[N,12]
  %2 = tanh %1 : f32[N,12]
  %3 = reshape %x {shape = [N, 12]} : f32[N,12]
  %4 = sigmoid %x : f32[N,3,4]
  %5 = reshape %4 {shape = [N, 12]} : f32[N,12]
  %6 = exp %x : f32[N,3,4]
  %7 = reshape %6 {shape = [N, 12]} : f32[N,12]
  %8 = reshape %c {shape = [6]} : f32[6]
  return %2, %3, %5, %6, %7, %8
}
)");
  CompileOptions o;
  o.fuse = false;
  Expected<Executable> exe = Session().compile(g, o);
  ASSERT_TRUE(exe) << exe.status().to_string();
  Array x = random_array(DType::F32, {2, 3, 4}, 7);
  std::vector<Array> want = reference(g, {x});
  Expected<std::vector<Array>> got = exe->run(std::vector<Array>{x});
  ASSERT_TRUE(got) << got.status().to_string();
  expect_all_close(*got, want);
  // Buffers asked for: relu's, tanh's, sigmoid's, exp's and the copies of %3, %7 and %8; none for
  // the inner reshape %1 nor for %5.
  EXPECT_EQ(exe->pool_stats().allocations + exe->pool_stats().reuses, 7u);
  // No result shares memory with the caller's input, another result or the plan's constant.
  const Array got1 = (*got)[1].clone(), got4 = (*got)[4].clone(), got5 = (*got)[5].clone();
  x.data<float>()[0] += 100.0f;
  (*got)[3].data<float>()[0] += 100.0f;
  (*got)[5].data<float>()[0] += 100.0f;
  EXPECT_TRUE(arrays_close((*got)[1], got1, 0, 0));
  EXPECT_TRUE(arrays_close((*got)[4], got4, 0, 0));
  Expected<std::vector<Array>> again = exe->run(std::vector<Array>{random_array(DType::F32, {2, 3, 4}, 7)});
  ASSERT_TRUE(again) << again.status().to_string();
  EXPECT_TRUE(arrays_close((*again)[5], got5, 0, 0));
}

// An idle buffer serves a smaller request when it is less than twice as large (a plan's values
// come in many sizes), never a larger one, and keeps its own capacity when it goes back.
TEST(ArrayPool, IdleBuffersServeSmallerRequestsUpToHalfTheirSize) {
  ArrayPool pool;
  uint8_t* first = nullptr;
  {
    std::shared_ptr<uint8_t[]> a = pool.allocate_bytes(1000);
    first = a.get();
    std::memset(a.get(), 7, 1000);
  }
  EXPECT_EQ(pool.stats().cached_bytes, 1000u);
  {
    std::shared_ptr<uint8_t[]> b = pool.allocate_bytes(600);  // 1000 < 2 * 600: reused
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(pool.stats().reuses, 1u);
    EXPECT_EQ(pool.stats().cached_bytes, 0u);
    std::shared_ptr<uint8_t[]> c = pool.allocate_bytes(500);  // nothing idle: a new buffer
    EXPECT_NE(c.get(), first);
  }
  EXPECT_EQ(pool.stats().cached_bytes, 1500u);               // the 1000-byte buffer back at its capacity
  std::shared_ptr<uint8_t[]> d = pool.allocate_bytes(400);   // 500 < 800: the 500-byte buffer
  std::shared_ptr<uint8_t[]> e = pool.allocate_bytes(1001);  // larger than any idle one: new
  std::shared_ptr<uint8_t[]> f = pool.allocate_bytes(499);   // 1000 >= 2 * 499: not reused
  EXPECT_EQ(pool.stats().reuses, 2u);
  EXPECT_EQ(pool.stats().allocations, 4u);
  EXPECT_EQ(pool.stats().cached_bytes, 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.get()) % kArrayAlignment, 0u);
}

TEST(RuntimePlan, RunByPositionEqualsRunByName) {
  Graph g = parse_one(kMlp);
  Expected<Executable> exe = Session().compile(g);
  ASSERT_TRUE(exe) << exe.status().to_string();
  std::vector<Array> in = mlp_inputs(5, 11);
  Expected<std::vector<Array>> by_position = exe->run(in);
  Expected<std::vector<Array>> by_name = exe->run(named(g, in));
  ASSERT_TRUE(by_position) << by_position.status().to_string();
  ASSERT_TRUE(by_name) << by_name.status().to_string();
  ASSERT_EQ(by_position->size(), 1u);
  EXPECT_TRUE((*by_position)[0].same_data((*by_name)[0]));
  expect_all_close(*by_position, reference(g, in));
}

TEST(RuntimePlan, RunByPositionWithAWrongCountIsAnError) {
  Graph g = parse_one(kMlp);
  Expected<Executable> exe = Session().compile(g);
  ASSERT_TRUE(exe);
  std::vector<Array> in = mlp_inputs(2, 3);
  in.pop_back();
  Expected<std::vector<Array>> out = exe->run(in);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.status().message(), "@mlp: expects 3 inputs (%x, %w, %b), got 2");
}

TEST(RuntimePlan, RepeatedSizesReuseTheShapePlan) {
  Graph g = parse_one(kMlp);
  Expected<Executable> exe = Session().compile(g);
  ASSERT_TRUE(exe);
  EXPECT_EQ(exe->stats().shape_plans, 0u);
  std::vector<Array> three = mlp_inputs(3, 21);
  for (int i = 0; i < 3; ++i) {
    Expected<std::vector<Array>> out = exe->run(three);
    ASSERT_TRUE(out) << out.status().to_string();
    expect_all_close(*out, reference(g, three));
  }
  EXPECT_EQ(exe->stats().shape_plans, 1u);

  // A new batch size is a new plan, with results for that size.
  std::vector<Array> seven = mlp_inputs(7, 31);
  Expected<std::vector<Array>> out = exe->run(named(g, seven));
  ASSERT_TRUE(out) << out.status().to_string();
  EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{7, 4}));
  expect_all_close(*out, reference(g, seven));
  EXPECT_EQ(exe->stats().shape_plans, 2u);

  // Both sizes stay cached.
  ASSERT_TRUE(exe->run(three));
  ASSERT_TRUE(exe->run(seven));
  EXPECT_EQ(exe->stats().shape_plans, 2u);
}

TEST(RuntimePlan, ACachedShapePlanStillChecksDtypes) {
  Graph g = parse_one(kMlp);
  Expected<Executable> exe = Session().compile(g);
  ASSERT_TRUE(exe);
  std::vector<Array> in = mlp_inputs(3, 41);
  ASSERT_TRUE(exe->run(in));
  in[2] = random_array(DType::F64, {4}, 5);
  Expected<std::vector<Array>> out = exe->run(in);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.status().message(), "@mlp: input %b must be f32[4], got f64[4] (dtype differs)");
}

TEST(RuntimePlan, CompilingTheSameGraphAgainIsACacheHit) {
  Graph g = parse_one(kMlp);
  Session s;
  Expected<Executable> first = s.compile(g);
  Expected<Executable> second = s.compile(parse_one(kMlp));  // equal, not the same object
  ASSERT_TRUE(first && second);
  EXPECT_EQ(s.stats().plan_hits, 1u);
  EXPECT_EQ(s.stats().plan_misses, 1u);
  EXPECT_EQ(&first->graph(), &second->graph()) << "a hit shares the compiled plan";
  std::vector<Array> in = mlp_inputs(4, 51);
  Expected<std::vector<Array>> out = second->run(in);
  ASSERT_TRUE(out);
  expect_all_close(*out, reference(g, in));

  CompileOptions interpreted;
  interpreted.cpu.codegen = cpu::Codegen::Interpreter;
  ASSERT_TRUE(s.compile(g, interpreted));
  CompileOptions unfused;
  unfused.fuse = false;
  ASSERT_TRUE(s.compile(g, unfused));
  CompileOptions on_reference;
  on_reference.backend = "reference";
  ASSERT_TRUE(s.compile(g, on_reference));
  EXPECT_EQ(s.stats().plan_misses, 4u) << "other options are other plans";

  std::string text = kMlp;
  Graph other_op = parse_one(text.replace(text.find("tanh %1"), 4, "relu"));
  ASSERT_TRUE(s.compile(other_op));
  // Equal structure, other input names: the hash agrees, exact equality does not (names are
  // the inputs of run by name).
  std::string renamed_text = kMlp;
  for (size_t p; (p = renamed_text.find("%x")) != std::string::npos;) renamed_text.replace(p, 2, "%input");
  Graph renamed = parse_one(renamed_text);
  EXPECT_EQ(structural_hash(renamed), structural_hash(g));
  Expected<Executable> r = s.compile(renamed);
  ASSERT_TRUE(r);
  EXPECT_EQ(s.stats().plan_misses, 6u);
  EXPECT_EQ(s.stats().plan_hits, 1u);
  EXPECT_TRUE(r->run({{"input", in[0]}, {"w", in[1]}, {"b", in[2]}}));
}

TEST(RuntimePlan, ThePlanCacheIsBounded) {
  Session s(2);
  std::string text = kMlp;
  for (const char* op : {"tanh", "relu", "sigmoid"}) {
    std::string t = text;
    ASSERT_TRUE(s.compile(parse_one(t.replace(t.find("tanh %1"), 4, op))));
  }
  EXPECT_EQ(s.stats().cached_plans, 2u);
  ASSERT_TRUE(s.compile(parse_one(kMlp)));  // the oldest was dropped
  EXPECT_EQ(s.stats().plan_hits, 0u);
}

TEST(RuntimePlan, SessionsCompileAndRunFromSeveralThreads) {
  Graph g = parse_one(kMlp);
  Session s;
  std::vector<Array> in = mlp_inputs(6, 61);
  std::vector<Array> want = reference(g, in);
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) {
        Expected<Executable> exe = s.compile(g);
        if (!exe) continue;
        Expected<std::vector<Array>> out = exe->run(in);
        if (out && arrays_close((*out)[0], want[0], 1e-5, 1e-6)) ++good;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(good.load(), 20);
  EXPECT_EQ(s.stats().plan_hits + s.stats().plan_misses, 20u);
  EXPECT_GE(s.stats().plan_hits, 16u);
}

uint64_t hash_of(const std::string& text) { return structural_hash(parse_one(text)); }

std::string unary(const std::string& type, const std::string& op = "tanh", const std::string& attrs = "") {
  return "func @f(%x: " + type + ") -> " + type + " {\n  %0 = " + op + " %x" + attrs + " : " + type +
         "\n  return %0\n}\n";
}

TEST(StructuralHash, SizesAndNamesDoNotCount) {
  EXPECT_EQ(hash_of(unary("f32[N,8]")), hash_of(unary("f32[M,16]")));
  EXPECT_EQ(hash_of(unary("f32[4,8]")), hash_of(unary("f32[5,3]")));
  const char* a = "func @f(%x: f32[N,4], %y: f32[4]) -> f32[N,4] {\n  %s = add %x, %y : f32[N,4]\n  return %s\n}\n";
  const char* b = "func @g(%p: f32[B,9], %q: f32[9]) -> f32[B,9] {\n  %0 = add %p, %q : f32[B,9]\n  return %0\n}\n";
  EXPECT_EQ(hash_of(a), hash_of(b));
}

// Found by the graph fuzzer under UBSan: an empty constant has no storage, and hashing its bytes
// passed a null pointer to memcpy. Gather with zero indices is such a graph.
TEST(StructuralHash, EmptyConstantHashesAndRuns) {
  GraphBuilder b("g");
  ValueId x = b.input("x", DType::F32, {3});
  ValueId idx = b.constant(Array(DType::I64, {0}));
  b.output(b.op(Op::Gather, {x, idx}, {{"axis", int64_t(0)}}));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().to_string();
  EXPECT_NE(structural_hash(*g), 0u);
  std::vector<Array> in = {random_array(DType::F32, {3}, 7)};
  Expected<Executable> exe = Session().compile(*g);
  ASSERT_TRUE(exe) << exe.status().to_string();
  Expected<std::vector<Array>> out = exe->run(in);
  ASSERT_TRUE(out) << out.status().to_string();
  EXPECT_EQ((*out)[0].numel(), 0);
}

TEST(StructuralHash, StructureCounts) {
  const uint64_t base = hash_of(unary("f32[N,8]"));
  EXPECT_NE(base, hash_of(unary("f32[N,8]", "sigmoid"))) << "op";
  EXPECT_NE(base, hash_of(unary("f64[N,8]"))) << "dtype";
  EXPECT_NE(base, hash_of(unary("f32[N,8,2]"))) << "rank";
  EXPECT_NE(base, hash_of(unary("f32[N,1]"))) << "a dim 1 instead of non-1";
  EXPECT_NE(hash_of(unary("f32[N,N]")), hash_of(unary("f32[N,M]"))) << "one symbol twice vs two symbols";
  EXPECT_NE(hash_of(unary("f32[N,8]", "softmax", " {axis = 0}")), hash_of(unary("f32[N,8]", "softmax", " {axis = 1}")))
      << "attribute value";
  const char* xy = "func @f(%x: f32[4], %y: f32[4]) -> f32[4] {\n  %0 = sub %x, %y : f32[4]\n  return %0\n}\n";
  const char* yx = "func @f(%x: f32[4], %y: f32[4]) -> f32[4] {\n  %0 = sub %y, %x : f32[4]\n  return %0\n}\n";
  EXPECT_NE(hash_of(xy), hash_of(yx)) << "wiring";
  const char* one = "func @f(%x: f32[4]) -> (f32[4], f32[4]) {\n  %0 = tanh %x : f32[4]\n  return %0, %x\n}\n";
  const char* two = "func @f(%x: f32[4]) -> (f32[4], f32[4]) {\n  %0 = tanh %x : f32[4]\n  return %x, %0\n}\n";
  EXPECT_NE(hash_of(one), hash_of(two)) << "outputs";
}

TEST(StructuralHash, RegionBodiesCount) {
  const char* chain = R"(func @f(%x: f32[N], %y: f32[N]) -> f32[N] {
  %0 = add %x, %y : f32[N]
  %1 = OP %0 : f32[N]
  %2 = mul %1, %y : f32[N]
  return %2
}
)";
  auto fused = [&](const std::string& op) {
    std::string t = chain;
    Expected<Graph> g = fuse(parse_one(t.replace(t.find("OP"), 2, op)), FusionTarget::Cpu, claim_table_of(FusionTarget::Cpu));
    EXPECT_TRUE(g) << g.status().to_string();
    EXPECT_EQ(g->nodes().size(), 1u) << "one elementwise_region";
    return structural_hash(*g);
  };
  EXPECT_NE(fused("tanh"), fused("sigmoid"));
  EXPECT_EQ(fused("tanh"), fused("tanh"));
}

TEST(BackendRegistry, KnownNamesAndAnUnknownOne) {
  std::vector<std::string> names = backend_names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "cpu");
  EXPECT_EQ(names[1], "reference");
  for (const char* name : {"cpu", "reference"}) {
    Expected<std::shared_ptr<Backend>> b = make_backend(name);
    ASSERT_TRUE(b) << b.status().to_string();
    EXPECT_EQ((*b)->name(), name);
    EXPECT_TRUE((*b)->device().is_host());
  }
  Expected<std::shared_ptr<Backend>> none = make_backend("gpu");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message().rfind("unknown backend 'gpu' (backends: cpu, reference", 0), 0u)
      << none.status().message();
  CompileOptions o;
  o.backend = "gpu";
  Expected<Executable> exe = Session().compile(parse_one(kMlp), o);
  ASSERT_FALSE(exe);
  EXPECT_NE(exe.status().message().find("unknown backend 'gpu'"), std::string::npos);
}

// A backend on a device of its own ({cpu, 1}: host memory under another name) that claims only
// `add`, runs it on the reference kernel and counts kernel runs and copies.
struct FakeCounters {
  std::atomic<int> runs{0}, to_device{0}, to_host{0};
};
FakeCounters& fake_counters() {
  static FakeCounters c;
  return c;
}

class CountingKernel final : public Kernel {
 public:
  explicit CountingKernel(const Node& n) : inner_(cpu::make_reference_kernel(n)) {}
  Status run(Stream& s, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    for (const BufferView& v : in) {
      if (!(v.device == Device{DeviceKind::Cpu, 1})) return Status::internal("operand not on the fake device");
    }
    ++fake_counters().runs;
    return inner_->run(s, in, out);
  }
  std::string_view kind() const override { return "fake"; }

 private:
  std::shared_ptr<const Kernel> inner_;
};

class FakeAddBackend final : public HostBackend {
 public:
  FakeAddBackend() : HostBackend(Device{DeviceKind::Cpu, 1}) {}
  std::string_view name() const override { return "fake-add"; }
  Claim claims(const Graph&, const Node& n) const override {
    return n.op == Op::Add ? Claim::accept() : Claim::refuse("fake-add runs add only");
  }
  Expected<std::shared_ptr<const Kernel>> compile(const Graph&, const Node& n) const override {
    return std::shared_ptr<const Kernel>(std::make_shared<CountingKernel>(n));
  }
  Status copy_from_host(Stream& s, const BufferView& host, const BufferView& dst) const override {
    ++fake_counters().to_device;
    return HostBackend::copy_from_host(s, host, dst);
  }
  Status copy_to_host(Stream& s, const BufferView& src, const BufferView& host) const override {
    ++fake_counters().to_host;
    return HostBackend::copy_to_host(s, src, host);
  }
};

void register_fake() {
  static const bool once = [] {
    Status s = register_backend("fake-add", [](const BackendOptions&) -> Expected<std::shared_ptr<Backend>> {
      return std::shared_ptr<Backend>(std::make_shared<FakeAddBackend>());
    });
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return true;
  }();
  (void)once;
}

TEST(Placement, ClaimedNodesRunOnTheTargetWithCopiesAtDeviceBoundaries) {
  register_fake();
  Graph g = parse_one(R"(func @f(%x: f32[N,16], %y: f32[16]) -> f32[N,16] {
  %0 = add %x, %y : f32[N,16]
  %1 = tanh %0 : f32[N,16]
  %2 = add %1, %y : f32[N,16]
  return %2
}
)");
  CompileOptions o;
  o.fuse = false;  // keep the adds as nodes (fused, they would be one region)
  o.backend = "fake-add";
  Expected<Executable> exe = Session().compile(g, o);
  ASSERT_TRUE(exe) << exe.status().to_string();
  // x and y to the device, %0 to the host for tanh, %1 back, the result home; y is copied once.
  EXPECT_EQ(exe->placement().summary(), "fake-add 2 nodes, cpu 1 node, 5 copies");
  EXPECT_EQ(exe->placement().node_backend, (std::vector<int>{0, 1, 0}));

  FakeCounters& c = fake_counters();
  c.runs = c.to_device = c.to_host = 0;
  std::vector<Array> in = {random_array(DType::F32, {3, 16}, 71), random_array(DType::F32, {16}, 72)};
  Expected<std::vector<Array>> out = exe->run(in);
  ASSERT_TRUE(out) << out.status().to_string();
  expect_all_close(*out, reference(g, in));
  EXPECT_EQ(c.runs.load(), 2);
  EXPECT_EQ(c.to_device.load(), 3);
  EXPECT_EQ(c.to_host.load(), 2);

  Expected<Placement> explained = place_on_backend(g, "fake-add");
  ASSERT_TRUE(explained);
  EXPECT_EQ(explained->summary(), exe->placement().summary());
  Expected<Placement> on_cpu = place_on_backend(g, "cpu");
  ASSERT_TRUE(on_cpu);
  EXPECT_EQ(on_cpu->summary(), "cpu 3 nodes");
}

// device_io: inputs arrive and outputs stay on the target's device (no copies in or out), and a
// constant the device reads crosses once per plan, not once per run.
TEST(Placement, DeviceIoKeepsValuesOnTheTargetAndUploadsConstantsOnce) {
  register_fake();
  Graph g = parse_one(R"(func @f(%x: f32[N,16]) -> f32[N,16] {
  %c = constant {value = dense<f32[16]: [0.5, -1.0, 2.0, 0.25, 1.5, -0.5, 3.0, 0.125, 1.0, -2.0, 0.75, 0.0, -0.25, 4.0, 2.5, -3.0]>} : f32[16]
  %0 = add %x, %c : f32[N,16]
  %1 = add %0, %x : f32[N,16]
  return %1
}
)");
  CompileOptions o;
  o.fuse = false;
  o.backend = "fake-add";
  o.device_io = true;
  Expected<Executable> exe = Session().compile(g, o);
  ASSERT_TRUE(exe) << exe.status().to_string();
  // The constant is defined on the host and copied to the device: the one copy.
  EXPECT_EQ(exe->placement().summary(), "fake-add 2 nodes, cpu 1 node, 1 copy");
  Expected<std::shared_ptr<Backend>> dev = make_backend("fake-add");
  ASSERT_TRUE(dev);
  FakeCounters& c = fake_counters();
  c.runs = c.to_device = c.to_host = 0;
  const Array x = random_array(DType::F32, {3, 16}, 73);
  Expected<Buffer> xb = (*dev)->allocate(DType::F32, x.shape());
  ASSERT_TRUE(xb);
  ASSERT_TRUE((*dev)->copy_from_host((*dev)->stream(), host_view(x), xb->view()).is_ok());
  c.to_device = 0;
  for (int run = 0; run < 2; ++run) {
    Expected<std::vector<Buffer>> out = exe->run_buffers(std::vector<Buffer>{*xb});
    ASSERT_TRUE(out) << out.status().to_string();
    ASSERT_TRUE(exe->sync().is_ok());
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].view().device, (Device{DeviceKind::Cpu, 1}));
    expect_all_close({(*out)[0].to_array()}, reference(g, {x}));
  }
  EXPECT_EQ(c.runs.load(), 4);
  EXPECT_EQ(c.to_device.load(), 1);  // the constant, once
  EXPECT_EQ(c.to_host.load(), 0);

  // A host buffer where the device's is expected, and run_buffers on a plan without device_io.
  Expected<std::vector<Buffer>> wrong = exe->run_buffers(std::vector<Buffer>{Buffer::wrap(x)});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.status().message().find("must be a buffer on cpu:1, got one on cpu:0"), std::string::npos)
      << wrong.status().message();
  o.device_io = false;
  Expected<Executable> plain = Session().compile(g, o);
  ASSERT_TRUE(plain);
  Expected<std::vector<Buffer>> refused = plain->run_buffers(std::vector<Buffer>{*xb});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.status().message().find("needs a plan compiled with CompileOptions::device_io"), std::string::npos);
}

}  // namespace
}  // namespace fusebox
