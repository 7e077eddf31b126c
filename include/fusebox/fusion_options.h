// Public fusion configuration: FusionTarget, FusionLimits, FusionOptions, the environment
// lookup, the claim table type and the pipeline plan (spec §1-§3); the tables themselves come
// from the backend folders (find_claim_table, claim_table_of in fusebox/session.h).
//
//   fusebox::FusionOptions o = fusebox::FusionOptions::for_target(fusebox::FusionTarget::Cuda);
//   o.fusion_limits = fusebox::FusionLimits{8, 4};   // kept: explicit limits win
//   auto parsed = fusebox::parse_fusion_options("skip_fusion=1,fk_fusion=0", o);
//
// Link fusebox_fusion to use it.
#pragma once

#include "fusebox/status.h"
#include "ir/claim_table.h"
#include "fusion/env.h"
#include "fusion/options.h"
#include "fusion/pipeline_plan.h"
