#include "fusion/claims.h"

#include <initializer_list>
#include <iterator>

#include "ir/check.h"

namespace fusebox {
namespace {

constexpr uint32_t bit(FusedKind k) { return 1u << static_cast<int>(k); }
constexpr uint32_t bit(EpilogueAct a) { return 1u << static_cast<int>(a); }
constexpr uint32_t bit(DType d) { return 1u << static_cast<int>(d); }

constexpr uint32_t kAllKinds = (1u << kNumFusedKinds) - 1;
constexpr uint32_t kAllActs = (1u << kNumEpilogueActs) - 1;
// The activations of the reference system's matmul/conv epilogues (spec §4.1): the targets
// whose claim sets come from it claim these; fusebox's own CPU and CUDA backends add leaky relu,
// clip (relu6) and hardsigmoid, which oneDNN and the NVRTC epilogues compute.
constexpr uint32_t kSpecActs = bit(EpilogueAct::None) | bit(EpilogueAct::Relu) | bit(EpilogueAct::Gelu) |
                               bit(EpilogueAct::GeluTanh) | bit(EpilogueAct::Silu) | bit(EpilogueAct::Sigmoid) |
                               bit(EpilogueAct::Tanh) | bit(EpilogueAct::HardSwish);
constexpr uint32_t kAllDTypes = (1u << kNumDTypes) - 1;
static_assert(kNumFusedKinds <= 32 && kNumEpilogueActs <= 32 && kNumDTypes <= 32);

constexpr uint32_t kinds_except(std::initializer_list<FusedKind> left_out) {
  uint32_t mask = kAllKinds;
  for (FusedKind k : left_out) mask &= ~bit(k);
  return mask;
}
constexpr uint32_t dtypes_except(std::initializer_list<DType> left_out) {
  uint32_t mask = kAllDTypes;
  for (DType d : left_out) mask &= ~bit(d);
  return mask;
}
constexpr uint32_t dtypes_only(std::initializer_list<DType> kept) {
  uint32_t mask = 0;
  for (DType d : kept) mask |= bit(d);
  return mask;
}

using K = FusedKind;
using D = DType;

// One row per target, in FusionTarget order (checked below). Kind exclusions are the spec's
// (§2, written from the reference system's claim sets); everything the spec does not exclude
// is claimed. Epilogue activations: kSpecActs for the reference system's targets, all of them
// for fusebox's own backends. The dtype sets follow the hardware/shading
// language of each target. IO figures: see TargetIoParams (estimates).
constexpr TargetInfo kTargets[] = {
    // Cpu: fusebox's own backend; it executes every fused kind (the oracle for all of them),
    // every dtype, regions of any size. Host memory is the device memory.
    {FusionTarget::Cpu, kAllKinds, kAllActs, kAllDTypes,
     /*has_executor=*/true, /*unified_memory=*/true, /*forces_unfuse_regions=*/false,
     {/*launch*/ 2, /*device GB/s*/ 50, /*readback GB/s*/ 50, /*sync*/ 0, /*min gain*/ 100}},
    // Cuda: fusebox's GPU backend (NVRTC regions, cuBLASLt epilogues, cuDNN conv): everything.
    // Discrete memory: outputs cross PCIe (about 25 GB/s effective on 4.0 x16).
    {FusionTarget::Cuda, kAllKinds, kAllActs, kAllDTypes,
     true, false, false,
     {5, 2000, 25, 10, 100}},
    // Metal: no conv-bias-act, no attention block (spec §2). MSL has no 64-bit float. Its
    // region kernel in the reference system mis-lowers long chains: regions are unfused unless
    // keep_elementwise_regions. Apple GPUs share memory physically, but outputs are still copied
    // out of GPU buffers into host arrays, so read-back is a memcpy, not free.
    {FusionTarget::Metal, kinds_except({K::ConvBiasAct, K::Attention}), kSpecActs,
     dtypes_except({D::F64}),
     false, false, true,
     {10, 400, 60, 50, 100}},
    // Mlx: same claim set and the same hardware as Metal (spec §2); MLX kernels have no f64.
    {FusionTarget::Mlx, kinds_except({K::ConvBiasAct, K::Attention}), kSpecActs,
     dtypes_except({D::F64}),
     false, false, true,
     {10, 400, 60, 50, 100}},
    // Wgpu: no conv-bias-act (spec §2). WGSL storage buffers hold only 32-bit scalars and f16
    // (shader-f16), no 64-bit, 8-bit or bool. The reference region kernel handles only
    // trailing/scalar broadcast, so regions are unfused unless keep. Read-back goes through a
    // mapped staging buffer with an async round trip.
    {FusionTarget::Wgpu, kinds_except({K::ConvBiasAct}), kSpecActs,
     dtypes_only({D::F32, D::F16, D::I32}),
     false, false, true,
     {20, 300, 8, 200, 100}},
    // Rocm: the spec lists no exclusion; HIP mirrors CUDA, so everything, discrete memory.
    {FusionTarget::Rocm, kAllKinds, kSpecActs, kAllDTypes,
     false, false, false,
     {8, 1600, 25, 15, 100}},
    // Tpu: no rms-norm fusion (spec §2). Transform and batch regions are claimed because the
    // spec lists Tpu among the targets that run them natively (§1.3 apply_native_fk_defaults).
    // 64-bit types are emulated or rejected by XLA on TPU, so they are not claimed.
    {FusionTarget::Tpu, kinds_except({K::ResidualRmsNorm}), kSpecActs,
     dtypes_except({D::F64, D::I64}),
     false, false, false,
     {15, 1200, 10, 50, 100}},
};
static_assert(std::size(kTargets) == kNumFusionTargets, "one claim row per FusionTarget");

constexpr bool rows_in_target_order() {
  for (int i = 0; i < kNumFusionTargets; ++i) {
    if (static_cast<int>(kTargets[i].target) != i) return false;
  }
  return true;
}
static_assert(rows_in_target_order(), "kTargets rows must follow FusionTarget order");

bool is_epilogue_kind(FusedKind k) {
  return k == FusedKind::MatmulBiasAct || k == FusedKind::MatmulResidual ||
         k == FusedKind::ConvBiasAct;
}

}  // namespace

std::string_view fused_kind_name(FusedKind k) {
  switch (k) {
#define FUSEBOX_FUSED_KIND_NAME(name, text) \
  case FusedKind::name:                     \
    return text;
    FUSEBOX_FUSED_KINDS(FUSEBOX_FUSED_KIND_NAME)
#undef FUSEBOX_FUSED_KIND_NAME
  }
  return "?";
}

std::optional<FusedKind> parse_fused_kind(std::string_view name) {
#define FUSEBOX_FUSED_KIND_PARSE(n, text) \
  if (name == text) return FusedKind::n;
  FUSEBOX_FUSED_KINDS(FUSEBOX_FUSED_KIND_PARSE)
#undef FUSEBOX_FUSED_KIND_PARSE
  return std::nullopt;
}

const TargetInfo& target_info(FusionTarget t) {
  int i = static_cast<int>(t);
  FUSEBOX_CHECK(i >= 0 && i < kNumFusionTargets) << "bad FusionTarget " << i;
  return kTargets[i];
}

bool target_claims(FusionTarget t, FusedKind k) { return (target_info(t).fused_kinds & bit(k)) != 0; }

bool target_claims_activation(FusionTarget t, FusedKind k, EpilogueAct a) {
  if (!is_epilogue_kind(k) || !target_claims(t, k)) return false;
  return (target_info(t).epilogue_acts & bit(a)) != 0;
}

bool target_claims_dtype(FusionTarget t, DType d) { return (target_info(t).dtypes & bit(d)) != 0; }

std::vector<FusedKind> claimed_kinds(FusionTarget t) {
  std::vector<FusedKind> out;
  for (int i = 0; i < kNumFusedKinds; ++i) {
    if (target_claims(t, static_cast<FusedKind>(i))) out.push_back(static_cast<FusedKind>(i));
  }
  return out;
}

std::vector<EpilogueAct> claimed_activations(FusionTarget t) {
  std::vector<EpilogueAct> out;
  for (int i = 0; i < kNumEpilogueActs; ++i) {
    if (target_info(t).epilogue_acts & (1u << i)) out.push_back(static_cast<EpilogueAct>(i));
  }
  return out;
}

std::vector<DType> claimed_dtypes(FusionTarget t) {
  std::vector<DType> out;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (target_claims_dtype(t, static_cast<DType>(i))) out.push_back(static_cast<DType>(i));
  }
  return out;
}

bool target_has_executor(FusionTarget t) { return target_info(t).has_executor; }
bool target_has_unified_memory(FusionTarget t) { return target_info(t).unified_memory; }
bool target_forces_unfuse_regions(FusionTarget t) { return target_info(t).forces_unfuse_regions; }

bool target_runs_fk_regions_natively(FusionTarget t) {
  return target_claims(t, FusedKind::TransformRegion) &&
         target_claims(t, FusedKind::BatchElementwiseRegion);
}

}  // namespace fusebox
