// One Session shared by several std::threads that compile and run different graphs with
// different executors at once: the plan cache (kept small, so plans are evicted while other
// threads use them), shape plans, the region JIT and oneDNN under contention. Every result is
// compared with the reference backend. `make test-sanitize` runs this under ThreadSanitizer.
#include <atomic>
#include <string>
#include <thread>

#include "ir/parser.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::arrays_close;
using testing::random_array;

// %act is replaced by each variant's activation; a matmul (oneDNN), an element-wise region
// (JIT or interpreter) and a reduction (reference kernel) per graph.
const char* kTemplate = R"(func @g(%x: f32[N,16], %w: f32[16,8], %b: f32[8]) -> (f32[N,8], f32[N]) {
  %0 = matmul %x, %w : f32[N,8]
  %1 = add %0, %b : f32[N,8]
  %2 = ACT %1 : f32[N,8]
  %3 = mul %2, %1 : f32[N,8]
  %4 = reduce_sum %3 {axes = [1]} : f32[N]
  return %3, %4
}
)";
const char* kActivations[] = {"tanh", "relu", "sigmoid", "silu"};

Graph variant(const std::string& act) {
  std::string text = kTemplate;
  text.replace(text.find("ACT"), 3, act);
  Expected<Graph> g = parse_graph(text);
  EXPECT_TRUE(g) << g.status().to_string();
  return g ? *g : Graph();
}

std::vector<Array> inputs(int64_t n, uint64_t seed) {
  return {random_array(DType::F32, {n, 16}, seed), random_array(DType::F32, {16, 8}, seed + 1),
          random_array(DType::F32, {8}, seed + 2)};
}

std::vector<Array> reference(const Graph& g, const std::vector<Array>& in) {
  CompileOptions o;
  o.fuse = false;
  testing::use_backend(o, testing::kReference);
  Expected<Executable> exe = Session().compile(g, o);
  if (!exe) return {};
  Expected<std::vector<Array>> out = exe->run(in);
  return out ? *out : std::vector<Array>();
}

TEST(SessionThreads, CompileAndRunDifferentGraphsThroughOneSession) {
  constexpr int kThreads = 4, kRounds = 6;
  const int64_t batch[] = {1, 3, 7};
  std::vector<Graph> graphs;
  std::vector<std::vector<std::vector<Array>>> in(std::size(kActivations)), want(std::size(kActivations));
  for (size_t v = 0; v < std::size(kActivations); ++v) {
    graphs.push_back(variant(kActivations[v]));
    for (int64_t n : batch) {
      in[v].push_back(inputs(n, 100 * v + uint64_t(n)));
      want[v].push_back(reference(graphs[v], in[v].back()));
      ASSERT_EQ(want[v].back().size(), 2u);
    }
  }
  const testing::BackendChoice executors[] = {testing::kCpu, testing::kCpuInterpreter, testing::kCpuJit};
  Session session(3);  // fewer slots than graphs x executors: plans are evicted while in use
  std::atomic<int> good{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const size_t v = size_t(t + r) % graphs.size();
        CompileOptions o;
        testing::use_backend(o, executors[size_t(t + 2 * r) % std::size(executors)]);
        Expected<Executable> exe = session.compile(graphs[v], o);
        if (!exe) continue;
        for (size_t k = 0; k < std::size(batch); ++k) {
          ++runs;
          Expected<std::vector<Array>> out = exe->run(in[v][k]);
          if (out && out->size() == 2 && arrays_close((*out)[0], want[v][k][0], 1e-5, 1e-6) &&
              arrays_close((*out)[1], want[v][k][1], 1e-4, 1e-5))
            ++good;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(runs.load(), kThreads * kRounds * int(std::size(batch)));
  EXPECT_EQ(good.load(), runs.load());
  const Session::Stats s = session.stats();
  EXPECT_EQ(s.plan_hits + s.plan_misses, size_t(kThreads * kRounds));
  EXPECT_LE(s.cached_plans, 3u);
}

}  // namespace
}  // namespace fusebox
