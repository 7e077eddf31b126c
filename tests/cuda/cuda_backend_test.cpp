// The CUDA backend against the CPU reference. Without NVRTC these tests skip; without a GPU (or
// its driver) only the code generation tests run: every element-wise step the reference runs,
// on every dtype, must have device code that NVRTC compiles for sm_90. With a GPU, every such
// step runs on the device, fused into one region per dtype, flat and broadcast, and must match
// the reference: integers and bools exactly, f32/f64 within 1e-5 relative (CUDA's
// transcendental functions are within 2 ulp), f16 within 2e-3 and bf16 within 1.6e-2 (one ulp of
// the dtype: a float result on a rounding boundary may round the other way).
#include <gtest/gtest.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/region_codegen.h"
#include "backends/registry/registry.h"
#include "ir/builder.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8,  DType::U8, DType::I32,
                                DType::I64, DType::Bool, DType::I16, DType::U16, DType::U32, DType::U64};

struct StepCase {
  Op op;
  Attrs attrs;
  int arity;  // operands of dtype D; `where` reads a bool condition first
};

// Every element-wise step with each of its attribute variants.
std::vector<StepCase> step_cases() {
  std::vector<StepCase> cases;
  for (int i = 0; i < kNumOps; ++i) {
    const Op op = Op(i);
    const OpInfo& info = op_info(op);
    if (op_kind(op) > OpKind::Broadcast || op == Op::BatchNorm || op == Op::Expand) continue;
    if (op == Op::Cast) {
      for (DType to : kAllDTypes) cases.push_back({op, {{"to", to}}, 1});
    } else if (op == Op::Gelu) {
      cases.push_back({op, {}, 1});
      cases.push_back({op, {{"approximate", std::string("tanh")}}, 1});
    } else if (op == Op::Mod) {
      cases.push_back({op, {}, 2});
      cases.push_back({op, {{"fmod", true}}, 2});
    } else if (op == Op::BitShift) {
      cases.push_back({op, {{"direction", std::string("left")}}, 2});
      cases.push_back({op, {{"direction", std::string("right")}}, 2});
    } else if (op == Op::Clip) {
      cases.push_back({op, {{"min", -1.5}, {"max", 1.25}}, 1});
      cases.push_back({op, {}, 1});
    } else if (op == Op::Where) {
      cases.push_back({op, {}, 3});
    } else {
      cases.push_back({op, {}, info.min_inputs});
    }
  }
  return cases;
}

std::vector<Array> operands_for(const StepCase& c, DType d, const std::vector<int64_t>& shape, uint64_t seed) {
  std::vector<Array> in;
  if (c.op == Op::Where) in.push_back(testing::random_array(DType::Bool, shape, seed + 7));
  const int n = c.op == Op::Where ? 2 : c.arity;
  for (int k = 0; k < n; ++k) {
    const bool shift = c.op == Op::BitShift && k == 1;
    in.push_back(testing::random_array(d, shape, seed + uint64_t(k), shift ? 0 : -40, shift ? 12 : 40));
  }
  return in;
}

// The steps the reference kernels run on dtype d (the ones the device must run too).
std::vector<StepCase> reference_steps(DType d) {
  std::vector<StepCase> kept;
  for (const StepCase& c : step_cases()) {
    if (testing::try_run_op(c.op, operands_for(c, d, {4}, 1), c.attrs)) kept.push_back(c);
  }
  return kept;
}

// One graph computing every step of `cases` on its inputs: %c (bool), %x0 and %x1 (dtype d,
// x1 of shape `other`).
Expected<Graph> all_steps_graph(const std::vector<StepCase>& cases, DType d, const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& other) {
  GraphBuilder b("steps");
  const ValueId c = b.input("c", DType::Bool, make_shape(shape));
  const ValueId x0 = b.input("x0", d, make_shape(shape));
  const ValueId x1 = b.input("x1", d, make_shape(other));
  for (const StepCase& s : cases) {
    std::vector<ValueId> ins = s.op == Op::Where ? std::vector<ValueId>{c, x0, x1}
                               : s.arity == 1    ? std::vector<ValueId>{x0}
                                                 : std::vector<ValueId>{x0, x1};
    b.output(b.op(s.op, ins, s.attrs));
  }
  return b.build();
}

TEST(CudaCodegen, EveryReferenceStepCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  size_t steps = 0;
  for (DType d : kAllDTypes) {
    const std::vector<StepCase> cases = reference_steps(d);
    ASSERT_FALSE(cases.empty()) << dtype_name(d);
    // The body of the one region these steps fuse into: rank-0 operands, every step an output.
    Graph body("body");
    const ValueId c = body.add_input("c", TensorType{DType::Bool, Shape{}});
    const ValueId x0 = body.add_input("x0", TensorType{d, Shape{}});
    const ValueId x1 = body.add_input("x1", TensorType{d, Shape{}});
    for (const StepCase& s : cases) {
      std::vector<ValueId> ins = s.op == Op::Where ? std::vector<ValueId>{c, x0, x1}
                                 : s.arity == 1    ? std::vector<ValueId>{x0}
                                                   : std::vector<ValueId>{x0, x1};
      std::vector<TensorType> types;
      for (ValueId v : ins) types.push_back(body.type(v));
      Node probe{s.op, {}, {}, s.attrs};
      Expected<std::vector<TensorType>> result = infer_result_types(probe, types);
      ASSERT_TRUE(result) << op_keyword(s.op) << ": " << result.status().message();
      body.add_output(body.add_node(s.op, ins, *result, s.attrs)[0]);
      ++steps;
    }
    for (cuda::RegionVariant v : {cuda::RegionVariant{0, 0, cuda::region_vector_width(body), 1, false},
                                  cuda::RegionVariant{2, 0, 1, 1, false},
                                  cuda::RegionVariant{2, 0, cuda::region_vector_width(body), 1, false, /*inner_repeated=*/0b100}}) {
      Expected<std::string> source = cuda::region_source(body, v);
      ASSERT_TRUE(source) << dtype_name(d) << ": " << source.status().message();
      Expected<std::string> cubin = cuda::compile_cubin(*source, "steps_" + std::string(dtype_name(d)) + ".cu", 90);
      ASSERT_TRUE(cubin) << dtype_name(d) << " " << v.key() << ": " << cubin.status().message();
      EXPECT_GT(cubin->size(), 1000u);
    }
  }
  EXPECT_GT(steps, 300u);
}

TEST(CudaCodegen, AStepWithoutDeviceCodeIsAnError) {
  // exp has no integer form in the reference either: the generator refuses it, naming the step.
  Node n{Op::Exp, {}, {}, {}};
  Graph body = cuda::single_step_body(n, {DType::I32}, DType::I32);
  Expected<std::string> source = cuda::region_source(body, {});
  ASSERT_FALSE(source);
  EXPECT_NE(source.status().message().find("no CUDA code for region step exp on i32"), std::string::npos)
      << source.status().message();
}

TEST(CudaBackend, WithoutADeviceEveryEntryPointSaysWhy) {
  Status s = cuda::cuda_available();
  if (s.is_ok()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_FALSE(s.message().empty());
  GraphBuilder b("f");
  b.output(b.op(Op::Tanh, {b.input("x", DType::F32, make_shape({4}))}));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g);
  CompileOptions o;
  o.target = FusionTarget::Cuda;
  Expected<Executable> exe = Session().compile(*g, o);
  ASSERT_FALSE(exe);
  EXPECT_EQ(exe.status().message(), s.message());
}

// Every reference step on the GPU, fused into regions per dtype: operands of one shape (the flat
// kernel), then a broadcast second operand (the strided kernels, with and without packs).
TEST(CudaBackend, EveryReferenceStepMatchesTheReferenceOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (DType d : kAllDTypes) {
    const std::vector<StepCase> cases = reference_steps(d);
    // Same shapes (flat kernel); a row operand over rows of 129 (strided) and of 128 (strided, V
    // elements of a row per thread); a column operand (repeated along the row).
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
        {{37, 129}, {37, 129}}, {{37, 129}, {129}}, {{37, 128}, {128}}, {{37, 128}, {37, 1}}};
    for (const auto& [main, other] : shapes) {
      Expected<Graph> g = all_steps_graph(cases, d, main, other);
      ASSERT_TRUE(g) << g.status().message();
      NamedArrays in = {{"c", testing::random_array(DType::Bool, main, 11)},
                        {"x0", testing::random_array(d, main, 12, -40, 40)},
                        {"x1", testing::random_array(d, other, 13, 0, 12)}};
      CompileOptions dev;
      dev.target = FusionTarget::Cuda;
      Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(*g, dev);
      ASSERT_TRUE(exes) << exes.status().message();
      EXPECT_EQ(exes->plan.placement().summary().find("cpu"), std::string::npos) << exes->plan.placement().summary();
      Expected<std::vector<Array>> want = exes->reference.run(in), got = exes->plan.run(in);
      ASSERT_TRUE(want && got) << got.status().message();
      for (size_t k = 0; k < cases.size(); ++k) {
        const DType od = (*want)[k].dtype();
        const double tol = od == DType::F16 ? 2e-3 : od == DType::BF16 ? 1.6e-2 : is_float(od) ? 1e-5 : 0;
        EXPECT_TRUE(testing::arrays_close((*got)[k], (*want)[k], tol, tol))
            << dtype_name(d) << " " << op_keyword(cases[k].op) << " (output " << k << ", operand " << Array(d, other).type_string() << ")";
      }
    }
  }
}

// device_io runs of a plan of several kernels are recorded once (a CUDA graph) and replayed:
// results follow the input buffers' contents, and other buffers get a recording of their own.
TEST(CudaBackend, DeviceIoRunsAreRecordedAndReplayed) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  GraphBuilder b("chain");
  const ValueId x = b.input("x", DType::F32, make_shape({1000}));
  const ValueId y = b.input("y", DType::F32, make_shape({1000}));
  b.output(b.op(Op::Tanh, {b.op(Op::Add, {b.op(Op::Mul, {x, y}), x})}));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g);
  Session session;
  CompileOptions dev;
  dev.target = FusionTarget::Cuda;
  dev.fuse = false;  // three kernels: a plan worth recording
  dev.device_io = true;
  CompileOptions ref;
  ref.fuse = false;
  ref.backend = "reference";
  Expected<Executable> exe = session.compile(*g, dev);
  Expected<Executable> want_exe = session.compile(*g, ref);
  ASSERT_TRUE(exe && want_exe) << exe.status().message();
  Expected<std::shared_ptr<Backend>> cuda = make_backend("cuda");
  ASSERT_TRUE(cuda);
  const Backend& d = **cuda;
  auto upload = [&](const Array& a) {
    Expected<Buffer> buf = d.allocate(a.dtype(), a.shape());
    EXPECT_TRUE(buf);
    EXPECT_TRUE(d.copy_from_host(d.stream(), host_view(a), buf->view()).is_ok());
    EXPECT_TRUE(d.stream().sync().is_ok());
    return *buf;
  };
  auto download = [&](const Buffer& buf) {
    Array a(buf.view().dtype, buf.view().shape);
    EXPECT_TRUE(d.copy_to_host(d.stream(), buf.view(), host_view(a)).is_ok());
    EXPECT_TRUE(d.stream().sync().is_ok());
    return a;
  };
  std::vector<Buffer> in = {upload(testing::random_array(DType::F32, {1000}, 1)), upload(testing::random_array(DType::F32, {1000}, 2))};
  for (int run = 0; run < 5; ++run) {
    // New contents in the same buffers every run: a replay reads them, not a snapshot.
    const std::vector<Array> host = {testing::random_array(DType::F32, {1000}, 10 + uint64_t(run)),
                                     testing::random_array(DType::F32, {1000}, 20 + uint64_t(run))};
    for (size_t k = 0; k < 2; ++k) ASSERT_TRUE(d.copy_from_host(d.stream(), host_view(host[k]), in[k].view()).is_ok());
    Expected<std::vector<Buffer>> out = exe->run_buffers(in);
    ASSERT_TRUE(out) << out.status().message();
    ASSERT_TRUE(exe->sync().is_ok());
    Expected<std::vector<Array>> want = want_exe->run(host);
    ASSERT_TRUE(want);
    EXPECT_TRUE(testing::arrays_close(download((*out)[0]), (*want)[0], 1e-6, 1e-6)) << "run " << run;
  }
  EXPECT_EQ(exe->stats().recordings, 1u);
  EXPECT_EQ(exe->stats().replays, 4u);  // runs 2 to 5; run 1 ran the kernels one by one
  // Other buffers: first a plain run, then a recording of their own.
  std::vector<Buffer> other = {upload(testing::random_array(DType::F32, {1000}, 3)), upload(testing::random_array(DType::F32, {1000}, 4))};
  for (int run = 0; run < 2; ++run) ASSERT_TRUE(exe->run_buffers(other));
  EXPECT_EQ(exe->stats().recordings, 2u);
}

}  // namespace
}  // namespace fusebox
