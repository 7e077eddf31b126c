// What the runtime needs from a backend: run one node of a compiled graph on host arrays.
#pragma once

#include <span>
#include <string_view>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  // `outputs` are allocated with the node's concrete result shapes; contents undefined.
  virtual Status execute(const Node& node, std::span<const Array> inputs,
                         std::span<Array> outputs) const = 0;
};

// The CPU backend running every node through the reference kernels.
const Backend& cpu_reference_backend();

}  // namespace fusebox
