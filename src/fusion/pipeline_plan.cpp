#include "fusion/pipeline_plan.h"

#include <utility>


namespace fusebox {

FusionOptions resolve_options(FusionTarget target, const ClaimTable& claims, FusionOptions caller,
                              const EnvLookup* env_or_null) {
  FusionOptions o = env_or_null ? caller.merge_env(*env_or_null) : std::move(caller);
  // Keep only prevents the target from forcing; an explicit unfuse request still stands.
  if (claims.forces_unfuse_regions && !o.keep_elementwise_regions) {
    o.unfuse_elementwise_regions = true;
  }
  if (!o.fusion_limits) o.fusion_limits = default_limits(target);
  return o.apply_native_fk_defaults(target, env_or_null);
}

bool target_keeps_regions(const ClaimTable& claims, const FusionOptions& resolved) {
  return claims.claims(FusedKind::ElementwiseRegion) &&
         !resolved.unfuse_elementwise_regions;
}

std::vector<std::string> plan_pipeline(const ClaimTable& table, const FusionOptions& o) {
  std::vector<std::string> passes;
  auto add = [&passes](std::string_view name) { passes.emplace_back(name); };

  if (o.skip_fusion) {
    add(pass_name::kCanonicalizeNoRecognition);
    add(pass_name::kDce);
    return passes;
  }

  // 1. canonicalize (with recognition of decomposed forms).
  add(pass_name::kCanonicalize);

  // 2. Pattern fusions, each only where the target claims what it emits.
  auto claims = [&table](FusedKind k) { return table.claims(k); };
  // SwiGLU first: fuse-matmul-bias-act would take the gate's silu as its epilogue.
  if (claims(FusedKind::SwiGLU)) add(pass_name::kFuseSwiglu);
  if (claims(FusedKind::MatmulBiasAct)) add(pass_name::kFuseMatmulBiasAct);
  if (claims(FusedKind::MatmulResidual)) add(pass_name::kFuseMatmulResidual);
  if (claims(FusedKind::ConvBiasAct) && !o.disable_conv_bias_act_fusion) {
    add(pass_name::kFuseConvBiasAct);
  }
  if (claims(FusedKind::Attention)) add(pass_name::kFuseAttention);
  if (claims(FusedKind::ResidualLayerNorm)) add(pass_name::kFuseResidualLayerNorm);
  if (claims(FusedKind::ResidualRmsNorm)) add(pass_name::kFuseResidualRmsNorm);

  // 3. Element-wise regions, where they survive; first the reductions with the element-wise
  // steps around them (spec §4.4), so the norm and softmax diamonds are not split up.
  bool keeps_regions = target_keeps_regions(table, o);
  bool native =
      o.native_fk_regions && claims(FusedKind::TransformRegion) && claims(FusedKind::BatchElementwiseRegion);
  // A transpose after element-wise steps moves up into the transform its region will read
  // through a prologue (FK fusion, run natively), so the region writes the transposed layout.
  if (keeps_regions && o.fk_fusion && o.fuse_region_prologue && native && !o.decompose_fusion_regions) {
    add(pass_name::kHoistTransposes);
  }
  if (keeps_regions && claims(FusedKind::ReductionRegion)) add(pass_name::kFuseReductionRegions);
  if (keeps_regions) add(pass_name::kMarkElementwiseRegions);

  // 4. FK passes.
  if (o.fk_fusion) {
    add(pass_name::kMarkBatchSliceRegions);
    add(pass_name::kMarkTransformRegions);
    if (o.fuse_region_prologue) add(pass_name::kFuseRegionPrologue);
    if (o.fuse_batch_preprocess) add(pass_name::kFuseBatchPreprocess);
  }

  // 5. Transform/batch regions the backend will not run natively go back to primitives. Not
  // gated on fk_fusion: such regions may also come from parsed text.
  if (o.decompose_fusion_regions || !native) add(pass_name::kDecomposeFusionRegions);

  // 6. Regions the target does not keep are broken back into primitives.
  if (!keeps_regions) add(pass_name::kUnfuseElementwiseRegions);

  // 7. IO-gated output selection.
  if (claims(FusedKind::FftPeaks) && !o.no_io_peaks_output) {
    add(pass_name::kSelectPeaksOnlyOutputs);
  }

  // 8.
  add(pass_name::kDce);
  return passes;
}

std::string join_pipeline(const std::vector<std::string>& passes) {
  std::string out;
  for (const std::string& p : passes) {
    if (!out.empty()) out += ",";
    out += p;
  }
  return out;
}

}  // namespace fusebox
