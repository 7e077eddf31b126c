#include "backends/registry/registry.h"

#include <mutex>

#include "backends/cpu/claims.h"
#include "backends/cpu/reference_backend.h"
#include "backends/cuda/claims.h"
#ifdef FUSEBOX_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#endif
#include "backends/metal/claims.h"
#include "backends/mlx/claims.h"
#include "backends/rocm/claims.h"
#include "backends/tpu/claims.h"
#include "backends/wgpu/claims.h"

namespace fusebox {

namespace {

struct Row {
  std::string name;
  BackendFactory make;
};

// The built-in rows; "cuda" when the build has the CUDA backend (making one fails with the
// reason on a machine without a GPU).
std::vector<Row> builtin_rows() {
  return {
      {"cpu", [](const BackendOptions& o) -> Expected<std::shared_ptr<Backend>> { return cpu::make_cpu_backend(o.cpu); }},
      {"reference", [](const BackendOptions&) -> Expected<std::shared_ptr<Backend>> { return cpu::make_reference_backend(); }},
#ifdef FUSEBOX_HAVE_CUDA
      {"cuda", [](const BackendOptions& o) -> Expected<std::shared_ptr<Backend>> { return cuda::make_cuda_backend(0, o.cuda); }},
#endif
  };
}

struct Registry {
  std::mutex mu;
  std::vector<Row> rows = builtin_rows();
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

const ClaimTable* find_claim_table(std::string_view target) {
  // One row per fusion target; the table names its target.
  for (const ClaimTable* t : {&cpu_claims(), &cuda_claims(), &metal_claims(), &mlx_claims(), &wgpu_claims(),
                              &rocm_claims(), &tpu_claims()}) {
    if (t->target == target) return t;
  }
  return nullptr;
}

Expected<std::shared_ptr<Backend>> make_backend(std::string_view name, const BackendOptions& options) {
  BackendFactory make;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const Row& row : r.rows) {
      if (row.name == name) make = row.make;
    }
  }
  if (!make) return Status::invalid("unknown backend '" + std::string(name) + "' (backends: " + backend_choices() + ")");
  return make(options);
}

std::vector<std::string> backend_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const Row& row : r.rows) names.push_back(row.name);
  return names;
}

std::string backend_choices() {
  std::string s;
  for (const std::string& name : backend_names()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

Status register_backend(std::string name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Row& row : r.rows) {
    if (row.name == name) return Status::invalid("backend '" + name + "' is already registered");
  }
  r.rows.push_back({std::move(name), std::move(factory)});
  return Status::ok();
}

}  // namespace fusebox
