// A transform plan (backends/transform_plan.h) seen as rows: its first output axis is the row,
// every other output axis together the column (row-major, so an HWC image's columns are x*C+c).
// Asked to (merge_rows), leading axes of one unit tap join the row: a CHW result's rows are then
// (channel, y), its columns x.
// Every tap of the plan is the sum of one tap of each axis, so the plan's taps factor into a
// table per row and a table per column, each with at most two taps:
//
//   element (r, j) = sum over t, u of  row_w[r][t] * col_w[j][u] * src[row_off[r][t] + col_off[j][u]]
//
// built once when the kernel is made, then a row is one pass over the column table with no
// index arithmetic (preprocess_loops.inc): nearest gathers by col_off, bilinear reads two source
// rows and sums the four products in the reference's order, in double, rounded once to f32.
// A one-tap row or column repeats its tap with weight 0; with u8 sources every value is finite
// and non-negative, so the extra products are +0 and leave the sum unchanged bit for bit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/row_kernels.h"
#include "backends/transform_plan.h"
#include "fusebox/status.h"
#include "ir/array.h"

namespace fusebox::cpu {

// A block of 16 columns whose taps all lie in one 128-byte window of a u8 source row (16 columns
// of a 2x downscale of 3 channels span 94 bytes): with AVX-512 VBMI a row reads them by two masked
// loads and a two-register byte permute per tap instead of a gather (which bounds the bilinear
// rows otherwise). Built for u8 sources, one per whole block of columns.
struct ByteWindow {
  int32_t lo = 0;         // the window's first byte, relative to the row's offset
  uint64_t mask[2] = {};  // the window's bytes that are read (none: the taps span 128 bytes or more)
  uint8_t tap0[16] = {}, tap1[16] = {};  // each column's taps (col_off0, col_off1) within the window
};
// The windows of the columns' taps, one per whole block of 16.
std::vector<ByteWindow> byte_windows(const std::vector<int32_t>& off0, const std::vector<int32_t>& off1);

struct RowTables {
  int64_t rows = 0, cols = 0;
  int row_axes = 1;              // the leading output axes that make the row (rows: their product)
  int64_t inner = 1;             // the size of the last output axis (the channels of HWC)
  bool linear = false;
  bool has_const = false;        // some tap reads a pad constant
  std::vector<int64_t> row_off;  // 2 per row: source element offsets
  std::vector<double> row_w;     // 2 per row
  std::vector<int32_t> row_const;  // per row: the latest pad step it reads (-1: none)
  std::vector<int32_t> col_off0, col_off1;  // per column, relative to the row's offset
  std::vector<double> col_w0, col_w1;
  // Bilinear from u8 whose row weights need my bits after the binary point and column weights mx,
  // with my + mx <= 16, each in [0, 1] and each pair summing to at most 1 (resizes by 2x, 1/2,
  // 3/4, half-pixel or asymmetric): every product and partial sum is then k / 2^(my+mx) with
  // k <= 255 * 2^16 < 2^24, exact in f32, so sums in f32 are the double sums bit for bit, at half
  // the lanes' cost. The weights again in f32 (empty otherwise).
  bool f32_weights = false;
  std::vector<float> row_w_f32, col_w0_f32, col_w1_f32;
  std::vector<int32_t> col_const;           // per column: as row_const
  std::vector<int32_t> const_cols;          // the columns with col_const >= 0
  int32_t col_lo = 0, col_hi = 0;           // the least and the greatest column offset
  std::vector<ByteWindow> col_windows;      // u8 sources: per block of 16 columns
  // Whether fill_rows computes rows itself (else through run_transform_window): f32 results
  // from u8 or f32 sources, nearest with any pad, bilinear from u8 whose pads all come after the
  // resize (a letterbox border).
  bool own_loops = false;
};

// The tables of `plan`, or nothing (with `why`) when it does not factor into rows: fewer than
// two output axes, two column axes with two taps, weights not in the row's then the column's
// order, column offsets beyond 32 bits, a plan whose own windows span several rows. merge_rows:
// the row may be several leading axes (row_axes), where one axis alone leaves two column axes
// with two taps.
std::optional<RowTables> row_tables(const TransformPlan& plan, std::string* why = nullptr,
                                    bool merge_rows = false);

// Rows [r0, r1) of the plan's result, exactly as run_transform_window computes them, to
// dst[0, (r1 - r0) * cols) in the plan's output dtype.
Status fill_rows(const TransformPlan& plan, const RowTables& t, const Array& src, void* dst, int64_t r0, int64_t r1);

// Asks the cache for the source bytes row r reads (both taps; elements of `esize` bytes), so
// that they arrive while the row before it is computed: the gathers of a row do not trigger
// the hardware prefetchers, and a frame larger than the caches would stall each of them.
void prefetch_row(const RowTables& t, const void* src, size_t esize, int64_t r);

// The loops of one instruction set (preprocess_loops.inc), picked at run time like the row
// kernels' (row_kernels.h).
struct PreprocessLoops {
  // `before`: how many bytes of the source lie before `src` (a row's offset in its frame).
  // out[i] = lut[base[i] + src[off[i]]]
  void (*lut_row)(const uint8_t* src, int64_t before, const int32_t* off, const int32_t* base,
                  const uint32_t* lut, uint32_t* out, int64_t n);
  // out[i] = float(src[off[i]]); `windows` (may be null) as for bilinear_u8
  void (*nearest_u8)(const uint8_t* src, int64_t before, const int32_t* off, float* out, int64_t n,
                     const ByteWindow* windows);
  void (*nearest_f32)(const float* src, const int32_t* off, float* out, int64_t n);
  // out[i] = float(wy0*w0[i]*a[o0[i]] + wy0*w1[i]*a[o1[i]] + wy1*w0[i]*b[o0[i]] + wy1*w1[i]*b[o1[i]]),
  // in double, summed left to right; `before` counts for both rows. `windows` (may be null): the
  // ByteWindows of o0/o1, used where the processor has AVX-512 VBMI.
  void (*bilinear_u8)(const uint8_t* a, const uint8_t* b, int64_t before, double wy0, double wy1,
                      const int32_t* o0, const int32_t* o1, const double* w0, const double* w1, float* out,
                      int64_t n, const ByteWindow* windows);
  // bilinear_u8 in f32 arithmetic (the same order): the same bits where RowTables::f32_weights.
  void (*bilinear_u8_f32)(const uint8_t* a, const uint8_t* b, int64_t before, float wy0, float wy1,
                          const int32_t* o0, const int32_t* o1, const float* w0, const float* w1, float* out,
                          int64_t n, const ByteWindow* windows);
  // out[i] = src[idx[i]] (4-byte elements)
  void (*gather32)(const uint32_t* src, const int32_t* idx, uint32_t* out, int64_t n);
  // out[i] = src[i * stride] (4-byte elements), reading no element past src[(n - 1) * stride]: one
  // channel of an interleaved row (HWC's column x * C + c) into a planar one (CHW).
  void (*strided32)(const uint32_t* src, int64_t stride, uint32_t* out, int64_t n);
};
// The step s > 0 with at(i) == at(0) + i * s for every i < n (1 when n < 2), or 0 when there is
// none: a run strided32 copies (one channel of an HWC row read for a CHW plane steps by C).
template <typename At>
int64_t even_step(int64_t n, At at) {
  if (n < 2) return 1;
  const int64_t step = int64_t(at(1)) - int64_t(at(0));
  for (int64_t i = 2; step > 0 && i < n; ++i) {
    if (int64_t(at(i)) - int64_t(at(i - 1)) != step) return 0;
  }
  return step > 0 ? step : 0;
}

const PreprocessLoops& preprocess_loops(RowIsa isa);
const PreprocessLoops& preprocess_loops();  // the best this processor has

// Whether the AVX2 and AVX-512 loops gather (vpgatherdd) where they can, or load one element at a
// time. Which is faster depends on the processor: on an Intel Xeon (Ice Lake) guest the lookup
// rows ran 1.7x faster one by one, on the AMD EPYC hosts the AVX-512 gathers won. Auto times both
// once per instruction set, at its first use in the process (about 100 microseconds), and keeps
// the faster; FUSEBOX_GATHERS=0|1 forces a way for the process (for measuring), set_gather_use
// for tests. Both ways compute the same bytes.
enum class GatherUse { Auto, Always, Never };
void set_gather_use(GatherUse use);
GatherUse gather_use();

}  // namespace fusebox::cpu
