// What each FusionTarget claims, as data (spec §2): fused kinds, epilogue activations, dtypes,
// whether an executor exists, memory model, and the IO cost figures the peaks-output pass uses.
//
// A pattern pass is scheduled only when the target claims the fused op it emits, so for the
// targets without an executor these tables decide what `fusebox opt --target T` shows.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "fusion/options.h"
#include "ir/dtype.h"
#include "ir/epilogue.h"

namespace fusebox {

// The fused products of the pipeline. Conv-affine (per-channel scale and shift after a conv)
// is not a kind of its own: the pass folds the scale into the weights and emits
// fused_conv_bias_act, so it is claimed with ConvBiasAct. FftPeaks is not an op either: it
// stands for fft_magnitude and peaks both running on the device, which is what the IO output
// gate (spec §4.6) needs.
#define FUSEBOX_FUSED_KINDS(X)                               \
  X(ElementwiseRegion, "elementwise_region")                 \
  X(TransformRegion, "transform_region")                     \
  X(BatchElementwiseRegion, "batch_elementwise_region")      \
  X(MatmulBiasAct, "fused_matmul_bias_act")                  \
  X(MatmulResidual, "fused_matmul_residual")                 \
  X(ConvBiasAct, "fused_conv_bias_act")                      \
  X(Attention, "fused_attention")                            \
  X(ResidualLayerNorm, "fused_residual_layer_norm")          \
  X(ResidualRmsNorm, "fused_residual_rms_norm")              \
  X(SwiGLU, "fused_swiglu")                                  \
  X(FftPeaks, "fft_peaks")

enum class FusedKind : uint8_t {
#define FUSEBOX_FUSED_KIND_ENUM(name, text) name,
  FUSEBOX_FUSED_KINDS(FUSEBOX_FUSED_KIND_ENUM)
#undef FUSEBOX_FUSED_KIND_ENUM
};
inline constexpr int kNumFusedKinds = 0
#define FUSEBOX_FUSED_KIND_COUNT(name, text) +1
    FUSEBOX_FUSED_KINDS(FUSEBOX_FUSED_KIND_COUNT)
#undef FUSEBOX_FUSED_KIND_COUNT
    ;

std::string_view fused_kind_name(FusedKind k);
std::optional<FusedKind> parse_fused_kind(std::string_view name);

// Activations a matmul or conv epilogue may carry: EpilogueAct of ir/epilogue.h.

// Figures for the IO-gated peaks-only output selection (spec §4.6). Order-of-magnitude
// estimates for a typical device of the class, not measurements; the pass compares them, so
// only their ratios matter. Replace with measured values when a backend exists.
struct TargetIoParams {
  double launch_cost_us;         // one kernel launch
  double device_bandwidth_gbps;  // device memory traffic of a kernel
  double host_readback_gbps;     // copying an output from device memory to a host array
  double sync_cost_us;           // one device->host synchronisation point
  double min_gain_us;            // drop an optional output only when it saves at least this
};

struct TargetInfo {
  FusionTarget target;
  uint32_t fused_kinds;    // bit per FusedKind
  uint32_t epilogue_acts;  // bit per EpilogueAct, for MatmulBiasAct/MatmulResidual/ConvBiasAct
  uint32_t dtypes;         // bit per DType that fused ops may take and produce
  bool has_executor;       // a backend that runs compiled plans exists in fusebox
  bool unified_memory;     // outputs are already host-readable: no read-back copy
  // The reference system's region kernel for this target is unreliable (see claims.cpp), so
  // option resolution unfuses element-wise regions unless keep_elementwise_regions.
  bool forces_unfuse_regions;
  TargetIoParams io;
};

const TargetInfo& target_info(FusionTarget t);

bool target_claims(FusionTarget t, FusedKind k);
// False when the kind itself is not claimed or is not an epilogue-carrying kind.
bool target_claims_activation(FusionTarget t, FusedKind k, EpilogueAct a);
bool target_claims_dtype(FusionTarget t, DType d);
std::vector<FusedKind> claimed_kinds(FusionTarget t);
std::vector<EpilogueAct> claimed_activations(FusionTarget t);
std::vector<DType> claimed_dtypes(FusionTarget t);

bool target_has_executor(FusionTarget t);
bool target_has_unified_memory(FusionTarget t);
bool target_forces_unfuse_regions(FusionTarget t);
// Claims both transform_region and batch_elementwise_region: the backend runs FK regions
// natively, so apply_native_fk_defaults turns native_fk_regions on.
bool target_runs_fk_regions_natively(FusionTarget t);

}  // namespace fusebox
