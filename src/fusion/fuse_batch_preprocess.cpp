// fuse-batch-preprocess — merges N element-wise regions with one body over N crops of one source,
// concatenated in item order, into one batch_elementwise_region (spec §4.3; ir/batch_region.h).
//
// Matches: a concat whose every operand is an item: an elementwise_region with a prologue that
// crops (one slice step), optionally followed by one transform_region (the per-item
// transpose/reshape), each intermediate read only by the next step. Requires: all items read the
// same operands (one source, the same shared operands); item i's body equals item 0's body with
// item i's crop rectangle, compared fully (steps, attributes, types: printed text); the concat
// lists the items in their program order (defect 4: the table is written in concat order, and a
// permuted concat is refused rather than silently reordered). Produces: one batch node in place
// of the concat, its body item 0, its table every item's crop and output offset. Preserves:
// inputs, output positions, values (bit for bit: expand_batch_regions is the inverse).
//
//   classify     concat nodes whose operands look like items
//   decide       verdict_for(): readers, sources, order, shapes, bodies
//   materialize  the batch node replaces the concat; the items' nodes are dropped
#include <memory>
#include <optional>
#include <variant>

#include "fusion/pass.h"
#include "ir/batch_region.h"
#include "ir/outline.h"
#include "ir/printer.h"
#include "ir/region_prologue.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

constexpr std::string_view kPattern = "batch_preprocess";

struct Item {
  int region = -1;     // node index of the elementwise_region with the crop
  int transform = -1;  // node index of the per-item transform_region, -1 when none
};

struct Refusal {
  MissReason reason;
  std::string why;
};

// The item feeding concat operand `v`, or nullopt when it is not shaped like one.
std::optional<Item> item_of(const Graph& g, const UseInfo& uses, ValueId v) {
  Item it;
  int p = uses.producer[size_t(v)];
  if (p < 0) return std::nullopt;
  if (g.nodes()[size_t(p)].op == Op::TransformRegion) {
    it.transform = p;
    p = uses.producer[size_t(g.nodes()[size_t(p)].inputs[0])];
    if (p < 0) return std::nullopt;
  }
  const Node& r = g.nodes()[size_t(p)];
  if (r.op != Op::ElementwiseRegion || r.outputs.size() != 1 || !prologue_crop(r)) return std::nullopt;
  it.region = p;
  return it;
}

// The body of a batch whose item 0 is `it`: the region (and transform) over fresh parameters.
std::shared_ptr<Graph> item_body(const Graph& g, const Item& it) {
  auto body = std::make_shared<Graph>("item");
  const Node& r = g.nodes()[size_t(it.region)];
  std::vector<ValueId> params;
  for (size_t j = 0; j < r.inputs.size(); ++j) {
    params.push_back(body->add_input("in" + std::to_string(j), g.type(r.inputs[j])));
  }
  ValueId y = body->add_value(g.type(r.outputs[0]));
  body->add_node(Node{r.op, params, {y}, r.attrs, r.body, r.loc});
  if (it.transform >= 0) {
    const Node& t = g.nodes()[size_t(it.transform)];
    ValueId z = body->add_value(g.type(t.outputs[0]));
    body->add_node(Node{t.op, {y}, {z}, t.attrs, t.body, t.loc});
    y = z;
  }
  body->add_output(y);
  return body;
}

// The first line where two printed bodies differ.
std::string first_difference(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  size_t from = a.rfind('\n', i == 0 ? 0 : i - 1);
  from = from == std::string::npos ? 0 : from + 1;
  size_t to = b.find('\n', i);
  std::string line = b.substr(from, to == std::string::npos ? std::string::npos : to - from);
  size_t s = line.find_first_not_of(' ');
  return s == std::string::npos ? line : line.substr(s);
}

std::variant<Node, Refusal> verdict_for(const Graph& g, const UseInfo& uses, const Node& concat,
                                        const std::vector<Item>& items, const std::vector<std::string>& names) {
  auto name = [&](ValueId v) { return "%" + names[size_t(v)]; };
  // Every intermediate value is read once, by the next step of its item.
  for (size_t i = 0; i < items.size(); ++i) {
    std::vector<ValueId> inner{g.nodes()[size_t(items[i].region)].outputs[0]};
    if (items[i].transform >= 0) inner.push_back(g.nodes()[size_t(items[i].transform)].outputs[0]);
    for (ValueId v : inner) {
      if (uses.is_output(v)) {
        return Refusal{MissReason::EscapesAsOutput, "item " + std::to_string(i) + ": " + name(v) + " is also a graph output"};
      }
      if (uses.users[size_t(v)].size() != 1) {
        return Refusal{MissReason::MultiConsumer, "item " + std::to_string(i) + ": " + name(v) + " is read elsewhere (" +
                                                      std::to_string(uses.users[size_t(v)].size()) + " readers)"};
      }
    }
  }
  const Node& r0 = g.nodes()[size_t(items[0].region)];
  const size_t k = size_t(prologue_input(r0));
  for (size_t i = 1; i < items.size(); ++i) {
    const Node& ri = g.nodes()[size_t(items[i].region)];
    if (size_t(prologue_input(ri)) != k || ri.inputs[k] != r0.inputs[k]) {
      return Refusal{MissReason::NotRecognised, "different sources: item " + std::to_string(i) + " crops " +
                                                    name(ri.inputs[size_t(prologue_input(ri))]) + ", item 0 crops " +
                                                    name(r0.inputs[k])};
    }
    if (ri.inputs != r0.inputs) {
      return Refusal{MissReason::NotRecognised, "item " + std::to_string(i) + " reads other operands than item 0"};
    }
    if (items[i].region <= items[i - 1].region) {
      return Refusal{MissReason::NotRecognised, "concat order is not item order: operand " + std::to_string(i) +
                                                    " comes from a region placed before operand " + std::to_string(i - 1) +
                                                    "'s"};
    }
  }
  // The table: each item's crop; item i written at i * extent along the concat axis.
  const TensorType& part = g.type(concat.inputs[0]);
  int64_t axis = concat.attr_i64("axis");
  if (axis < 0) axis += int64_t(part.shape.size());
  if (axis < 0 || size_t(axis) >= part.shape.size() || !part.shape[size_t(axis)].is_static()) {
    return Refusal{MissReason::ShapeMismatch, "the concat axis is not a static axis of the items"};
  }
  std::vector<int64_t> starts, ends, offsets;
  for (size_t i = 0; i < items.size(); ++i) {
    const Node* crop = prologue_crop(g.nodes()[size_t(items[i].region)]);
    const auto& s = crop->attr_i64s("starts");
    const auto& e = crop->attr_i64s("ends");
    starts.insert(starts.end(), s.begin(), s.end());
    ends.insert(ends.end(), e.begin(), e.end());
    offsets.push_back(int64_t(i) * part.shape[size_t(axis)].value());
  }
  std::string label = "batch_" + r0.attr_str("name");
  Node batch{Op::BatchElementwiseRegion, r0.inputs, concat.outputs,
             {{"name", label}, {"axis", axis}, {"starts", starts}, {"ends", ends}, {"offsets", offsets}},
             item_body(g, items[0]), concat.loc};
  // Item i of the batch must be exactly what the graph computes for item i.
  for (size_t i = 0; i < items.size(); ++i) {
    Expected<Graph> mine = batch_item_body(batch, i);
    if (!mine) return Refusal{MissReason::ShapeMismatch, "item " + std::to_string(i) + ": " + mine.status().message()};
    std::string want = print_graph(*item_body(g, items[i])), have = print_graph(*mine);
    if (want != have) {
      return Refusal{MissReason::NotRecognised, "item " + std::to_string(i) + "'s body differs from item 0's at: " +
                                                    first_difference(have, want)};
    }
  }
  std::vector<TensorType> in;
  for (ValueId v : batch.inputs) in.push_back(g.type(v));
  Expected<std::vector<TensorType>> out = infer_batch_region(batch, in);
  if (!out || !((*out)[0] == g.type(concat.outputs[0]))) {
    return Refusal{MissReason::ShapeMismatch, "the batch's result type differs from the concat's"};
  }
  return batch;
}

}  // namespace

Status run_fuse_batch_preprocess(Graph& g, PassContext& ctx) {
  UseInfo uses = compute_uses(g);
  std::vector<std::string> names = value_display_names(g);
  std::vector<bool> drop(g.nodes().size(), false);
  std::vector<std::pair<size_t, Node>> batches;  // concat index -> its batch node
  for (size_t c = 0; c < g.nodes().size(); ++c) {
    const Node& concat = g.nodes()[c];
    if (concat.op != Op::Concat || concat.inputs.size() < 2) continue;
    std::vector<Item> items;
    for (ValueId v : concat.inputs) {
      std::optional<Item> it = item_of(g, uses, v);
      if (!it) break;
      items.push_back(*it);
    }
    if (items.size() != concat.inputs.size()) {
      if (items.empty()) continue;  // not a batch of crops at all
      ctx.remarks.miss(std::string(kPattern), describe_node(g, concat, names), MissReason::NotRecognised,
                       "not batching: concat operand " + std::to_string(items.size()) +
                           " is not a cropped element-wise region");
      continue;
    }
    auto verdict = verdict_for(g, uses, concat, items, names);
    if (const Refusal* no = std::get_if<Refusal>(&verdict)) {
      ctx.remarks.miss(std::string(kPattern), describe_node(g, concat, names), no->reason, "not batching: " + no->why);
      continue;
    }
    for (const Item& it : items) {
      drop[size_t(it.region)] = true;
      if (it.transform >= 0) drop[size_t(it.transform)] = true;
    }
    batches.emplace_back(c, std::move(std::get<Node>(verdict)));
  }
  ctx.count("fuse-batch-preprocess", "batches", int64_t(batches.size()));
  if (batches.empty()) return Status::ok();
  std::vector<Node> out;
  size_t next = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (next < batches.size() && batches[next].first == i) {
      out.push_back(std::move(batches[next++].second));
    } else if (!drop[i]) {
      out.push_back(std::move(g.mutable_nodes()[i]));
    }
  }
  g.mutable_nodes() = std::move(out);
  return sort_topologically(g);
}

}  // namespace fusebox
