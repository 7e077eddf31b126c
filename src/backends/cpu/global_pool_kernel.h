// The CPU kernel of global_avg_pool over f32, in every activation layout the backend keeps: NCHW
// (each plane contiguous), nChw<b>c and NHWC ([N, C/b, H, W, b], ir/layout.h: b lanes of
// channels contiguous at each position).
//
// It reads its input once, in order: lanes of channels (a plane's positions in NCHW) accumulate
// in f32 over blocks of 256 positions, and each block's sum is added in double, so the mean is
// within a few f32 roundings of the reference's (which sums in double) at any plane size. NaN and
// infinities propagate as they do there. Work is split across threads by planes (NCHW), by slabs
// (the blocked layouts), or, with fewer slabs than threads (NHWC at batch 1), by parts of each
// slab's positions (whole 256-position blocks; their double sums are added afterwards) or runs of
// its lanes. Lane sums are 4-lane vectors in registers, 32 lanes at a time; an NCHW plane is summed
// by the row kernels' per-ISA sum (row_kernels.h). The reference kernel
// is single-threaded and sums each lane in double at the build's baseline ISA: squeeze-excite
// means of efficientnet_b0 (17 per run) took 0.8 ms of a 7.8 ms run that way (docs/benchmarks.md).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace fusebox::cpu {

// A kernel for global_avg_pool node `n` of `g`, or null when it is not f32 (the caller then uses
// the reference kernel).
std::shared_ptr<const Kernel> make_global_pool_kernel(const Graph& g, const Node& n);

}  // namespace fusebox::cpu
