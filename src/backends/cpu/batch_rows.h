// The row path of a batch_elementwise_region (ir/batch_region.h): one pass per item and output
// row, from the frame straight to the item's slice of the result, in its final layout.
//
//   per (item, window of rows), in parallel:
//     nearest from u8, operands per channel:  out[dst] = lut[channel][frame byte]
//         (the lut is the region's program run once over every byte value and pad constant)
//     otherwise:  rows of the transform (preprocess_rows.h) -> a window buffer (cache)
//                 region program over the window -> out[dst] by a gather per row
//
// The per-item transform (the CHW transpose and its reshape) and the item's offset in the batch
// are folded into the write: read element (r, j) goes to base_i + r * row_stride + dst[j], and
// the columns are visited in destination order, so each channel plane's row is written in one
// contiguous run. Values equal the general path's (batch_kernel.cpp) bit for bit: the same
// transform arithmetic and the same region program.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"

namespace fusebox::cpu {

// The row-path kernel of a batch node, or null with `why` when the batch has a form it does not
// take (an item transform that is not a permutation, an operand varying along the rows, a
// transform that does not factor into rows, results of other than 4 bytes); then the general
// batch kernel runs it. An error names what is malformed.
Expected<std::shared_ptr<const Kernel>> make_batch_rows_kernel(const Node& batch, Codegen codegen, std::string* why);

}  // namespace fusebox::cpu
