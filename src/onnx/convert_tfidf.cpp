// TfIdfVectorizer over integer token ids [C] or [N, C], as comparisons with its constant pool:
//
//   for each gram length n in [min_gram_length, max_gram_length] with pool grams P [m, n]:
//     for each skip distance d (items d apart: d = 1 .. max_skip_count + 1; only d = 1 for
//     unigrams, which the skips do not change), with L = C - (n - 1) * d start positions:
//       hit[b, p, g] = and_j eq(x[b, p + j*d], P[g, j])           [N, L, m], one eq per item j
//     count_n = reduce_sum(cast(concat(hits over d, positions axis)), positions)     [N, m]
//   counts = matmul(concat(count_n over n), S)   S [grams, outputs] 0/1: gram i -> ngram_indexes[i]
//   TF: counts;  IDF: cast(counts > 0) * weights;  TFIDF: counts * weights
//
// The sequence length C must be static (it sets the slices); N may be a run-time size. As ONNX's
// reference implementation and onnxruntime do, weights[i] weighs output column i (IDF without
// weights gives 1 where the count is positive, TFIDF without weights the count); a gram listed
// twice in the pool counts only at its last listing. pool_strings is refused: fusebox tensors
// hold no strings.
#include <algorithm>
#include <map>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

// The pool's grams of one length in [min_gram_length, max_gram_length]: items [m, n] row-major
// and each gram's output column.
struct GramSet {
  int64_t length = 0;
  std::vector<int64_t> items;
  std::vector<int64_t> columns;
  int64_t count() const { return static_cast<int64_t>(columns.size()); }
};

struct TfIdfSpec {
  int64_t min_gram = 0, max_gram = 0, max_skip = 0, outputs = 0;
  std::string mode;
  std::vector<GramSet> sets;
  std::optional<std::vector<float>> weights;
};

Expected<TfIdfSpec> read_spec(OnnxNode& n) {
  TfIdfSpec spec;
  std::optional<int64_t> min_gram = n.attr_int("min_gram_length"), max_gram = n.attr_int("max_gram_length"),
                         max_skip = n.attr_int("max_skip_count");
  std::optional<std::vector<int64_t>> counts = n.attr_ints("ngram_counts"),
                                      indexes = n.attr_ints("ngram_indexes");
  std::optional<std::vector<int64_t>> pool = n.attr_ints("pool_int64s");
  std::optional<std::vector<std::string>> pool_strings = n.attr_strings("pool_strings");
  spec.mode = n.attr_string("mode", "");
  spec.weights = n.attr_floats("weights");
  FUSEBOX_RETURN_IF_ERROR(n.status());
  if (pool_strings)
    return n.error(
        "attribute 'pool_strings' is not supported (fusebox tensors hold no strings); use pool_int64s");
  if (!pool) return n.error("attribute 'pool_int64s' is missing");
  if (!min_gram || !max_gram || !max_skip) {
    return n.error("attributes 'min_gram_length', 'max_gram_length' and 'max_skip_count' are required");
  }
  if (!counts || !indexes) return n.error("attributes 'ngram_counts' and 'ngram_indexes' are required");
  if (spec.mode != "TF" && spec.mode != "IDF" && spec.mode != "TFIDF") {
    return n.error("attribute 'mode' = \"" + spec.mode + "\" is not supported (TF, IDF or TFIDF)");
  }
  if (*min_gram < 1 || *max_gram < *min_gram) {
    return n.error("attributes 'min_gram_length' = " + std::to_string(*min_gram) +
                   " and 'max_gram_length' = " + std::to_string(*max_gram) + " need 1 <= min <= max");
  }
  if (*max_skip < 0)
    return n.error("attribute 'max_skip_count' must be >= 0, got " + std::to_string(*max_skip));
  spec.min_gram = *min_gram;
  spec.max_gram = *max_gram;
  spec.max_skip = *max_skip;
  const int64_t pool_size = static_cast<int64_t>(pool->size());
  // ngram_counts[i]: where the (i+1)-grams start in the pool; they run to the next start.
  int64_t gram_index = 0, total_grams = 0;
  for (size_t i = 0; i < counts->size(); ++i) {
    const int64_t begin = (*counts)[i], end = i + 1 < counts->size() ? (*counts)[i + 1] : pool_size;
    const int64_t length = static_cast<int64_t>(i) + 1;
    if (begin < 0 || end < begin || end > pool_size) {
      return n.error("attribute 'ngram_counts' must be non-decreasing starts inside pool_int64s (" +
                     std::to_string(pool_size) + " items)");
    }
    if ((end - begin) % length != 0) {
      return n.error("attribute 'ngram_counts': the " + std::to_string(length) + "-grams span " +
                     std::to_string(end - begin) + " pool items, not a multiple of " +
                     std::to_string(length));
    }
    total_grams += (end - begin) / length;
  }
  if (static_cast<int64_t>(indexes->size()) != total_grams) {
    return n.error("attribute 'ngram_indexes' has " + std::to_string(indexes->size()) +
                   " entries, the pool holds " + std::to_string(total_grams) + " n-grams");
  }
  if (indexes->empty())
    return n.error("attribute 'ngram_indexes' is empty: the output would have no columns");
  for (int64_t c : *indexes) {
    if (c < 0) return n.error("attribute 'ngram_indexes' holds the negative index " + std::to_string(c));
    spec.outputs = std::max(spec.outputs, c + 1);
  }
  if (spec.weights && static_cast<int64_t>(spec.weights->size()) < spec.outputs) {
    return n.error("attribute 'weights' has " + std::to_string(spec.weights->size()) +
                   " entries, the output has " + std::to_string(spec.outputs) + " columns");
  }
  for (size_t i = 0; i < counts->size(); ++i) {
    const int64_t begin = (*counts)[i], end = i + 1 < counts->size() ? (*counts)[i + 1] : pool_size;
    const int64_t length = static_cast<int64_t>(i) + 1, grams = (end - begin) / length;
    if (length < spec.min_gram || length > spec.max_gram || grams == 0) {
      gram_index += grams;
      continue;
    }
    // A gram listed twice counts at its last listing only.
    std::map<std::vector<int64_t>, int64_t> column_of;
    std::vector<std::vector<int64_t>> order;
    for (int64_t g = 0; g < grams; ++g, ++gram_index) {
      std::vector<int64_t> gram(pool->begin() + begin + g * length, pool->begin() + begin + (g + 1) * length);
      if (!column_of.count(gram)) order.push_back(gram);
      column_of[gram] = (*indexes)[size_t(gram_index)];
    }
    GramSet set;
    set.length = length;
    for (const std::vector<int64_t>& gram : order) {
      set.items.insert(set.items.end(), gram.begin(), gram.end());
      set.columns.push_back(column_of[gram]);
    }
    spec.sets.push_back(std::move(set));
  }
  return spec;
}

// [N, m] f32: how often each gram of `set` occurs in the rows of x3 ([N, C, 1] int64) over every
// allowed skip distance; kNoValue when no gram fits in C items.
Expected<ValueId> gram_counts(ImportContext& ctx, OnnxNode& n, ValueId x3, int64_t c, const GramSet& set,
                              int64_t max_skip) {
  const int64_t m = set.count(), len = set.length;
  // The j-th item of every gram, [m].
  std::vector<ValueId> items;
  for (int64_t j = 0; j < len; ++j) {
    Array column(DType::I64, {m});
    for (int64_t g = 0; g < m; ++g) column.set_i64(g, set.items[size_t(g * len + j)]);
    items.push_back(ctx.builder().constant(column));
  }
  std::vector<ValueId> hits;
  const int64_t distances = len == 1 ? 1 : max_skip + 1;
  for (int64_t d = 1; d <= distances; ++d) {
    const int64_t starts = c - (len - 1) * d;
    if (starts <= 0) break;
    ValueId hit = kNoValue;
    for (int64_t j = 0; j < len; ++j) {
      ValueId at = x3;
      if (starts != c) {
        at = ctx.emit(Op::Slice, {x3},
                      {{"starts", std::vector<int64_t>{j * d}},
                       {"ends", std::vector<int64_t>{j * d + starts}},
                       {"axes", std::vector<int64_t>{1}}});
      }
      ValueId eq = ctx.emit(Op::Equal, {at, items[size_t(j)]});
      hit = j == 0 ? eq : ctx.emit(Op::And, {hit, eq});
    }
    hits.push_back(hit);
  }
  if (hits.empty()) return kNoValue;
  ValueId all = hits.size() == 1 ? hits[0] : ctx.emit(Op::Concat, hits, {{"axis", int64_t(1)}});
  ValueId ones = ctx.emit(Op::Cast, {all}, {{"to", DType::F32}});
  ValueId sum = ctx.emit(Op::ReduceSum, {ones}, {{"axes", std::vector<int64_t>{1}}, {"keepdims", false}});
  if (sum == kNoValue) return ctx.builder_status(n);
  return sum;
}

Status convert_tfidf_vectorizer(ImportContext& ctx, OnnxNode& n) {
  FUSEBOX_ASSIGN_OR_RETURN(TfIdfSpec spec, read_spec(n));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x, ctx.value(n, 0));
  const TensorType xt = ctx.type(x);
  if (xt.dtype != DType::I32 && xt.dtype != DType::I64) {
    return n.error("input X must be int32 or int64 token ids, got " + xt.to_string());
  }
  if (xt.rank() != 1 && xt.rank() != 2)
    return n.error("input X must be [C] or [N, C], got " + xt.to_string());
  const Dim& cdim = xt.shape.back();
  if (!cdim.is_static())
    return n.error("input X needs a static sequence length (last dim), got " + xt.to_string());
  const int64_t c = cdim.value();
  const Dim rows = xt.rank() == 2 ? xt.shape[0] : Dim(1);
  // x as int64 [N, C, 1]: pool items are int64, and a position's comparisons run along the last axis.
  ValueId wide = xt.dtype == DType::I64 ? x : ctx.emit(Op::Cast, {x}, {{"to", DType::I64}});
  if (wide == kNoValue) return ctx.set_output(n, 0, wide);
  FUSEBOX_ASSIGN_OR_RETURN(ValueId x3, ctx.reshape(n, wide, Shape{rows, Dim(c), Dim(1)}));
  std::vector<ValueId> parts;
  std::vector<int64_t> columns;
  for (const GramSet& set : spec.sets) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId part, gram_counts(ctx, n, x3, c, set, spec.max_skip));
    if (part == kNoValue) continue;
    parts.push_back(part);
    columns.insert(columns.end(), set.columns.begin(), set.columns.end());
  }
  ValueId counts;
  if (parts.empty()) {
    // No gram of the pool fits: all counts are zero.
    if (!rows.is_static())
      return n.error("no pool n-gram fits in the input and its batch size is not static: " + xt.to_string());
    Array zeros(DType::F32, {rows.value(), spec.outputs});
    zeros.fill_bytes(0);
    counts = ctx.builder().constant(zeros);
  } else {
    ValueId grams = parts.size() == 1 ? parts[0] : ctx.emit(Op::Concat, parts, {{"axis", int64_t(1)}});
    Array scatter(DType::F32, {static_cast<int64_t>(columns.size()), spec.outputs});
    scatter.fill_bytes(0);
    for (size_t i = 0; i < columns.size(); ++i)
      scatter.set_f64(static_cast<int64_t>(i) * spec.outputs + columns[i], 1.0);
    counts = ctx.emit(Op::MatMul, {grams, ctx.builder().constant(scatter)});
  }
  ValueId y = counts;
  if (spec.mode == "IDF") {
    ValueId positive = ctx.emit(Op::Greater, {counts, scalar_constant(ctx, DType::F32, 0.0)});
    y = ctx.emit(Op::Cast, {positive}, {{"to", DType::F32}});
  }
  if (spec.mode != "TF" && spec.weights) {
    Array w(DType::F32, {spec.outputs});
    for (int64_t i = 0; i < spec.outputs; ++i) w.set_f64(i, (*spec.weights)[size_t(i)]);
    y = ctx.emit(Op::Mul, {y, ctx.builder().constant(w)});
  }
  if (y == kNoValue) return ctx.set_output(n, 0, y);
  if (xt.rank() == 1) {
    FUSEBOX_ASSIGN_OR_RETURN(y, ctx.reshape(n, y, Shape{Dim(spec.outputs)}));
  }
  return ctx.set_output(n, 0, y);
}

}  // namespace

void add_tfidf_converters(ConverterTable& table) { table["TfIdfVectorizer"] = convert_tfidf_vectorizer; }

}  // namespace fusebox::onnx_import
