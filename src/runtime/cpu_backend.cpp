#include <vector>

#include "backends/cpu/reference/reference.h"
#include "backends/cpu/region_program.h"
#include "ir/outline.h"
#include "runtime/backend.h"

namespace fusebox {

namespace {

class ReferenceKernel final : public CompiledKernel {
 public:
  explicit ReferenceKernel(const Node& n) : node_(n) {}
  Status run(std::span<const Array> in, std::span<Array> out) const override {
    return cpu::run_reference(node_, in, out);
  }
  std::string_view kind() const override { return "reference"; }

 private:
  Node node_;  // a copy: kernels outlive the graph they were compiled from
};

class RegionKernel final : public CompiledKernel {
 public:
  RegionKernel(std::shared_ptr<const cpu::RegionProgram> p, bool region) : program_(std::move(p)), region_(region) {}
  Status run(std::span<const Array> in, std::span<Array> out) const override { return program_->run(in, out); }
  std::string_view kind() const override { return region_ ? "region" : "elementwise"; }

 private:
  std::shared_ptr<const cpu::RegionProgram> program_;
  bool region_;
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(cpu::Codegen codegen) : codegen_(codegen) {}
  std::string_view name() const override { return "cpu"; }
  Expected<std::shared_ptr<const CompiledKernel>> compile(const Graph& g, const Node& n) const override {
    std::vector<TensorType> in;
    for (ValueId v : n.inputs) in.push_back(g.type(v));
    bool region = n.op == Op::ElementwiseRegion;
    if (region || (n.outputs.size() == 1 && cpu::RegionProgram::supports(n, in, g.type(n.outputs[0])))) {
      FUSEBOX_ASSIGN_OR_RETURN(auto program, cpu::RegionProgram::compile(n, in, codegen_));
      return std::shared_ptr<const CompiledKernel>(std::make_shared<RegionKernel>(std::move(program), region));
    }
    return std::shared_ptr<const CompiledKernel>(std::make_shared<ReferenceKernel>(n));
  }

 private:
  cpu::Codegen codegen_;
};

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  Expected<std::shared_ptr<const CompiledKernel>> compile(const Graph&, const Node& n) const override {
    return std::shared_ptr<const CompiledKernel>(std::make_shared<ReferenceKernel>(n));
  }
};

}  // namespace

const Backend& cpu_backend(cpu::Codegen codegen) {
  static const CpuBackend automatic(cpu::Codegen::Auto), interpreter(cpu::Codegen::Interpreter), jit(cpu::Codegen::Jit);
  switch (codegen) {
    case cpu::Codegen::Interpreter: return interpreter;
    case cpu::Codegen::Jit: return jit;
    case cpu::Codegen::Auto: break;
  }
  return automatic;
}

const Backend& reference_backend() {
  static const ReferenceBackend backend;
  return backend;
}

}  // namespace fusebox
