// Region prologues (region_prologue.h): splitting a region into its transform and its
// element-wise part, attaching a transform to a region, and the graph-wide inverse.
#include "ir/region_prologue.h"

#include <map>

#include "ir/check.h"
#include "ir/outline.h"

namespace fusebox {

int64_t prologue_input(const Node& region) {
  if (region.op != Op::ElementwiseRegion) return -1;
  const AttrValue* v = region.attrs.find("prologue_input");
  if (!v) return -1;
  const int64_t* k = std::get_if<int64_t>(v);
  return k ? *k : -1;
}

namespace {

// Copies `from`'s parameters, nodes and outputs into a new graph; `param_type` and `first` let
// the caller replace one parameter's type and skip leading nodes; `remap` pre-seeds ids.
struct BodyCopy {
  std::shared_ptr<Graph> body;
  std::map<ValueId, ValueId> map;
};

void copy_nodes(const Graph& from, size_t first, BodyCopy& c) {
  for (size_t i = first; i < from.nodes().size(); ++i) {
    const Node& n = from.nodes()[i];
    Node m{n.op, {}, {}, n.attrs, n.body, n.loc};
    for (ValueId v : n.inputs) m.inputs.push_back(c.map.at(v));
    for (ValueId v : n.outputs) {
      ValueId nv = c.body->add_value(from.type(v), from.value(v).name);
      c.map[v] = nv;
      m.outputs.push_back(nv);
    }
    c.body->add_node(std::move(m));
  }
  for (ValueId v : from.outputs()) c.body->add_output(c.map.at(v));
}

}  // namespace

Expected<PrologueParts> split_prologue(const Node& region) {
  const int64_t k = prologue_input(region);
  auto bad = [](const std::string& why) { return Status::invalid("region prologue: " + why); };
  if (k < 0) return bad("the region has no prologue_input");
  if (!region.body) return bad("the region has no body");
  const Graph& body = *region.body;
  if (static_cast<size_t>(k) >= body.inputs().size()) {
    return bad("prologue_input = " + std::to_string(k) + " but the body takes " +
               std::to_string(body.inputs().size()) + " values");
  }
  const ValueId param = body.inputs()[static_cast<size_t>(k)];
  if (body.nodes().empty() || body.nodes()[0].op != Op::TransformRegion || !body.nodes()[0].body ||
      body.nodes()[0].inputs.size() != 1 || body.nodes()[0].inputs[0] != param ||
      body.nodes()[0].outputs.size() != 1) {
    return bad("the body must open with a transform_region over parameter " + std::to_string(k));
  }
  for (size_t i = 1; i < body.nodes().size(); ++i)
    for (ValueId v : body.nodes()[i].inputs)
      if (v == param) return bad("parameter " + std::to_string(k) + " is read by more than its transform");
  for (ValueId v : body.outputs())
    if (v == param) return bad("parameter " + std::to_string(k) + " is returned untransformed");

  const Node& t = body.nodes()[0];
  PrologueParts parts;
  parts.input = static_cast<size_t>(k);
  parts.read = body.type(t.outputs[0]);
  parts.transform = Node{Op::TransformRegion, {}, {}, t.attrs, t.body, t.loc};
  BodyCopy c{std::make_shared<Graph>(body.name()), {}};
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    ValueId v = body.inputs()[i];
    if (i == parts.input) {
      c.map[t.outputs[0]] = c.body->add_input(body.value(v).name, TensorType{parts.read.dtype, {}});
    } else {
      c.map[v] = c.body->add_input(body.value(v).name, body.type(v));
    }
  }
  copy_nodes(body, 1, c);
  Attrs attrs = region.attrs;
  attrs.erase("prologue_input");
  parts.region = Node{Op::ElementwiseRegion, region.inputs, region.outputs, std::move(attrs), c.body, region.loc};
  return parts;
}

Node attach_prologue(const Node& region, size_t k, const Node& transform, ValueId source,
                     const TensorType& source_type) {
  FUSEBOX_CHECK(region.body && transform.body && k < region.body->inputs().size()) << "attach_prologue: arguments";
  const Graph& body = *region.body;
  BodyCopy c{std::make_shared<Graph>(body.name()), {}};
  ValueId param = -1;
  for (size_t i = 0; i < body.inputs().size(); ++i) {
    ValueId v = body.inputs()[i];
    ValueId nv = c.body->add_input(body.value(v).name, i == k ? source_type : body.type(v));
    if (i == k) param = nv; else c.map[v] = nv;
  }
  const Graph& tb = *transform.body;
  ValueId read = c.body->add_value(tb.type(tb.outputs()[0]), body.value(body.inputs()[k]).name + "_read");
  c.body->add_node(Node{Op::TransformRegion, {param}, {read}, transform.attrs, transform.body, transform.loc});
  c.map[body.inputs()[k]] = read;
  copy_nodes(body, 0, c);
  Node out{Op::ElementwiseRegion, region.inputs, region.outputs, region.attrs, c.body, region.loc};
  out.inputs[k] = source;
  out.attrs.set("prologue_input", static_cast<int64_t>(k));
  return out;
}

Expected<int64_t> split_region_prologues(Graph& g) {
  for (const Node& n : g.nodes()) {  // check every region before the graph is touched
    if (prologue_input(n) >= 0) FUSEBOX_RETURN_IF_ERROR(split_prologue(n).status());
  }
  int64_t count = 0;
  std::vector<Node> nodes = std::move(g.mutable_nodes());
  std::vector<Node> out;
  for (Node& n : nodes) {
    if (prologue_input(n) < 0) {
      out.push_back(std::move(n));
      continue;
    }
    PrologueParts parts = *split_prologue(n);
    ValueId read = g.add_value(parts.read);
    parts.transform.inputs = {n.inputs[parts.input]};
    parts.transform.outputs = {read};
    parts.region.inputs[parts.input] = read;
    out.push_back(std::move(parts.transform));
    out.push_back(std::move(parts.region));
    ++count;
  }
  g.mutable_nodes() = std::move(out);
  FUSEBOX_RETURN_IF_ERROR(sort_topologically(g));
  return count;
}

}  // namespace fusebox
