// Small blocks kept per thread for the objects made and dropped at every lazy op (a tensor's
// state, a scalar's bytes, the Array a kernel argument wraps). glibc's thread cache holds seven
// blocks of a size; a 100-op chain makes and frees a few hundred at once, so most of them
// overflowed into its shared bins, and every page-sized request then consolidated those bins.
//
// Blocks come in size classes of 16 bytes up to kMaxPooledBytes. A freed block goes to the free
// list of the thread that frees it (any thread may free any block: every block of a class is a
// plain malloc of the class size), at most kMaxPooledBlocks per class; the rest, and everything a
// thread still holds when it ends, goes back to malloc. Builds with AddressSanitizer or
// ThreadSanitizer pass every request straight to malloc, so a use after free stays visible.
#pragma once

#include <cstddef>
#include <new>

namespace fusebox {

inline constexpr size_t kMaxPooledBytes = 256;
inline constexpr int kMaxPooledBlocks = 1024;

// bytes == 0 or > kMaxPooledBytes: plain malloc. Throws std::bad_alloc when memory is out.
void* pool_allocate(size_t bytes);
// `bytes` must be the size given to pool_allocate.
void pool_free(void* p, size_t bytes) noexcept;

// An allocator for std::allocate_shared: one pooled block holds the control block and the object.
template <typename T>
struct PoolAllocator {
  using value_type = T;
  static_assert(alignof(T) <= alignof(std::max_align_t), "pooled blocks are malloc-aligned");

  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) noexcept {}

  T* allocate(size_t n) { return static_cast<T*>(pool_allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { pool_free(p, n * sizeof(T)); }

  template <typename U>
  bool operator==(const PoolAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace fusebox
