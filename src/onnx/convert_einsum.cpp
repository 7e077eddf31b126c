// ONNX Einsum written with transpose, reshape, slice, reduce_sum and matmul.
//
// The equation is parsed into one list of labels per operand (letters; `...` becomes one label
// per broadcast dim, right-aligned across operands) and the output's (given after `->`, or
// implicit: the ellipsis dims, then the letters that occur once, in alphabetical order). Then:
//
//   1. a label repeated within one operand takes the diagonal: the two axes moved last, merged
//      (n*n) and sliced with step n + 1 (n static);
//   2. a label that no other operand and not the output holds is summed away (reduce_sum);
//   3. operands are contracted left to right, two at a time: labels in both that are still
//      needed are batch dims, labels in both that are not are contracted, the rest stay:
//          a -> [batch, L, K]   b -> [batch, K, R]   matmul -> [batch, L, R] -> split L and R
//   4. the last result is summed over what the output lacks and transposed to the output order.
//
// Every step is exact except the sums, which add the same terms as the definition in another
// order. Refused, naming the equation: characters other than letters, `.`, `,`, `-`, `>` and
// spaces; an output label absent from the inputs or repeated; a diagonal of a non-static size;
// operand counts that do not match the equation.
#include <algorithm>
#include <cctype>
#include <functional>
#include <limits>
#include <map>

#include "onnx/converters.h"

namespace fusebox::onnx_import {

namespace {

constexpr int kEllipsis = 1000;  // ellipsis dim i is label kEllipsis + i (right-aligned)
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

struct Term {
  ValueId v = kNoValue;
  std::vector<int> labels;  // one per axis
};

struct Equation {
  std::vector<std::string> inputs;
  std::optional<std::string> output;
};

Expected<Equation> split_equation(OnnxNode& n, const std::string& text) {
  std::string eq;
  for (char c : text) {
    if (c == ' ') continue;
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '.' && c != ',' && c != '-' && c != '>') {
      return n.error("equation \"" + text + "\": character '" + std::string(1, c) + "' is not supported");
    }
    eq += c;
  }
  Equation e;
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  if (arrow != std::string::npos) e.output = eq.substr(arrow + 2);
  size_t start = 0;
  for (size_t comma; (comma = lhs.find(',', start)) != std::string::npos; start = comma + 1) {
    e.inputs.push_back(lhs.substr(start, comma - start));
  }
  e.inputs.push_back(lhs.substr(start));
  return e;
}

// Letters of one side of the equation and where its ellipsis stands; ok=false when malformed.
struct Side {
  std::string letters;
  int ellipsis_at = -1;  // index into letters before which the ellipsis dims stand
  bool ok = true;
};

Side parse_side(const std::string& s) {
  Side side;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s.compare(i, 3, "...") == 0 && side.ellipsis_at < 0) {
      side.ellipsis_at = int(side.letters.size());
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(s[i]))) {
      side.letters += s[i];
    } else {
      side.ok = false;
    }
  }
  return side;
}

std::vector<int> labels_of(const Side& s, int ell_dims, int max_ell) {
  std::vector<int> out;
  for (int i = 0; i <= int(s.letters.size()); ++i) {
    if (i == s.ellipsis_at) {
      for (int k = 0; k < ell_dims; ++k) out.push_back(kEllipsis + max_ell - ell_dims + k);
    }
    if (i < int(s.letters.size())) out.push_back(int(static_cast<unsigned char>(s.letters[size_t(i)])));
  }
  return out;
}

int position(const std::vector<int>& v, int label) {
  auto it = std::find(v.begin(), v.end(), label);
  return it == v.end() ? -1 : int(it - v.begin());
}

Dim group_size(const Shape& shape, const std::vector<int>& axes) {
  if (axes.size() == 1) return shape[size_t(axes[0])];
  int64_t p = 1;
  for (int a : axes) {
    if (!shape[size_t(a)].is_static()) return Dim::dynamic();
    p *= shape[size_t(a)].value();
  }
  return Dim(p);
}

class Einsum {
 public:
  Einsum(ImportContext& ctx, OnnxNode& n, std::string eq) : ctx_(ctx), n_(n), eq_(std::move(eq)) {}

  Status fail(const std::string& what) const { return n_.error("equation \"" + eq_ + "\": " + what); }

  Expected<ValueId> transpose(ValueId v, const std::vector<int64_t>& perm) {
    for (size_t i = 0; i < perm.size(); ++i) {
      if (perm[i] != int64_t(i)) return ctx_.emit(Op::Transpose, {v}, {{"perm", perm}});
    }
    return v;
  }

  Expected<ValueId> reshape(ValueId v, const Shape& target) {
    if (v == kNoValue) return ctx_.builder_status(n_);
    if (ctx_.type(v).shape == target) return v;
    return ctx_.reshape(n_, v, target);
  }

  // Takes the diagonal of every label the term holds twice.
  Status diagonals(Term& t) {
    for (;;) {
      int a = -1, b = -1;
      for (int i = 0; i < int(t.labels.size()) && a < 0; ++i) {
        for (int j = i + 1; j < int(t.labels.size()); ++j) {
          if (t.labels[size_t(i)] == t.labels[size_t(j)]) {
            a = i, b = j;
            break;
          }
        }
      }
      if (a < 0) return Status::ok();
      if (t.v == kNoValue) return ctx_.builder_status(n_);
      const Shape s = ctx_.type(t.v).shape;
      const Dim &da = s[size_t(a)], &db = s[size_t(b)];
      if (!da.is_static() || !db.is_static() || da.value() != db.value()) {
        return fail("the diagonal of sizes " + da.to_string() + " and " + db.to_string() +
                    " needs equal static sizes");
      }
      const int64_t size = da.value();
      std::vector<int64_t> perm;
      std::vector<int> labels;
      Shape merged;
      for (int i = 0; i < int(s.size()); ++i) {
        if (i == a || i == b) continue;
        perm.push_back(i), labels.push_back(t.labels[size_t(i)]), merged.push_back(s[size_t(i)]);
      }
      perm.push_back(a), perm.push_back(b);
      labels.push_back(t.labels[size_t(a)]);
      merged.push_back(Dim(size * size));
      FUSEBOX_ASSIGN_OR_RETURN(ValueId v, transpose(t.v, perm));
      FUSEBOX_ASSIGN_OR_RETURN(v, reshape(v, merged));
      t.v = ctx_.emit(Op::Slice, {v},
                      {{"starts", std::vector<int64_t>{0}},
                       {"ends", std::vector<int64_t>{kMax}},
                       {"axes", std::vector<int64_t>{int64_t(merged.size()) - 1}},
                       {"steps", std::vector<int64_t>{size + 1}}});
      t.labels = labels;
    }
  }

  // Sums away the labels `keep` rejects.
  void reduce(Term& t, const std::function<bool(int)>& keep) {
    std::vector<int64_t> axes;
    std::vector<int> labels;
    for (size_t i = 0; i < t.labels.size(); ++i) {
      if (keep(t.labels[i]))
        labels.push_back(t.labels[i]);
      else
        axes.push_back(int64_t(i));
    }
    if (axes.empty()) return;
    t.v = ctx_.emit(Op::ReduceSum, {t.v}, {{"axes", axes}, {"keepdims", false}});
    t.labels = labels;
  }

  // a and b contracted into the labels `needed` asks for (batch, then a's, then b's).
  Expected<Term> contract(const Term& a, const Term& b, const std::function<bool(int)>& needed) {
    if (a.v == kNoValue || b.v == kNoValue) return ctx_.builder_status(n_);
    std::vector<int> batch, left, contracted, right;
    for (int l : a.labels) {
      bool in_b = position(b.labels, l) >= 0;
      (in_b ? (needed(l) ? batch : contracted) : left).push_back(l);
    }
    for (int l : b.labels) {
      if (position(a.labels, l) < 0) right.push_back(l);
    }
    const Shape sa = ctx_.type(a.v).shape, sb = ctx_.type(b.v).shape;
    auto axes_of = [](const std::vector<int>& labels, const std::vector<int>& of) {
      std::vector<int> axes;
      for (int l : of) axes.push_back(position(labels, l));
      return axes;
    };
    std::vector<int> ab = axes_of(a.labels, batch), al = axes_of(a.labels, left),
                     ak = axes_of(a.labels, contracted);
    std::vector<int> bb = axes_of(b.labels, batch), bk = axes_of(b.labels, contracted),
                     br = axes_of(b.labels, right);
    std::vector<int64_t> perm_a, perm_b;
    Shape shape_a, shape_b, out;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Dim &x = sa[size_t(ab[i])], &y = sb[size_t(bb[i])];
      if (x.is_static() && y.is_static() && x.value() != y.value() && x.value() != 1 && y.value() != 1) {
        return fail("sizes " + x.to_string() + " and " + y.to_string() + " of one label differ");
      }
      perm_a.push_back(ab[i]), perm_b.push_back(bb[i]);
      shape_a.push_back(x), shape_b.push_back(y);
      out.push_back(x.is_static() && x.value() == 1 ? y : x);
    }
    for (int i : al) perm_a.push_back(i), out.push_back(sa[size_t(i)]);
    for (int i : ak) perm_a.push_back(i);
    for (int i : bk) perm_b.push_back(i);
    for (int i : br) perm_b.push_back(i), out.push_back(sb[size_t(i)]);
    shape_a.push_back(group_size(sa, al)), shape_a.push_back(group_size(sa, ak));
    shape_b.push_back(group_size(sb, bk)), shape_b.push_back(group_size(sb, br));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId va, transpose(a.v, perm_a));
    FUSEBOX_ASSIGN_OR_RETURN(va, reshape(va, shape_a));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId vb, transpose(b.v, perm_b));
    FUSEBOX_ASSIGN_OR_RETURN(vb, reshape(vb, shape_b));
    ValueId m = ctx_.emit(Op::MatMul, {va, vb});
    FUSEBOX_ASSIGN_OR_RETURN(m, reshape(m, out));
    Term t{m, batch};
    t.labels.insert(t.labels.end(), left.begin(), left.end());
    t.labels.insert(t.labels.end(), right.begin(), right.end());
    return t;
  }

  Status run() {
    FUSEBOX_ASSIGN_OR_RETURN(Equation e, split_equation(n_, eq_));
    if (int(e.inputs.size()) != n_.num_inputs()) {
      return fail("has " + std::to_string(e.inputs.size()) + " operands, the node " +
                  std::to_string(n_.num_inputs()));
    }
    std::vector<Side> sides;
    std::vector<Term> terms;
    std::vector<int> ell_dims;
    int max_ell = 0;
    for (int i = 0; i < n_.num_inputs(); ++i) {
      Side s = parse_side(e.inputs[size_t(i)]);
      FUSEBOX_ASSIGN_OR_RETURN(ValueId v, ctx_.value(n_, i));
      int rank = ctx_.type(v).rank(), ell = rank - int(s.letters.size());
      if (!s.ok || ell < 0 || (ell > 0 && s.ellipsis_at < 0)) {
        return fail("operand " + std::to_string(i) + " \"" + e.inputs[size_t(i)] +
                    "\" does not match its type " + ctx_.type(v).to_string());
      }
      max_ell = std::max(max_ell, ell);
      sides.push_back(s), ell_dims.push_back(ell), terms.push_back(Term{v, {}});
    }
    std::map<int, int> count;
    for (size_t i = 0; i < terms.size(); ++i) {
      terms[i].labels = labels_of(sides[i], ell_dims[i], max_ell);
      for (int l : terms[i].labels) ++count[l];
    }
    std::vector<int> output;
    if (e.output) {
      Side s = parse_side(*e.output);
      if (!s.ok) return fail("the output \"" + *e.output + "\" is malformed");
      output = labels_of(s, s.ellipsis_at >= 0 ? max_ell : 0, max_ell);
    } else {
      for (int k = 0; k < max_ell; ++k) output.push_back(kEllipsis + k);
      for (auto [l, c] : count) {
        if (l < kEllipsis && c == 1) output.push_back(l);
      }
    }
    for (size_t i = 0; i < output.size(); ++i) {
      if (count.count(output[i]) == 0 || position(output, output[i]) != int(i)) {
        return fail("output label '" + std::string(1, char(output[i] < kEllipsis ? output[i] : '.')) +
                    "' is repeated or absent from the inputs");
      }
    }
    // A label is needed after operand i when the output or a later operand holds it.
    auto needed_after = [&](size_t i) {
      return [&, i](int l) {
        if (position(output, l) >= 0) return true;
        for (size_t j = i + 1; j < terms.size(); ++j) {
          if (position(terms[j].labels, l) >= 0) return true;
        }
        return false;
      };
    };
    for (size_t i = 0; i < terms.size(); ++i) {
      FUSEBOX_RETURN_IF_ERROR(diagonals(terms[i]));
      // Summed away here: labels of this operand alone that the output lacks.
      reduce(terms[i], [&](int l) {
        if (position(output, l) >= 0) return true;
        for (size_t j = 0; j < terms.size(); ++j) {
          if (j != i && position(terms[j].labels, l) >= 0) return true;
        }
        return false;
      });
    }
    Term acc = terms[0];
    for (size_t i = 1; i < terms.size(); ++i) {
      auto needed = needed_after(i);
      reduce(acc, [&](int l) { return needed(l) || position(terms[i].labels, l) >= 0; });
      FUSEBOX_ASSIGN_OR_RETURN(acc, contract(acc, terms[i], needed));
    }
    reduce(acc, [&](int l) { return position(output, l) >= 0; });
    if (acc.v == kNoValue) return ctx_.builder_status(n_);
    std::vector<int64_t> perm;
    for (int l : output) perm.push_back(position(acc.labels, l));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId y, transpose(acc.v, perm));
    return ctx_.set_output(n_, 0, y);
  }

 private:
  ImportContext& ctx_;
  OnnxNode& n_;
  std::string eq_;
};

Status convert_einsum(ImportContext& ctx, OnnxNode& n) {
  std::string eq = n.attr_string("equation", "");
  if (eq.empty()) return n.error("attribute 'equation' is missing");
  if (n.num_inputs() < 1) return n.error("needs at least one input");
  return Einsum(ctx, n, eq).run();
}

}  // namespace

void add_einsum_converters(ConverterTable& table) { table["Einsum"] = convert_einsum; }

}  // namespace fusebox::onnx_import
