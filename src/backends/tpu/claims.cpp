#include "backends/tpu/claims.h"

namespace fusebox {

// Tpu: no rms-norm fusion (spec §2). Transform and batch regions are claimed: the spec lists Tpu
// among the targets that run them natively. 64-bit types are emulated or rejected by XLA on
// TPU, so they are not claimed.
const ClaimTable& tpu_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"tpu", kinds_except({FusedKind::ResidualRmsNorm, FusedKind::ReductionRegion}), kSpecActs, dtypes_except({DType::F64, DType::I64}),
    /*has_executor=*/false, /*unified_memory=*/false, /*forces_unfuse_regions=*/false,
    {15, 1200, 10, 50, 100}};
  return kTable;
}

}  // namespace fusebox
