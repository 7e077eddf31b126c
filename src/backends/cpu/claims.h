// The cpu target's claim table (ir/claim_table.h).
#pragma once

#include "ir/claim_table.h"

namespace fusebox {

const ClaimTable& cpu_claims();

}  // namespace fusebox
