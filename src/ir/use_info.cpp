#include "ir/use_info.h"

namespace fusebox {

UseInfo compute_uses(const Graph& g) {
  UseInfo u;
  u.users.resize(g.num_values());
  u.output_uses.assign(g.num_values(), 0);
  u.producer.assign(g.num_values(), -1);
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].inputs) u.users[static_cast<size_t>(v)].push_back(static_cast<int>(i));
    for (ValueId v : nodes[i].outputs) u.producer[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  for (ValueId v : g.outputs()) ++u.output_uses[static_cast<size_t>(v)];
  return u;
}

}  // namespace fusebox
