#include "backends/cpu/claims.h"

namespace fusebox {

// Cpu: fusebox's own backend; it executes every fused kind (the oracle for all of them),
// every dtype, regions of any size. Host memory is the device memory.
const ClaimTable& cpu_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"cpu", kAllKinds, kAllActs, kAllDTypes, /*has_executor=*/true, /*unified_memory=*/true, /*forces_unfuse_regions=*/false,
    {/*launch us*/ 2, /*device GB/s*/ 50, /*readback GB/s*/ 50, /*sync us*/ 0, /*min gain us*/ 100}};
  return kTable;
}

}  // namespace fusebox
