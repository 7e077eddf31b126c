// The programs `fusebox demo` runs: three realistic graphs written with GraphBuilder, each with
// its inputs (activations and weights alike are graph inputs, drawn from a fixed seed, so the
// printed .fbir stays small and `fusebox run` can feed it other values).
//
//   transformer_block  pre-norm attention (4 heads) + GELU MLP, both with residual adds
//   cnn_block          conv2d -> batch_norm -> hardswish -> squeeze-excite -> residual add
//   image_pipeline     u8 HWC frame -> crops -> cast -> bilinear resize -> normalise -> CHW batch
#pragma once

#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"
#include "runtime/session.h"

namespace fusebox::cli {

struct DemoProgram {
  std::string name;
  std::string description;  // one line
  Graph graph;
  NamedArrays inputs;
  // The inputs that are weights: `fusebox demo` freezes them into constants when it compiles
  // (ir/freeze.h), as a deployed model's weights are, so both plans fold what depends on them.
  std::vector<std::string> weights;
};

// Full: the sizes the demo times. Small: the same graphs with tiny sizes, for tests.
enum class DemoScale { Full, Small };

Expected<std::vector<DemoProgram>> demo_programs(DemoScale scale = DemoScale::Full);

}  // namespace fusebox::cli
