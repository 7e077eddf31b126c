// Which passes run, in which order, for a target and its options (spec §3), and how a caller's
// options are resolved for a compile (spec §1.3). Pure functions of their arguments: no global
// or thread-local state (spec §5 defect 9), so compiles are re-entrant.
//
//   FusionOptions o = resolve_options(target, claims, caller_options, want_env ? &env : nullptr);
//   std::vector<std::string> passes = plan_pipeline(claims, o);
//
// `claims` is the target's claim table (ir/claim_table.h), which the caller gets from the
// target's backend folder (find_claim_table in backends/registry).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fusion/env.h"
#include "fusion/options.h"
#include "ir/claim_table.h"

namespace fusebox {

// Step names, spelled like the pass files and --passes flags.
namespace pass_name {
inline constexpr std::string_view kCanonicalize = "canonicalize";
// canonicalize without recognition of decomposed forms (the skip_fusion pipeline). The pass
// option rides in braces, MLIR style, so `--passes=` can spell it too.
inline constexpr std::string_view kCanonicalizeNoRecognition = "canonicalize{no-recognition}";
inline constexpr std::string_view kFuseMatmulBiasAct = "fuse-matmul-bias-act";
inline constexpr std::string_view kFuseMatmulResidual = "fuse-matmul-residual";
inline constexpr std::string_view kFuseConvBiasAct = "fuse-conv-bias-act";
inline constexpr std::string_view kFuseAttention = "fuse-attention";
inline constexpr std::string_view kFuseResidualLayerNorm = "fuse-residual-layer-norm";
inline constexpr std::string_view kFuseResidualRmsNorm = "fuse-residual-rms-norm";
inline constexpr std::string_view kFuseSwiglu = "fuse-swiglu";
inline constexpr std::string_view kHoistTransposes = "hoist-transposes";
inline constexpr std::string_view kFuseReductionRegions = "fuse-reduction-regions";
inline constexpr std::string_view kMarkElementwiseRegions = "mark-elementwise-regions";
inline constexpr std::string_view kMarkBatchSliceRegions = "mark-batch-slice-regions";
inline constexpr std::string_view kMarkTransformRegions = "mark-transform-regions";
inline constexpr std::string_view kFuseRegionPrologue = "fuse-region-prologue";
inline constexpr std::string_view kFuseBatchPreprocess = "fuse-batch-preprocess";
inline constexpr std::string_view kDecomposeFusionRegions = "decompose-fusion-regions";
inline constexpr std::string_view kUnfuseElementwiseRegions = "unfuse-elementwise-regions";
inline constexpr std::string_view kSelectPeaksOnlyOutputs = "select-peaks-only-outputs";
inline constexpr std::string_view kDce = "dce";
}  // namespace pass_name

// Option resolution at compile, in order: merge_env (only when env_or_null is given: the
// caller asked for environment overrides) -> the target's forced unfuse of element-wise
// regions unless keep_elementwise_regions -> fusion_limits defaulted by target when unset ->
// apply_native_fk_defaults (with the same env). The result always has fusion_limits set.
FusionOptions resolve_options(FusionTarget target, const ClaimTable& claims, FusionOptions caller,
                              const EnvLookup* env_or_null);

// True when element-wise regions survive the pipeline on this target: it claims
// elementwise_region and the options do not unfuse them.
bool target_keeps_regions(const ClaimTable& claims, const FusionOptions& resolved);

// The ordered pass names of spec §3 for already resolved options. skip_fusion gives
// {canonicalize{no-recognition}, dce}.
std::vector<std::string> plan_pipeline(const ClaimTable& claims, const FusionOptions& resolved);

// "a,b,c": the form --passes= takes.
std::string join_pipeline(const std::vector<std::string>& passes);

}  // namespace fusebox
