// CUDA C++ for an elementwise_region body: one kernel per (body, variant), compiled with NVRTC.
//
//   flat     every operand is full-size and contiguous, or one repeated element; thread j
//            handles elements [j*V, j*V + V) with one V-wide load per operand and one store per
//            output (16-byte accesses for f32 at V = 4), a grid-stride loop, a scalar tail
//   strided  some operand is broadcast by strides: each element's operand offsets come from its
//            index over `rank` dims (the runtime merges dims first, so [N,C] + [C] is rank 2
//            however many dims the tensors have), 32-bit index arithmetic when it fits; when the
//            last dim allows, V elements of a row per thread (one index computation, packs)
//
// Sizes, strides and pointers are kernel arguments: a new size never recompiles. Every value
// of the body is held in its compute type (float for f32/f16/bf16, the integer itself, bool)
// and values of f16/bf16 are rounded to their dtype after every step, so each step rounds as
// the unfused op does. A step with no device code is an error, never skipped.
#pragma once

#include <cstdint>
#include <string>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox::cuda {

inline constexpr int kRegionThreads = 256;
inline constexpr int kMaxStridedRank = 8;

struct RegionVariant {
  int rank = 0;            // 0: flat; else strided over this many dims
  uint64_t repeated = 0;   // flat: bit k means operand k is one element read by every thread
  int vector = 1;          // flat: elements per thread and access (1, 2, 4, 8 or 16)
  int unroll = 1;          // flat with vector > 1: accesses in flight per thread per iteration
  bool index64 = false;    // strided: 64-bit index arithmetic
  // strided with vector > 1: each thread takes `vector` consecutive elements of the last dim
  // (its size a multiple of vector); bit k: operand k is repeated along it (stride 0), else it
  // walks it with stride 1 and is read as one pack.
  uint64_t inner_repeated = 0;
  std::string key() const;
};

struct DeviceTransform;

// A region whose operand `operand` is read through a transform (a prologue): that operand's
// pointer is the transform's source, and each element the body reads is computed by the
// transform's device function at the element's index in the transform's result.
struct RegionPrologue {
  size_t operand = 0;
  const DeviceTransform* transform = nullptr;
};

// The kernel's entry point in every generated source.
inline constexpr const char* kRegionEntry = "fb_region";

// The kernel source of `body` (an elementwise_region body: rank-0 inputs, steps, outputs) for
// `variant`. Its arguments: (long long n, const void* operand..., void* output...[, prologue
// axes][, FbShape]), FbShape = { IDX dims[rank]; IDX strides[operands][rank]; } with IDX u32 or
// long long, the prologue axes the transform's argument struct (transform_codegen.h).
Expected<std::string> region_source(const Graph& body, const RegionVariant& variant,
                                    const RegionPrologue* prologue = nullptr);

// Elements per thread of the flat variant: 16 bytes of the widest dtype the kernel reads or
// writes (4 for f32, 2 for f64, 16 for u8 alone).
int region_vector_width(const Graph& body);

// The C type a buffer of dtype d holds in generated code (bool as u8, f16/bf16 as u16).
std::string storage_type_name(DType d);
// The C type values of dtype d are computed in (float for f32/f16/bf16, bool for bool).
std::string compute_type_name(DType d);
// A stored element as its compute type, and a computed value as its storage type.
std::string load_expression(DType d, const std::string& stored);
std::string store_expression(DType d, const std::string& value);

// The device function `name(inputs..., outputs&...)` computing every step of `body` (rank-0
// values, as an elementwise_region body) with the steps of region_source: other kernels
// evaluate element-wise steps through it. An error names a step without device code.
Expected<std::string> body_function(const Graph& body, const std::string& name);
// A double as an exact literal of generated code (by its bits: NaN and infinities included).
std::string double_literal(double v);

// A body of one step: `n` with rank-0 operands of `operand_types`' dtypes (how a lone
// element-wise node runs on the GPU).
Graph single_step_body(const Node& n, const std::vector<DType>& operand_dtypes, DType result);

}  // namespace fusebox::cuda
