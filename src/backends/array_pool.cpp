#include "backends/array_pool.h"

namespace fusebox {

ArrayPool::ArrayPool(size_t max_cached_bytes) : state_(std::make_shared<State>()) {
  state_->max_cached_bytes = max_cached_bytes;
}

void ArrayPool::State::give_back(size_t capacity, uint8_t* p) {
  std::lock_guard<std::mutex> lock(mu);
  if (cached_bytes + capacity > max_cached_bytes) {
    free_array_bytes(p);
    return;
  }
  idle.emplace(capacity, p);
  cached_bytes += capacity;
  stats.cached_bytes = cached_bytes;
}

ArrayPool::State::~State() {
  for (auto& [capacity, p] : idle) free_array_bytes(p);
}

Array ArrayPool::allocate(DType dtype, std::vector<int64_t> shape) {
  size_t bytes = size_t(product(shape)) * size_t(dtype_size(dtype));
  return Array::adopt(dtype, std::move(shape), allocate_bytes(bytes));
}

std::shared_ptr<uint8_t[]> ArrayPool::allocate_bytes(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  uint8_t* p = nullptr;
  size_t capacity = bytes;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    // The smallest idle buffer that holds `bytes`, if it is less than twice as large: a plan's
    // values come in many sizes, and with exact sizes only every size kept buffers of its own
    // (PaddleOCR det: 61 MB of run-time memory).
    auto it = state_->idle.lower_bound(bytes);
    if (it != state_->idle.end() && it->first / 2 < bytes) {
      p = it->second;
      capacity = it->first;
      state_->idle.erase(it);
      state_->cached_bytes -= capacity;
      state_->stats.cached_bytes = state_->cached_bytes;
      ++state_->stats.reuses;
    } else {
      ++state_->stats.allocations;
    }
  }
  if (!p) p = allocate_array_bytes(capacity);
  std::weak_ptr<State> weak = state_;
  std::shared_ptr<uint8_t[]> buffer(p, [weak, capacity](uint8_t* q) {
    if (auto s = weak.lock()) {
      s->give_back(capacity, q);
    } else {
      free_array_bytes(q);
    }
  });
  return buffer;
}

ArrayPool::Stats ArrayPool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

}  // namespace fusebox
