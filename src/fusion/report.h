// FusionReport (spec §4.5): what fusion did to one function and what it refused, with reasons.
//
//   fusion report @chain5 (target cpu)
//     nodes    5 -> 1
//     kernels  5 -> 1
//     bytes    50.3 MB -> 12.6 MB
//     fused    elementwise_region x1 (fused_mul_add_relu_tanh_add: 5 ops, 3 inputs, 1 output)
//     missed   none
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "fusion/options.h"
#include "fusion/verdict.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"

namespace fusebox {

struct FusedEntry {
  std::string kind;  // op keyword: elementwise_region, fused_matmul_bias_act, ...
  std::string name;  // region name or node description
  size_t ops = 0;    // primitive ops inside
  size_t inputs = 0;
  size_t outputs = 0;
};

struct FusionReport {
  std::string function;
  FusionTarget target = FusionTarget::Cpu;
  size_t nodes_before = 0, nodes_after = 0;
  size_t kernels_before = 0, kernels_after = 0;  // launches: every node but constants
  double bytes_before = 0, bytes_after = 0;      // reads + writes of every kernel
  std::string size_note;                         // how symbols were sized for the byte estimate
  std::vector<FusedEntry> fused;
  std::vector<MissedFusion> missed;
  std::vector<std::pair<std::string, std::string>> notes;  // (topic, line): FusionRemarks::notes
  std::vector<std::string> skipped_passes;       // planned but not in this build

  std::string to_string() const;
};

// Builds the report of `before` -> `after`. Symbols take their value from `sizes` when bound
// there, else 1; unknown dims count as 1.
FusionReport make_fusion_report(const Graph& before, const Graph& after, FusionTarget target,
                                const FusionRemarks& remarks,
                                const std::map<std::string, int64_t>& stats,
                                const SymbolBindings& sizes = {});

// Estimated bytes read and written by the kernels of a graph (see make_fusion_report).
double estimate_bytes_moved(const Graph& g, const SymbolBindings& sizes);
size_t count_kernels(const Graph& g);

// An error listing every missed fusion when there is any (spec §4.5 assert_fusion_clean).
Status assert_fusion_clean(const FusionReport& report);

}  // namespace fusebox
