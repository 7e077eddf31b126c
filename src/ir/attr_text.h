// The text form of attribute values, shared by the printer, the parser and the op table's
// schema defaults:
//
//   i64 3    f64 1.0e-05 | inf | nan    bool true    str "tanh"    dtype f16
//   i64s [0, 2, 1]    f64s [0.5, 2.0]    dims [N, 64, -1, ?]
//   array dense<f32[2,2]: [1.0, 2.0, 3.0, 4.0]>   (row-major, flat)
#pragma once

#include <string>
#include <string_view>

#include "fusebox/status.h"
#include "ir/attributes.h"

namespace fusebox {

std::string print_attr_value(const AttrValue& v);
// Shortest text that reads back to the same double; always has '.', 'e', "inf" or "nan".
std::string format_f64(double v);
std::string format_f32(float v);
std::string quote_string(std::string_view s);

// Parses one value of the given type from the start of `text`. On success *consumed is the
// number of characters read. Errors name the offending text; *error_offset is where it starts.
Expected<AttrValue> parse_attr_value(std::string_view text, AttrType type, size_t* consumed,
                                     size_t* error_offset);

}  // namespace fusebox
