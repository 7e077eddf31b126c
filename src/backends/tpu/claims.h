// The tpu target's claim table (ir/claim_table.h): this folder holds only the table, since the target has no executor in this build.
#pragma once

#include "ir/claim_table.h"

namespace fusebox {

const ClaimTable& tpu_claims();

}  // namespace fusebox
