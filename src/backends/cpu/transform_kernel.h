// Native execution of transform_region: one pass over the output (spec §4.3, issue "CPU native
// execution"). Each output coordinate is mapped back through the steps to the source elements
// it reads; nothing in between is materialised.
//
//   plan     backends/transform_plan.h (shared with the other backends)
//   run      per output row (parallel over rows): outer taps once per row, the last axis from
//            its table; a row whose map is a plain offset is one memcpy
//
// Results equal the reference (the steps one by one) bit for bit: nearest and linear taps come
// from the reference's own resize arithmetic (reference/resize_math.h), the interpolation sums
// the taps in the reference's order in double and rounds once at the resize's dtype, and the
// casts a region may hold keep every value.
#pragma once

#include <memory>
#include <string>

#include "backends/transform_plan.h"
#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox::cpu {

// Runs the plan: `in` has the body parameter's type, `out` the region's result type.
Status run_transform_plan(const TransformPlan& plan, const Array& in, Array& out);

// The granule of run_transform_window: windows start and end at multiples of it (a row of the
// plan's output, or a row of rows for HWC interpolation).
int64_t transform_window_unit(const TransformPlan& plan);
// Runs the plan for the result elements [e0, e1) only (row-major over the region's result),
// writing them to dst[0, e1 - e0): how a prologue runs the transform a slice at a time.
Status run_transform_window(const TransformPlan& plan, const Array& in, void* dst, int64_t e0, int64_t e1);

}  // namespace fusebox::cpu
