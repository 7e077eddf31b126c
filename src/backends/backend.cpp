#include "backends/backend.h"

#include "ir/block_pool.h"
#include "ir/check.h"

namespace fusebox {

std::string Device::to_string() const {
  return std::string(kind == DeviceKind::Cuda ? "cuda" : "cpu") + ":" + std::to_string(index);
}

BufferView host_view(const Array& a) {
  // Kernels never write their operands, so a view of a const Array may drop the const.
  return BufferView{const_cast<void*>(a.raw()), a.dtype(), a.shape(), contiguous_strides(a.shape()), kHostDevice};
}

Array array_over(const BufferView& v) {
  FUSEBOX_CHECK(v.device.kind == DeviceKind::Cpu) << "a host Array over memory of " << v.device.to_string();
  FUSEBOX_CHECK(v.strides == contiguous_strides(v.shape)) << "a host Array over a strided view";
  return Array::view(v.dtype, v.shape, v.data);
}

std::vector<Array> arrays_over(std::span<const BufferView> views) {
  std::vector<Array> arrays;
  arrays.reserve(views.size());
  for (const BufferView& v : views) arrays.push_back(array_over(v));
  return arrays;
}

Buffer Buffer::wrap(const Array& a) {
  // A pooled block (ir/block_pool.h): a lazy flush wraps every operand of its plan.
  return Buffer(host_view(a), std::allocate_shared<Array>(PoolAllocator<Array>(), a));
}

Buffer Buffer::reshaped(std::vector<int64_t> shape) const {
  FUSEBOX_CHECK(view_.strides == contiguous_strides(view_.shape)) << "reshaping a strided buffer";
  FUSEBOX_CHECK(product(shape) == view_.numel()) << "reshape changes the element count";
  BufferView v = view_;
  v.strides = contiguous_strides(shape);
  v.shape = std::move(shape);
  return Buffer(std::move(v), owner_);
}

Array Buffer::to_array() const {
  FUSEBOX_CHECK(view_.device.kind == DeviceKind::Cpu) << "an Array of memory on " << view_.device.to_string();
  // Aliasing constructor: the Array shares ownership of whatever owns this buffer's memory.
  std::shared_ptr<uint8_t[]> bytes(owner_, static_cast<uint8_t*>(view_.data));
  return Array::adopt(view_.dtype, view_.shape, std::move(bytes));
}

}  // namespace fusebox
