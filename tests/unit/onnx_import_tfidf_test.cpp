// TfIdfVectorizer (src/onnx/convert_tfidf.cpp) and 3-D ConvTranspose
// (src/onnx/convert_window_dims.cpp): each model runs unfused on the reference kernels, compared
// with values computed here from ONNX's definition, and fused on the CPU pipeline (after a
// poisoned run), compared with the unfused run. Inputs are random with fixed seeds.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportTfIdf, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <cmath>
#include <functional>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

std::vector<Array> run_both(const OnnxModel& m, const NamedArrays& inputs) {
  return run_fused_and_unfused(m, inputs,
                               [](const Array& f, const Array& u) { return arrays_close(f, u, 1e-5, 1e-6); });
}

// ---- TfIdfVectorizer ----

struct TfIdfCase {
  int64_t min_gram, max_gram, max_skip;
  std::string mode;
  std::vector<std::vector<int64_t> > grams;  // grouped by length, shortest first
  std::vector<int64_t> indexes;              // output column of each gram
  std::vector<float> weights;                // empty: none
};

int64_t columns_of(const TfIdfCase& c) { return *std::max_element(c.indexes.begin(), c.indexes.end()) + 1; }

void set_tfidf_attrs(onnx::NodeProto& n, const TfIdfCase& c) {
  std::vector<int64_t> pool, counts;
  for (size_t len = 1, g = 0; g < c.grams.size(); ++len) {
    counts.push_back(static_cast<int64_t>(pool.size()));
    for (; g < c.grams.size() && c.grams[g].size() == len; ++g)
      pool.insert(pool.end(), c.grams[g].begin(), c.grams[g].end());
  }
  set_attr(n, "min_gram_length", c.min_gram);
  set_attr(n, "max_gram_length", c.max_gram);
  set_attr(n, "max_skip_count", c.max_skip);
  set_attr(n, "mode", c.mode);
  set_attr(n, "pool_int64s", pool);
  set_attr(n, "ngram_counts", counts);
  set_attr(n, "ngram_indexes", c.indexes);
  if (!c.weights.empty()) set_attr(n, "weights", c.weights);
}

// ONNX's definition: every gram of a length in [min, max] is counted at every start position
// and every skip distance d (its items d apart, d = 1 .. max_skip + 1), unigrams once; the
// counts land in the gram's output column, then the mode weighs them (weights by column).
Array direct_tfidf(const Array& x, int64_t rows, int64_t len, const TfIdfCase& c,
                   std::vector<int64_t> out_shape) {
  const int64_t cols = columns_of(c);
  std::vector<double> counts(size_t(rows * cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t g = 0; g < c.grams.size(); ++g) {
      const int64_t n = static_cast<int64_t>(c.grams[g].size());
      if (n < c.min_gram || n > c.max_gram) continue;
      for (int64_t d = 1; d <= (n == 1 ? 1 : c.max_skip + 1); ++d) {
        for (int64_t p = 0; p + (n - 1) * d < len; ++p) {
          bool match = true;
          for (int64_t j = 0; j < n; ++j)
            match = match && x.get_i64(r * len + p + j * d) == c.grams[g][size_t(j)];
          if (match) counts[size_t(r * cols + c.indexes[g])] += 1;
        }
      }
    }
  }
  Array want(DType::F32, std::move(out_shape));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double f = counts[size_t(i)], w = c.weights.empty() ? 1.0 : c.weights[size_t(i % cols)];
    want.set_f64(i, c.mode == "TF" ? f : c.mode == "IDF" ? (f > 0 ? w : 0.0) : f * w);
  }
  return want;
}

// Unigrams, bigrams and trigrams over the ids 0..4; column 7 is no gram's (it stays 0).
const std::vector<std::vector<int64_t> > kGrams = {{1},    {3},    {4},       {1, 2},   {3, 3},
                                                   {0, 4}, {2, 1}, {1, 1, 2}, {4, 0, 3}};
const std::vector<int64_t> kIndexes = {5, 0, 8, 2, 1, 6, 3, 4, 9};

TEST(OnnxImportTfIdf, MatchesItsDefinition) {
  const std::vector<float> weights = {0.5f, 1.25f, 2.0f, 0.75f, 3.0f, 1.5f, 0.25f, 4.0f, 2.5f, 1.75f};
  const std::vector<TfIdfCase> cases = {
      {1, 3, 2, "TF", kGrams, kIndexes, {}},         {1, 3, 2, "IDF", kGrams, kIndexes, weights},
      {2, 3, 0, "TFIDF", kGrams, kIndexes, weights}, {1, 2, 3, "TFIDF", kGrams, kIndexes, {}},
      {2, 2, 5, "IDF", kGrams, kIndexes, {}},        {3, 3, 1, "TF", kGrams, kIndexes, {}},
  };
  const int64_t rows = 3, len = 12;
  int seed = 100;
  for (const TfIdfCase& c : cases) {
    for (int32_t elem : {TP::INT32, TP::INT64}) {
      SCOPED_TRACE(c.mode + " grams " + std::to_string(c.min_gram) + ".." + std::to_string(c.max_gram) +
                   " skip " + std::to_string(c.max_skip) + (elem == TP::INT32 ? " int32" : " int64"));
      OnnxModel m(17);
      m.input("x", elem, {rows, len});
      set_tfidf_attrs(m.node("TfIdfVectorizer", {"x"}, {"y"}), c);
      m.output("y");
      Array x =
          random_array(elem == TP::INT32 ? DType::I32 : DType::I64, {rows, len}, uint64_t(++seed), 0, 5);
      std::vector<Array> got = run_both(m, {{"x", x}});
      ASSERT_EQ(got.size(), 1u);
      EXPECT_TRUE(arrays_close(got[0], direct_tfidf(x, rows, len, c, {rows, columns_of(c)}), 0, 0));
    }
  }
}

// A [C] input gives a [columns] result; a batch of run-time size works too.
TEST(OnnxImportTfIdf, OneRowAndRunTimeBatch) {
  const TfIdfCase c{1, 2, 1, "TF", kGrams, kIndexes, {}};
  {
    OnnxModel m(17);
    m.input("x", TP::INT64, {15});
    set_tfidf_attrs(m.node("TfIdfVectorizer", {"x"}, {"y"}), c);
    m.output("y");
    Array x = random_array(DType::I64, {15}, 7, 0, 5);
    std::vector<Array> got = run_both(m, {{"x", x}});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(arrays_close(got[0], direct_tfidf(x, 1, 15, c, {columns_of(c)}), 0, 0));
  }
  {
    OnnxModel m(17);
    m.input("x", TP::INT32, {"N", 10});
    set_tfidf_attrs(m.node("TfIdfVectorizer", {"x"}, {"y"}), c);
    m.output("y");
    Array x = random_array(DType::I32, {4, 10}, 8, 0, 5);
    std::vector<Array> got = run_both(m, {{"x", x}});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(arrays_close(got[0], direct_tfidf(x, 4, 10, c, {4, columns_of(c)}), 0, 0));
  }
}

// A gram listed twice counts at its last listing only (as ONNX's reference implementation).
TEST(OnnxImportTfIdf, RepeatedGramCountsAtItsLastListing) {
  OnnxModel m(17);
  m.input("x", TP::INT64, {6});
  set_tfidf_attrs(m.node("TfIdfVectorizer", {"x"}, {"y"}),
                  TfIdfCase{1, 1, 0, "TF", {{2}, {5}, {2}}, {0, 1, 2}, {}});
  m.output("y");
  std::vector<Array> got = run_both(m, {{"x", array_of_ints(DType::I64, {6}, {2, 5, 2, 7, 2, 5})}});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].same_data(array_f32({3}, {0, 2, 3})));
}

TEST(OnnxImportTfIdf, UnsupportedInputsAreClearErrors) {
  const TfIdfCase c{1, 2, 1, "TF", kGrams, kIndexes, {}};
  auto model = [](int32_t elem, std::vector<OnnxDim> dims, const TfIdfCase& c,
                  const std::function<void(onnx::NodeProto&)>& edit = {}) {
    OnnxModel m(17);
    m.input("x", elem, dims);
    auto& n = m.node("TfIdfVectorizer", {"x"}, {"y"}, "vec");
    set_tfidf_attrs(n, c);
    if (edit) edit(n);
    m.output("y");
    return import_error(m);
  };
  auto expect_error = [](const std::string& e, const std::string& part) {
    EXPECT_NE(e.find("TfIdfVectorizer"), std::string::npos) << e;
    EXPECT_NE(e.find(part), std::string::npos) << e;
  };
  TfIdfCase bad_mode = c, short_indexes = c, short_weights = c;
  bad_mode.mode = "BM25";
  short_indexes.indexes = {0, 1};
  short_weights.weights = {1, 2};
  expect_error(model(TP::INT32, {2, "C"}, c), "static sequence length");
  expect_error(model(TP::FLOAT, {2, 8}, c), "int32 or int64");
  expect_error(model(TP::INT32, {2, 8}, bad_mode), "'mode'");
  expect_error(model(TP::INT32, {2, 8}, short_indexes), "'ngram_indexes' has 2 entries");
  expect_error(model(TP::INT32, {2, 8}, short_weights), "'weights' has 2 entries");
  expect_error(model(TP::INT32, {2, 8}, c,
                     [](onnx::NodeProto& n) {
                       auto* a = n.add_attribute();
                       a->set_name("pool_strings");
                       a->set_type(onnx::AttributeProto::STRINGS);
                       a->add_strings("the");
                     }),
               "'pool_strings' is not supported");
}

// ---- 3-D ConvTranspose ----

// ONNX's definition: x[n, ci, i...] * w[ci, oc, k...] lands at o = i * stride + k * dilation -
// pad_begin on every axis (when inside the output), in output channel group(ci) * Cg + oc; plus
// the bias.
Array direct_conv_transpose_3d(const Array& x, const Array& w, const Array& b, int64_t group,
                               const std::vector<int64_t>& stride, const std::vector<int64_t>& dil,
                               const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& out) {
  const std::vector<int64_t>& xs = x.shape();
  const std::vector<int64_t>& ws = w.shape();
  const int64_t batch = xs[0], ci_count = xs[1], cg = ws[1], co_count = cg * group,
                ci_per_group = ci_count / group;
  Array y(DType::F32, {batch, co_count, out[0], out[1], out[2]});
  const int64_t plane = out[0] * out[1] * out[2];
  for (int64_t i = 0; i < y.numel(); ++i) y.set_f64(i, b.get_f64((i / plane) % co_count));
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t ci = 0; ci < ci_count; ++ci)
      for (int64_t id = 0; id < xs[2]; ++id)
        for (int64_t ih = 0; ih < xs[3]; ++ih)
          for (int64_t iw = 0; iw < xs[4]; ++iw) {
            const double xv = x.get_f64((((n * ci_count + ci) * xs[2] + id) * xs[3] + ih) * xs[4] + iw);
            for (int64_t oc = 0; oc < cg; ++oc)
              for (int64_t kd = 0; kd < ws[2]; ++kd)
                for (int64_t kh = 0; kh < ws[3]; ++kh)
                  for (int64_t kw = 0; kw < ws[4]; ++kw) {
                    const int64_t od = id * stride[0] + kd * dil[0] - pad_begin[0];
                    const int64_t oh = ih * stride[1] + kh * dil[1] - pad_begin[1];
                    const int64_t ow = iw * stride[2] + kw * dil[2] - pad_begin[2];
                    if (od < 0 || od >= out[0] || oh < 0 || oh >= out[1] || ow < 0 || ow >= out[2]) continue;
                    const int64_t co = (ci / ci_per_group) * cg + oc;
                    const int64_t at = (((n * co_count + co) * out[0] + od) * out[1] + oh) * out[2] + ow;
                    y.set_f64(at,
                              y.get_f64(at) +
                                  xv * w.get_f64((((ci * cg + oc) * ws[2] + kd) * ws[3] + kh) * ws[4] + kw));
                  }
          }
  return y;
}

TEST(OnnxImportTfIdf, ConvTranspose3dMatchesItsDefinition) {
  // Groups, per-axis strides, dilations, pads and output_padding.
  const std::vector<int64_t> xs{2, 4, 3, 4, 5}, ws{4, 3, 2, 3, 2};
  const std::vector<int64_t> stride{2, 1, 2}, dil{1, 2, 1}, pads{1, 0, 1, 0, 2, 1}, out_pad{1, 0, 1};
  OnnxModel m(17);
  m.input("x", std::vector<OnnxDim>(xs.begin(), xs.end()));
  m.initializer("w", random_array(DType::F32, ws, 41));
  m.initializer("b", random_array(DType::F32, {6}, 42));
  auto& n = m.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  set_attr(n, "group", int64_t(2));
  set_attr(n, "strides", stride);
  set_attr(n, "dilations", dil);
  set_attr(n, "pads", pads);
  set_attr(n, "output_padding", out_pad);
  m.output("y");
  Array x = random_array(DType::F32, xs, 40);
  std::vector<Array> got = run_both(m, {{"x", x}});
  ASSERT_EQ(got.size(), 1u);
  // (in - 1) * stride + out_pad + (k - 1) * dil + 1 - pads: 6, 6, 9.
  Array want =
      direct_conv_transpose_3d(x, random_array(DType::F32, ws, 41), random_array(DType::F32, {6}, 42), 2,
                               stride, dil, {1, 0, 1}, {6, 6, 9});
  EXPECT_TRUE(arrays_close(got[0], want, 1e-5, 1e-5));
}

// output_shape beyond what the product reaches on some axes (negative pads: the result is
// extended with zeros plus the bias) and short of it on another; a run-time batch.
TEST(OnnxImportTfIdf, ConvTranspose3dOutputShape) {
  const std::vector<int64_t> ws{2, 2, 2, 2, 2};
  OnnxModel m(17);
  m.input("x", {"N", 2, 2, 3, 3});
  m.initializer("w", random_array(DType::F32, ws, 51));
  m.initializer("b", random_array(DType::F32, {2}, 52));
  auto& n = m.node("ConvTranspose", {"x", "w", "b"}, {"y"});
  set_attr(n, "strides", std::vector<int64_t>{2, 2, 2});
  set_attr(n, "output_shape", std::vector<int64_t>{6, 5, 7});
  m.output("y");
  Array x = random_array(DType::F32, {3, 2, 2, 3, 3}, 50);
  std::vector<Array> got = run_both(m, {{"x", x}});
  ASSERT_EQ(got.size(), 1u);
  // Full sizes 4, 6, 6; totals -2, 1, -1 split larger half first: begins -1, 1, 0.
  Array want =
      direct_conv_transpose_3d(x, random_array(DType::F32, ws, 51), random_array(DType::F32, {2}, 52), 1,
                               {2, 2, 2}, {1, 1, 1}, {-1, 1, 0}, {6, 5, 7});
  EXPECT_TRUE(arrays_close(got[0], want, 1e-5, 1e-5));
}

TEST(OnnxImportTfIdf, ConvTranspose3dNeedsAStaticDepth) {
  OnnxModel m(17);
  m.input("x", {1, 2, "D", 4, 4});
  m.initializer("w", random_array(DType::F32, {2, 2, 2, 2, 2}, 60));
  m.node("ConvTranspose", {"x", "w"}, {"y"}, "up");
  m.output("y");
  std::string e = import_error(m);
  EXPECT_NE(e.find("ConvTranspose"), std::string::npos) << e;
  EXPECT_NE(e.find("static input depth"), std::string::npos) << e;
}

}  // namespace
}  // namespace fusebox::testing

#endif
