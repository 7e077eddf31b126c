#include "backends/cpu/reference_backend.h"

#include "backends/cpu/reference/reference.h"
#include "backends/host_backend.h"

namespace fusebox::cpu {

namespace {

class ReferenceNodeKernel final : public Kernel {
 public:
  explicit ReferenceNodeKernel(const Node& n) : node_(n) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return run_reference(node_, ins, outs);
  }
  std::string_view kind() const override { return "reference"; }

 private:
  Node node_;  // a copy: kernels outlive the graph they were compiled from
};

class ReferenceBackend final : public HostBackend {
 public:
  std::string_view name() const override { return "reference"; }
  Claim claims(const Graph&, const Node&) const override { return Claim::accept(); }
  Expected<std::shared_ptr<const Kernel>> compile(const Graph&, const Node& n) const override {
    return make_reference_kernel(n);
  }
};

}  // namespace

std::shared_ptr<const Kernel> make_reference_kernel(const Node& n) { return std::make_shared<ReferenceNodeKernel>(n); }

std::shared_ptr<Backend> make_reference_backend() { return std::make_shared<ReferenceBackend>(); }

}  // namespace fusebox::cpu
