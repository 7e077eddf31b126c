#include "backends/mlx/claims.h"

namespace fusebox {

// Mlx: the claim set and hardware of Metal (spec §2); MLX kernels have no f64.
const ClaimTable& mlx_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"mlx", kinds_except({FusedKind::ConvBiasAct, FusedKind::Attention, FusedKind::ReductionRegion}), kSpecActs, dtypes_except({DType::F64}),
    /*has_executor=*/false, /*unified_memory=*/false, /*forces_unfuse_regions=*/true,
    {10, 400, 60, 50, 100}};
  return kTable;
}

}  // namespace fusebox
