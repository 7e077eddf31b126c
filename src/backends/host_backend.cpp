#include "backends/host_backend.h"

#include <cstring>

namespace fusebox {

namespace {

Status check_same_type(const BufferView& a, const BufferView& b, const char* what) {
  if (a.dtype == b.dtype && a.shape == b.shape) return Status::ok();
  return Status::internal(std::string(what) + ": views differ in type (" + std::string(dtype_name(a.dtype)) +
                          " vs " + std::string(dtype_name(b.dtype)) + ", or shape)");
}

}  // namespace

Expected<Buffer> HostBackend::allocate(DType dtype, std::span<const int64_t> shape) const {
  std::vector<int64_t> dims(shape.begin(), shape.end());
  std::shared_ptr<uint8_t[]> bytes = pool_.allocate_bytes(size_t(product(dims)) * size_t(dtype_size(dtype)));
  BufferView view{bytes.get(), dtype, dims, contiguous_strides(dims), device_};
  return Buffer(std::move(view), std::move(bytes));
}

Status HostBackend::copy_from_host(Stream&, const BufferView& host, const BufferView& dst) const {
  FUSEBOX_RETURN_IF_ERROR(check_same_type(host, dst, "copy from host"));
  if (host.nbytes()) std::memcpy(dst.data, host.data, host.nbytes());
  return Status::ok();
}

Status HostBackend::copy_to_host(Stream&, const BufferView& src, const BufferView& host) const {
  FUSEBOX_RETURN_IF_ERROR(check_same_type(src, host, "copy to host"));
  if (src.nbytes()) std::memcpy(host.data, src.data, src.nbytes());
  return Status::ok();
}

}  // namespace fusebox
