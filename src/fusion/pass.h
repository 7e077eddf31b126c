// What a pass sees: the graph to rewrite in place and a PassContext carrying the target and its
// claim table (handed in by the caller: fusion does not depend on backends), the resolved options (passes never read the environment), remarks for the report, statistics, and
// an optional constant evaluator (injected by the runtime: fusion does not depend on backends).
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/status.h"
#include "fusion/options.h"
#include "fusion/verdict.h"
#include "ir/check.h"
#include "ir/claim_table.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox {

using ConstantEvaluator =
    std::function<Expected<std::vector<Array>>(const Node&, std::span<const Array> inputs)>;

struct PassContext {
  FusionTarget target = FusionTarget::Cpu;
  const ClaimTable* claims = nullptr;  // the target's; set by whoever runs the passes
  FusionOptions options;  // resolved (resolve_options) before the pipeline starts
  FusionRemarks remarks;
  std::map<std::string, int64_t> stats;  // "<pass>.<counter>" -> value
  ConstantEvaluator evaluate;            // empty: canonicalize folds nothing
  // Options-derived switch of spec §3: under skip_fusion, canonicalize does no recognition.
  bool recognize_patterns = true;

  // The target's claim table; FUSEBOX_CHECKs that whoever runs the passes set it.
  const ClaimTable& table() const {
    FUSEBOX_CHECK(claims) << "PassContext::claims is not set (the caller hands in the target's claim table)";
    return *claims;
  }

  void count(std::string_view pass, std::string_view counter, int64_t n = 1) {
    stats[std::string(pass) + "." + std::string(counter)] += n;
  }
};

using PassFn = Status (*)(Graph&, PassContext&);

struct PassInfo {
  std::string_view name;
  PassFn run;
  std::string_view help;
};

#define FUSEBOX_PASS(name, fn, help) Status fn(Graph& g, PassContext& ctx);
#include "fusion/passes.def"
#undef FUSEBOX_PASS

std::span<const PassInfo> all_passes();
const PassInfo* find_pass(std::string_view name);

}  // namespace fusebox
