#include "backends/rocm/claims.h"

namespace fusebox {

// Rocm: the spec lists no exclusion; HIP mirrors CUDA, so everything, discrete memory.
const ClaimTable& rocm_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"rocm", kAllKinds, kSpecActs, kDeviceDTypes, /*has_executor=*/false, /*unified_memory=*/false,
    /*forces_unfuse_regions=*/false, {8, 1600, 25, 15, 100}};
  return kTable;
}

}  // namespace fusebox
