// ONNX ops that import as the scatter/gather ops (ScatterElements, Scatter, ScatterND, GatherND)
// or as longer compositions (LRN, MeanVarianceNormalization, Einsum): each model runs unfused on
// the reference kernels, compared with values computed here from ONNX's definition on random
// data, and fused on the CPU pipeline, compared with the unfused run. Refusals name the node.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportComposite, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <cmath>
#include <functional>
#include <map>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

std::vector<Array> run_both(const OnnxModel& m, const NamedArrays& inputs) {
  return run_fused_and_unfused(m, inputs, [](const Array& f, const Array& u) { return close_to_scale(f, u, 1e-5); });
}

TEST(OnnxImportComposite, ScatterAndGatherOps) {
  Array data = random_array(DType::F32, {3, 4}, 1);
  // ScatterElements with add along axis 1 and a repeated, negative index.
  {
    OnnxModel m(16);
    m.input("data", {3, 4});
    m.input("idx", TP::INT64, {3, 2});
    m.input("upd", {3, 2});
    auto& n = m.node("ScatterElements", {"data", "idx", "upd"}, {"y"});
    set_attr(n, "axis", int64_t(1));
    set_attr(n, "reduction", "add");
    m.output("y");
    Array idx = array_of_ints(DType::I64, {3, 2}, {0, -4, 3, 1, 2, 2}),
          upd = random_array(DType::F32, {3, 2}, 2);
    std::vector<Array> out = run_both(m, {{"data", data}, {"idx", idx}, {"upd", upd}});
    ASSERT_EQ(out.size(), 1u);
    Array want = data.clone();
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        int64_t k = idx.get_i64(i * 2 + j);
        k = k < 0 ? k + 4 : k;
        want.set_f64(i * 4 + k, double(float(want.get_f64(i * 4 + k) + upd.get_f64(i * 2 + j))));
      }
    EXPECT_TRUE(arrays_close(out[0], want, 0, 0));
  }
  // Scatter (opset 9) is ScatterElements; an out-of-range index names the node by its result.
  {
    OnnxModel m(9);
    m.input("data", {3, 4});
    m.input("idx", TP::INT64, {1, 4});
    m.input("upd", {1, 4});
    m.node("Scatter", {"data", "idx", "upd"}, {"y"}, "my_scatter");
    m.output("y");
    Graph g = import_model(m);
    Expected<Executable> exe = Session().compile(g, CompileOptions{});
    ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
    Array upd = random_array(DType::F32, {1, 4}, 3);
    Expected<std::vector<Array> > ok =
        exe->run({{"data", data}, {"idx", array_of_ints(DType::I64, {1, 4}, {2, 0, -1, 1})}, {"upd", upd}});
    ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
    const int64_t rows[] = {2, 0, 2, 1};
    Array want = data.clone();
    for (int64_t j = 0; j < 4; ++j) want.set_f64(rows[j] * 4 + j, upd.get_f64(j));
    EXPECT_TRUE(arrays_close((*ok)[0], want, 0, 0));
    Expected<std::vector<Array> > bad =
        exe->run({{"data", data}, {"idx", array_of_ints(DType::I64, {1, 4}, {0, 3, 0, 0})}, {"upd", upd}});
    ASSERT_FALSE(bad.has_value());
    EXPECT_NE(bad.status().message().find("index 3 at indices[0,1] is out of range for axis 0 of size 3"),
              std::string::npos)
        << bad.status().message();
    EXPECT_NE(bad.status().message().find("%y = scatter_elements"), std::string::npos)
        << bad.status().message();
  }
  // ScatterND with mul on row slices, GatherND with batch_dims 1.
  {
    OnnxModel m(16);
    m.input("data", {3, 4});
    m.input("idx", TP::INT64, {2, 1});
    m.input("upd", {2, 4});
    set_attr(m.node("ScatterND", {"data", "idx", "upd"}, {"y"}), "reduction", "mul");
    m.input("bidx", TP::INT64, {3, 2, 1});
    set_attr(m.node("GatherND", {"data", "bidx"}, {"z"}), "batch_dims", int64_t(1));
    m.output("y");
    m.output("z");
    Array upd = random_array(DType::F32, {2, 4}, 4),
          bidx = array_of_ints(DType::I64, {3, 2, 1}, {3, 0, -1, 2, 1, 1});
    std::vector<Array> out = run_both(
        m,
        {{"data", data}, {"idx", array_of_ints(DType::I64, {2, 1}, {2, -3})}, {"upd", upd}, {"bidx", bidx}});
    ASSERT_EQ(out.size(), 2u);
    Array want = data.clone();
    for (int64_t j = 0; j < 4; ++j) {
      want.set_f64(2 * 4 + j, double(float(data.get_f64(2 * 4 + j) * upd.get_f64(j))));
      want.set_f64(0 * 4 + j, double(float(data.get_f64(0 * 4 + j) * upd.get_f64(4 + j))));
    }
    EXPECT_TRUE(arrays_close(out[0], want, 0, 0));
    Array gathered(DType::F32, {3, 2});
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        int64_t k = bidx.get_i64(i * 2 + j);
        gathered.set_f64(i * 2 + j, data.get_f64(i * 4 + (k < 0 ? k + 4 : k)));
      }
    EXPECT_TRUE(arrays_close(out[1], gathered, 0, 0));
  }
  // Opset 18's max reduction is refused by name.
  OnnxModel m(18);
  m.input("data", {3, 4});
  m.input("idx", TP::INT64, {2, 1});
  m.input("upd", {2, 4});
  set_attr(m.node("ScatterND", {"data", "idx", "upd"}, {"y"}), "reduction", "max");
  m.output("y");
  EXPECT_NE(import_error(m).find("attribute 'reduction' = \"max\" is not supported"), std::string::npos);
}

// CumSum (constant and run-time axis), ReverseSequence, Det, Mod fmod = 1 and cubic Resize map to
// one fusebox op each with the node's attributes: the import equals that op run directly.
TEST(OnnxImportComposite, OneOpConversionsKeepTheirAttributes) {
  Array x = random_array(DType::F32, {3, 4}, 31);
  {
    OnnxModel m(14);
    m.input("x", {3, 4});
    m.input("axis", TP::INT64, {});
    m.initializer("one", array_of_ints(DType::I64, {}, {1}));
    auto& a = m.node("CumSum", {"x", "one"}, {"y"});
    set_attr(a, "exclusive", int64_t(1));
    set_attr(m.node("CumSum", {"x", "axis"}, {"z"}), "reverse", int64_t(1));
    m.output("y");
    m.output("z");
    std::vector<Array> out = run_both(m, {{"x", x}, {"axis", array_of_ints(DType::I64, {}, {-2})}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(
        arrays_close(out[0], run_op1(Op::CumSum, {x}, {{"axis", int64_t(1)}, {"exclusive", true}}), 0, 0));
    EXPECT_TRUE(
        arrays_close(out[1], run_op1(Op::CumSum, {x}, {{"axis", int64_t(0)}, {"reverse", true}}), 0, 0));
  }
  {
    OnnxModel m(11);
    m.input("x", {3, 4});
    m.input("lens", TP::INT64, {4});
    m.input("b", {3, 4});
    m.input("sq", {2, 3, 3});
    auto& r = m.node("ReverseSequence", {"x", "lens"}, {"y"});
    set_attr(r, "batch_axis", int64_t(1));
    set_attr(r, "time_axis", int64_t(0));
    set_attr(m.node("Mod", {"x", "b"}, {"z"}), "fmod", int64_t(1));
    m.node("Det", {"sq"}, {"d"});
    m.output("y");
    m.output("z");
    m.output("d");
    Array lens = array_of_ints(DType::I64, {4}, {3, 0, 2, 1}),
          b = random_array(DType::F32, {3, 4}, 32, 0.5, 3);
    Array sq = random_array(DType::F32, {2, 3, 3}, 33);
    std::vector<Array> out = run_both(m, {{"x", x}, {"lens", lens}, {"b", b}, {"sq", sq}});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(arrays_close(out[0], run_op1(Op::ReverseSequence, {x, lens}), 0, 0));
    EXPECT_TRUE(arrays_close(out[1], run_op1(Op::Mod, {x, b}, {{"fmod", true}}), 0, 0));
    EXPECT_TRUE(arrays_close(out[2], run_op1(Op::Det, {sq}), 0, 0));
  }
  {
    OnnxModel m(13);
    Array img = random_array(DType::F32, {1, 1, 4, 4}, 34);
    m.input("x", {1, 1, 4, 4});
    m.initializer("scales", f32s({1, 1, 2, 1.5f}));
    auto& r = m.node("Resize", {"x", "", "scales"}, {"y"});
    set_attr(r, "mode", "cubic");
    set_attr(r, "cubic_coeff_a", -0.5f);
    set_attr(r, "exclude_outside", int64_t(1));
    m.output("y");
    std::vector<Array> out = run_both(m, {{"x", img}});
    ASSERT_EQ(out.size(), 1u);
    Attrs attrs{{"scales", std::vector<double>{1, 1, 2, 1.5}},
                {"mode", std::string("cubic")},
                {"coordinate", std::string("half_pixel")},
                {"cubic_coeff_a", -0.5},
                {"exclude_outside", true}};
    EXPECT_TRUE(arrays_close(out[0], run_op1(Op::Resize, {img}, attrs), 0, 0));
  }
}

// LRN on [N, C, H, W] with even and odd window sizes, against the definition's loop.
TEST(OnnxImportComposite, LrnMatchesTheDefinition) {
  const int64_t N = 2, C = 5, H = 3, W = 2;
  Array x = random_array(DType::F32, {N, C, H, W}, 7);
  for (int64_t size : {1, 2, 3, 4}) {
    SCOPED_TRACE("size " + std::to_string(size));
    const float alpha = 0.3f, beta = 0.6f, bias = 1.5f;
    OnnxModel m(13);
    m.input("x", {"N", C, H, W});
    auto& n = m.node("LRN", {"x"}, {"y"});
    set_attr(n, "size", size);
    set_attr(n, "alpha", alpha);
    set_attr(n, "beta", beta);
    set_attr(n, "bias", bias);
    m.output("y");
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    Array want(DType::F32, {N, C, H, W});
    for (int64_t i = 0; i < want.numel(); ++i) {
      int64_t c = (i / (H * W)) % C, base = i - c * H * W;
      double sq = 0;
      for (int64_t k = std::max<int64_t>(0, c - (size - 1) / 2); k <= std::min(C - 1, c + size / 2); ++k) {
        double v = x.get_f64(base + k * H * W);
        sq += v * v;
      }
      want.set_f64(i,
                   x.get_f64(i) / std::pow(double(bias) + double(alpha) / double(size) * sq, double(beta)));
    }
    EXPECT_TRUE(arrays_close(out[0], want, 1e-5, 1e-6));
  }
}

TEST(OnnxImportComposite, MeanVarianceNormalization) {
  Array x = random_array(DType::F32, {2, 3, 4, 2}, 9);
  for (std::vector<int64_t> axes : {std::vector<int64_t>{0, 2, 3}, std::vector<int64_t>{1, -1}}) {
    OnnxModel m(13);
    m.input("x", {2, 3, 4, 2});
    auto& n = m.node("MeanVarianceNormalization", {"x"}, {"y"});
    if (axes[0] != 0) set_attr(n, "axes", axes);
    m.output("y");
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    const int64_t shape[] = {2, 3, 4, 2};
    std::vector<bool> reduced(4, false);
    for (int64_t a : axes) reduced[size_t(a < 0 ? a + 4 : a)] = true;
    // Group key: the coordinates of the kept axes.
    auto key = [&](int64_t i) {
      int64_t k = 0, rest = i;
      std::vector<int64_t> c(4);
      for (int d = 3; d >= 0; --d) c[size_t(d)] = rest % shape[d], rest /= shape[d];
      for (int d = 0; d < 4; ++d) k = k * shape[d] + (reduced[size_t(d)] ? 0 : c[size_t(d)]);
      return k;
    };
    std::map<int64_t, std::pair<double, double> > sums;
    std::map<int64_t, int64_t> counts;
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = x.get_f64(i);
      sums[key(i)].first += v, sums[key(i)].second += v * v, ++counts[key(i)];
    }
    Array want(DType::F32, {2, 3, 4, 2});
    for (int64_t i = 0; i < x.numel(); ++i) {
      double mean = sums[key(i)].first / double(counts[key(i)]),
             sq = sums[key(i)].second / double(counts[key(i)]);
      want.set_f64(i, (x.get_f64(i) - mean) / (std::sqrt(sq - mean * mean) + 1e-9));
    }
    EXPECT_TRUE(arrays_close(out[0], want, 1e-4, 1e-5)) << "axes " << axes.size();
  }
}

// Einsum on random data against a naive sum over every label, one equation per feature.
TEST(OnnxImportComposite, EinsumMatchesNaiveSums) {
  struct Case {
    std::string eq;
    std::vector<std::vector<int64_t> > shapes;
    std::vector<int64_t> out_shape;
    // out[o] = sum over the free labels of the product of the operands, as a callback that gets
    // the operands and the output index.
    std::function<double(const std::vector<Array>&, const std::vector<int64_t>&)> f;
  };
  auto at = [](const Array& a, std::vector<int64_t> idx) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off = off * a.shape()[d] + idx[d];
    return a.get_f64(off);
  };
  std::vector<Case> cases = {
      {"ij->ji",
       {{3, 4}},
       {4, 3},
       [&](auto& in, auto& o) {
         return at(in[0], {o[1], o[0]});
       }},
      {"ij->i",
       {{3, 4}},
       {3},
       [&](auto& in, auto& o) {
         double s = 0;
         for (int64_t j = 0; j < 4; ++j) s += at(in[0], {o[0], j});
         return s;
       }},
      {"i,i",
       {{5}, {5}},
       {},
       [&](auto& in, auto&) {
         double s = 0;
         for (int64_t i = 0; i < 5; ++i) s += at(in[0], {i}) * at(in[1], {i});
         return s;
       }},
      {"bij, bjk -> bik",
       {{2, 3, 4}, {2, 4, 5}},
       {2, 3, 5},
       [&](auto& in, auto& o) {
         double s = 0;
         for (int64_t j = 0; j < 4; ++j) s += at(in[0], {o[0], o[1], j}) * at(in[1], {o[0], j, o[2]});
         return s;
       }},
      {"...ii ->...i",
       {{2, 3, 3}},
       {2, 3},
       [&](auto& in, auto& o) {
         return at(in[0], {o[0], o[1], o[1]});
       }},
      {"ij,jk",
       {{3, 4}, {4, 2}},
       {3, 2},
       [&](auto& in, auto& o) {
         double s = 0;
         for (int64_t j = 0; j < 4; ++j) s += at(in[0], {o[0], j}) * at(in[1], {j, o[1]});
         return s;
       }},
      {"i,j->ij",
       {{3}, {2}},
       {3, 2},
       [&](auto& in, auto& o) { return at(in[0], {o[0]}) * at(in[1], {o[1]}); }},
      {"ii",
       {{4, 4}},
       {},
       [&](auto& in, auto&) {
         double s = 0;
         for (int64_t i = 0; i < 4; ++i) s += at(in[0], {i, i});
         return s;
       }},
      {"ijk,ikl,l->kj",
       {{2, 3, 4}, {2, 4, 3}, {3}},
       {4, 3},
       [&](auto& in, auto& o) {
         double s = 0;
         for (int64_t i = 0; i < 2; ++i)
           for (int64_t l = 0; l < 3; ++l)
             s += at(in[0], {i, o[1], o[0]}) * at(in[1], {i, o[0], l}) * at(in[2], {l});
         return s;
       }},
  };
  uint64_t seed = 20;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.eq);
    OnnxModel m(12);
    std::vector<std::string> names;
    NamedArrays inputs;
    std::vector<Array> arrays;
    for (size_t i = 0; i < c.shapes.size(); ++i) {
      names.push_back("x" + std::to_string(i));
      m.input(names.back(), std::vector<OnnxDim>(c.shapes[i].begin(), c.shapes[i].end()));
      arrays.push_back(random_array(DType::F32, c.shapes[i], ++seed));
      inputs[names.back()] = arrays.back();
    }
    set_attr(m.node("Einsum", names, {"y"}), "equation", c.eq);
    m.output("y");
    std::vector<Array> out = run_both(m, inputs);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(std::vector<int64_t>(out[0].shape().begin(), out[0].shape().end()), c.out_shape);
    Array want(DType::F32, c.out_shape);
    for (int64_t k = 0; k < want.numel(); ++k) {
      std::vector<int64_t> o(c.out_shape.size());
      int64_t rest = k;
      for (size_t d = o.size(); d-- > 0;) o[d] = rest % c.out_shape[d], rest /= c.out_shape[d];
      want.set_f64(k, c.f(arrays, o));
    }
    EXPECT_TRUE(arrays_close(out[0], want, 1e-5, 1e-5));
  }
}

TEST(OnnxImportComposite, EinsumRefusalsNameTheEquation) {
  for (const char* eq : {"ij,jk->m", "ij,jk->ii", "i2,jk->i", "ij,jk->ik,", "ii,jk->i", "ij->i"}) {
    OnnxModel m(12);
    m.input("a", {3, 4});
    m.input("b", {4, 2});
    set_attr(m.node("Einsum", {"a", "b"}, {"y"}), "equation", eq);
    m.output("y");
    std::string msg = import_error(m);
    EXPECT_NE(msg.find(std::string("equation \"") + eq + "\""), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
