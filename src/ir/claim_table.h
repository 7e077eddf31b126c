// A backend's claim table as data (DESIGN.md §5, spec §2): the fused kinds it runs, the epilogue
// activations of its fused contractions, the dtypes fused ops may take and produce, whether an
// executor exists, its memory model, and the IO cost figures the peaks-output pass uses.
//
// The type lives here because it speaks only of ops, dtypes and activations. Each backend folder
// (src/backends/<target>/claims.cpp) fills one; the runtime hands the target's table to the
// fusion pipeline (Fuse(target, claims)), so `fusion` never includes a backend. A pattern pass is
// scheduled only when the table claims the fused op it emits.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

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
  X(FftPeaks, "fft_peaks")                                   \
  X(ReductionRegion, "reduction_region")

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

struct ClaimTable {
  std::string_view target;  // the FusionTarget's name: "cpu", "cuda", "metal", ...
  uint32_t fused_kinds;     // bit per FusedKind
  uint32_t epilogue_acts;   // bit per EpilogueAct, for MatmulBiasAct/MatmulResidual/ConvBiasAct
  uint32_t dtypes;          // bit per DType that fused ops may take and produce
  bool has_executor;        // a backend that runs compiled plans exists in this build
  bool unified_memory;      // outputs are already host-readable: no read-back copy
  // The reference system's region kernel for this target is unreliable, so option resolution
  // unfuses element-wise regions unless keep_elementwise_regions.
  bool forces_unfuse_regions;
  TargetIoParams io;

  bool claims(FusedKind k) const { return (fused_kinds >> static_cast<int>(k)) & 1u; }
  // False when the kind itself is not claimed or is not an epilogue-carrying kind.
  bool claims_activation(FusedKind k, EpilogueAct a) const;
  bool claims_dtype(DType d) const { return (dtypes >> static_cast<int>(d)) & 1u; }
  std::vector<FusedKind> kinds() const;
  std::vector<EpilogueAct> activations() const;
  std::vector<DType> claimed_dtypes() const;
};

// Building blocks for the tables' rows (constexpr, so a row is a constant).
namespace claim_bits {
constexpr uint32_t bit(FusedKind k) { return 1u << static_cast<int>(k); }
constexpr uint32_t bit(EpilogueAct a) { return 1u << static_cast<int>(a); }
constexpr uint32_t bit(DType d) { return 1u << static_cast<int>(d); }
static_assert(kNumFusedKinds <= 32 && kNumEpilogueActs <= 32 && kNumDTypes <= 32);

inline constexpr uint32_t kAllKinds = (1u << kNumFusedKinds) - 1;
inline constexpr uint32_t kAllActs = (1u << kNumEpilogueActs) - 1;
inline constexpr uint32_t kAllDTypes = (1u << kNumDTypes) - 1;
// The dtypes of the reference system's targets (and of fusebox's GPU backends until they run the
// others): the 16-bit and unsigned 32/64-bit integers are left out. The CPU claims every dtype.
inline constexpr uint32_t kDeviceDTypes =
    kAllDTypes & ~(bit(DType::I16) | bit(DType::U16) | bit(DType::U32) | bit(DType::U64));
// The activations of the reference system's matmul/conv epilogues (spec §4.1): the targets
// whose claim sets come from it claim these; fusebox's own CPU and CUDA backends add leaky relu,
// clip (relu6) and hardsigmoid.
inline constexpr uint32_t kSpecActs = bit(EpilogueAct::None) | bit(EpilogueAct::Relu) | bit(EpilogueAct::Gelu) |
                                      bit(EpilogueAct::GeluTanh) | bit(EpilogueAct::Silu) |
                                      bit(EpilogueAct::Sigmoid) | bit(EpilogueAct::Tanh) |
                                      bit(EpilogueAct::HardSwish);

constexpr uint32_t kinds_except(std::initializer_list<FusedKind> left_out) {
  uint32_t mask = kAllKinds;
  for (FusedKind k : left_out) mask &= ~bit(k);
  return mask;
}
constexpr uint32_t dtypes_except(std::initializer_list<DType> left_out) {
  uint32_t mask = kDeviceDTypes;
  for (DType d : left_out) mask &= ~bit(d);
  return mask;
}
constexpr uint32_t dtypes_only(std::initializer_list<DType> kept) {
  uint32_t mask = 0;
  for (DType d : kept) mask |= bit(d);
  return mask;
}
}  // namespace claim_bits

}  // namespace fusebox
