// What canonicalize's recognisers (recognize_activations, recognize_norms, recognize_softmax)
// share: walking producers structurally, comparing constants, checking that a matched pattern's
// intermediates are read only inside it, and reporting a near-miss with its reason.
//
// A recogniser first matches by structure alone (RecognizeMatcher::producer), collecting the
// nodes it would absorb; then read_only_inside() and its own checks (axes, eps) decide. A
// structure that matched but was refused becomes a MissedFusion remark for `fusebox explain`:
//   missed   layer_norm at %7 = div: not-recognised: layer norm over axis 1 is not a trailing range
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "fusion/pass.h"
#include "fusion/pattern_rewrite.h"
#include "fusion/verdict.h"
#include "ir/use_info.h"

namespace fusebox {

// Relative tolerance when a constant of the pattern is compared with its exact value: exporters
// write √2, 1/√2 or √(2/π) rounded to f32 (relative error < 6e-8) or to a few digits.
inline constexpr double kConstantTolerance = 1e-6;

struct RecognizeMatcher {
  const Graph& g;
  const UseInfo& uses;
  std::vector<std::string> names;  // value_display_names(g)

  RecognizeMatcher(Graph& graph, const UseInfo& u);

  const Node* producer(ValueId v) const;
  // The node defining `v` when it has op `op` (uses not checked).
  const Node* producer(ValueId v, Op op) const;
  // The node defining `v` when it has op `op` and nobody else reads `v`.
  const Node* single_use(ValueId v, Op op) const;
  // `v` is a one-element constant within kConstantTolerance (relative) of `want`.
  bool is_constant(ValueId v, double want) const;
  // The value of `v` when it is a one-element constant.
  std::optional<double> constant_value(ValueId v) const;
  size_t index(const Node* n) const { return static_cast<size_t>(n - g.nodes().data()); }
  std::string name(ValueId v) const { return "%" + names[static_cast<size_t>(v)]; }

  // Every result of `nodes` except the last's (the pattern's result) is read only by `nodes`
  // and is not a graph output; else the reason, e.g. "%3 is also read outside the pattern".
  Verdict read_only_inside(const std::vector<const Node*>& nodes) const;
  // The axes of reduce node `n`, normalised and sorted, when it keeps its dims; else nullopt.
  std::optional<std::vector<int64_t>> kept_axes(const Node& n) const;

  // A constant node holding `value` for a rewrite's prelude: appended to `prelude`, its result a
  // new value of the graph (which may move the graph's value table: take no reference to a type
  // across this call). `uses` and `names` do not know the new value.
  ValueId add_constant(Array value, SourceLoc loc, std::vector<Node>* prelude) const;

 private:
  Graph& graph_;  // the graph `g` views, for add_constant only
};

// Records a near-miss of `pattern` at `root`: "not recognising %7 = div as layer_norm: <why>".
void report_near_miss(PassContext& ctx, const RecognizeMatcher& m, const char* pattern, const Node& root,
                      const std::string& why);

// A recogniser: the rewrite rooted at node `i`, or nullopt (having reported a near-miss if any).
using RecognizeFn = std::optional<Rewrite> (*)(const RecognizeMatcher& m, PassContext& ctx, size_t i);

// Runs every recogniser at every node of `g` (one UseInfo for all) and applies the rewrites.
// Returns how many were applied.
int64_t recognize_all(Graph& g, PassContext& ctx, std::initializer_list<RecognizeFn> recognisers);

}  // namespace fusebox
