// Tests of the claim tables (spec §2), option resolution (spec §1.3) and the pass list per
// target and options (spec §3). Lists are compared exactly, so a pass in the wrong place or
// under the wrong condition fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/fusion_options.h"
#include "fusebox/session.h"

namespace fusebox {
namespace {

using Passes = std::vector<std::string>;
constexpr FusionTarget kAllTargets[] = {FusionTarget::Cpu,  FusionTarget::Cuda,
                                        FusionTarget::Metal, FusionTarget::Mlx,
                                        FusionTarget::Wgpu, FusionTarget::Rocm,
                                        FusionTarget::Tpu};

// The tables live in the backend folders; the runtime finds them by target.
const ClaimTable& C(FusionTarget t) { return claim_table_of(t); }
std::vector<FusedKind> claimed_kinds(FusionTarget t) { return C(t).kinds(); }
std::vector<DType> claimed_dtypes(FusionTarget t) { return C(t).claimed_dtypes(); }
bool target_claims(FusionTarget t, FusedKind k) { return C(t).claims(k); }
bool target_claims_activation(FusionTarget t, FusedKind k, EpilogueAct a) { return C(t).claims_activation(k, a); }
bool target_claims_dtype(FusionTarget t, DType d) { return C(t).claims_dtype(d); }

Passes plan(FusionTarget t, const FusionOptions& caller = {}, const EnvLookup* env = nullptr) {
  return plan_pipeline(C(t), resolve_options(t, C(t), caller, env));
}

Passes without(Passes p, const std::set<std::string>& drop) {
  std::erase_if(p, [&](const std::string& s) { return drop.count(s) != 0; });
  return p;
}

// The default pipelines, written out in full.
const Passes kFull = {"canonicalize",
                      "fuse-swiglu",
                      "fuse-matmul-bias-act",
                      "fuse-matmul-residual",
                      "fuse-conv-bias-act",
                      "fuse-attention",
                      "fuse-residual-layer-norm",
                      "fuse-residual-rms-norm",
                      "hoist-transposes",
                      "fuse-reduction-regions",
                      "mark-elementwise-regions",
                      "mark-batch-slice-regions",
                      "mark-transform-regions",
                      "fuse-region-prologue",
                      "fuse-batch-preprocess",
                      "select-peaks-only-outputs",
                      "dce"};
const Passes kMetal = {"canonicalize",
                       "fuse-swiglu",
                       "fuse-matmul-bias-act",
                       "fuse-matmul-residual",
                       "fuse-residual-layer-norm",
                       "fuse-residual-rms-norm",
                       "mark-batch-slice-regions",
                       "mark-transform-regions",
                       "fuse-region-prologue",
                       "fuse-batch-preprocess",
                       "unfuse-elementwise-regions",
                       "select-peaks-only-outputs",
                       "dce"};
const Passes kWgpu = {"canonicalize",
                      "fuse-swiglu",
                      "fuse-matmul-bias-act",
                      "fuse-matmul-residual",
                      "fuse-attention",
                      "fuse-residual-layer-norm",
                      "fuse-residual-rms-norm",
                      "mark-batch-slice-regions",
                      "mark-transform-regions",
                      "fuse-region-prologue",
                      "fuse-batch-preprocess",
                      "unfuse-elementwise-regions",
                      "select-peaks-only-outputs",
                      "dce"};
const Passes kTpu = {"canonicalize",
                     "fuse-swiglu",
                     "fuse-matmul-bias-act",
                     "fuse-matmul-residual",
                     "fuse-conv-bias-act",
                     "fuse-attention",
                     "fuse-residual-layer-norm",
                     "hoist-transposes",
                     "mark-elementwise-regions",
                     "mark-batch-slice-regions",
                     "mark-transform-regions",
                     "fuse-region-prologue",
                     "fuse-batch-preprocess",
                     "select-peaks-only-outputs",
                     "dce"};

// ---- claims ----

TEST(Claims, KindNamesRoundTrip) {
  const std::vector<std::string> names = {
      "elementwise_region",        "transform_region",      "batch_elementwise_region",
      "fused_matmul_bias_act",     "fused_matmul_residual", "fused_conv_bias_act",
      "fused_attention",           "fused_residual_layer_norm", "fused_residual_rms_norm",
      "fused_swiglu",              "fft_peaks",             "reduction_region"};
  ASSERT_EQ(int(names.size()), kNumFusedKinds);
  for (int i = 0; i < kNumFusedKinds; ++i) {
    EXPECT_EQ(fused_kind_name(FusedKind(i)), names[i]);
    EXPECT_EQ(parse_fused_kind(names[i]), FusedKind(i));
  }
  EXPECT_FALSE(parse_fused_kind("fused_everything").has_value());
}

TEST(Claims, ActivationNames) {
  for (int i = 0; i < kNumEpilogueActs; ++i) {
    EXPECT_EQ(parse_epilogue_act(epilogue_act_name(EpilogueAct(i))), EpilogueAct(i));
  }
  EXPECT_EQ(parse_epilogue_act("gelu-tanh"), EpilogueAct::GeluTanh);
  EXPECT_FALSE(parse_epilogue_act("swish").has_value());
}

TEST(Claims, KindsPerTarget) {
  using K = FusedKind;
  auto all_but = [](std::set<K> out) {
    std::vector<K> v;
    for (int i = 0; i < kNumFusedKinds; ++i)
      if (!out.count(K(i))) v.push_back(K(i));
    return v;
  };
  EXPECT_EQ(claimed_kinds(FusionTarget::Cpu), all_but({}));
  EXPECT_EQ(claimed_kinds(FusionTarget::Cuda), all_but({}));
  EXPECT_EQ(claimed_kinds(FusionTarget::Rocm), all_but({}));
  // The reference system has no reduction regions, so the targets whose claims come from it
  // leave them out.
  EXPECT_EQ(claimed_kinds(FusionTarget::Metal), all_but({K::ConvBiasAct, K::Attention, K::ReductionRegion}));
  EXPECT_EQ(claimed_kinds(FusionTarget::Mlx), all_but({K::ConvBiasAct, K::Attention, K::ReductionRegion}));
  EXPECT_EQ(claimed_kinds(FusionTarget::Wgpu), all_but({K::ConvBiasAct, K::ReductionRegion}));
  EXPECT_EQ(claimed_kinds(FusionTarget::Tpu), all_but({K::ResidualRmsNorm, K::ReductionRegion}));
  EXPECT_FALSE(target_claims(FusionTarget::Metal, K::Attention));
  EXPECT_TRUE(target_claims(FusionTarget::Wgpu, K::Attention));
}

TEST(Claims, EpilogueActivations) {
  for (FusionTarget t : kAllTargets) {
    for (int a = 0; a < kNumEpilogueActs; ++a) {
      EpilogueAct act = EpilogueAct(a);
      // fusebox's own backends compute every activation in the epilogue.
      bool own = t == FusionTarget::Cpu || t == FusionTarget::Cuda;
      if (own) EXPECT_TRUE(target_claims_activation(t, FusedKind::MatmulBiasAct, act)) << t;
      EXPECT_EQ(target_claims_activation(t, FusedKind::ConvBiasAct, act),
                target_claims(t, FusedKind::ConvBiasAct) && target_claims_activation(t, FusedKind::MatmulBiasAct, act))
          << t;
      // Not an epilogue kind: never claims an activation.
      EXPECT_FALSE(target_claims_activation(t, FusedKind::ElementwiseRegion, act)) << t;
      EXPECT_FALSE(target_claims_activation(t, FusedKind::ResidualLayerNorm, act)) << t;
    }
  }
  EXPECT_FALSE(target_claims_activation(FusionTarget::Metal, FusedKind::ConvBiasAct, EpilogueAct::Relu));
  EXPECT_TRUE(target_claims_activation(FusionTarget::Cpu, FusedKind::ConvBiasAct, EpilogueAct::HardSwish));
  // The reference system's epilogues stop at its own list: no clip (relu6) there.
  EXPECT_TRUE(target_claims_activation(FusionTarget::Tpu, FusedKind::MatmulBiasAct, EpilogueAct::Relu));
  EXPECT_FALSE(target_claims_activation(FusionTarget::Tpu, FusedKind::MatmulBiasAct, EpilogueAct::Clip));
}

TEST(Claims, DTypesPerTarget) {
  using D = DType;
  const std::vector<D> all = {D::F32, D::F16, D::BF16, D::F64, D::I8,
                              D::U8,  D::I32, D::I64,  D::Bool};
  auto but = [&](std::set<D> out) {
    std::vector<D> v;
    for (D d : all)
      if (!out.count(d)) v.push_back(d);
    return v;
  };
  std::vector<D> every = all;
  every.insert(every.end(), {D::I16, D::U16, D::U32, D::U64});
  EXPECT_EQ(claimed_dtypes(FusionTarget::Cpu), every);
  EXPECT_EQ(claimed_dtypes(FusionTarget::Cuda), all);
  EXPECT_EQ(claimed_dtypes(FusionTarget::Rocm), all);
  EXPECT_EQ(claimed_dtypes(FusionTarget::Metal), but({D::F64}));
  EXPECT_EQ(claimed_dtypes(FusionTarget::Mlx), but({D::F64}));
  EXPECT_EQ(claimed_dtypes(FusionTarget::Wgpu), (std::vector<D>{D::F32, D::F16, D::I32}));
  EXPECT_EQ(claimed_dtypes(FusionTarget::Tpu), but({D::F64, D::I64}));
  EXPECT_FALSE(target_claims_dtype(FusionTarget::Metal, D::F64));
  EXPECT_TRUE(target_claims_dtype(FusionTarget::Metal, D::BF16));
}

TEST(Claims, ExecutorsMemoryAndForcedUnfuse) {
  for (FusionTarget t : kAllTargets) {
    bool cpu = t == FusionTarget::Cpu;
#ifdef FUSEBOX_HAVE_CUDA
    const bool cuda_built = true;
#else
    const bool cuda_built = false;
#endif
    EXPECT_EQ(C(t).has_executor, cpu || (t == FusionTarget::Cuda && cuda_built)) << t;
    EXPECT_EQ(C(t).unified_memory, cpu) << t;
    EXPECT_EQ(C(t).forces_unfuse_regions, t == FusionTarget::Metal ||
                                                   t == FusionTarget::Mlx ||
                                                   t == FusionTarget::Wgpu)
        << t;
    EXPECT_TRUE(C(t).claims(FusedKind::TransformRegion) && C(t).claims(FusedKind::BatchElementwiseRegion)) << t;
    EXPECT_EQ(C(t).target, target_name(t));
  }
}

TEST(Claims, IoParamsArePlausible) {
  for (FusionTarget t : kAllTargets) {
    const TargetIoParams& io = C(t).io;
    EXPECT_GE(io.launch_cost_us, 0) << t;
    EXPECT_GT(io.device_bandwidth_gbps, 0) << t;
    EXPECT_GT(io.host_readback_gbps, 0) << t;
    EXPECT_GE(io.sync_cost_us, 0) << t;
    EXPECT_GT(io.min_gain_us, 0) << t;
    EXPECT_TRUE(std::isfinite(io.launch_cost_us + io.device_bandwidth_gbps +
                              io.host_readback_gbps + io.sync_cost_us + io.min_gain_us));
    // A discrete device reads back more slowly than it moves data internally.
    if (!C(t).unified_memory) {
      EXPECT_LT(io.host_readback_gbps, io.device_bandwidth_gbps) << t;
    }
  }
}

// ---- resolution ----

TEST(ResolveOptions, DefaultsPerTarget) {
  for (FusionTarget t : kAllTargets) {
    FusionOptions r = resolve_options(t, C(t), {}, nullptr);
    FusionOptions expected;
    expected.unfuse_elementwise_regions = C(t).forces_unfuse_regions;
    expected.fusion_limits = default_limits(t);
    expected.native_fk_regions = true;
    EXPECT_EQ(r, expected) << t;
  }
  EXPECT_EQ(resolve_options(FusionTarget::Cpu, C(FusionTarget::Cpu), {}, nullptr).fusion_limits,
            FusionLimits::UNBOUNDED);
  EXPECT_TRUE(resolve_options(FusionTarget::Wgpu, C(FusionTarget::Wgpu), {}, nullptr).unfuse_elementwise_regions);
  EXPECT_FALSE(resolve_options(FusionTarget::Cuda, C(FusionTarget::Cuda), {}, nullptr).unfuse_elementwise_regions);
}

TEST(ResolveOptions, KeepBlocksForcedUnfuseOnly) {
  FusionOptions keep;
  keep.keep_elementwise_regions = true;
  for (FusionTarget t : {FusionTarget::Metal, FusionTarget::Mlx, FusionTarget::Wgpu}) {
    EXPECT_FALSE(resolve_options(t, C(t), keep, nullptr).unfuse_elementwise_regions) << t;
    FusionOptions both = keep;
    both.unfuse_elementwise_regions = true;
    EXPECT_TRUE(resolve_options(t, C(t), both, nullptr).unfuse_elementwise_regions) << t;
  }
  // Explicit unfuse on CPU gives per-op execution.
  FusionOptions unfuse;
  unfuse.unfuse_elementwise_regions = true;
  EXPECT_TRUE(resolve_options(FusionTarget::Cpu, C(FusionTarget::Cpu), unfuse, nullptr).unfuse_elementwise_regions);
}

TEST(ResolveOptions, ExplicitLimitsAreKept) {
  FusionOptions o;
  o.fusion_limits = FusionLimits::GPU_NATIVE;
  EXPECT_EQ(resolve_options(FusionTarget::Cpu, C(FusionTarget::Cpu), o, nullptr).fusion_limits,
            FusionLimits::GPU_NATIVE);
  o.fusion_limits = FusionLimits::UNBOUNDED;
  EXPECT_EQ(resolve_options(FusionTarget::Tpu, C(FusionTarget::Tpu), o, nullptr).fusion_limits,
            FusionLimits::UNBOUNDED);
  o.fusion_limits.reset();
  EXPECT_EQ(resolve_options(FusionTarget::Tpu, C(FusionTarget::Tpu), o, nullptr).fusion_limits, (FusionLimits{32, 16}));
}

TEST(ResolveOptions, EnvOnlyWhenAsked) {
  EnvLookup env = map_env({{"FUSEBOX_NO_FUSION", "1"}, {"RLX_NO_NATIVE_FK_REGIONS", "1"},
                           {"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "1"}});
  FusionOptions without_env = resolve_options(FusionTarget::Metal, C(FusionTarget::Metal), {}, nullptr);
  EXPECT_FALSE(without_env.skip_fusion);
  EXPECT_TRUE(without_env.native_fk_regions);
  EXPECT_TRUE(without_env.unfuse_elementwise_regions);
  FusionOptions with_env = resolve_options(FusionTarget::Metal, C(FusionTarget::Metal), {}, &env);
  EXPECT_TRUE(with_env.skip_fusion);
  EXPECT_FALSE(with_env.native_fk_regions);          // the veto reaches apply_native_fk_defaults
  EXPECT_TRUE(with_env.keep_elementwise_regions);    // merged before the forced unfuse...
  EXPECT_FALSE(with_env.unfuse_elementwise_regions);  // ...so keep blocks it
}

TEST(ResolveOptions, Idempotent) {
  EnvLookup veto = map_env({{"FUSEBOX_NO_NATIVE_FK_REGIONS", "1"}});
  for (FusionTarget t : kAllTargets) {
    for (const EnvLookup* env : std::vector<const EnvLookup*>{nullptr, &veto}) {
      FusionOptions once = resolve_options(t, C(t), FusionOptions::for_target(t, map_env({})), env);
      EXPECT_EQ(resolve_options(t, C(t), once, env), once) << t;
    }
  }
}

// ---- pipelines ----

TEST(PipelinePlan, DefaultPerTarget) {
  EXPECT_EQ(plan(FusionTarget::Cpu), kFull);
  EXPECT_EQ(plan(FusionTarget::Cuda), kFull);
  EXPECT_EQ(plan(FusionTarget::Rocm), kFull);
  EXPECT_EQ(plan(FusionTarget::Metal), kMetal);
  EXPECT_EQ(plan(FusionTarget::Mlx), kMetal);
  EXPECT_EQ(plan(FusionTarget::Wgpu), kWgpu);
  EXPECT_EQ(plan(FusionTarget::Tpu), kTpu);
  // The per-target constructors give the same pipelines.
  for (FusionTarget t : kAllTargets) {
    EXPECT_EQ(plan(t, FusionOptions::for_target(t, map_env({}))), plan(t)) << t;
  }
}

TEST(PipelinePlan, SkipFusionLeavesCanonicalizeAndDce) {
  FusionOptions o;
  o.skip_fusion = true;
  // Every other option on, to show none of them adds a pass.
  o.decompose_fusion_regions = true;
  o.unfuse_elementwise_regions = true;
  for (FusionTarget t : kAllTargets) {
    EXPECT_EQ(plan(t, o), (Passes{"canonicalize{no-recognition}", "dce"})) << t;
  }
  EnvLookup env = map_env({{"RLX_METAL_NO_FUSION", "1"}});
  EXPECT_EQ(plan(FusionTarget::Cuda, {}, &env), (Passes{"canonicalize{no-recognition}", "dce"}));
}

TEST(PipelinePlan, UnfuseAndKeep) {
  FusionOptions unfuse;
  unfuse.unfuse_elementwise_regions = true;
  Passes cpu_unfused =
      without(kFull, {"hoist-transposes", "fuse-reduction-regions", "mark-elementwise-regions"});
  cpu_unfused.insert(cpu_unfused.end() - 2, "unfuse-elementwise-regions");
  EXPECT_EQ(plan(FusionTarget::Cpu, unfuse), cpu_unfused);

  FusionOptions keep;
  keep.keep_elementwise_regions = true;
  Passes metal_kept = {"canonicalize",
                       "fuse-swiglu",
                       "fuse-matmul-bias-act",
                       "fuse-matmul-residual",
                       "fuse-residual-layer-norm",
                       "fuse-residual-rms-norm",
                       "hoist-transposes",
                       "mark-elementwise-regions",
                       "mark-batch-slice-regions",
                       "mark-transform-regions",
                       "fuse-region-prologue",
                       "fuse-batch-preprocess",
                       "select-peaks-only-outputs",
                       "dce"};
  EXPECT_EQ(plan(FusionTarget::Metal, keep), metal_kept);
  EXPECT_EQ(plan(FusionTarget::Mlx, keep), metal_kept);
  Passes wgpu_kept = without(kFull, {"fuse-conv-bias-act", "fuse-reduction-regions"});
  EXPECT_EQ(plan(FusionTarget::Wgpu, keep), wgpu_kept);
  // keep + explicit unfuse: unfuse stands.
  FusionOptions both = keep;
  both.unfuse_elementwise_regions = true;
  EXPECT_EQ(plan(FusionTarget::Metal, both), kMetal);
  // keep changes nothing where regions are kept anyway.
  EXPECT_EQ(plan(FusionTarget::Cuda, keep), kFull);
  // The env KEEP flag reaches Metal through resolution.
  EnvLookup env = map_env({{"FUSEBOX_KEEP_ELEMENTWISE_REGIONS", "on"}});
  EXPECT_EQ(plan(FusionTarget::Metal, {}, &env), metal_kept);
}

TEST(PipelinePlan, FkSwitches) {
  FusionOptions o;
  o.fk_fusion = false;
  EXPECT_EQ(plan(FusionTarget::Cpu, o),
            without(kFull, {"hoist-transposes", "mark-batch-slice-regions", "mark-transform-regions",
                            "fuse-region-prologue", "fuse-batch-preprocess"}));
  // The sub-switches do not matter once fk_fusion is off.
  o.fuse_region_prologue = false;
  o.fuse_batch_preprocess = false;
  EXPECT_EQ(plan(FusionTarget::Cpu, o),
            without(kFull, {"hoist-transposes", "mark-batch-slice-regions", "mark-transform-regions",
                            "fuse-region-prologue", "fuse-batch-preprocess"}));

  FusionOptions no_prologue;
  no_prologue.fuse_region_prologue = false;
  EXPECT_EQ(plan(FusionTarget::Cpu, no_prologue),
            without(kFull, {"hoist-transposes", "fuse-region-prologue"}));
  EXPECT_EQ(plan(FusionTarget::Wgpu, no_prologue), without(kWgpu, {"fuse-region-prologue"}));

  FusionOptions no_batch;
  no_batch.fuse_batch_preprocess = false;
  EXPECT_EQ(plan(FusionTarget::Cpu, no_batch), without(kFull, {"fuse-batch-preprocess"}));
  EXPECT_EQ(plan(FusionTarget::Tpu, no_batch), without(kTpu, {"fuse-batch-preprocess"}));

  EnvLookup env = map_env({{"FUSEBOX_FUSE_REGION_PROLOGUE", "0"},
                           {"RLX_FUSE_BATCH_PREPROCESS", "off"}});
  EXPECT_EQ(plan(FusionTarget::Cuda, {}, &env),
            without(kFull, {"hoist-transposes", "fuse-region-prologue", "fuse-batch-preprocess"}));
}

TEST(PipelinePlan, DecomposeWhenNotNativeOrAsked) {
  // Regions decomposed: no transpose is hoisted into a prologue that will not stay.
  Passes decomposed = without(kFull, {"hoist-transposes"});
  decomposed.insert(decomposed.end() - 2, "decompose-fusion-regions");

  // Resolved options straight into plan_pipeline: native off means decompose.
  FusionOptions r = resolve_options(FusionTarget::Cpu, C(FusionTarget::Cpu), {}, nullptr);
  r.native_fk_regions = false;
  EXPECT_EQ(plan_pipeline(C(FusionTarget::Cpu), r), decomposed);
  r.native_fk_regions = true;
  EXPECT_EQ(plan_pipeline(C(FusionTarget::Cpu), r), kFull);
  r.decompose_fusion_regions = true;
  EXPECT_EQ(plan_pipeline(C(FusionTarget::Cpu), r), decomposed);

  // Through resolution: decompose requested, or the NO_NATIVE veto.
  FusionOptions decompose;
  decompose.decompose_fusion_regions = true;
  EXPECT_EQ(plan(FusionTarget::Cuda, decompose), decomposed);
  EnvLookup veto = map_env({{"RLX_NO_NATIVE_FK_REGIONS", "1"}, {"FUSEBOX_NATIVE_FK_REGIONS", "1"}});
  EXPECT_EQ(plan(FusionTarget::Cuda, {}, &veto), decomposed);
  Passes metal_decomposed = kMetal;
  metal_decomposed.insert(metal_decomposed.end() - 3, "decompose-fusion-regions");
  EXPECT_EQ(plan(FusionTarget::Metal, {}, &veto), metal_decomposed);

  // Not gated on fk_fusion: regions may come from parsed text.
  FusionOptions fk_off = decompose;
  fk_off.fk_fusion = false;
  EXPECT_EQ(plan(FusionTarget::Cpu, fk_off),
            without(decomposed, {"mark-batch-slice-regions", "mark-transform-regions",
                                 "fuse-region-prologue", "fuse-batch-preprocess"}));
}

TEST(PipelinePlan, ConvBiasActSwitch) {
  FusionOptions o;
  o.disable_conv_bias_act_fusion = true;
  EXPECT_EQ(plan(FusionTarget::Cpu, o), without(kFull, {"fuse-conv-bias-act"}));
  EXPECT_EQ(plan(FusionTarget::Tpu, o), without(kTpu, {"fuse-conv-bias-act"}));
  EXPECT_EQ(plan(FusionTarget::Metal, o), kMetal);  // not claimed there anyway
  EnvLookup env = map_env({{"RLX_DISABLE_CONV_BIAS_ACT_FUSION", "1"}});
  EXPECT_EQ(plan(FusionTarget::Cuda, {}, &env), without(kFull, {"fuse-conv-bias-act"}));
}

TEST(PipelinePlan, PeaksOutputSwitch) {
  FusionOptions o;
  o.no_io_peaks_output = true;
  for (FusionTarget t : kAllTargets) {
    Passes p = plan(t, o);
    EXPECT_EQ(p, without(plan(t), {"select-peaks-only-outputs"})) << t;
    EXPECT_EQ(std::count(p.begin(), p.end(), "select-peaks-only-outputs"), 0) << t;
  }
  EnvLookup env = map_env({{"FUSEBOX_NO_IO_PEAKS_OUTPUT", "1"}});
  EXPECT_EQ(plan(FusionTarget::Cuda, {}, &env), without(kFull, {"select-peaks-only-outputs"}));
}

TEST(PipelinePlan, EveryCombinationIsWellFormed) {
  // Structural invariants over all 2^10 boolean combinations on every target.
  for (FusionTarget t : kAllTargets) {
    for (int bits = 0; bits < (1 << 10); ++bits) {
      auto b = [bits](int i) { return ((bits >> i) & 1) != 0; };
      FusionOptions o{b(0), b(1), b(2), b(3), b(4), b(5), b(6), b(7), std::nullopt, b(8), b(9)};
      Passes p = plan(t, o);
      ASSERT_GE(p.size(), 2u);
      EXPECT_EQ(p.back(), "dce");
      EXPECT_TRUE(p.front() == "canonicalize" || p.front() == "canonicalize{no-recognition}");
      EXPECT_EQ(std::set<std::string>(p.begin(), p.end()).size(), p.size()) << "duplicates";
      bool marks = std::count(p.begin(), p.end(), "mark-elementwise-regions") != 0;
      bool unfuses = std::count(p.begin(), p.end(), "unfuse-elementwise-regions") != 0;
      if (!o.skip_fusion) {
        EXPECT_NE(marks, unfuses) << to_string(o) << " on " << t;
      }
    }
  }
}

TEST(PipelinePlan, ReentrantAcrossThreads) {
  // No global or thread-local state: concurrent plans with different environments agree with
  // the serial answers.
  std::vector<EnvLookup> envs = {map_env({}), map_env({{"FUSEBOX_NO_FK_FUSION", "1"}}),
                                 map_env({{"RLX_NO_NATIVE_FK_REGIONS", "1"}}),
                                 map_env({{"FUSEBOX_NO_FUSION", "1"}})};
  std::vector<Passes> serial;
  for (const EnvLookup& e : envs)
    for (FusionTarget t : kAllTargets) serial.push_back(plan(t, {}, &e));
  std::vector<std::vector<Passes>> results(8);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < results.size(); ++k) {
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 50; ++rep) {
        results[k].clear();
        for (const EnvLookup& e : envs)
          for (FusionTarget t : kAllTargets) results[k].push_back(plan(t, {}, &e));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const auto& r : results) EXPECT_EQ(r, serial);
}

TEST(PipelinePlan, JoinForPassesFlag) {
  EXPECT_EQ(join_pipeline({}), "");
  EXPECT_EQ(join_pipeline({"canonicalize{no-recognition}", "dce"}),
            "canonicalize{no-recognition},dce");
}

}  // namespace
}  // namespace fusebox
