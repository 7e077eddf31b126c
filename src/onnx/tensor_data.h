// ONNX element types and TensorProto data as fusebox DTypes and Arrays.
#pragma once

#include <optional>
#include <string>

#include "fusebox/status.h"
#include "ir/array.h"
#include "onnx_proto.h"

namespace fusebox::onnx_import {

// The fusebox type of an ONNX TensorProto::DataType, or nullopt for types fusebox lacks
// (strings, complex, u16/i16/u32/u64, float8).
std::optional<DType> dtype_from_onnx(int32_t onnx_type);
// "FLOAT", "UINT16", ... for messages.
std::string onnx_type_name(int32_t onnx_type);

// Where tensors stored as external data live; empty: external data is refused.
struct ExternalDataDir {
  std::string path;
};

// The tensor's data as an Array. Every inconsistency (negative dims, a data field of the wrong
// length, an unsupported type, a missing external file) is an error naming `what`.
Expected<Array> tensor_to_array(const onnx::TensorProto& t, const std::string& what,
                                const ExternalDataDir& external);

}  // namespace fusebox::onnx_import
