// Disjoint sets over 0..n-1 with path halving and union by size.
#pragma once

#include <numeric>
#include <vector>

namespace fusebox {

class UnionFind {
 public:
  explicit UnionFind(size_t n) : parent_(n), size_(n, 1) { std::iota(parent_.begin(), parent_.end(), 0); }
  size_t find(size_t x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }
  // Returns the new root.
  size_t unite(size_t a, size_t b) {
    a = find(a);
    b = find(b);
    if (a == b) return a;
    if (size_[a] < size_[b]) std::swap(a, b);
    parent_[b] = a;
    size_[a] += size_[b];
    return a;
  }
  size_t size_of(size_t x) { return size_[find(x)]; }

 private:
  std::vector<size_t> parent_;
  std::vector<size_t> size_;
};

}  // namespace fusebox
