// dce — removes nodes whose results are neither read by a live node nor returned.
// Matches: any node without live uses (graph outputs count as uses). Produces: the same graph
// without them. Requires: a verified graph. Preserves: inputs, output positions, every live value.
#include "fusion/pass.h"
#include "ir/dead_code.h"

namespace fusebox {

Status run_dce(Graph& g, PassContext& ctx) {
  ctx.count("dce", "removed", static_cast<int64_t>(remove_dead_nodes(g)));
  return Status::ok();
}

}  // namespace fusebox
