// assign_blocked_layout: the backends' lowering that keeps CNN activations in a blocked layout
// nChw<b>c (ir/layout.h) from one contraction to the next, or channels-last (NHWC: every value
// one block of all its channels, [N,1,H,W,C]; conv and pooling with layout = "nhwc"). The CPU
// backend runs it for oneDNN (f32, its host's block or NHWC), the CUDA backend, on request, for
// cuDNN (NHWC, f16 and f32; backends/cuda/conv_layout.h).
//
// Matches: conv2d / fused_conv_bias_act of the options' dtypes (and conv2d_integer when the
// options say so), dense or depthwise, whose input
// and output channel counts the block divides (on the CPU a dense 1x1 conv with no epilogue only
// when its input is already blocked: on NCHW it is a plain GEMM). Around them, what runs on the
// blocked form as well: max/avg/global-avg pooling of a blocked value; element-wise ops and
// elementwise_regions with an operand of the result's shape in blocked form (the other operands
// follow: a [C] channel vector [1,C,1,1] becomes [1,C/b,1,1,b], a channel-free [N,1,H,W] becomes
// [N,1,H,W,1], constants converted here once); concat of blocked parts whose channel counts the
// block divides; nearest resize (spatial axes only) of a blocked value.
//
// Produces: those nodes on 5-D values (conv and pooling with layout = "nchwc"); to_nchwc where a
// plain value enters the blocked part, to_nchw where a blocked value leaves it (an op that needs
// NCHW, a graph output), each once per value.
//
// Requires: a verified graph. Preserves: inputs, outputs (names and NCHW types) and every result
// bit for bit: each op computes the same values, only where they lie in memory changes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

// The `block` that asks for NHWC.
inline constexpr int64_t kNhwcBlock = -2;

struct LayoutSummary {
  int64_t block = 0;  // 4, 8, 16 or kNhwcBlock
  int blocked_nodes = 0;  // nodes that run on blocked activations
  int to_nchwc = 0;       // conversions into the blocked layout (constants excluded)
  int to_nchw = 0;        // conversions out of it
  // "nchw8c: 14 nodes blocked, 2 reorders (1 to_nchwc, 1 to_nchw)", or "nchw" when nothing is.
  std::string to_string() const;
};

struct BlockedLayoutOptions {
  // 4, 8 or 16 (what oneDNN has formats for), or kNhwcBlock. In NHWC every channel count is its
  // own block, so each conv whose weights are static qualifies (concat of channels joins the
  // last axis).
  int64_t block = kNhwcBlock;
  // Convolutions and pools of these dtypes take the layout.
  std::vector<DType> dtypes{DType::F32};
  // A dense 1x1 conv with nothing fused stays NCHW unless its input is blocked already (oneDNN
  // runs it as a GEMM there); false blocks it like every other conv.
  bool bare_1x1_plain = true;
  // Only convolutions whose weights are graph constants (a kernel that reorders its weights once
  // when it is built).
  bool constant_weights = false;
  // conv2d_integer (u8/i8 activations, i32 result) takes the layout too when its weights and
  // their zero point are constants; the element-wise steps between such convs follow.
  bool integer_convs = false;
};

Expected<Graph> assign_blocked_layout(const Graph& g, const BlockedLayoutOptions& options);
// The CPU's: f32, `block`.
Expected<Graph> assign_blocked_layout(const Graph& g, int64_t block);

// Counts what a lowered graph holds.
LayoutSummary summarize_layout(const Graph& g);

}  // namespace fusebox
