// Shared helpers for unit tests: random arrays, running one op through the runtime and directly on
// its reference kernel with poisoned outputs, and comparisons with a tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "fusebox/session.h"

namespace fusebox::testing {

// A backend and its CPU region codegen, as tests pick them (`fusebox run --executor`'s choices).
struct BackendChoice {
  const char* backend;
  cpu::Codegen codegen;
};
inline constexpr BackendChoice kReference{"reference", cpu::Codegen::Auto};
inline constexpr BackendChoice kCpu{"cpu", cpu::Codegen::Auto};
inline constexpr BackendChoice kCpuInterpreter{"cpu", cpu::Codegen::Interpreter};
inline constexpr BackendChoice kCpuJit{"cpu", cpu::Codegen::Jit};
inline void use_backend(CompileOptions& o, BackendChoice c) {
  o.backend = c.backend;
  o.cpu.codegen = c.codegen;
}

// Uniform values in [lo, hi) from a fixed seed (integers: rounded toward zero; bool: p=0.5).
Array random_array(DType dtype, std::vector<int64_t> shape, uint64_t seed, double lo = -2.0,
                   double hi = 2.0);
Array array_f32(std::vector<int64_t> shape, std::vector<float> values);
Array array_of(DType dtype, std::vector<int64_t> shape, std::vector<double> values);
// Like array_of but through Array::set_i64, so that 64-bit integers keep every bit.
Array array_of_ints(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> values);

// Builds a one-node graph whose operands are inputs "in0", "in1", ... of the arrays' types and
// runs it on the CPU reference backend. Fails the calling test on any error.
std::vector<Array> run_op(Op op, const std::vector<Array>& inputs, Attrs attrs = {});
// Like run_op but returns the status instead of failing.
Expected<std::vector<Array>> try_run_op(Op op, const std::vector<Array>& inputs, Attrs attrs = {});
// The same one-node graph compiled with `options` (another executor, fusion on).
Expected<std::vector<Array>> try_run_op_with(Op op, const std::vector<Array>& inputs, Attrs attrs,
                                             const CompileOptions& options);
// The one result of run_op for a single-result op; an empty Array when the run failed.
Array run_op1(Op op, const std::vector<Array>& inputs, Attrs attrs = {});

// The bytes that run_reference_poisoned fills results with before each direct kernel run.
inline constexpr uint8_t kPoisonBytes[] = {0xFF, 0x00, 0x5A};
// Runs one op through the runtime like run_op, then directly on its CPU reference kernel
// (cpu::run_reference) once per byte of kPoisonBytes, on results pre-filled with that byte. Every
// direct run must succeed and agree byte for byte with the runtime's results, which proves the
// kernel writes every result element; fails the calling test otherwise. Returns the runtime's
// results.
std::vector<Array> run_reference_poisoned(Op op, const std::vector<Array>& inputs, Attrs attrs = {});

// Element-wise |a-b| <= atol + rtol*|b| (NaN equals NaN); shapes and dtypes must match.
::testing::AssertionResult arrays_close(const Array& actual, const Array& expected,
                                        double rtol = 1e-6, double atol = 1e-6);
// |a-b| <= rel * max(1, max|expected|) for every element (the fused-equals-reference check of
// STYLE.md §6); shapes must match.
::testing::AssertionResult close_to_scale(const Array& actual, const Array& expected, double rel = 1e-5);
// How many nodes of `g` have op `op`.
size_t count_op(const Graph& g, Op op);
// The text of a file under tests/ (e.g. "lit/ir/ops-roundtrip.fbir"); empty when unreadable.
std::string read_test_file(const std::string& relative);

// `g` compiled unfused on the reference backend (the oracle) and with `options` (the plan under
// test), in one Session.
struct OracleAndPlan {
  Executable reference;
  Executable plan;
};
Expected<OracleAndPlan> compile_against_reference(const Graph& g, const CompileOptions& options);

// The first node of `g` with op `op` (null: none).
const Node* find_node(const Graph& g, Op op);
// The name of the backend that runs the first node with op `op` of `exe` ("absent": none).
std::string backend_of(const Executable& exe, Op op);
// The graph of .fbir text; fails the calling test (and returns an empty graph) when it does not parse.
Graph parse_or_fail(const std::string& text);

// "2,3,4": dims as the .fbir text of a shape or a list attribute writes them.
std::string dims_text(std::initializer_list<int64_t> dims);
// A one-node graph of `op` over inputs "in0", "in1", ... of the arrays' types, its result typed
// `result`.
Graph one_node(Op op, const std::vector<Array>& in, const Attrs& attrs, const TensorType& result);
// The same over inputs of `types`, the result typed by shape inference (which must accept it).
Graph one_node(Op op, const std::vector<TensorType>& types, const Attrs& attrs);
// Runs a host kernel of one operand and one result directly, the result (of `result`'s type)
// pre-filled with the byte `poison`.
Expected<Array> run_host_kernel(const Kernel& kernel, const Array& in, const TensorType& result,
                                uint8_t poison);
// Runs `op` over `in` with backend `backend`'s kernel directly (claimed, compiled, run on its
// device), the result (typed as `like`) pre-filled with the byte `poison`, so that an element the
// kernel does not write shows. A refusal is an error carrying the claim's reason.
Expected<Array> run_one_kernel(const std::string& backend, Op op, const std::vector<Array>& in, const Attrs& attrs,
                               const Array& like, uint8_t poison);

// Every element as double.
std::vector<double> to_doubles(const Array& a);
// Every element as int64_t (through Array::get_i64).
std::vector<int64_t> to_ints(const Array& a);

// Compiles `g` (one u8 input named "frame" of shape `frame`) fused with `options` and unfused on
// the reference backend, runs both on a random frame per seed, and expects result 0 to agree
// within 1e-6 relative and absolute (a normalising region may contract sub and mul). Returns the
// fused graph for the caller's structural checks (empty when compiling failed).
Graph expect_frame_program_matches_reference(const Graph& g, std::optional<FusionOptions> options,
                                             const std::vector<int64_t>& frame, std::initializer_list<uint64_t> seeds);

}  // namespace fusebox::testing
