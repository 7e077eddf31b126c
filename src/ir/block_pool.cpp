// Per-thread free lists of small blocks (block_pool.h).
#include "ir/block_pool.h"

#include <cstdint>
#include <cstdlib>

namespace fusebox {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kPooling = false;
#else
constexpr bool kPooling = true;
#endif

constexpr size_t kGranule = 16;
constexpr size_t kClasses = kMaxPooledBytes / kGranule;

struct FreeBlock {
  FreeBlock* next;
};

// Trivially destructible, so they stay usable while other thread-locals are destroyed.
struct FreeLists {
  FreeBlock* head[kClasses];
  int count[kClasses];
  bool registered;  // the closer below is constructed: the lists are emptied at thread end
  bool closed;      // the thread is ending: frees go straight to malloc
};
thread_local FreeLists t_lists{};

struct Closer {
  ~Closer() {
    for (size_t c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = t_lists.head[c]) {
        t_lists.head[c] = b->next;
        std::free(b);
      }
      t_lists.count[c] = 0;
    }
    t_lists.closed = true;
  }
};
thread_local Closer t_closer;

size_t class_of(size_t bytes) { return (bytes - 1) / kGranule; }

}  // namespace

void* pool_allocate(size_t bytes) {
  if (!kPooling || bytes == 0 || bytes > kMaxPooledBytes) {
    void* p = std::malloc(bytes == 0 ? 1 : bytes);
    if (!p) throw std::bad_alloc();
    return p;
  }
  const size_t c = class_of(bytes);
  if (FreeBlock* b = t_lists.head[c]) {
    t_lists.head[c] = b->next;
    --t_lists.count[c];
    return b;
  }
  void* p = std::malloc((c + 1) * kGranule);
  if (!p) throw std::bad_alloc();
  return p;
}

void pool_free(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (!kPooling || bytes == 0 || bytes > kMaxPooledBytes || t_lists.closed) {
    std::free(p);
    return;
  }
  const size_t c = class_of(bytes);
  if (t_lists.count[c] >= kMaxPooledBlocks) {
    std::free(p);
    return;
  }
  if (!t_lists.registered) {
    // Constructs this thread's closer, whose destructor gives the kept blocks back.
    static_cast<void>(&t_closer);
    t_lists.registered = true;
  }
  auto* b = static_cast<FreeBlock*>(p);
  b->next = t_lists.head[c];
  t_lists.head[c] = b;
  ++t_lists.count[c];
}

}  // namespace fusebox
