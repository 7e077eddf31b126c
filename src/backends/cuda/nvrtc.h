// NVRTC, loaded at run time: CUDA C++ source -> a cubin for one GPU architecture. Compiling needs
// no GPU, so the generated sources are also checked on machines without one (tests/cuda).
#pragma once

#include <string>
#include <vector>

#include "fusebox/status.h"

namespace fusebox::cuda {

// Whether NVRTC can be loaded here, and its version ("13.0"); an error names what is missing.
Expected<std::string> nvrtc_version();

// Compiles `source` for sm_<arch> (90 for Hopper) into a cubin. The options every fusebox kernel
// is compiled with: C++17, no contraction of a*b+c into fused multiply-adds (--fmad=false: every
// step rounds as the reference does), IEEE division and square root. A compile error returns the
// NVRTC log with the source's name.
Expected<std::string> compile_cubin(const std::string& source, const std::string& name, int arch,
                                    const std::vector<std::string>& extra_options = {});

}  // namespace fusebox::cuda
