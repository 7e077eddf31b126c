// The blocked channel layout nChw<b>c of CNN activations (docs/ir-syntax.md, "Layouts").
//
//   plain   [N, C, H, W]            element (n, c, h, w)
//   blocked [N, C/b, H, W, b]       the same element at [n, c/b, h, w, c%b]
//
// oneDNN's convolutions and pooling read and write the blocked form directly; the CPU backend's
// lowering (backends/cpu/assign_blocked_layout.h) keeps activations in it from one contraction
// to the next. to_nchwc / to_nchw are the ops that convert; a node with `layout = "nchwc"` (conv,
// pooling) takes and gives its activations blocked. C must be a multiple of b.
#pragma once

#include <cstdint>
#include <optional>

#include "ir/array.h"
#include "ir/graph.h"
#include "ir/shape.h"

namespace fusebox {

// Largest block the layout ops accept (oneDNN uses 4, 8 and 16).
inline constexpr int64_t kMaxNchwcBlock = 64;

// True for a node whose activations are blocked (`layout = "nchwc"`).
bool has_nchwc_layout(const Node& n);

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
