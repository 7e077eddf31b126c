// Concrete shapes of every value for one set of input shapes, computed once and reused while
// the sizes repeat: a run with sizes seen before does no shape inference at all.
//
// The key is the input shapes (every rank and dim, in input order); they decide the symbol
// bindings and so every other shape. The cache keeps the few most recent keys (a server
// alternating between two batch sizes hits on both) and is safe to use from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"

namespace fusebox {

using ShapeKey = std::vector<int64_t>;  // per input: rank, then its dims

// A graph with bind_symbols nodes (ir/bind_symbols.h) is planned in steps: up to and including
// the first such node from the input sizes, then, each time one has run, up to the next with its
// symbols bound from the values it read. `planned` counts the nodes whose results have dims.
struct ShapePlan {
  SymbolBindings bindings;
  std::vector<std::vector<int64_t>> dims;  // per value
  size_t planned = 0;
  ShapeKey key;  // what it is cached under: the input sizes, then each bind's node and values
};

// Infers the concrete result shapes of the nodes up to the first bind_symbols (every node when
// there is none) and checks them against the declared types. `input_dims` follow g.inputs();
// errors name the node.
Expected<ShapePlan> plan_shapes(const Graph& g, SymbolBindings bindings,
                                const std::vector<std::vector<int64_t>>& input_dims);

// Goes on from plan.planned to the next bind_symbols node (or the end).
Status extend_shapes(const Graph& g, ShapePlan& plan);

class ShapePlanCache {
 public:
  explicit ShapePlanCache(size_t capacity = 8) : capacity_(capacity) {}
  std::shared_ptr<const ShapePlan> find(const ShapeKey& key);
  void insert(ShapeKey key, std::shared_ptr<const ShapePlan> plan);
  size_t computed() const;  // plans inserted so far

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  size_t computed_ = 0;
  std::vector<std::pair<ShapeKey, std::shared_ptr<const ShapePlan>>> entries_;  // most recent first
};

}  // namespace fusebox
