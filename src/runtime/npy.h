// NPY files (numpy's array format) in and out of Arrays.
//
//   \x93NUMPY <major> <minor> <header length: u16 (1.0) or u32 (2.0, 3.0)>
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   <- padded with spaces + '\n'
//   <data: row-major, little-endian>
//
// Versions 1.0, 2.0 and 3.0 are read; 1.0 is written (2.0 only when the header does not fit in
// 64 KiB). Element types: '<f4' '<f8' '<f2' '|u1' '|i1' '<i4' '<i8' '|b1' (f32 f64 f16 u8 i8
// i32 i64 bool); bf16 has no numpy code and is refused when writing. Every malformed file is a
// Status naming the file and what is wrong, never a crash; bytes after the data are ignored, as
// numpy does.
#pragma once

#include <string>
#include <string_view>

#include "fusebox/status.h"
#include "ir/array.h"

namespace fusebox {

Expected<Array> read_npy(const std::string& path);
// Parses the bytes of a whole .npy file; `name` is used in messages (usually the path).
Expected<Array> parse_npy(std::string_view bytes, std::string_view name);

Status write_npy(const std::string& path, const Array& array);
// The bytes write_npy writes (numpy's np.save layout, byte for byte).
Expected<std::string> format_npy(const Array& array);

}  // namespace fusebox
