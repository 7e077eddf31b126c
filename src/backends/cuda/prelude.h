// The device functions every generated kernel starts with (prelude.cpp): loads and stores of
// each dtype, and one function per element-wise step with the reference kernels' semantics
// (src/backends/cpu/reference/unary.cpp, binary.cpp): the same operation order, NaN rules,
// wrapping integer arithmetic, saturating float-to-integer casts. Kernels are compiled with
// --fmad=false, so a*b+c rounds twice as on the CPU. Transcendental functions are CUDA's (at most
// 2 ulp from the correctly rounded value, where the CPU's are within 1). It ends with the block
// reduction the row and reduction_region kernels share (fb_block_reduce with FbAdd, FbMul, FbMax,
// FbMin).
#pragma once

#include <string>
#include <string_view>

#include "ir/dtype.h"

namespace fusebox::cuda {

std::string_view prelude_source();

// The storage of float values of `dtype` (f32, f16 or bf16) for kernels that compute in float:
// the element type fb_t, FB_LOAD(s) and FB_STORE(f) (round to nearest even), and FB_ROUND(f),
// a float rounded to the dtype and kept as float.
std::string float_storage_defines(DType dtype);

}  // namespace fusebox::cuda
