// The CPU region executor: an elementwise_region runs as one pass over its output.
//
//   output index space, cut into tiles of kTile elements, tiles spread over all cores
//   per tile:  load operands -> run the body's steps over tile registers -> store results
//
//   operand  contiguous and full-size: the step reads the input memory in place
//            repeating along the last axis (a [C] vector over [..., C]), runs of more than a
//            chunk: written out once per run over a chunk plus a period, read in place
//            other broadcasts (any numpy pattern, by real strides, 0 on stretched dims): gathered
//            into a register; rank-0 operands and body constants are filled once per thread
//   register kTile values in the value's storage type (f16 stays f16), so every step rounds
//            exactly as the unfused op does; registers are reused after a value's last use
//   step     a vectorised loop for common ops on f32/f64/i32/i64 (tanh, exp, sigmoid, silu and
//            tanh-gelu by simd_math.h); every other op and dtype runs the reference kernel on
//            the tile, which keeps its exact semantics
//
// Intermediates never leave the tile registers: the region reads each input once and writes
// each output once.
//
// Generated code (region_jit.h) replaces the interpreter when the build has LLVM and every step
// has code: then a region runs as one loop with all steps in vector registers, over chunks of
// kJitChunk elements spread over all cores; broadcast operands are read as above per chunk.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <vector>

#include "backends/cpu/region_jit.h"
#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace fusebox::cpu {

inline constexpr int64_t kTile = 512;
inline constexpr int64_t kJitChunk = 4096;  // a multiple of kJitMaxLanes
// Auto generates code for runs of at least this many elements: below it the interpreter is as
// fast and a first run need not wait for code generation. A long body generates code from fewer
// elements, at kJitMinElementSteps (elements x steps): the interpreter fills a register with each
// repeated operand and passes over a tile per step, which for a 100-step chain on 1024 elements
// cost more than the rest of a lazy cache-hit run.
inline constexpr int64_t kJitMinElements = int64_t(1) << 14;
inline constexpr int64_t kJitMinElementSteps = int64_t(1) << 16;
// Outputs of at least this many bytes are written with non-temporal stores: they would not stay
// in the last-level cache anyway.
inline constexpr int64_t kStreamingBytes = int64_t(16) << 20;

// How regions run: Auto generates code for large runs (kJitMinElements), Interpreter never does,
// Jit does for every run it can (tests). Without LLVM in the build all three interpret.
enum class Codegen { Auto, Interpreter, Jit };

class RegionProgram {
 public:
  // Compiles an elementwise_region node, or a single element-wise node as a one-op region
  // (the unfused fast path: every op alone through the same loops).
  static Expected<std::shared_ptr<const RegionProgram>> compile(const Node& node,
                                                                std::span<const TensorType> operand_types,
                                                                Codegen codegen = Codegen::Auto);
  // Whether `node` can be compiled (an element-wise step whose result has the broadcast shape).
  static bool supports(const Node& node, std::span<const TensorType> operand_types,
                       const TensorType& result_type);

  // Runs over the operands; outputs are preallocated with the broadcast shape.
  Status run(std::span<const Array> inputs, std::span<Array> outputs) const;

  // Why generated code does not run this region ("" when it may).
  const std::string& jit_unsupported() const { return jit_unsupported_; }

  struct Step;

 private:
  RegionProgram() = default;
  // The kernel for a variant, generated on first use; null when code generation failed in Auto
  // (the interpreter runs), an error when it failed in Jit.
  Expected<std::shared_ptr<const JitKernel>> jit_kernel(const JitVariant& variant) const;
  Status run_interpreted(std::span<const Array> inputs, std::span<Array> outputs) const;
  Status run_generated(const JitKernel& kernel, std::span<const Array> inputs, std::span<Array> outputs) const;
  // Whether `total` elements through every step are worth waking other threads: at least 8 tiles
  // (4096 elements) and 2^15 element-steps. Below that a parallel region costs more than it
  // saves, and far more when the cores are busy with other processes (a sleeping worker is woken
  // at the scheduler's pace: a region over 1024 elements took milliseconds instead of
  // microseconds on a loaded host).
  bool worth_threads(int64_t total) const;

  std::shared_ptr<const Graph> body_;
  std::vector<Step> steps_;
  std::vector<DType> operand_dtypes_;
  std::vector<int> operand_reg_;   // register of each operand (loaded per tile)
  std::vector<int> output_reg_;    // register of each result
  std::vector<int> constant_regs_; // registers filled once per thread
  std::vector<std::shared_ptr<const Array>> constant_arrays_;
  int num_regs_ = 0;
  Codegen codegen_ = Codegen::Auto;
  std::string jit_unsupported_;
  mutable std::mutex jit_mu_;
  // Generated kernels by repeated operands, one map per streaming choice (found without a key copy).
  mutable std::map<std::vector<bool>, std::shared_ptr<const JitKernel>> jit_kernels_[2];
  mutable bool jit_failed_ = false;
};

}  // namespace fusebox::cpu
