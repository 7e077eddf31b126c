#include "ir/dead_code.h"

namespace fusebox {

size_t remove_dead_nodes(Graph& g) {
  std::vector<bool> live_value(g.num_values(), false);
  for (ValueId v : g.outputs()) live_value[static_cast<size_t>(v)] = true;
  const auto& nodes = g.nodes();
  std::vector<bool> live_node(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    for (ValueId v : nodes[i].outputs) live_node[i] = live_node[i] || live_value[static_cast<size_t>(v)];
    if (!live_node[i]) continue;
    for (ValueId v : nodes[i].inputs) live_value[static_cast<size_t>(v)] = true;
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (live_node[i]) kept.push_back(nodes[i]);
  size_t removed = nodes.size() - kept.size();
  g.mutable_nodes() = std::move(kept);
  return removed;
}

}  // namespace fusebox
