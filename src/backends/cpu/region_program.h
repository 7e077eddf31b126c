// The CPU region executor: an elementwise_region runs as one pass over its output.
//
//   output index space, cut into tiles of kTile elements, tiles spread over all cores
//   per tile:  load operands -> run the body's steps over tile registers -> store results
//
//   operand  contiguous and full-size: the step reads the input memory in place
//            broadcast (any numpy pattern, by real strides, 0 on stretched dims): gathered
//            into a register; rank-0 operands and body constants are filled once per thread
//   register kTile values in the value's storage type (f16 stays f16), so every step rounds
//            exactly as the unfused op does; registers are reused after a value's last use
//   step     a vectorised loop for common ops on f32/f64/i32/i64 (tanh, exp, sigmoid, silu and
//            tanh-gelu by simd_math.h); every other op and dtype runs the reference kernel on
//            the tile, which keeps its exact semantics
//
// Intermediates never leave the tile registers: the region reads each input once and writes
// each output once.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace fusebox::cpu {

inline constexpr int64_t kTile = 512;

class RegionProgram {
 public:
  // Compiles an elementwise_region node, or a single element-wise node as a one-op region
  // (the unfused fast path: every op alone through the same loops).
  static Expected<std::shared_ptr<const RegionProgram>> compile(const Node& node,
                                                                std::span<const TensorType> operand_types);
  // Whether `node` can be compiled (an element-wise step whose result has the broadcast shape).
  static bool supports(const Node& node, std::span<const TensorType> operand_types,
                       const TensorType& result_type);

  // Runs over the operands; outputs are preallocated with the broadcast shape.
  Status run(std::span<const Array> inputs, std::span<Array> outputs) const;

  struct Step;

 private:
  RegionProgram() = default;

  std::shared_ptr<const Graph> body_;
  std::vector<Step> steps_;
  std::vector<DType> operand_dtypes_;
  std::vector<int> operand_reg_;   // register of each operand (loaded per tile)
  std::vector<int> output_reg_;    // register of each result
  std::vector<int> constant_regs_; // registers filled once per thread
  std::vector<std::shared_ptr<const Array>> constant_arrays_;
  int num_regs_ = 0;
};

}  // namespace fusebox::cpu
