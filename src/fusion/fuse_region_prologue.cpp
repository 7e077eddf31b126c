// fuse-region-prologue — folds a transform_region into the read of the element-wise region it
// feeds (spec §4.3): the region then reads the transform's source and maps each of its output
// coordinates back through the transform, so the transformed tensor is never written out.
//
// Matches: a transform_region, or a lone index-only step (slice, transpose, flip, pad, resize: a
// chain of one, which becomes a one-step transform first), whose result has exactly one reader,
// not returned, and that reader is an elementwise_region (reading it as operand k, with no
// prologue yet) or a lone element-wise op of any arity (which becomes a one-step region first:
// spec §4.3 names the unary case; `slice -> add bias` is the same pattern one operand wider). A
// region fed by several such transforms takes one: the one whose result has the region's shape
// (the large read), else the first; the others stay transform regions, reported. Produces: the region with
// `prologue_input = k`, operand k the transform's source and the transform opening its body
// (ir/region_prologue.h). Requires: a verified graph (run after mark-transform-regions).
// Preserves: inputs, output positions, values (bit for bit: split_prologue is the inverse, and
// decompose-fusion-regions / unfuse-elementwise-regions apply it).
//
//   classify     transform_region nodes and lone steps; element-wise readers
//   decide       verdict_for(): one reader, not an output, a region (or lone op) without prologue;
//                then one transform per reader
//   materialize  attach_prologue() per decision, transforms dropped, all at once
#include <algorithm>
#include <map>
#include <variant>

#include "fusion/pass.h"
#include "ir/outline.h"
#include "ir/region_prologue.h"
#include "ir/transform_region.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

constexpr std::string_view kPattern = "region_prologue";

struct Decision {
  size_t transform;  // node index of the transform_region
  size_t reader;     // node index of its reader
  size_t operand;    // k
};

struct Refusal {
  MissReason reason;
  std::string why;
};

// Whether a node outside any transform_region is a chain of one step worth a prologue: a reshape
// alone moves nothing, and a cast alone is a step the region takes itself.
bool is_lone_transform(const Graph& g, const Node& n) {
  return n.op != Op::Reshape && n.op != Op::Cast && is_transform_step(g, n);
}

// Whether a lone op can become a one-step region: an element-wise step with one result.
bool is_lone_elementwise(const Graph& g, const Node& n) {
  return n.op != Op::ElementwiseRegion && n.outputs.size() == 1 && is_region_step(g, n);
}

// Decides for the transform at `t`: the decision, or the refusal with its reason.
std::variant<Decision, Refusal> verdict_for(const Graph& g, const UseInfo& uses, size_t t,
                                            const std::vector<std::string>& names) {
  ValueId v = g.nodes()[t].outputs[0];
  std::string value = "%" + names[static_cast<size_t>(v)];
  if (uses.is_output(v)) return Refusal{MissReason::EscapesAsOutput, value + " is also a graph output"};
  const auto& readers = uses.users[static_cast<size_t>(v)];
  if (readers.empty()) return Refusal{MissReason::MultiConsumer, value + " has no reader"};
  if (readers.size() != 1) {
    return Refusal{MissReason::MultiConsumer, value + " has " + std::to_string(readers.size()) + " readers"};
  }
  size_t r = static_cast<size_t>(readers[0]);
  const Node& reader = g.nodes()[r];
  std::string who = describe_node(g, reader, names);
  if (reader.op != Op::ElementwiseRegion && !is_lone_elementwise(g, reader)) {
    return Refusal{MissReason::NotRecognised, value + "'s reader " + who + " is not an element-wise region or op"};
  }
  if (prologue_input(reader) >= 0) {
    return Refusal{MissReason::NotRecognised, who + " already reads another operand through a prologue"};
  }
  for (size_t k = 0; k < reader.inputs.size(); ++k)
    if (reader.inputs[k] == v) return Decision{t, r, k};
  return Refusal{MissReason::NotRecognised, value + " is not an operand of " + who};
}

// A lone element-wise op as a one-step region over rank-0 values (its operands broadcast as the
// op's do).
Node one_step_region(const Graph& g, const Node& n) {
  auto body = std::make_shared<Graph>(g.name());
  std::vector<ValueId> xs;
  for (size_t k = 0; k < n.inputs.size(); ++k)
    xs.push_back(body->add_input("x" + std::to_string(k), TensorType{g.type(n.inputs[k]).dtype, {}}));
  ValueId y = body->add_value(TensorType{g.type(n.outputs[0]).dtype, {}});
  body->add_node(Node{n.op, std::move(xs), {y}, n.attrs, nullptr, n.loc});
  body->add_output(y);
  std::string name = "fused_" + std::string(n.info().keyword);
  return Node{Op::ElementwiseRegion, n.inputs, n.outputs, {{"name", name}}, body, n.loc};
}

}  // namespace

Status run_fuse_region_prologue(Graph& g, PassContext& ctx) {
  const auto& nodes = g.nodes();
  UseInfo uses = compute_uses(g);
  std::vector<std::string> names = value_display_names(g);
  auto refuse = [&](size_t i, const Refusal& no) {
    std::string value = "%" + names[static_cast<size_t>(nodes[i].outputs[0])];
    ctx.remarks.miss(std::string(kPattern), describe_node(g, nodes[i], names), no.reason,
                     "not folding " + value + " into its reader: " + no.why);
  };
  // Per reader, one prologue: the transform whose result has the region's shape (the large
  // read) rather than a broadcast operand's, else the first in program order.
  std::map<size_t, Decision> chosen;
  std::vector<Decision> others;
  auto reads_into_region = [&](size_t i) {
    const auto& readers = uses.users[size_t(nodes[i].outputs[0])];
    return std::any_of(readers.begin(), readers.end(),
                       [&](int r) { return nodes[size_t(r)].op == Op::ElementwiseRegion; });
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const bool lone = is_lone_transform(g, nodes[i]);
    if (nodes[i].op != Op::TransformRegion && !lone) continue;
    auto verdict = verdict_for(g, uses, i, names);
    if (const Refusal* no = std::get_if<Refusal>(&verdict)) {
      if (!lone || reads_into_region(i)) refuse(i, *no);  // a lone step elsewhere is no near miss
      continue;
    }
    const Decision& d = std::get<Decision>(verdict);
    auto full = [&](const Decision& c) {
      return g.type(nodes[c.transform].outputs[0]).shape == g.type(nodes[c.reader].outputs[0]).shape;
    };
    auto [at, first] = chosen.emplace(d.reader, d);
    if (first) continue;
    if (full(d) && !full(at->second))
      std::swap(at->second, others.emplace_back(d));
    else
      others.push_back(d);
  }
  for (const Decision& d : others) {
    refuse(d.transform, Refusal{MissReason::NotRecognised,
                                describe_node(g, nodes[d.reader], names) + " reads %" +
                                    names[size_t(nodes[chosen.at(d.reader).transform].outputs[0])] +
                                    " through its prologue (one per region)"});
  }
  std::vector<Decision> decisions;
  for (const auto& [reader, d] : chosen) decisions.push_back(d);
  ctx.count("fuse-region-prologue", "prologues", static_cast<int64_t>(decisions.size()));
  if (decisions.empty()) return Status::ok();

  std::map<size_t, Node> replaced;  // reader index -> its region with the prologue
  std::vector<bool> drop(nodes.size(), false);
  for (const Decision& d : decisions) {
    const Node& t = nodes[d.transform];
    const Node& reader = nodes[d.reader];
    Node region = reader.op == Op::ElementwiseRegion ? reader : one_step_region(g, reader);
    const Node chain =
        t.op == Op::TransformRegion ? t : transform_step_region(t, g.type(t.inputs[0]), g.type(t.outputs[0]));
    replaced[d.reader] = attach_prologue(region, d.operand, chain, t.inputs[0], g.type(t.inputs[0]));
    drop[d.transform] = true;
  }
  std::vector<Node> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (drop[i]) continue;
    auto it = replaced.find(i);
    out.push_back(it == replaced.end() ? std::move(g.mutable_nodes()[i]) : std::move(it->second));
  }
  g.mutable_nodes() = std::move(out);
  return sort_topologically(g);
}

}  // namespace fusebox
