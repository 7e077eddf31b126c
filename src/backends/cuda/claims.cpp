#include "backends/cuda/claims.h"

namespace fusebox {

// Cuda: fusebox's GPU backend claims every fused kind, activation and dtype for fusion. The
// executor (cuda_backend.h) exists when the build found the CUDA toolkit; what it does not run
// yet is placed on the CPU node by node (cuda_backend.cpp's claims say which).
// Discrete memory: outputs cross PCIe (about 25 GB/s effective on 4.0 x16).
#ifdef FUSEBOX_HAVE_CUDA
inline constexpr bool kCudaExecutor = true;
#else
inline constexpr bool kCudaExecutor = false;
#endif

const ClaimTable& cuda_claims() {
  using namespace claim_bits;
  static constexpr ClaimTable kTable{"cuda", kAllKinds, kAllActs, kDeviceDTypes, /*has_executor=*/kCudaExecutor, /*unified_memory=*/false, /*forces_unfuse_regions=*/false,
    {5, 2000, 25, 10, 100}};
  return kTable;
}

}  // namespace fusebox
