// The cuda target's claim table (ir/claim_table.h); the backend itself is cuda_backend.h.
#pragma once

#include "ir/claim_table.h"

namespace fusebox {

const ClaimTable& cuda_claims();

}  // namespace fusebox
