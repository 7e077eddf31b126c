// Runs a list of named passes over a graph. The list is data: the pipeline of a target comes
// from plan_pipeline (pipeline_plan.h); `fusebox opt --passes=a,b` passes any list.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fusion/pass.h"

namespace fusebox {

struct PipelineHooks {
  // Verify the graph after every pass (tests and debug builds turn it on).
  bool verify_each = false;
  // Planned passes this build does not implement are skipped (recorded in ctx.stats as
  // "pipeline.skipped.<name>") instead of failing; explicit --passes lists fail on them.
  bool skip_unavailable = false;
  std::function<void(std::string_view pass, const Graph&)> after_pass;
};

Status run_pipeline(Graph& g, const std::vector<std::string>& passes, PassContext& ctx,
                    const PipelineHooks& hooks = {});

// Comma-separated list to names; empty items are errors.
Expected<std::vector<std::string>> parse_pass_list(std::string_view text);

}  // namespace fusebox
