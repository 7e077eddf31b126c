// Placement: which backend runs each node, where each value lives, and the copies that move a
// value to the device of a node that reads it.
//
//   node      on the target backend when it claims the node, else on the CPU backend
//             (constants always on the host: they are the graph's own host arrays)
//   resident  one value on one device: residents [0, num_values) are the values where they are
//             defined (graph inputs: the host); each copy adds one
//   copy      to the host by the source's backend, or from the host by the destination's;
//             device to device goes through the host. Outputs end on the host (on the target
//             with device_io, where graph inputs also start).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

struct Copy {
  int from = 0;     // resident read
  int to = 0;       // resident written
  int backend = 0;  // the backend that copies: the device side
  bool to_host = false;
};

struct Placement {
  std::vector<std::shared_ptr<Backend>> backends;  // [0]: the target; the CPU fallback when needed
  int host = 0;                                    // a backend on the host (inputs live there)
  std::vector<int> node_backend;                   // per node
  std::vector<ValueId> resident_value;             // per resident
  std::vector<int> resident_backend;               // per resident: whose device holds it
  std::vector<std::vector<int>> operands;          // per node: the resident each operand reads
  std::vector<std::vector<Copy>> copies_before;    // per node
  std::vector<Copy> final_copies;                  // outputs brought to the host
  std::vector<int> output_resident;                // per graph output: its host resident

  size_t num_copies() const;
  // "cpu 12 nodes", or "fake 3 nodes, cpu 9 nodes, 4 copies" (backends in order, nodes counted).
  std::string summary() const;
};

using BackendMaker = std::function<Expected<std::shared_ptr<Backend>>()>;

// `fallback` makes the CPU backend; it is called only when a node is refused or the target's
// device is not the host.
// `device_io`: graph inputs are given on the target's device and outputs stay there.
Expected<Placement> place(const Graph& g, std::shared_ptr<Backend> target, const BackendMaker& fallback,
                          bool device_io = false);

}  // namespace fusebox
