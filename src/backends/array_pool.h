// ArrayPool: host buffers reused across runs. A buffer allocated here goes back to the pool when
// its last owner dies, so a plan run in a loop touches fresh memory only on the first
// run (first-touch page faults run at a few GB/s, far below copy bandwidth). Thread-safe; the
// pool keeps at most `max_cached_bytes` of idle buffers and frees the rest.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "ir/array.h"

namespace fusebox {

class ArrayPool {
 public:
  explicit ArrayPool(size_t max_cached_bytes = size_t(2) << 30);
  // At least `bytes` (one byte for an empty buffer), aligned to kArrayAlignment.
  std::shared_ptr<uint8_t[]> allocate_bytes(size_t bytes);
  Array allocate(DType dtype, std::vector<int64_t> shape);

  using Stats = PoolStats;
  Stats stats() const;

 private:
  struct State {
    std::mutex mu;
    std::multimap<size_t, uint8_t*> idle;  // capacity -> buffer
    size_t cached_bytes = 0;
    size_t max_cached_bytes = 0;
    Stats stats;
    void give_back(size_t capacity, uint8_t* p);
    ~State();
  };
  std::shared_ptr<State> state_;
};

}  // namespace fusebox
