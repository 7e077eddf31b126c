// The compiled, immutable part of an Executable: shared by every copy and every thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "runtime/memory_plan.h"
#include "runtime/placement.h"
#include "runtime/session.h"

namespace fusebox {

struct Executable::Plan {
  Graph graph;
  FusionReport report;
  Placement placement;
  MemoryPlan memory;
  std::vector<std::shared_ptr<const Kernel>> kernels;  // per node; null where `constants` holds it
  // Per value: a constant read only by kernels (which never write their operands) shares the
  // graph's array instead of being copied every run. A returned constant runs its kernel, so
  // the caller owns its copy.
  std::vector<Buffer> constants;
  // Per node: a reshape that runs no kernel, its result the operand's buffer under the new
  // shape (kernels never write their operands). Not for a returned value, whose memory the
  // caller gets to own alone.
  std::vector<bool> aliases;
  std::vector<std::string> output_names;
  bool device_io = false;       // CompileOptions::device_io
  bool run_time_sizes = false;  // the graph has bind_symbols nodes (ir/bind_symbols.h)
  // Per resident: a constant's copy on a device, made by the first run that needs it and kept
  // (constants never change), so weights cross to a GPU once.
  mutable std::mutex uploads_mu;
  mutable std::vector<Buffer> uploaded;
};

// The recordings of an executable's device_io runs (one per input buffers and sizes).
std::shared_ptr<Executable::Recordings> make_recordings();

}  // namespace fusebox
