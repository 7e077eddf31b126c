// decompose-fusion-regions — the exact inverse of the FK passes, for targets that do not run
// transform regions natively (or when decompose_fusion_regions is set).
//
// Matches: every batch_elementwise_region (expanded first into its items and a concat, the
// shapes taken from each item's crop: ir/batch_region.h), every region prologue (split next: ir/region_prologue.h) and transform_region. Produces: its body's steps, in order, at the types the body
// records (the shapes come from the body, not from an assumed rank); the region's result id is
// defined by the last step, so consumers and outputs are untouched. Requires: a verified graph.
// Preserves: inputs, output positions, values (bit for bit: the steps are the region's meaning).
#include "fusion/pass.h"
#include "ir/batch_region.h"
#include "ir/region_prologue.h"
#include "ir/transform_region.h"

namespace fusebox {

Status run_decompose_fusion_regions(Graph& g, PassContext& ctx) {
  FUSEBOX_ASSIGN_OR_RETURN(int64_t batches, expand_batch_regions(g));
  ctx.count("decompose-fusion-regions", "batch_regions", batches);
  FUSEBOX_ASSIGN_OR_RETURN(int64_t prologues, split_region_prologues(g));
  ctx.count("decompose-fusion-regions", "prologues", prologues);
  FUSEBOX_ASSIGN_OR_RETURN(int64_t regions, inline_transform_regions(g));
  ctx.count("decompose-fusion-regions", "transform_regions", regions);
  return Status::ok();
}

}  // namespace fusebox
