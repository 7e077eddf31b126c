#include "backends/cpu/cpu_backend.h"

#include <vector>

#include "backends/cpu/contraction_kernel.h"
#include "backends/cpu/reference_backend.h"
#include "backends/host_backend.h"

namespace fusebox {

std::string_view codegen_name(cpu::Codegen c) {
  switch (c) {
    case cpu::Codegen::Interpreter: return "interpreter";
    case cpu::Codegen::Jit: return "jit";
    case cpu::Codegen::Auto: break;
  }
  return "auto";
}

std::optional<cpu::Codegen> parse_codegen(std::string_view name) {
  for (cpu::Codegen c : {cpu::Codegen::Auto, cpu::Codegen::Interpreter, cpu::Codegen::Jit}) {
    if (codegen_name(c) == name) return c;
  }
  return std::nullopt;
}

namespace cpu {

namespace {

class RegionKernel final : public Kernel {
 public:
  RegionKernel(std::shared_ptr<const RegionProgram> p, bool region) : program_(std::move(p)), region_(region) {}
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return program_->run(ins, outs);
  }
  std::string_view kind() const override { return region_ ? "region" : "elementwise"; }

 private:
  std::shared_ptr<const RegionProgram> program_;
  bool region_;
};

class CpuBackend final : public HostBackend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options) : options_(options) {}
  std::string_view name() const override { return "cpu"; }
  Claim claims(const Graph&, const Node&) const override { return Claim::accept(); }
  Expected<std::shared_ptr<const Kernel>> compile(const Graph& g, const Node& n) const override {
    std::vector<TensorType> in;
    for (ValueId v : n.inputs) in.push_back(g.type(v));
    bool region = n.op == Op::ElementwiseRegion;
    if (region || (n.outputs.size() == 1 && RegionProgram::supports(n, in, g.type(n.outputs[0])))) {
      FUSEBOX_ASSIGN_OR_RETURN(auto program, RegionProgram::compile(n, in, options_.codegen));
      return std::shared_ptr<const Kernel>(std::make_shared<RegionKernel>(std::move(program), region));
    }
    if (options_.onednn) {
      FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> k, make_onednn_kernel(g, n, options_.codegen));
      if (k) return k;
    }
    return make_reference_kernel(n);
  }

 private:
  CpuBackendOptions options_;
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  return std::make_shared<CpuBackend>(options);
}

}  // namespace cpu
}  // namespace fusebox
