// batch_elementwise_region (batch_region.h): its crop table, item bodies, result types and the
// graph-wide expansion back into per-item regions and a concat.
#include "ir/batch_region.h"

#include <algorithm>
#include <map>

#include "ir/outline.h"
#include "ir/region_prologue.h"
#include "ir/shape_inference.h"

namespace fusebox {

namespace {

Status bad(const std::string& why) { return Status::invalid("batch_elementwise_region: " + why); }

// The transform body of a region with a prologue (null when the region has none).
Graph* prologue_transform_body(const Node& region) {
  if (prologue_input(region) < 0 || !region.body || region.body->nodes().empty()) return nullptr;
  const Node& t = region.body->nodes()[0];
  return t.op == Op::TransformRegion ? t.body.get() : nullptr;
}

// Checks the body's shape (batch_region.h) and returns its region node.
Expected<const Node*> body_region(const Node& batch) {
  if (!batch.body) return bad("has no body");
  const Graph& body = *batch.body;
  if (body.inputs().size() != batch.inputs.size()) {
    return bad("body takes " + std::to_string(body.inputs().size()) + " values but the node has " +
               std::to_string(batch.inputs.size()) + " operands");
  }
  const auto& nodes = body.nodes();
  if (nodes.empty() || nodes.size() > 2 || prologue_input(nodes[0]) < 0 || nodes[0].outputs.size() != 1) {
    return bad("body must be one elementwise_region with a prologue (one result), optionally followed by "
               "one transform_region");
  }
  if (nodes.size() == 2 && (nodes[1].op != Op::TransformRegion || nodes[1].inputs.size() != 1 ||
                            nodes[1].inputs[0] != nodes[0].outputs[0])) {
    return bad("the body's second node must be a transform_region over the item region's result");
  }
  if (body.outputs().size() != 1 || body.outputs()[0] != nodes.back().outputs[0]) {
    return bad("body must return the result of its last node");
  }
  std::string why;
  if (!prologue_crop(nodes[0], &why)) return bad(why);
  return &nodes[0];
}

}  // namespace

const Node* prologue_crop(const Node& region, std::string* why) {
  const Graph* tb = prologue_transform_body(region);
  if (!tb) {
    if (why) *why = "the region has no prologue";
    return nullptr;
  }
  const Node* crop = nullptr;
  for (const Node& n : tb->nodes()) {
    if (n.op != Op::Slice) continue;
    if (crop) {
      if (why) *why = "the prologue has more than one slice";
      return nullptr;
    }
    crop = &n;
  }
  if (!crop && why) *why = "the prologue has no slice (no crop)";
  if (crop && crop->has_attr("steps")) {
    for (int64_t s : crop->attr_i64s("steps"))
      if (s != 1) {
        if (why) *why = "the prologue's slice has steps";
        return nullptr;
      }
  }
  return crop;
}

Expected<BatchTable> batch_table(const Node& batch) {
  FUSEBOX_ASSIGN_OR_RETURN(const Node* region, body_region(batch));
  const Node* crop = prologue_crop(*region);
  BatchTable t;
  t.axis = batch.attr_i64("axis");
  t.starts = batch.attr_i64s("starts");
  t.ends = batch.attr_i64s("ends");
  t.offsets = batch.attr_i64s("offsets");
  t.items = t.offsets.size();
  t.width = crop->attr_i64s("starts").size();
  if (t.items == 0) return bad("the table has no items (offsets is empty)");
  if (t.starts.size() != t.items * t.width || t.ends.size() != t.items * t.width) {
    return bad("starts and ends need " + std::to_string(t.width) + " values per item (" +
               std::to_string(t.items) + " items), they have " + std::to_string(t.starts.size()) + " and " +
               std::to_string(t.ends.size()));
  }
  return t;
}

Status retype_nodes(Graph& g, size_t count) {
  for (size_t i = 0; i < std::min(count, g.nodes().size()); ++i) {
    const Node& n = g.nodes()[i];
    std::vector<TensorType> in;
    for (ValueId v : n.inputs) in.push_back(g.type(v));
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> out, infer_result_types(n, in));
    if (out.size() != n.outputs.size()) return Status::invalid(std::string(n.info().keyword) + ": result count");
    for (size_t r = 0; r < out.size(); ++r) g.value(n.outputs[r]).type = out[r];
  }
  return Status::ok();
}

Expected<Graph> batch_item_body(const Node& batch, size_t i) {
  FUSEBOX_ASSIGN_OR_RETURN(BatchTable t, batch_table(batch));
  if (i >= t.items) return bad("item " + std::to_string(i) + " of " + std::to_string(t.items));
  Graph body = *batch.body;  // deep copy, nested bodies included
  Node& region = body.mutable_nodes()[0];
  Graph* region_body = region.body.get();
  Graph* tb = region_body->mutable_nodes()[0].body.get();
  for (Node& n : tb->mutable_nodes()) {
    if (n.op != Op::Slice) continue;
    auto row = [&](const std::vector<int64_t>& v) {
      return std::vector<int64_t>(v.begin() + std::ptrdiff_t(i * t.width), v.begin() + std::ptrdiff_t((i + 1) * t.width));
    };
    n.attrs.set("starts", row(t.starts));
    n.attrs.set("ends", row(t.ends));
  }
  std::string item = "item " + std::to_string(i);
  Status s = retype_nodes(*tb);
  if (s.is_ok()) s = retype_nodes(*region_body, 1);  // the transform; the rest are scalar steps
  if (s.is_ok()) s = retype_nodes(body);
  if (!s.is_ok()) return s.with_context("batch_elementwise_region: " + item);
  return body;
}

Expected<std::vector<TensorType>> infer_batch_region(const Node& batch, std::span<const TensorType> in) {
  FUSEBOX_ASSIGN_OR_RETURN(BatchTable t, batch_table(batch));
  const Graph& body = *batch.body;
  for (size_t j = 0; j < in.size(); ++j) {
    const TensorType& want = body.type(body.inputs()[j]);
    if (in[j].dtype != want.dtype || in[j].shape != want.shape) {
      return bad("operand " + std::to_string(j) + " is " + in[j].to_string() + " but the body reads " +
                 want.to_string());
    }
  }
  TensorType item0;
  for (size_t i = 0; i < t.items; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(Graph b, batch_item_body(batch, i));
    const TensorType& ti = b.type(b.outputs()[0]);
    if (i == 0) {
      item0 = ti;
    } else if (!(ti.dtype == item0.dtype && ti.shape == item0.shape)) {
      return bad("item " + std::to_string(i) + " is " + ti.to_string() + " but item 0 is " + item0.to_string() +
                 " (crops of different sizes need a resize to one size)");
    }
  }
  const int64_t rank = static_cast<int64_t>(item0.shape.size());
  if (t.axis < 0 || t.axis >= rank) return bad("axis " + std::to_string(t.axis) + " is outside the item's rank " + std::to_string(rank));
  const Dim& d = item0.shape[size_t(t.axis)];
  if (!d.is_static()) return bad("the item's extent on the batch axis is not static");
  const int64_t extent = d.value();
  for (size_t i = 0; i < t.items; ++i) {
    if (t.offsets[i] != int64_t(i) * extent) {
      return bad("offsets[" + std::to_string(i) + "] is " + std::to_string(t.offsets[i]) + ", item order needs " +
                 std::to_string(int64_t(i) * extent));
    }
  }
  TensorType out = item0;
  out.shape[size_t(t.axis)] = Dim(extent * int64_t(t.items));
  return std::vector<TensorType>{out};
}

Expected<int64_t> expand_batch_regions(Graph& g) {
  // Every item of every batch is built before the graph is touched.
  std::map<size_t, std::vector<Graph>> items;
  for (size_t k = 0; k < g.nodes().size(); ++k) {
    const Node& n = g.nodes()[k];
    if (n.op != Op::BatchElementwiseRegion) continue;
    FUSEBOX_ASSIGN_OR_RETURN(BatchTable t, batch_table(n));
    for (size_t i = 0; i < t.items; ++i) {
      FUSEBOX_ASSIGN_OR_RETURN(Graph b, batch_item_body(n, i));
      items[k].push_back(std::move(b));
    }
  }
  if (items.empty()) return 0;
  std::vector<Node> nodes = std::move(g.mutable_nodes());
  std::vector<Node> out;
  for (size_t k = 0; k < nodes.size(); ++k) {
    Node& n = nodes[k];
    auto it = items.find(k);
    if (it == items.end()) {
      out.push_back(std::move(n));
      continue;
    }
    std::vector<ValueId> parts;
    for (const Graph& b : it->second) {
      std::map<ValueId, ValueId> map;
      for (size_t j = 0; j < n.inputs.size(); ++j) map[b.inputs()[j]] = n.inputs[j];
      for (const Node& m : b.nodes()) {
        Node c{m.op, {}, {}, m.attrs, m.body, n.loc};
        for (ValueId v : m.inputs) c.inputs.push_back(map.at(v));
        for (ValueId v : m.outputs) c.outputs.push_back(map[v] = g.add_value(b.type(v)));
        out.push_back(std::move(c));
      }
      parts.push_back(map.at(b.outputs()[0]));
    }
    out.push_back(Node{Op::Concat, parts, n.outputs, {{"axis", n.attr_i64("axis")}}, nullptr, n.loc});
  }
  g.mutable_nodes() = std::move(out);
  FUSEBOX_RETURN_IF_ERROR(sort_topologically(g));
  return static_cast<int64_t>(items.size());
}

}  // namespace fusebox
