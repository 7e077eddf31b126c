// The order a segment's records run in when fusion is on: recorded order, except that a record
// whose operand was just produced runs next (chain following), so that an independent record
// recorded in between (a matmul of another branch, an op on another shape) no longer splits a
// chain the fusers could take whole. Groups stay runs of consecutive records of this order.
//
//   recorded:  a = x*2   m = p@q   b = exp(a)   c = b+1      groups [a] [m] [b c]
//   scheduled: a = x*2   b = exp(a)   c = b+1   m = p@q      groups [a b c] [m]
//
// Tensor states are values (a record never writes a tensor another record made), so the only
// hazards are read-after-write, kept by the topological order, and free-after-read, kept because
// in-place writes are decided from the last reader in the scheduled order. An order that fails
// the check is not used: the segment runs in recorded order.
#pragma once

#include <vector>

#include "lazy/relative_form.h"
#include "lazy/state.h"

namespace fusebox::lazy {

// The scheduled order as record indices; empty when it is the recorded order. Depends only on
// which record reads which record's results, so equal relative forms give equal orders.
std::vector<int> chain_order(const RelativeForm& rf, const std::vector<Record>& ops);

// Whether every record comes after the records producing its operands (and each once).
bool is_valid_order(const RelativeForm& rf, const std::vector<Record>& ops, const std::vector<int>& order);

// Puts the records in `order` and renumbers the form's producers and last readers to match.
void apply_order(RelativeForm& rf, std::vector<Record>& ops, const std::vector<int>& order);

}  // namespace fusebox::lazy
