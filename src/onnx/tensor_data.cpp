#include "onnx/tensor_data.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>

#include "ir/size.h"

namespace fusebox::onnx_import {

// raw_data is little-endian; fusebox stores arrays in host order and copies it as is.
static_assert(std::endian::native == std::endian::little, "ONNX import assumes a little-endian host");

namespace {

using TP = onnx::TensorProto;

// Larger tensors than this are refused before anything is allocated: a corrupt dims field must
// not turn into a huge allocation.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 34;  // 16 GiB

Status fail(const std::string& what, const std::string& msg) {
  return Status::invalid(what + ": " + msg);
}

// Copies integer-typed repeated fields (int32_data holds every type narrower than 32 bits,
// float16/bfloat16 as their bit patterns).
template <typename Field>
void copy_ints(const Field& field, Array& a) {
  for (int64_t i = 0; i < a.numel(); ++i) {
    auto v = field.Get(static_cast<int>(i));
    switch (a.dtype()) {
      case DType::F16:
      case DType::BF16: a.data<uint16_t>()[i] = static_cast<uint16_t>(v); break;
      case DType::Bool: a.data<bool>()[i] = v != 0; break;
      default: a.set_i64(i, static_cast<int64_t>(v)); break;
    }
  }
}

Expected<std::string> read_external(const TP& t, const std::string& what, const ExternalDataDir& dir) {
  if (dir.path.empty()) {
    return fail(what, "stored as external data, which needs the model's directory (import the file, not bytes)");
  }
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      return fail(what, "external data entry '" + kv.key() + "' is not a number: '" + kv.value() + "'");
    }
  }
  if (location.empty()) return fail(what, "external data has no location");
  if (offset < 0) return fail(what, "external data offset is negative");
  std::string path = dir.path + "/" + location;
  std::ifstream f(path, std::ios::binary);
  if (!f) return fail(what, "cannot open external data file '" + path + "'");
  f.seekg(0, std::ios::end);
  int64_t size = static_cast<int64_t>(f.tellg());
  if (offset > size) return fail(what, "external data offset is past the end of '" + path + "'");
  if (length < 0) length = size - offset;
  if (length > size - offset) return fail(what, "external data runs past the end of '" + path + "'");
  std::string bytes(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  if (!f.read(bytes.data(), length)) return fail(what, "cannot read external data file '" + path + "'");
  return bytes;
}

}  // namespace

std::optional<DType> dtype_from_onnx(int32_t onnx_type) {
  switch (onnx_type) {
    case TP::FLOAT: return DType::F32;
    case TP::UINT8: return DType::U8;
    case TP::INT8: return DType::I8;
    case TP::INT32: return DType::I32;
    case TP::INT64: return DType::I64;
    case TP::BOOL: return DType::Bool;
    case TP::FLOAT16: return DType::F16;
    case TP::DOUBLE: return DType::F64;
    case TP::BFLOAT16: return DType::BF16;
    case TP::INT16: return DType::I16;
    case TP::UINT16: return DType::U16;
    case TP::UINT32: return DType::U32;
    case TP::UINT64: return DType::U64;
    default: return std::nullopt;
  }
}

std::string onnx_type_name(int32_t onnx_type) {
  if (TP::DataType_IsValid(onnx_type)) return TP::DataType_Name(static_cast<TP::DataType>(onnx_type));
  return "data type " + std::to_string(onnx_type);
}

Expected<Array> tensor_to_array(const TP& t, const std::string& what, const ExternalDataDir& external) {
  std::optional<DType> dtype = dtype_from_onnx(t.data_type());
  if (!dtype) return fail(what, "element type " + onnx_type_name(t.data_type()) + " is not supported");
  if (t.has_segment()) return fail(what, "segmented tensors are not supported");
  std::vector<int64_t> dims;
  for (int64_t d : t.dims()) {
    if (d < 0) return fail(what, "has a negative dim " + std::to_string(d));
    dims.push_back(d);
  }
  // The size limit first (a zero-element [0, 2^61] included), then the byte cap.
  Status size = check_size(dims);
  if (!size.is_ok()) return fail(what, "shape " + size.message());
  int64_t numel = product(dims);
  int64_t nbytes = numel * dtype_size(*dtype);
  if (nbytes > kMaxTensorBytes) return fail(what, "is too large (" + std::to_string(nbytes) + " bytes)");

  std::string external_bytes;
  const std::string* raw = nullptr;
  if (t.data_location() == TP::EXTERNAL) {
    FUSEBOX_ASSIGN_OR_RETURN(external_bytes, read_external(t, what, external));
    raw = &external_bytes;
  } else if (t.has_raw_data()) {
    raw = &t.raw_data();
  }
  if (raw) {
    if (static_cast<int64_t>(raw->size()) != nbytes) {
      return fail(what, "raw data has " + std::to_string(raw->size()) + " bytes, " + std::to_string(numel) +
                            " elements of " + std::string(dtype_name(*dtype)) + " need " + std::to_string(nbytes));
    }
    Array a(*dtype, dims);
    if (nbytes > 0) std::memcpy(a.raw(), raw->data(), static_cast<size_t>(nbytes));
    return a;
  }

  // Typed fields: exactly one holds the data, with one entry per element.
  auto check_count = [&](int count, const char* field) -> Status {
    if (count != numel) {
      return fail(what, std::string(field) + " has " + std::to_string(count) + " entries for " +
                            std::to_string(numel) + " elements");
    }
    return Status::ok();
  };
  // ONNX keeps u32 and u64 in uint64_data, the narrower integers, bool and f16/bf16 in int32_data.
  const bool wide_unsigned = *dtype == DType::U32 || *dtype == DType::U64;
  int count = *dtype == DType::F32   ? t.float_data_size()
              : *dtype == DType::F64 ? t.double_data_size()
              : *dtype == DType::I64 ? t.int64_data_size()
              : wide_unsigned        ? t.uint64_data_size()
                                     : t.int32_data_size();
  const char* field = *dtype == DType::F32   ? "float_data"
                      : *dtype == DType::F64 ? "double_data"
                      : *dtype == DType::I64 ? "int64_data"
                      : wide_unsigned        ? "uint64_data"
                                             : "int32_data";
  // Checked before allocating, so a corrupt dims field cannot ask for a huge array.
  FUSEBOX_RETURN_IF_ERROR(check_count(count, field));
  Array a(*dtype, dims);
  switch (*dtype) {
    case DType::F32:
      for (int64_t i = 0; i < numel; ++i) a.data<float>()[i] = t.float_data(static_cast<int>(i));
      break;
    case DType::F64:
      for (int64_t i = 0; i < numel; ++i) a.data<double>()[i] = t.double_data(static_cast<int>(i));
      break;
    case DType::I64:
      copy_ints(t.int64_data(), a);
      break;
    case DType::U32:
    case DType::U64:
      copy_ints(t.uint64_data(), a);
      break;
    default:
      copy_ints(t.int32_data(), a);
      break;
  }
  return a;
}

}  // namespace fusebox::onnx_import
