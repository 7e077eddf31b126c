// The one-call entry points of the fusion compiler (spec §1.3):
//
//   Graph fused = *fuse(graph, FusionTarget::Cpu, claims);
//   auto [g, report] = *Fuse(FusionTarget::Cuda, claims).options(o).limits(l).merge_env().run_with_report(graph);
//
// `claims` is the target's claim table (ir/claim_table.h): fusion holds none of its own; the
// runtime takes it from the target's backend folder (find_claim_table in backends/registry).
//
// Contract: graph inputs keep their names and outputs keep their positions. Options resolve as
// spec §1.3 says: merge_env (when asked) -> per-target forced unfuse (unless keep) -> limits
// default by target -> apply_native_fk_defaults. No state outside the call: compiles are
// re-entrant and may run on several threads at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "fusion/env.h"
#include "fusion/options.h"
#include "fusion/pass.h"
#include "fusion/report.h"
#include "ir/graph.h"

namespace fusebox {

struct FuseResult {
  Graph graph;
  FusionReport report;
};

class Fuse {
 public:
  // FUSEBOX_CHECKs that the table is the target's.
  Fuse(FusionTarget target, const ClaimTable& claims);

  Fuse& options(FusionOptions o) { options_ = std::move(o); return *this; }
  Fuse& limits(FusionLimits l) { limits_ = l; return *this; }
  Fuse& skip_fusion() { skip_ = true; return *this; }
  // Apply FUSEBOX_*/RLX_* overrides from `env` (the process environment by default).
  Fuse& merge_env(EnvLookup env = process_env()) { env_ = std::move(env); return *this; }
  // Lets canonicalize fold constants (the runtime passes its reference evaluator).
  Fuse& evaluator(ConstantEvaluator e) { evaluate_ = std::move(e); return *this; }
  Fuse& verify_each_pass(bool on = true) { verify_each_ = on; return *this; }
  // Symbol sizes for the report's byte estimate (unbound symbols count as 1).
  Fuse& report_sizes(SymbolBindings sizes) { sizes_ = std::move(sizes); return *this; }

  // The resolved options and the pass list this builder would run.
  FusionOptions resolved_options() const;
  std::vector<std::string> passes() const;

  Expected<Graph> run(const Graph& g) const;
  Expected<FuseResult> run_with_report(const Graph& g) const;

 private:
  FusionTarget target_;
  const ClaimTable* claims_;
  std::optional<FusionOptions> options_;
  std::optional<FusionLimits> limits_;
  bool skip_ = false;
  std::optional<EnvLookup> env_;
  ConstantEvaluator evaluate_;
  bool verify_each_ = false;
  SymbolBindings sizes_;
};

Expected<Graph> fuse(const Graph& g, FusionTarget target, const ClaimTable& claims);

}  // namespace fusebox
