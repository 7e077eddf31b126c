// The .fbir printer. Canonical text: inputs by name, unnamed results numbered in order,
// attributes in schema order, one node per line. print(parse(s)) == s for canonical s.
#pragma once

#include <string>

#include "ir/graph.h"

namespace fusebox {

std::string print_graph(const Graph& g);
std::string print_module(const Module& m);  // functions separated by a blank line

}  // namespace fusebox
