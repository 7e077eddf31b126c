// matmul_integer and conv2d_integer: the reference kernels against sums computed here, and the
// CPU backend's oneDNN int8 kernels against the reference bit for bit (poisoned results), with
// the cases the kernel must leave to the reference (weights that are not constants or do not fit
// s8 less their zero point, sums that could reach 2^24, a per-row zero point).
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/onednn/onednn_kernels.h"
#include "backends/cpu/reference/reference.h"
#include "backends/host_backend.h"
#include "ir/builder.h"
#include "ir/check.h"
#include "ir/layout.h"
#include "ir/printer.h"
#include "ir/shape_inference.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

// Uniform integers in [lo, hi] of an 8-bit dtype.
Array ints(DType dt, std::vector<int64_t> shape, uint64_t seed, int lo, int hi) {
  Array a(dt, shape);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  for (int64_t i = 0; i < a.numel(); ++i) a.set_i64(i, d(rng));
  return a;
}

Array scalar_of(DType dt, int64_t v) {
  Array a(dt, {});
  a.set_i64(0, v);
  return a;
}

// One integer contraction node over input x and the rest as constants (or inputs, `w_input`).
struct Case {
  Op op;
  Array x, w, x_zp, w_zp;
  Attrs attrs;
  bool w_input = false;
};

Graph graph_of(const Case& c) {
  Graph g("f");
  auto constant = [&](const Array& a) {
    return g.add_node(Op::Constant, {}, {TensorType{a.dtype(), make_shape(a.shape())}},
                      {{"value", std::make_shared<const Array>(a)}})[0];
  };
  const ValueId x = g.add_input("x", TensorType{c.x.dtype(), make_shape(c.x.shape())});
  const ValueId w =
      c.w_input ? g.add_input("w", TensorType{c.w.dtype(), make_shape(c.w.shape())}) : constant(c.w);
  const ValueId xz = constant(c.x_zp), wz = constant(c.w_zp);
  Node probe{c.op, {x, w, xz, wz}, {}, c.attrs, nullptr, {}};
  const std::vector<TensorType> in{g.type(x), g.type(w), g.type(xz), g.type(wz)};
  Expected<std::vector<TensorType>> out = infer_result_types(probe, in);
  FUSEBOX_CHECK(bool(out)) << out.status().to_string();
  g.add_output(g.add_node(c.op, {x, w, xz, wz}, *out, c.attrs)[0]);
  return g;
}

// The CPU backend's kernel for the case's node: its kind, and its result against the reference
// on results poisoned with every byte of kPoisonBytes.
std::string check_against_reference(const Case& c) {
  const Graph g = graph_of(c);
  const Node& n = g.nodes().back();
  std::shared_ptr<Backend> cpu = cpu::make_cpu_backend(CpuBackendOptions{});
  Expected<std::shared_ptr<const Kernel>> kernel = cpu->compile(g, n);
  EXPECT_TRUE(kernel) << kernel.status().to_string();
  if (!kernel) return "";
  const TensorType yt = g.type(n.outputs[0]);
  std::vector<int64_t> yshape;
  for (const Dim& d : yt.shape) yshape.push_back(d.value());
  const std::vector<Array> in{c.x, c.w, c.x_zp, c.w_zp};
  Array want(DType::I32, yshape);
  want.fill_bytes(0xA5);
  Status s = cpu::run_reference(n, in, std::span<Array>(&want, 1));
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::vector<BufferView> views;
  for (const Array& a : in) views.push_back(host_view(a));
  for (uint8_t poison : testing::kPoisonBytes) {
    Array y(DType::I32, yshape);
    y.fill_bytes(poison);
    const BufferView out = host_view(y);
    s = (*kernel)->run(cpu->stream(), views, std::span<const BufferView>(&out, 1));
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(testing::to_ints(y), testing::to_ints(want)) << "poison " << int(poison);
  }
  return std::string((*kernel)->kind());
}

// The kernel kind a case the int8 kernel takes must get on this host.
std::string taken() { return cpu::onednn::int8_exact() ? "onednn" : "reference"; }

TEST(IntegerContraction, ReferenceMatchesSumsComputedHere) {
  // matmul_integer [2,3,5] x [5,4], per-row a zero point, per-column b zero point.
  const Array a = ints(DType::U8, {2, 3, 5}, 1, 0, 255), b = ints(DType::I8, {5, 4}, 2, -128, 127);
  const Array az = ints(DType::U8, {3}, 3, 0, 255), bz = ints(DType::I8, {4}, 4, -128, 127);
  const Array y = testing::run_op1(Op::MatMulInteger, {a, b, az, bz});
  ASSERT_EQ(y.dtype(), DType::I32);
  for (int64_t bi = 0; bi < 2; ++bi) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        int64_t sum = 0;
        for (int64_t k = 0; k < 5; ++k) {
          sum += (a.get_i64((bi * 3 + i) * 5 + k) - az.get_i64(i)) * (b.get_i64(k * 4 + j) - bz.get_i64(j));
        }
        EXPECT_EQ(y.get_i64((bi * 3 + i) * 4 + j), sum) << bi << "," << i << "," << j;
      }
    }
  }
  // conv2d_integer 1x2x4x4, w 3x2x2x2, stride 1, pad 1 on top/left only: padding reads x_zp.
  const Array x = ints(DType::I8, {1, 2, 4, 4}, 5, -128, 127), w = ints(DType::U8, {3, 2, 2, 2}, 6, 0, 255);
  const Array xz = scalar_of(DType::I8, -7), wz = ints(DType::U8, {3}, 7, 0, 255);
  const Array c =
      testing::run_op1(Op::Conv2dInteger, {x, w, xz, wz}, {{"pad", std::vector<int64_t>{1, 1, 0, 0}}});
  ASSERT_EQ(c.shape(), (std::vector<int64_t>{1, 3, 4, 4}));
  for (int64_t o = 0; o < 3; ++o) {
    for (int64_t oh = 0; oh < 4; ++oh) {
      for (int64_t ow = 0; ow < 4; ++ow) {
        int64_t sum = 0;
        for (int64_t ci = 0; ci < 2; ++ci) {
          for (int64_t ky = 0; ky < 2; ++ky) {
            for (int64_t kx = 0; kx < 2; ++kx) {
              const int64_t ih = oh - 1 + ky, iw = ow - 1 + kx;
              if (ih < 0 || iw < 0) continue;
              sum += (x.get_i64((ci * 4 + ih) * 4 + iw) + 7) *
                     (w.get_i64(((o * 2 + ci) * 2 + ky) * 2 + kx) - wz.get_i64(o));
            }
          }
        }
        EXPECT_EQ(c.get_i64((o * 4 + oh) * 4 + ow), sum) << o << "," << oh << "," << ow;
      }
    }
  }
}

TEST(IntegerContraction, ShapeInferenceRefusesWhatItCannotType) {
  const TensorType u8x{DType::U8, make_shape({2, 3})}, i8w{DType::I8, make_shape({3, 4})};
  const TensorType u8s{DType::U8, {}}, i8s{DType::I8, {}};
  auto infer = [](Op op, std::vector<TensorType> in) {
    Node n{op, {0, 1, 2, 3}, {}, {}, nullptr, {}};
    return infer_result_types(n, in);
  };
  EXPECT_TRUE(infer(Op::MatMulInteger, {u8x, i8w, u8s, i8s}));
  Expected<std::vector<TensorType>> f32 =
      infer(Op::MatMulInteger, {TensorType{DType::F32, make_shape({2, 3})}, i8w, u8s, i8s});
  ASSERT_FALSE(f32);
  EXPECT_NE(f32.status().message().find("operands must be u8 or i8"), std::string::npos)
      << f32.status().to_string();
  Expected<std::vector<TensorType>> zp_type = infer(Op::MatMulInteger, {u8x, i8w, i8s, i8s});
  ASSERT_FALSE(zp_type);
  EXPECT_NE(zp_type.status().message().find("zero point"), std::string::npos) << zp_type.status().to_string();
  Expected<std::vector<TensorType>> zp_len =
      infer(Op::MatMulInteger, {u8x, i8w, u8s, TensorType{DType::I8, make_shape({3})}});
  ASSERT_FALSE(zp_len);
  EXPECT_NE(zp_len.status().message().find("per column of b (4)"), std::string::npos)
      << zp_len.status().to_string();
}

TEST(IntegerContraction, CpuKernelsEqualTheReference) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "fusebox was built without oneDNN (libdnnl-dev)";
  using V = std::vector<int64_t>;
  struct Conv {
    V x, w;
    Attrs attrs;
    DType xt, wt;
    bool per_channel;
  };
  const std::vector<Conv> convs{
      {{2, 16, 9, 11}, {24, 16, 3, 3}, {{"pad", V{1, 1, 1, 1}}}, DType::U8, DType::I8, false},
      {{1, 16, 12, 10},
       {8, 4, 3, 3},
       {{"groups", int64_t(4)}, {"stride", V{2, 2}}, {"pad", V{0, 1, 2, 1}}, {"dilation", V{2, 1}}},
       DType::I8,
       DType::I8,
       true},
      {{1, 32, 14, 14},
       {32, 1, 3, 3},
       {{"groups", int64_t(32)}, {"pad", V{1, 1, 1, 1}}},
       DType::U8,
       DType::I8,
       true},
      {{3, 40, 7, 7}, {17, 40, 1, 1}, {}, DType::U8, DType::U8, false},
  };
  uint64_t seed = 10;
  for (const Conv& cv : convs) {
    SCOPED_TRACE("conv x " + testing::dims_text({cv.x[0], cv.x[1], cv.x[2], cv.x[3]}));
    Case c{Op::Conv2dInteger, {}, {}, {}, {}, cv.attrs};
    c.x = ints(cv.xt, cv.x, ++seed, cv.xt == DType::U8 ? 0 : -128, cv.xt == DType::U8 ? 255 : 127);
    c.x_zp = scalar_of(cv.xt, cv.xt == DType::U8 ? 131 : -5);
    // u8 weights around a zero point of 128 (centred they fit s8); i8 weights near its ends.
    if (cv.wt == DType::U8) {
      c.w = ints(DType::U8, cv.w, ++seed, 1, 255);
      c.w_zp = scalar_of(DType::U8, 128);
    } else {
      c.w = ints(DType::I8, cv.w, ++seed, -100, 100);
      c.w_zp = cv.per_channel ? ints(DType::I8, {cv.w[0]}, ++seed, -20, 20) : scalar_of(DType::I8, 0);
    }
    EXPECT_EQ(check_against_reference(c), taken());
  }
  // matmul_integer: a batched a against a [K, N] weight, a per-column zero point.
  for (DType at : {DType::U8, DType::I8}) {
    SCOPED_TRACE(std::string("matmul a ") + std::string(dtype_name(at)));
    Case c{Op::MatMulInteger,
           ints(at, {3, 5, 40}, ++seed, at == DType::U8 ? 0 : -128, at == DType::U8 ? 255 : 127),
           ints(DType::I8, {40, 24}, ++seed, -110, 110),
           scalar_of(at, at == DType::U8 ? 17 : -3),
           ints(DType::I8, {24}, ++seed, -15, 15),
           {}};
    EXPECT_EQ(check_against_reference(c), taken());
    // A per-row zero point of a runs the reference inside the same kernel.
    c.x_zp = ints(at, {5}, ++seed, 0, 100);
    EXPECT_EQ(check_against_reference(c), taken());
  }
}

// Sums just below 2^24 come back exact from one product; sums that could pass it are split into
// runs (of K, of input channels) that each stay below it, and their results added; weights that
// are not constants, that do not fit s8 less their zero point, and a grouped conv past the bound
// are left to the reference.
TEST(IntegerContraction, CpuKernelTakesOnlyWhatItComputesExactly) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "fusebox was built without oneDNN (libdnnl-dev)";
  // 255 * 127 * 500 = 16,192,500 < 2^24: the largest sums a [K=500] column of +-127 can give.
  Array w(DType::I8, {500, 8});
  std::mt19937_64 rng(3);
  for (int64_t i = 0; i < w.numel(); ++i) w.set_i64(i, (rng() & 1) ? 127 : -127);
  Array a = ints(DType::U8, {6, 500}, 4, 0, 255);
  for (int64_t i = 0; i < 500; ++i)
    a.set_i64(i, w.get_i64(i * 8) > 0 ? 255 : 0);  // row 0 meets column 0's signs
  Case near{Op::MatMulInteger, a, w, scalar_of(DType::U8, 0), scalar_of(DType::I8, 0), {}};
  EXPECT_EQ(check_against_reference(near), taken());
  // K = 520: 255 * 127 * 520 > 2^24, and row 0 sums to the odd 255 * 127 * 520 - 127, which f32
  // cannot hold: two runs of K.
  Array big = ints(DType::U8, {6, 520}, 5, 0, 255);
  for (int64_t i = 0; i < 520; ++i) big.set_i64(i, i == 0 ? 254 : 255);
  Case over{Op::MatMulInteger,       big, ints(DType::I8, {520, 8}, 6, 127, 127), scalar_of(DType::U8, 0),
            scalar_of(DType::I8, 0), {}};
  EXPECT_EQ(check_against_reference(over), taken());
  auto parts_of = [](const Case& c) {
    cpu::onednn::IntegerSpec spec;
    spec.conv = c.op == Op::Conv2dInteger;
    spec.x_dtype = c.x.dtype();
    if (spec.conv) spec.pad[0] = spec.pad[1] = spec.pad[2] = spec.pad[3] = 1;
    Expected<std::unique_ptr<cpu::onednn::IntegerKernel>> k =
        cpu::onednn::IntegerKernel::create(spec, c.w, c.w_zp);
    return k ? (*k)->parts() : -1;
  };
  if (cpu::onednn::int8_exact()) {
    EXPECT_EQ(parts_of(near), 1);
    EXPECT_EQ(parts_of(over), 2);
  }
  // A 3x3 conv over 512 channels of weights that use the int8 range (about 255 * 4608 * 64 per
  // output): runs of input channels, u8 activations at both ends of their range.
  Case deep{Op::Conv2dInteger,
            ints(DType::U8, {1, 512, 6, 7}, 9, 0, 255),
            ints(DType::I8, {16, 512, 3, 3}, 10, -126, 126),
            scalar_of(DType::U8, 3),
            ints(DType::I8, {16}, 11, -1, 1),
            {{"pad", std::vector<int64_t>{1, 1, 1, 1}}}};
  for (int64_t i = 0; i < 512 * 6 * 7; i += 3) deep.x.set_i64(i, 255);
  EXPECT_EQ(check_against_reference(deep), taken());
  if (cpu::onednn::int8_exact()) EXPECT_GE(parts_of(deep), 3);
  // The same sums in a grouped conv (2 groups of 512): one run per group is all it takes, so none.
  Case grouped = deep;
  grouped.x = ints(DType::U8, {1, 1024, 6, 7}, 12, 200, 255);
  grouped.attrs.set("groups", int64_t(2));
  EXPECT_EQ(check_against_reference(grouped), "reference");
  // u8 weights with a zero point of 0: 200 - 0 does not fit s8.
  Case wide{Op::MatMulInteger,
            ints(DType::U8, {4, 16}, 7, 0, 255),
            ints(DType::U8, {16, 8}, 8, 0, 255),
            scalar_of(DType::U8, 9),
            scalar_of(DType::U8, 0),
            {}};
  EXPECT_EQ(check_against_reference(wide), "reference");
  Case input = near;
  input.w_input = true;
  EXPECT_EQ(check_against_reference(input), "reference");
}

// FUSEBOX_ONEDNN_INT8=0 turns the kernel off: the reference runs.
TEST(IntegerContraction, TurnedOffRunsTheReference) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "fusebox was built without oneDNN (libdnnl-dev)";
  ASSERT_EQ(setenv("FUSEBOX_ONEDNN_INT8", "0", 1), 0);
  Case c{Op::MatMulInteger,
         ints(DType::U8, {4, 16}, 9, 0, 255),
         ints(DType::I8, {16, 8}, 10, -50, 50),
         scalar_of(DType::U8, 9),
         scalar_of(DType::I8, 0),
         {}};
  EXPECT_FALSE(cpu::onednn::int8_exact());
  EXPECT_EQ(check_against_reference(c), "reference");
  unsetenv("FUSEBOX_ONEDNN_INT8");
}

// A quantized chain in QLinearConv's form (conv2d_integer, its i32 bias, requantized to u8, a
// second conv2d_integer) compiled for the CPU: where oneDNN takes int8 exactly and the layout is
// channels-last (AVX-512), both convs and the steps between them run NHWC, with one conversion in
// and one out; on every host each result is the reference's bit for bit.
TEST(IntegerContraction, QuantizedChainsStayChannelsLast) {
  if (!cpu::onednn::available()) GTEST_SKIP() << "fusebox was built without oneDNN (libdnnl-dev)";
  GraphBuilder b("chain");
  const ValueId x = b.input("x", DType::U8, make_shape({2, 16, 10, 12}));
  const ValueId w1 = b.constant(ints(DType::I8, {24, 16, 3, 3}, 40, -60, 60));
  const ValueId y1 = b.op(Op::Conv2dInteger,
                          {x, w1, b.constant(scalar_of(DType::U8, 121)), b.constant(scalar_of(DType::I8, 0))},
                          {{"pad", std::vector<int64_t>{1, 1, 1, 1}}});
  Array bias(DType::I32, {24, 1, 1});
  for (int64_t i = 0; i < 24; ++i) bias.set_i64(i, 37 * i - 400);
  const ValueId s = b.add(y1, b.constant(bias));
  const ValueId f = b.mul(b.cast(s, DType::F32), b.scalar(DType::F32, 0.002));
  const ValueId q = b.cast(b.op(Op::Clip, {b.add(b.op(Op::Round, {f}), b.scalar(DType::F32, 100))},
                                {{"min", 0.0}, {"max", 255.0}}),
                           DType::U8);
  const ValueId y2 = b.op(Op::Conv2dInteger, {q, b.constant(ints(DType::I8, {8, 24, 1, 1}, 41, -127, 127)),
                                              b.constant(scalar_of(DType::U8, 100)),
                                              b.constant(ints(DType::I8, {8}, 42, -3, 3))});
  b.output(y2);
  b.output(s);
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << g.status().to_string();
  Expected<testing::OracleAndPlan> both = testing::compile_against_reference(*g, CompileOptions{});
  ASSERT_TRUE(both) << both.status().to_string();
  const Graph& plan = both->plan.graph();
  int nhwc_convs = 0, conversions = 0;
  for (const Node& n : plan.nodes()) {
    nhwc_convs += n.op == Op::Conv2dInteger && has_nhwc_layout(n);
    conversions += n.op == Op::ToNchwc || n.op == Op::ToNchw;
  }
  if (cpu::onednn::int8_exact() && cpu::onednn::preferred_nchwc_block() == 16) {
    EXPECT_EQ(nhwc_convs, 2) << print_graph(plan);
    EXPECT_EQ(conversions, 3) << print_graph(plan);  // x in; y2 and s out
  } else {
    EXPECT_EQ(nhwc_convs, 0) << print_graph(plan);
  }
  for (uint64_t seed : {1u, 2u}) {
    const NamedArrays in{{"x", ints(DType::U8, {2, 16, 10, 12}, seed, 0, 255)}};
    Expected<std::vector<Array>> want = both->reference.run(in);
    Expected<std::vector<Array>> got = both->plan.run(in);
    ASSERT_TRUE(want && got) << (want ? got.status() : want.status()).to_string();
    for (size_t i = 0; i < 2; ++i)
      EXPECT_EQ(testing::to_ints((*got)[i]), testing::to_ints((*want)[i])) << "output " << i;
  }
}

}  // namespace
}  // namespace fusebox
