// The .fbir parser. Errors read "<file>:<line>:<col>: <message>" and never abort. The parsed
// module is verified before it is returned.
#pragma once

#include <string_view>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

Expected<Module> parse_module(std::string_view text, std::string_view filename = "<input>");
// The same, for text that starts at line `first_line` of `filename` (one chunk of a file split
// with `// -----`): messages and node locations use whole-file line numbers.
Expected<Module> parse_module(std::string_view text, std::string_view filename, int first_line);
// Exactly one function.
Expected<Graph> parse_graph(std::string_view text, std::string_view filename = "<input>");

}  // namespace fusebox
