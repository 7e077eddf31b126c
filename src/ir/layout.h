// The blocked channel layout nChw<b>c of CNN activations (docs/ir-syntax.md, "Layouts").
//
//   plain   [N, C, H, W]            element (n, c, h, w)
//   blocked [N, C/b, H, W, b]       the same element at [n, c/b, h, w, c%b]
//
// oneDNN's convolutions and pooling read and write the blocked form directly; the CPU backend's
// lowering (backends/assign_blocked_layout.h) keeps activations in it from one contraction
// to the next. to_nchwc / to_nchw are the ops that convert; a node with `layout = "nchwc"` (conv,
// pooling) takes and gives its activations blocked. C must be a multiple of b.
//
// One block of all channels, b = C, is the channels-last order NHWC: [N, 1, H, W, C]. A conv or
// pooling node with `layout = "nhwc"` takes and gives its activations in that form, each value
// with its own channel count as its block (a conv from 24 to 40 channels reads [N,1,H,W,24] and
// writes [N,1,H,W,40]).
#pragma once

#include <cstdint>
#include <optional>

#include "ir/array.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace fusebox {

// Largest block the layout ops accept (oneDNN uses 4, 8 and 16 as blocks; NHWC takes the channel
// count as its block).
inline constexpr int64_t kMaxNchwcBlock = int64_t(1) << 20;

// True for a node whose activations are blocked (`layout = "nchwc"` or `"nhwc"`).
bool has_nchwc_layout(const Node& n);
// True for a node whose activations are one block of all their channels (`layout = "nhwc"`).
bool has_nhwc_layout(const Node& n);

// [N,C,H,W] -> [N,C/b,H,W,b]; nullopt unless rank 4 with a static C that b divides.
std::optional<Shape> nchwc_shape(const Shape& plain, int64_t block);
// [N,C/b,H,W,b] -> [N,C,H,W]; nullopt unless rank 5 with a static b.
std::optional<Shape> nchw_shape(const Shape& blocked);

// The data moved between the two layouts (any dtype). FUSEBOX_CHECKs the shapes; `out` has the
// converted shape.
void copy_to_nchwc(const Array& plain, Array& out);
void copy_to_nchw(const Array& blocked, Array& out);
Array to_nchwc(const Array& plain, int64_t block);
Array to_nchw(const Array& blocked);

}  // namespace fusebox
