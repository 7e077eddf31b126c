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

struct ShapePlan {
  SymbolBindings bindings;
  std::vector<std::vector<int64_t>> dims;  // per value
};

// Infers every node's concrete result shapes and checks them against the declared types.
// `input_dims` follow g.inputs(); errors name the node.
Expected<ShapePlan> plan_shapes(const Graph& g, SymbolBindings bindings,
                                const std::vector<std::vector<int64_t>>& input_dims);

using ShapeKey = std::vector<int64_t>;  // per input: rank, then its dims

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
