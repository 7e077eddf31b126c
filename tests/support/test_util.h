// Shared helpers for unit tests: random arrays, running one op or a graph through the runtime
// with poisoned outputs, and comparisons with a tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusebox/session.h"

namespace fusebox::testing {

// Uniform values in [lo, hi) from a fixed seed (integers: rounded toward zero; bool: p=0.5).
Array random_array(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo = -2.0,
                   double hi = 2.0);
Array array_f32(std::vector<int64_t> shape, std::vector<float> values);
Array array_of(DType dtype, std::vector<int64_t> shape, std::vector<double> values);

// Builds a one-node graph whose operands are inputs "in0", "in1", ... of the arrays' types and
// runs it on the CPU reference backend. Fails the calling test on any error.
std::vector<Array> run_op(Op op, const std::vector<Array>& inputs, Attrs attrs = {});
// Like run_op but returns the status instead of failing.
Expected<std::vector<Array>> try_run_op(Op op, const std::vector<Array>& inputs, Attrs attrs = {});

// Element-wise |a-b| <= atol + rtol*|b| (NaN equals NaN); shapes and dtypes must match.
::testing::AssertionResult arrays_close(const Array& actual, const Array& expected,
                                        double rtol = 1e-6, double atol = 1e-6);
// Every element as double.
std::vector<double> to_doubles(const Array& a);

}  // namespace fusebox::testing
