// SmallVec<T, N>: a vector whose first N elements live inside the object. Records have one to
// three operands and one result almost always; keeping those inline saves a heap allocation per
// list on the recording path (three per record, one per drop). Past N elements (a concat of many
// parts) every element moves to a std::vector, so the elements stay contiguous.
//
// The state is (inline slots, heap vector, size, which of the two holds the elements), all
// values with their own copy and move, so the defaulted copy and move are right. T must be
// default-constructible: unused inline slots hold default values.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <utility>
#include <vector>

namespace fusebox::lazy {

template <typename T, size_t N>
class SmallVec {
 public:
  SmallVec() = default;
  SmallVec(std::initializer_list<T> values) {
    reserve(values.size());
    for (const T& v : values) push_back(v);
  }

  size_t size() const { return on_heap_ ? heap_.size() : size_; }
  bool empty() const { return size() == 0; }
  T* data() { return on_heap_ ? heap_.data() : inline_.data(); }
  const T* data() const { return on_heap_ ? heap_.data() : inline_.data(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T* begin() { return data(); }
  T* end() { return data() + size(); }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }

  void reserve(size_t n) {
    if (n > N) spill(n);
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (!on_heap_ && size_ < N) {
      inline_[size_] = T(std::forward<Args>(args)...);
      return inline_[size_++];
    }
    spill(2 * N);
    return heap_.emplace_back(std::forward<Args>(args)...);
  }
  void push_back(const T& v) { emplace_back(v); }
  void push_back(T&& v) { emplace_back(std::move(v)); }

 private:
  // Moves the inline elements to the heap vector (once; later calls only reserve).
  void spill(size_t capacity) {
    if (on_heap_) return;
    heap_.reserve(capacity > size_ ? capacity : size_);
    for (size_t i = 0; i < size_; ++i) heap_.push_back(std::exchange(inline_[i], T()));
    size_ = 0;
    on_heap_ = true;
  }

  std::array<T, N> inline_{};
  std::vector<T> heap_;
  size_t size_ = 0;  // elements in inline_ (while !on_heap_)
  bool on_heap_ = false;
};

}  // namespace fusebox::lazy
