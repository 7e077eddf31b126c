// The reference backend: every node on its reference kernel, one op at a time, exactly as
// written (a region runs its body op by op at full size). The oracle of every test.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace fusebox::cpu {

std::shared_ptr<Backend> make_reference_backend();
// One node on its reference kernel (the CPU backend's kernel for ops without a faster one).
std::shared_ptr<const Kernel> make_reference_kernel(const Node& n);

}  // namespace fusebox::cpu
