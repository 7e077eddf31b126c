// Reference kernels of the movement and indexing ops: reshape, transpose, slice, concat, pad,
// gather, flip. They only move elements, so they work on every dtype by copying bytes (f16/bf16
// and NaN payloads pass through unchanged).
//
// Most of them are one strided read: output element at index (i0, i1, ...) reads the input at
// base + sum(ik * stride_k), where the strides may be permuted (transpose), scaled (slice
// steps) or negated (flip, negative steps).
#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"
#include "backends/cpu/reference/resize_math.h"
#include "ir/layout.h"
#include "ir/shape_inference.h"

namespace fusebox::cpu {

namespace {

std::string dims_string(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// out[i] = in[base + strided offset of i], walking out in row-major order: the outer dims by the
// multi-index, the last one by its stride (a transpose to CHW would otherwise pay a multi-index
// step per element).
template <size_t Bytes>
void copy_strided_sized(const uint8_t* in, uint8_t* out, std::span<const int64_t> out_shape,
                        int64_t base, std::vector<int64_t> strides) {
  const size_t outer = out_shape.empty() ? 0 : out_shape.size() - 1;
  const int64_t inner = out_shape.empty() ? 1 : out_shape.back();
  const int64_t step = out_shape.empty() ? 0 : strides.back() * int64_t(Bytes);
  strides.resize(outer);
  int64_t o = 0;
  for (MultiIndex it(out_shape.first(outer), {std::move(strides)}); !it.done(); it.next()) {
    const uint8_t* row = in + (base + it.offset(0)) * int64_t(Bytes);
    for (int64_t i = 0; i < inner; ++i, ++o) std::memcpy(out + o * int64_t(Bytes), row + i * step, Bytes);
  }
}

// The same copy when the innermost output dims read contiguous input: one memcpy per row of
// `inner` elements (after merging the dims read in order), rows spread over the OpenMP pool when
// there are many. A transpose that keeps the last axis, or a slice of whole rows, runs at copy
// speed instead of element by element; the bytes written are the same.
bool copy_rows(const uint8_t* in, uint8_t* out, std::span<const int64_t> out_shape, int64_t base,
               const std::vector<int64_t>& strides, int64_t esize) {
  std::vector<int64_t> shape, stride;  // merged: dims of size 1 dropped, in-order runs joined
  for (size_t d = 0; d < out_shape.size(); ++d) {
    if (out_shape[d] == 1) continue;
    if (!shape.empty() && stride.back() == strides[d] * out_shape[d]) {
      shape.back() *= out_shape[d];
      stride.back() = strides[d];
      continue;
    }
    shape.push_back(out_shape[d]);
    stride.push_back(strides[d]);
  }
  if (shape.empty() || stride.back() != 1) return false;
  const int64_t inner = shape.back();
  if (inner < 16 && shape.size() > 1) return false;  // short rows: the element loop is as fast
  const int64_t rows = product(std::span<const int64_t>(shape).first(shape.size() - 1));
  const size_t outer_rank = shape.size() - 1;
  const size_t row_bytes = size_t(inner * esize);
#pragma omp parallel for schedule(static) if (rows * inner >= (int64_t(1) << 16))
  for (int64_t r = 0; r < rows; ++r) {
    int64_t offset = base, rest = r;
    for (size_t d = outer_rank; d-- > 0;) {
      offset += (rest % shape[d]) * stride[d];
      rest /= shape[d];
    }
    std::memcpy(out + size_t(r) * row_bytes, in + offset * esize, row_bytes);
  }
  return true;
}

void copy_strided(const Array& in, Array& out, int64_t base, std::vector<int64_t> strides) {
  FUSEBOX_CHECK(in.dtype() == out.dtype()) << "movement op changes the dtype";
  FUSEBOX_CHECK(strides.size() == out.shape().size()) << "one stride per output dim";
  if (out.numel() == 0) return;
  const auto* src = static_cast<const uint8_t*>(in.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  if (copy_rows(src, dst, out.shape(), base, strides, dtype_size(in.dtype()))) return;
  switch (dtype_size(in.dtype())) {
    case 1: return copy_strided_sized<1>(src, dst, out.shape(), base, std::move(strides));
    case 2: return copy_strided_sized<2>(src, dst, out.shape(), base, std::move(strides));
    case 4: return copy_strided_sized<4>(src, dst, out.shape(), base, std::move(strides));
    case 8: return copy_strided_sized<8>(src, dst, out.shape(), base, std::move(strides));
  }
  FUSEBOX_CHECK(false) << "unexpected element size " << dtype_size(in.dtype());
}

int checked_axis(int64_t axis, int rank, const char* op) {
  std::optional<int> a = normalize_axis(axis, rank);
  FUSEBOX_CHECK(a.has_value()) << op << ": axis " << axis << " out of range for rank " << rank;
  return *a;
}


}  // namespace

Status ref_Reshape(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  FUSEBOX_CHECK(x.numel() == y.numel()) << "reshape: element counts differ";
  if (x.nbytes() > 0) std::memcpy(y.raw(), x.raw(), x.nbytes());
  return Status::ok();
}

Status ref_Transpose(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  const auto& perm = args.node.attr_i64s("perm");
  FUSEBOX_CHECK(static_cast<int>(perm.size()) == x.rank()) << "transpose: perm length";
  std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  std::vector<int64_t> strides(perm.size());
  std::vector<bool> seen(perm.size(), false);
  for (size_t i = 0; i < perm.size(); ++i) {
    auto axis = static_cast<size_t>(checked_axis(perm[i], x.rank(), "transpose"));
    FUSEBOX_CHECK(!seen[axis] && y.shape()[i] == x.shape()[axis]) << "transpose: perm is not a permutation";
    seen[axis] = true;
    strides[i] = in_strides[axis];
  }
  copy_strided(x, y, 0, std::move(strides));
  return Status::ok();
}

Status ref_Slice(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  const Node& n = args.node;
  const auto& starts = n.attr_i64s("starts");
  const auto& ends = n.attr_i64s("ends");
  std::vector<int64_t> axes, steps;
  if (n.has_attr("axes")) {
    axes = n.attr_i64s("axes");
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  steps = n.has_attr("steps") ? n.attr_i64s("steps") : std::vector<int64_t>(starts.size(), 1);
  FUSEBOX_CHECK(ends.size() == starts.size() && axes.size() == starts.size() &&
                steps.size() == starts.size())
      << "slice: attribute lengths differ";
  FUSEBOX_CHECK(y.rank() == x.rank()) << "slice: result rank";
  if (y.numel() == 0) return Status::ok();
  std::vector<int64_t> strides = contiguous_strides(x.shape());
  std::vector<int64_t> want = x.shape();
  std::vector<bool> seen(strides.size(), false);
  int64_t base = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    auto axis = static_cast<size_t>(checked_axis(axes[i], x.rank(), "slice"));
    FUSEBOX_CHECK(steps[i] != 0 && !seen[axis]) << "slice: step 0 or repeated axis";
    seen[axis] = true;
    SliceRange r = normalize_slice(x.shape()[axis], starts[i], ends[i], steps[i]);
    want[axis] = r.count;
    base += r.start * strides[axis];
    // A step larger than the axis reads one element; its stride is never used, and multiplying
    // it out could overflow.
    strides[axis] = r.count > 1 ? strides[axis] * steps[i] : 0;
  }
  FUSEBOX_CHECK(want == y.shape()) << "slice: result shape disagrees";
  copy_strided(x, y, base, std::move(strides));
  return Status::ok();
}

Status ref_Concat(const KernelArgs& args) {
  Array& y = args.out[0];
  int axis = checked_axis(args.node.attr_i64("axis"), y.rank(), "concat");
  std::span<const int64_t> shape = y.shape();
  int64_t outer = product(shape.subspan(0, static_cast<size_t>(axis)));
  int64_t inner = product(shape.subspan(static_cast<size_t>(axis) + 1));
  int64_t elem = dtype_size(y.dtype());
  int64_t total = 0;
  for (const Array& x : args.in) {
    FUSEBOX_CHECK(x.dtype() == y.dtype() && x.rank() == y.rank()) << "concat: operand type";
    for (int d = 0; d < y.rank(); ++d) {
      FUSEBOX_CHECK(d == axis || x.shape()[size_t(d)] == shape[size_t(d)]) << "concat: operand dim " << d;
    }
    total += x.shape()[static_cast<size_t>(axis)];
  }
  FUSEBOX_CHECK(total == shape[static_cast<size_t>(axis)]) << "concat: result dim disagrees";
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (const Array& x : args.in) {
      int64_t chunk = x.shape()[static_cast<size_t>(axis)] * inner * elem;
      if (chunk == 0) continue;
      std::memcpy(dst, static_cast<const uint8_t*>(x.raw()) + o * chunk, static_cast<size_t>(chunk));
      dst += chunk;
    }
  }
  return Status::ok();
}

Status ref_Pad(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  const auto& pads = args.node.attr_i64s("pads");
  const std::string& mode_name = args.node.attr_str("mode");
  enum class Mode { kConstant, kReflect, kEdge };
  Mode mode = mode_name == "reflect" ? Mode::kReflect : mode_name == "edge" ? Mode::kEdge : Mode::kConstant;
  size_t rank = x.shape().size();
  FUSEBOX_CHECK(pads.size() == 2 * rank) << "pad: pads length";
  for (size_t d = 0; d < rank; ++d) {
    FUSEBOX_CHECK(y.shape()[d] == x.shape()[d] + pads[d] + pads[d + rank]) << "pad: result dim";
  }
  if (y.numel() == 0) return Status::ok();
  if (x.numel() == 0 && mode != Mode::kConstant) {
    return Status::invalid("pad: " + mode_name + " mode cannot pad an empty input " + x.type_string());
  }
  // The fill value in the element type, with the same conversion as a cast.
  Array fill(x.dtype(), {1});
  fill.set_f64(0, args.node.attr_f64("value"));

  size_t elem = static_cast<size_t>(dtype_size(x.dtype()));
  std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  std::vector<int64_t> index(rank, 0);
  for (int64_t o = 0; o < y.numel(); ++o) {
    int64_t offset = 0;
    bool inside = true;
    for (size_t d = 0; d < rank; ++d) {
      int64_t n = x.shape()[d];
      int64_t j = index[d] - pads[d];
      if (j < 0 || j >= n) {
        if (mode == Mode::kConstant) {
          inside = false;
          break;
        }
        j = mode == Mode::kEdge ? std::clamp<int64_t>(j, 0, n - 1) : reflect_index(j, n);
      }
      offset += j * in_strides[d];
    }
    const uint8_t* from = inside ? src + offset * int64_t(elem) : static_cast<const uint8_t*>(fill.raw());
    std::memcpy(dst + o * int64_t(elem), from, elem);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < y.shape()[d]) break;
      index[d] = 0;
    }
  }
  return Status::ok();
}

Status ref_Gather(const KernelArgs& args) {
  const Array& x = args.in[0];
  const Array& indices = args.in[1];
  Array& y = args.out[0];
  int axis = checked_axis(args.node.attr_i64("axis"), x.rank(), "gather");
  FUSEBOX_CHECK(indices.dtype() == DType::I32 || indices.dtype() == DType::I64) << "gather: index dtype";
  int64_t dim = x.shape()[static_cast<size_t>(axis)];
  // Every index is checked before anything is written, even when the result is empty, so an
  // invalid index is reported the same way for every data shape.
  std::vector<int64_t> resolved(static_cast<size_t>(indices.numel()));
  for (int64_t k = 0; k < indices.numel(); ++k) {
    int64_t idx = indices.get_i64(k);
    int64_t r = idx < 0 ? idx + dim : idx;
    if (r < 0 || r >= dim) {
      std::vector<int64_t> pos(indices.shape().size());
      int64_t rest = k;
      for (size_t d = pos.size(); d-- > 0;) {
        pos[d] = rest % indices.shape()[d];
        rest /= indices.shape()[d];
      }
      std::string range = dim == 0 ? "none: the axis is empty"
                                   : "[" + std::to_string(-dim) + ", " + std::to_string(dim - 1) + "]";
      return Status::invalid("gather: index " + std::to_string(idx) + " at indices" + dims_string(pos) +
                             " is out of range for axis " + std::to_string(axis) + " of size " +
                             std::to_string(dim) + " (valid range " + range + ")");
    }
    resolved[static_cast<size_t>(k)] = r;
  }
  std::span<const int64_t> shape = x.shape();
  int64_t outer = product(shape.subspan(0, static_cast<size_t>(axis)));
  int64_t inner = product(shape.subspan(static_cast<size_t>(axis) + 1));
  FUSEBOX_CHECK(y.numel() == outer * indices.numel() * inner) << "gather: result size";
  int64_t chunk = inner * dtype_size(x.dtype());
  if (chunk == 0) return Status::ok();
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t r : resolved) {
      std::memcpy(dst, src + (o * dim + r) * chunk, static_cast<size_t>(chunk));
      dst += chunk;
    }
  }
  return Status::ok();
}

Status ref_Flip(const KernelArgs& args) {
  const Array& x = args.in[0];
  Array& y = args.out[0];
  FUSEBOX_CHECK(x.shape() == y.shape()) << "flip: result shape";
  if (y.numel() == 0) return Status::ok();
  std::vector<int64_t> strides = contiguous_strides(x.shape());
  std::vector<bool> flipped(strides.size(), false);
  int64_t base = 0;
  for (int64_t a : args.node.attr_i64s("axes")) {
    auto axis = static_cast<size_t>(checked_axis(a, x.rank(), "flip"));
    FUSEBOX_CHECK(!flipped[axis]) << "flip: axis repeated";
    flipped[axis] = true;
    base += (x.shape()[axis] - 1) * strides[axis];
    strides[axis] = -strides[axis];
  }
  copy_strided(x, y, base, std::move(strides));
  return Status::ok();
}

Status ref_ToNchwc(const KernelArgs& args) {
  copy_to_nchwc(args.in[0], args.out[0]);
  return Status::ok();
}

Status ref_ToNchw(const KernelArgs& args) {
  copy_to_nchw(args.in[0], args.out[0]);
  return Status::ok();
}

}  // namespace fusebox::cpu
