// unfuse-elementwise-regions — the exact inverse of mark-elementwise-regions.
// Matches: every elementwise_region. Produces: its body's ops at the original shapes and dtypes,
// the region's result values defined by the ops that computed them (so consumers and outputs are
// untouched); a region with a prologue first gives its transform back as a transform_region
// (ir/region_prologue.h), which stays. Requires: a verified graph. Preserves: inputs, output positions, values.
#include "fusion/pass.h"
#include "ir/batch_region.h"
#include "ir/outline.h"
#include "ir/region_prologue.h"

namespace fusebox {

Status run_unfuse_elementwise_regions(Graph& g, PassContext& ctx) {
  // A batch region's items are element-wise regions: they come back first (ir/batch_region.h).
  FUSEBOX_RETURN_IF_ERROR(expand_batch_regions(g).status());
  int64_t regions = 0;
  for (const Node& n : g.nodes()) regions += n.op == Op::ElementwiseRegion;
  ctx.count("unfuse-elementwise-regions", "regions", regions);
  if (regions == 0) return Status::ok();
  FUSEBOX_RETURN_IF_ERROR(split_region_prologues(g).status());
  return inline_elementwise_regions(g);
}

}  // namespace fusebox
