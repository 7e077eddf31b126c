// Reference kernels of the ops that address their data through an index tensor: gather_nd,
// scatter_elements, scatter_nd and reverse_sequence (ONNX GatherND, ScatterElements, ScatterND,
// ReverseSequence).
//
// Every index is read, normalised (a negative index counts from the end of its axis) and
// range-checked before anything is written, so a bad index comes back as a Status naming the
// index, where it sits in `indices` and the valid range, whatever the other operands hold. The
// scatters copy the data, then apply the updates in row-major order of `indices`: with
// reduction "none" a repeated position keeps the last update; "add" and "mul" combine every
// update into the element (f16/bf16 compute in float and round at each step; integers wrap).
#include <cstring>
#include <string>

#include "backends/cpu/reference/dtype_dispatch.h"
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {

namespace {

std::string position_string(int64_t flat, std::span<const int64_t> shape) {
  std::vector<int64_t> pos(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    pos[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  std::string s = "[";
  for (size_t d = 0; d < pos.size(); ++d) s += (d ? "," : "") + std::to_string(pos[d]);
  return s + "]";
}

// indices[k] normalised into [0, size) or an error naming it.
Expected<int64_t> resolve_index(const KernelArgs& args, const Array& indices, int64_t k, int axis,
                                int64_t size) {
  int64_t v = indices.get_i64(k);
  int64_t r = v < 0 ? v + size : v;
  if (r >= 0 && r < size) return r;
  std::string range = size == 0 ? "none: the axis is empty"
                                : "[" + std::to_string(-size) + ", " + std::to_string(size - 1) + "]";
  return Status::invalid(std::string(args.node.info().keyword) + ": index " + std::to_string(v) +
                         " at indices" + position_string(k, indices.shape()) + " is out of range for axis " +
                         std::to_string(axis) + " of size " + std::to_string(size) + " (valid range " +
                         range + ")");
}

// Row-major strides of a shape, in elements.
std::vector<int64_t> strides_of(std::span<const int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// dst[o + i] (op)= src[s + i] for i < count, by the reduction attribute.
struct Combine {
  std::string_view reduction;
  DType dtype;
  size_t esize;

  void apply(uint8_t* dst, const uint8_t* src, int64_t count) const {
    if (reduction == "none") {
      std::memcpy(dst, src, size_t(count) * esize);
      return;
    }
    const bool add = reduction == "add";
    visit_dtype(dtype, [&]<DType D>() {
      using T = DTypeTraits<D>;
      if constexpr (D != DType::Bool) {
        auto* d = reinterpret_cast<Storage<D>*>(dst);
        const auto* s = reinterpret_cast<const Storage<D>*>(src);
        for (int64_t i = 0; i < count; ++i) {
          if constexpr (kIsIntType<D>) {  // wraps, through unsigned arithmetic
            uint64_t a = uint64_t(int64_t(d[i])), b = uint64_t(int64_t(s[i]));
            d[i] = static_cast<Storage<D>>(add ? a + b : a * b);
          } else {
            typename T::Compute a = T::load(d[i]), b = T::load(s[i]);
            d[i] = T::store(add ? a + b : a * b);
          }
        }
      }
    });
  }
};

}  // namespace

Status ref_GatherNd(const KernelArgs& args) {
  const Array& x = args.in[0];
  const Array& indices = args.in[1];
  Array& y = args.out[0];
  const std::span<const int64_t> shape = x.shape();
  const int64_t b = args.node.attr_i64("batch_dims"), k = indices.shape().back();
  const std::vector<int64_t> stride = strides_of(shape);
  const int64_t batches = product(shape.subspan(0, size_t(b)));
  const int64_t block = b == 0 ? x.numel() : stride[size_t(b) - 1];  // the data of one batch
  const int64_t slice = product(shape.subspan(size_t(b + k)));
  const int64_t tuples = indices.numel() / std::max<int64_t>(k, 1);
  const int64_t per_batch = batches == 0 ? 0 : tuples / batches;
  std::vector<int64_t> source(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (per_batch == 0 ? 0 : t / per_batch) * block;
    for (int64_t j = 0; j < k; ++j) {
      const int axis = int(b + j);
      FUSEBOX_ASSIGN_OR_RETURN(int64_t r, resolve_index(args, indices, t * k + j, axis, shape[size_t(axis)]));
      off += r * stride[size_t(axis)];
    }
    source[size_t(t)] = off;
  }
  FUSEBOX_CHECK(y.numel() == tuples * slice) << "gather_nd: result size";
  const size_t esize = size_t(dtype_size(x.dtype())), bytes = size_t(slice) * esize;
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t t = 0; t < tuples && bytes > 0; ++t)
    std::memcpy(dst + size_t(t) * bytes, src + size_t(source[size_t(t)]) * esize, bytes);
  return Status::ok();
}

Status ref_ScatterElements(const KernelArgs& args) {
  const Array& x = args.in[0];
  const Array& indices = args.in[1];
  const Array& updates = args.in[2];
  Array& y = args.out[0];
  const std::span<const int64_t> shape = x.shape();
  const int axis = *normalize_axis(args.node.attr_i64("axis"), x.rank());
  const std::vector<int64_t> stride = strides_of(shape);
  const std::span<const int64_t> ishape = indices.shape();
  // Target offset of every update: its own position with the axis coordinate replaced.
  std::vector<int64_t> target(size_t(indices.numel()));
  for (int64_t k = 0; k < indices.numel(); ++k) {
    int64_t rest = k, off = 0;
    for (size_t d = ishape.size(); d-- > 0;) {
      int64_t c = rest % ishape[d];
      rest /= ishape[d];
      if (int(d) == axis) continue;
      if (c >= shape[d]) {
        std::string dims;
        for (size_t e = 0; e < shape.size(); ++e) dims += (e ? "," : "") + std::to_string(shape[e]);
        return Status::invalid("scatter_elements: indices" + position_string(k, ishape) +
                               " lies outside the data [" + dims + "] along axis " + std::to_string(d));
      }
      off += c * stride[d];
    }
    FUSEBOX_ASSIGN_OR_RETURN(int64_t r, resolve_index(args, indices, k, axis, shape[size_t(axis)]));
    target[size_t(k)] = off + r * stride[size_t(axis)];
  }
  std::memcpy(y.raw(), x.raw(), size_t(x.numel() * dtype_size(x.dtype())));
  const Combine combine{args.node.attr_str("reduction"), x.dtype(), size_t(dtype_size(x.dtype()))};
  const auto* src = static_cast<const uint8_t*>(updates.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t k = 0; k < indices.numel(); ++k) {
    combine.apply(dst + size_t(target[size_t(k)]) * combine.esize, src + size_t(k) * combine.esize, 1);
  }
  return Status::ok();
}

Status ref_ScatterNd(const KernelArgs& args) {
  const Array& x = args.in[0];
  const Array& indices = args.in[1];
  const Array& updates = args.in[2];
  Array& y = args.out[0];
  const std::span<const int64_t> shape = x.shape();
  const int64_t k = indices.shape().back();
  const std::vector<int64_t> stride = strides_of(shape);
  const int64_t slice = product(shape.subspan(size_t(k)));
  const int64_t tuples = indices.numel() / std::max<int64_t>(k, 1);
  std::vector<int64_t> target(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      FUSEBOX_ASSIGN_OR_RETURN(int64_t r, resolve_index(args, indices, t * k + j, int(j), shape[size_t(j)]));
      off += r * stride[size_t(j)];
    }
    target[size_t(t)] = off;
  }
  FUSEBOX_CHECK(updates.numel() == tuples * slice) << "scatter_nd: updates size";
  std::memcpy(y.raw(), x.raw(), size_t(x.numel() * dtype_size(x.dtype())));
  const Combine combine{args.node.attr_str("reduction"), x.dtype(), size_t(dtype_size(x.dtype()))};
  const auto* src = static_cast<const uint8_t*>(updates.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  for (int64_t t = 0; t < tuples; ++t) {
    combine.apply(dst + size_t(target[size_t(t)]) * combine.esize, src + size_t(t * slice) * combine.esize,
                  slice);
  }
  return Status::ok();
}

// The first sequence_lens[b] steps of batch b along the time axis reversed, the rest copied.
// A length outside [0, time steps] is an error naming it.
Status ref_ReverseSequence(const KernelArgs& args) {
  const Array& x = args.in[0];
  const Array& lens = args.in[1];
  Array& y = args.out[0];
  const std::span<const int64_t> shape = x.shape();
  const size_t b_axis = size_t(args.node.attr_i64("batch_axis")),
               t_axis = size_t(args.node.attr_i64("time_axis"));
  const int64_t steps = shape[t_axis];
  for (int64_t b = 0; b < lens.numel(); ++b) {
    int64_t len = lens.get_i64(b);
    if (len < 0 || len > steps) {
      return Status::invalid("reverse_sequence: sequence_lens[" + std::to_string(b) +
                             "] = " + std::to_string(len) + " is out of range [0, " + std::to_string(steps) +
                             "] (the time axis' size)");
    }
  }
  const std::vector<int64_t> stride = strides_of(shape);
  const size_t esize = size_t(dtype_size(x.dtype()));
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(y.raw());
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t o = 0; o < x.numel(); ++o) {
    int64_t rest = o;
    for (size_t d = shape.size(); d-- > 0;) index[d] = rest % shape[d], rest /= shape[d];
    const int64_t len = lens.get_i64(index[b_axis]), t = index[t_axis];
    const int64_t from = t < len ? len - 1 - t : t;
    std::memcpy(dst + size_t(o) * esize, src + size_t(o + (from - t) * stride[t_axis]) * esize, esize);
  }
  return Status::ok();
}

}  // namespace fusebox::cpu
