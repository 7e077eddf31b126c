#include "backends/wgpu/claims.h"

namespace fusebox {

// Wgpu: no conv-bias-act (spec §2). WGSL storage buffers hold only 32-bit scalars and f16
// (shader-f16): no 64-bit, 8-bit or bool. The reference region kernel handles only trailing or
// scalar broadcast, so regions are unfused unless keep. Read-back goes through a mapped staging
// buffer with an asynchronous round trip.
const ClaimTable& wgpu_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"wgpu", kinds_except({FusedKind::ConvBiasAct, FusedKind::ReductionRegion}), kSpecActs, dtypes_only({DType::F32, DType::F16, DType::I32}),
    /*has_executor=*/false, /*unified_memory=*/false, /*forces_unfuse_regions=*/true,
    {20, 300, 8, 200, 100}};
  return kTable;
}

}  // namespace fusebox
