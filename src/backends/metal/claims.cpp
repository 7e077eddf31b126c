#include "backends/metal/claims.h"

namespace fusebox {

// Metal: no conv-bias-act, no attention block (spec §2). MSL has no 64-bit float. Its region
// kernel in the reference system mis-lowers long chains: regions are unfused unless
// keep_elementwise_regions. Apple GPUs share memory physically, but outputs are still copied out
// of GPU buffers into host arrays, so read-back is a memcpy, not free.
const ClaimTable& metal_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"metal", kinds_except({FusedKind::ConvBiasAct, FusedKind::Attention, FusedKind::ReductionRegion}), kSpecActs, dtypes_except({DType::F64}),
    /*has_executor=*/false, /*unified_memory=*/false, /*forces_unfuse_regions=*/true,
    {10, 400, 60, 50, 100}};
  return kTable;
}

}  // namespace fusebox
