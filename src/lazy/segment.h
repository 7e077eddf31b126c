// Running a flushed segment: its relative form (the plan-cache key), the fusers' grouping, one
// ir::Graph per group compiled by Session::compile, and the runs that give tensors their values.
//
//   records ──relative form──> key ──hit──> cached groups + Executables ──┐
//                                  └─miss─> explore (fusers) ─> build graphs ─> compile ─┴─> run
//
// Relative form: tensor ids renumbered by first appearance; dims of the tensors entering the
// segment replaced by ids that only say which sizes are equal (size 1 is always 1); dim-valued
// attributes (reshape/expand/resize sizes) written with those ids when a size matches one;
// scalars are rank-0 inputs, so their values are run-time data. Segment inputs are built with
// symbolic dims named by dim id, so the cached Executables run a new batch size unchanged.
#pragma once

#include <cstddef>
#include <vector>

#include "fusebox/status.h"
#include "lazy/relative_form.h"
#include "lazy/state.h"
#include "lazy/stream.h"  // kMaxPendingRecords, for users of the public header

namespace fusebox::lazy {

// Runs the op records of a segment, whose relative form is `form`, on the device: in recorded
// order or, with fusion on, in the order of schedule.h. Tensors they produce that still have a
// handle get their value; on an error every tensor not yet computed gets it as its error.
Status run_segment(std::vector<Record> ops, RelativeForm form, const Device& device);

struct PlanCacheInfo {
  size_t entries = 0;
  size_t capacity = 0;
};
PlanCacheInfo plan_cache_info();
// Drops every cached plan; capacity 0 turns the cache off.
void set_plan_cache_capacity(size_t capacity);
void clear_plan_cache();

}  // namespace fusebox::lazy
