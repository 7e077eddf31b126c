#include "backends/cuda/claims.h"

namespace fusebox {

// Cuda: fusebox's GPU backend (NVRTC regions, cuBLASLt epilogues, cuDNN conv) claims every
// fused kind, activation and dtype. It has no executor in this build yet: Session::compile
// refuses the target, and these claims decide what `fusebox opt --target cuda` shows.
// Discrete memory: outputs cross PCIe (about 25 GB/s effective on 4.0 x16).
const ClaimTable& cuda_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"cuda", kAllKinds, kAllActs, kDeviceDTypes, /*has_executor=*/false, /*unified_memory=*/false, /*forces_unfuse_regions=*/false,
    {5, 2000, 25, 10, 100}};
  return kTable;
}

}  // namespace fusebox
