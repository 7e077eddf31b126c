// Differential test of element-wise fusion: thousands of random DAGs of element-wise, broadcast
// and cast ops with random shapes, broadcast patterns and fusion options. The fused graph run on
// the CPU region executor must equal the unfused graph run op by op on the reference backend:
// f32 within 1e-5 relative (plus 1e-6 absolute near zero, where the reference's own float
// formulas cancel), integers and bools exactly. A second generator mode adds row reductions over
// the last axis (keepdims, so later steps broadcast them back): reduction regions with random
// bodies, sums and means over values of one sign (|a|) so that reordered sums stay well
// conditioned.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/cpu/reduction_kernel.h"
#include "backends/cpu/region_jit.h"
#ifdef FUSEBOX_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#include "fusion/fuse.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

struct RandomDag {
  Graph graph;
  NamedArrays inputs;
  FusionOptions options;
};

class DagGenerator {
 public:
  explicit DagGenerator(uint64_t seed, bool reductions = false) : rng_(seed), reductions_(reductions) {}

  RandomDag make() {
    RandomDag d;
    GraphBuilder b("dag");
    const int rank = pick(1, 3);
    std::vector<int64_t> base;
    for (int i = 0; i < rank; ++i) base.push_back(pick(1, 9));
    // Inputs: the base shape, or a numpy-broadcastable variant of it (1s, dropped leading dims).
    const int num_inputs = pick(1, 4);
    for (int i = 0; i < num_inputs; ++i) {
      std::vector<int64_t> shape = base;
      if (i > 0 && coin(0.5)) {
        for (auto& dim : shape)
          if (coin(0.4)) dim = 1;
        if (coin(0.3) && !shape.empty()) shape.erase(shape.begin());
      }
      DType dt = coin(0.8) ? DType::F32 : (coin(0.5) ? DType::I32 : DType::F64);
      std::string name = "in" + std::to_string(i);
      values_.push_back({b.input(name, dt, make_shape(shape)), dt});
      double lo = dt == DType::I32 ? -50 : -3, hi = dt == DType::I32 ? 50 : 3;
      d.inputs[name] = testing::random_array(dt, shape, rng_(), lo, hi);
    }
    const int steps = pick(2, 14);
    for (int s = 0; s < steps; ++s) add_step(b);
    // Outputs: the last value and a few random others (mid-chain outputs).
    b.output(values_.back().id);
    for (int k = pick(0, 2); k > 0; --k) b.output(values_[static_cast<size_t>(pick(0, int(values_.size()) - 1))].id);
    Expected<Graph> g = b.build();
    EXPECT_TRUE(g) << g.status().to_string();
    d.graph = g ? *g : Graph();
    d.options = FusionOptions::for_cpu();
    if (coin(0.4)) d.options.fusion_limits = FusionLimits{size_t(pick(1, 6)), size_t(pick(1, 5))};
    if (coin(0.1)) d.options.unfuse_elementwise_regions = true;
    values_.clear();
    return d;
  }

 private:
  struct Val {
    ValueId id;
    DType dtype;
  };

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin(double p) { return std::bernoulli_distribution(p)(rng_); }
  Val any() { return values_[static_cast<size_t>(pick(0, int(values_.size()) - 1))]; }
  Val of_type(GraphBuilder& b, DType dt) {
    Val v = any();
    if (v.dtype == dt) return v;
    // Float-to-int truncation would turn a 1-ulp difference of an approximated tanh into a
    // difference of 1: round first, as a quantising program would.
    if (dt == DType::I32 && v.dtype != DType::Bool) return {b.cast(b.op(Op::Round, {v.id}), dt), dt};
    return {b.cast(v.id, dt), dt};
  }

  void add_step(GraphBuilder& b) {
    Val a = any();
    DType dt = a.dtype == DType::Bool ? DType::F32 : a.dtype;
    a = of_type(b, dt);
    const bool is_float = dt != DType::I32;
    ValueId out = kNoValue;
    DType out_dt = dt;
    if (reductions_ && dt == DType::F32 && !b.type(a.id).shape.empty() && coin(0.2)) {
      const Op ops[] = {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin};
      const Op r = ops[pick(0, 3)];
      const ValueId x = r == Op::ReduceSum || r == Op::ReduceMean ? b.op(Op::Abs, {a.id}) : a.id;
      values_.push_back({b.op(r, {x}, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", true}}), dt});
      return;
    }
    switch (pick(0, 15)) {
      case 0: out = b.add(a.id, of_type(b, dt).id); break;
      case 1: out = b.sub(a.id, of_type(b, dt).id); break;
      case 2: out = b.mul(a.id, of_type(b, dt).id); break;
      case 3:
        if (is_float) {  // denominator kept away from zero: |y| + 1
          ValueId den = b.add(b.op(Op::Abs, {of_type(b, dt).id}), b.scalar(dt, 1.0));
          out = b.div(a.id, den);
        } else {
          out = b.op(Op::Max, {a.id, of_type(b, dt).id});
        }
        break;
      case 4: out = b.op(is_float ? Op::Tanh : Op::Neg, {a.id}); break;
      case 5: out = b.op(is_float ? Op::Sigmoid : Op::Abs, {a.id}); break;
      case 6: out = b.relu(a.id); break;
      case 7: {
        // Float operands are compared on a grid of 1/8: the same quantity computed two ways (an
        // approximated silu against the reference's) must not flip the comparison by one ulp.
        auto grid = [&](ValueId v) {
          return is_float ? b.op(Op::Round, {b.mul(v, b.scalar(dt, 8.0))}) : v;
        };
        ValueId c = b.op(coin(0.5) ? Op::Greater : Op::LessEqual, {grid(a.id), grid(of_type(b, dt).id)});
        out = b.op(Op::Where, {c, a.id, of_type(b, dt).id});
        break;
      }
      case 8: out = b.mul(a.id, b.scalar(dt, coin(0.5) ? 0.5 : 3.0)); break;
      case 9:
        out_dt = dt == DType::F32 ? DType::F64 : DType::F32;
        out = b.cast(a.id, out_dt);
        break;
      case 10: out = b.op(is_float ? Op::Exp : Op::Min, is_float ? std::vector<ValueId>{b.op(Op::Neg, {b.op(Op::Abs, {a.id})})}
                                                                 : std::vector<ValueId>{a.id, of_type(b, dt).id});
        break;
      case 12:  // log of |a| + 1 (f64 runs the reference kernel inside a region)
        out = is_float ? b.op(Op::Log, {b.add(b.op(Op::Abs, {a.id}), b.scalar(dt, 1.0))}) : b.op(Op::Neg, {a.id});
        break;
      case 13: {
        const Op f = coin(0.5) ? Op::Erf : (coin(0.5) ? Op::Sin : Op::Cos);
        out = is_float ? b.op(f, {a.id}) : b.op(Op::Abs, {a.id});
        break;
      }
      case 14:
        out = is_float ? b.op(coin(0.5) ? Op::HardSwish : Op::Gelu, {a.id})
                       : b.op(Op::Clip, {a.id}, {{"min", -7.0}});
        break;
      case 15:
        out = is_float ? b.op(Op::Sqrt, {b.op(Op::Abs, {a.id})}) : b.op(Op::Relu, {a.id});
        break;
      default:
        out = is_float ? b.op(Op::Silu, {a.id}) : b.op(Op::Clip, {a.id}, {{"min", -20.0}, {"max", 30.0}});
        break;
    }
    values_.push_back({out, out_dt});
  }

  std::mt19937_64 rng_;
  bool reductions_ = false;
  std::vector<Val> values_;
};

// Runs `count` random DAGs fused on `executor` against the reference; returns the number of
// region nodes the fused graphs had, and counts in `staged` those whose generated code would run
// in stages (cpu::jit_stage_starts).
int run_differential(uint64_t seed, int count, testing::BackendChoice executor, int* staged = nullptr,
                     FusionTarget target = FusionTarget::Cpu, int* reduction_regions = nullptr) {
  DagGenerator gen(seed, reduction_regions != nullptr);
  int regions = 0, compared = 0;
  for (int iter = 0; iter < count; ++iter) {
    RandomDag d = gen.make();
    EXPECT_TRUE(verify(d.graph).is_ok()) << iter;
    Session session;
    CompileOptions ref_opts;
    ref_opts.fuse = false;
    testing::use_backend(ref_opts, testing::kReference);
    CompileOptions fused_opts;
    fused_opts.target = target;
    fused_opts.fusion = d.options;
    fused_opts.verify_each_pass = true;
    testing::use_backend(fused_opts, executor);
    Expected<Executable> ref = session.compile(d.graph, ref_opts);
    Expected<Executable> fused = session.compile(d.graph, fused_opts);
    if (!ref || !fused) {
      ADD_FAILURE() << iter << ": " << fused.status().to_string();
      return regions;
    }
    for (const Node& n : fused->graph().nodes()) {
      // Reduction regions whose body the reduction kernel takes (not the reference kernels).
      if (reduction_regions && n.op == Op::ReductionRegion && cpu::reduction_codegen(n).kernel)
        ++*reduction_regions;
      if (n.op != Op::ElementwiseRegion) continue;
      ++regions;
      if (staged && n.body && cpu::jit_stage_starts(*n.body).size() > 1) ++*staged;
    }
    Expected<std::vector<Array>> want = ref->run(d.inputs);
    Expected<std::vector<Array>> got = fused->run(d.inputs);
    if (!want || !got) {
      ADD_FAILURE() << iter << ": " << got.status().to_string();
      return regions;
    }
    EXPECT_EQ(want->size(), got->size());
    for (size_t k = 0; k < want->size() && k < got->size(); ++k) {
      const Array& w = (*want)[k];
      double rtol = is_float(w.dtype()) ? 1e-5 : 0, atol = is_float(w.dtype()) ? 1e-6 : 0;
      if (!testing::arrays_close((*got)[k], w, rtol, atol)) {
        ADD_FAILURE() << "dag " << iter << " output " << k << "\n" << print_graph(d.graph) << "\nfused:\n"
                      << print_graph(fused->graph());
        return regions;
      }
      ++compared;
    }
  }
  // The generator must actually exercise fusion.
  EXPECT_GT(compared, count);
  return regions;
}

TEST(FusionDifferential, RandomDagsMatchTheReference) {
  EXPECT_GT(run_differential(20261130, 4000, testing::kCpuInterpreter), 2000);
}

// The same with every region through generated code (shapes up to 9x9x9: vector loop and
// scalar tail both run, staged bodies over several blocks).
TEST(FusionDifferential, RandomDagsOnGeneratedCodeMatchTheReference) {
  if (!cpu::jit_built()) GTEST_SKIP() << "this build has no CPU code generation (llvm-14-dev not found)";
  const uint64_t before = cpu::jit_stats().compiled;
  int staged = 0;
  EXPECT_GT(run_differential(20261201, 1500, testing::kCpuJit, &staged), 700);
  EXPECT_GT(staged, 50) << staged;
  EXPECT_GT(cpu::jit_stats().compiled - before, 500u);
}

// DAGs with row reductions: reduction regions with random bodies (approximated functions, casts
// to f64 and back, clip, round, hardswish, sin: steps with and without tile loops), on the tile
// interpreter (bodies it lacks a step for go to the reference kernels) and as generated code.
TEST(FusionDifferential, RandomDagsWithRowReductionsMatchTheReference) {
  int reductions = 0;
  run_differential(20261207, 1500, testing::kCpuInterpreter, nullptr, FusionTarget::Cpu, &reductions);
  EXPECT_GT(reductions, 250) << reductions;
  if (!cpu::jit_built()) return;
  reductions = 0;
  run_differential(20261208, 1500, testing::kCpuJit, nullptr, FusionTarget::Cpu, &reductions);
  EXPECT_GT(reductions, 250) << reductions;
}

// The same DAGs on the GPU: every region and lone op as generated CUDA C++ (flat and strided
// kernels; f32, f64, i32 and bool values). Skips without a GPU.
TEST(FusionDifferential, RandomDagsOnCudaMatchTheReference) {
#ifdef FUSEBOX_HAVE_CUDA
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  EXPECT_GT(run_differential(20261202, 300, testing::BackendChoice{"cuda", cpu::Codegen::Auto}, nullptr, FusionTarget::Cuda),
            150);
#else
  GTEST_SKIP() << "this build has no CUDA backend";
#endif
}

}  // namespace
}  // namespace fusebox
