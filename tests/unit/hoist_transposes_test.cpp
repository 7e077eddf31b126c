// hoist-transposes (src/fusion/hoist_transposes.cpp) on random programs: a chain of element-wise
// steps over one full-size operand (a graph input, or a resize of a u8 image) and small operands
// (a scalar, a vector along one random axis of random rank, as a graph input or a constant), then
// a random permutation. The CPU pipeline (with the pass) must give the reference backend's values
// bit for bit (the steps are exact per element: a permutation reorders them, never changes them),
// and the transpose no longer runs last.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "fusion/fuse.h"
#include "ir/builder.h"
#include "ir/printer.h"
#include "runtime/session.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

struct Program {
  Graph graph;
  NamedArrays inputs;
};

// A small operand against a result of `dims`: a scalar, or the size of one axis with 1s around
// it (its rank between that axis's and the result's).
Shape small_shape(const std::vector<int64_t>& dims, std::mt19937_64& rng) {
  if (rng() % 4 == 0) return {};
  const size_t axis = rng() % dims.size();
  const size_t rank = dims.size() - axis + rng() % (axis + 1);  // keeps `axis` aligned from the right
  Shape s(rank, Dim(1));
  s[rank - (dims.size() - axis)] = Dim(dims[axis]);
  return s;
}

Program random_program(uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t rank = 2 + rng() % 3;
  std::vector<int64_t> dims;
  for (size_t d = 0; d < rank; ++d) dims.push_back(int64_t(1 + rng() % 6));
  GraphBuilder b("hoist");
  NamedArrays inputs;
  ValueId x;
  const bool image = rank == 3 && rng() % 2;
  if (image) {  // a u8 image resized: the transpose joins a transform chain
    std::vector<int64_t> src = {dims[0] * 2 + 1, dims[1] * 2, dims[2]};
    inputs.emplace("x", testing::random_array(DType::U8, src, seed, 0, 256));
    x = b.op(Op::Resize, {b.cast(b.input("x", DType::U8, make_shape(src)), DType::F32)},
             {{"sizes", make_shape(dims)}, {"mode", std::string("linear")}});
  } else {
    inputs.emplace("x", testing::random_array(DType::F32, dims, seed));
    x = b.input("x", DType::F32, make_shape(dims));
  }
  const int steps = 1 + int(rng() % 3);
  for (int k = 0; k < steps; ++k) {
    const Shape s = small_shape(dims, rng);
    std::vector<int64_t> sd;
    for (const Dim& d : s) sd.push_back(d.value());
    Array v = testing::random_array(DType::F32, sd, seed * 10 + uint64_t(k), 0.5, 2);
    ValueId operand;
    if (rng() % 2) {
      operand = b.constant(v);
    } else {
      const std::string name = "s" + std::to_string(k);
      inputs.emplace(name, v);
      operand = b.input(name, DType::F32, s);
    }
    const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Max};
    x = b.op(ops[rng() % 4], rng() % 2 ? std::vector<ValueId>{x, operand} : std::vector<ValueId>{operand, x});
    if (rng() % 3 == 0) x = b.relu(x);
  }
  std::vector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  b.output(b.transpose(x, perm));
  Expected<Graph> g = b.build();
  EXPECT_TRUE(g) << g.status().to_string();
  return Program{g ? *g : Graph(), inputs};
}

TEST(HoistTransposes, RandomChainsMatchTheReferenceBitForBit) {
  Session session;
  int hoisted = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Program p = random_program(seed);
    CompileOptions ref;
    ref.fuse = false;
    testing::use_backend(ref, testing::kReference);
    CompileOptions fused;
    fused.verify_each_pass = true;
    Expected<Executable> want_exe = session.compile(p.graph, ref);
    Expected<Executable> got_exe = session.compile(p.graph, fused);
    ASSERT_TRUE(want_exe && got_exe) << got_exe.status().to_string() << "\n" << print_graph(p.graph);
    const Graph& fg = got_exe->graph();
    hoisted += fg.nodes().back().op != Op::Transpose;
    Expected<std::vector<Array>> want = want_exe->run(p.inputs);
    Expected<std::vector<Array>> got = got_exe->run(p.inputs);
    ASSERT_TRUE(want && got) << got.status().to_string();
    EXPECT_TRUE((*got)[0].same_data((*want)[0])) << "seed " << seed << "\n"
                                                 << print_graph(p.graph) << "\n"
                                                 << print_graph(got_exe->graph());
  }
  // The transpose no longer runs after the steps (it reads the input, or joins the resize in
  // the region's prologue), except for identity permutations, which canonicalize drops.
  EXPECT_GT(hoisted, 150);
}

}  // namespace
}  // namespace fusebox
