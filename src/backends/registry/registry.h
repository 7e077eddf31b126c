// Backends by name. Adding a backend is a folder under src/backends/ and one row in
// registry.cpp; `fusebox run --backend NAME` and CompileOptions::backend find it here.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/options.h"
#include "fusebox/status.h"
#include "ir/claim_table.h"

namespace fusebox {

// Every backend's options; each backend reads its own member.
struct BackendOptions {
  CpuBackendOptions cpu;
  CudaBackendOptions cuda;
};

using BackendFactory = std::function<Expected<std::shared_ptr<Backend>>(const BackendOptions&)>;

// A new backend of that name. An unknown name is an error listing the known ones.
Expected<std::shared_ptr<Backend>> make_backend(std::string_view name, const BackendOptions& options = {});
std::vector<std::string> backend_names();  // built-in rows first, then registered ones
std::string backend_choices();             // "cpu, reference"

// The claim table of a fusion target by its name ("cpu", "cuda", "metal", ...), from the target's
// backend folder; null for a name with none. The runtime hands it to the fusion pipeline.
const ClaimTable* find_claim_table(std::string_view target);

// Adds a row at run time (tests, embedders with a backend of their own). A taken name is an error.
Status register_backend(std::string name, BackendFactory factory);

}  // namespace fusebox
