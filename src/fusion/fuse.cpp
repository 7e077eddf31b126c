#include "fusion/fuse.h"

#include "fusion/pipeline.h"
#include "fusion/pipeline_plan.h"
#include "ir/check.h"

namespace fusebox {

Fuse::Fuse(FusionTarget target, const ClaimTable& claims) : target_(target), claims_(&claims) {
  FUSEBOX_CHECK(claims.target == target_name(target))
      << "Fuse: the claim table of " << claims.target << " handed in for target " << target_name(target);
}

FusionOptions Fuse::resolved_options() const {
  FusionOptions base = options_ ? *options_ : FusionOptions::for_target(target_, env_ ? *env_ : EnvLookup{});
  if (limits_) base.fusion_limits = limits_;
  if (skip_) base.skip_fusion = true;
  return resolve_options(target_, *claims_, base, env_ ? &*env_ : nullptr);
}

std::vector<std::string> Fuse::passes() const { return plan_pipeline(*claims_, resolved_options()); }

Expected<FuseResult> Fuse::run_with_report(const Graph& g) const {
  PassContext ctx;
  ctx.target = target_;
  ctx.claims = claims_;
  ctx.options = resolved_options();
  ctx.evaluate = evaluate_;
  ctx.recognize_patterns = !ctx.options.skip_fusion;
  PipelineHooks hooks;
  hooks.verify_each = verify_each_;
  hooks.skip_unavailable = true;
  Graph out = g;
  FUSEBOX_RETURN_IF_ERROR(run_pipeline(out, plan_pipeline(*claims_, ctx.options), ctx, hooks));
  FusionReport report = make_fusion_report(g, out, target_, ctx.remarks, ctx.stats, sizes_);
  return FuseResult{std::move(out), std::move(report)};
}

Expected<Graph> Fuse::run(const Graph& g) const {
  FUSEBOX_ASSIGN_OR_RETURN(FuseResult r, run_with_report(g));
  return std::move(r.graph);
}

Expected<Graph> fuse(const Graph& g, FusionTarget target, const ClaimTable& claims) {
  return Fuse(target, claims).run(g);
}

}  // namespace fusebox
