// Chain-following order of a segment's records (schedule.h).
#include "lazy/schedule.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace fusebox::lazy {
namespace {

// The distinct in-segment producers of a record's operands.
std::vector<int> producers_of(const RelativeForm& rf, const Record& r) {
  std::vector<int> out;
  for (const StatePtr& s : r.inputs) {
    const int p = rf.producer[size_t(rf.rel(s.get()))];
    if (p >= 0 && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

}  // namespace

std::vector<int> chain_order(const RelativeForm& rf, const std::vector<Record>& ops) {
  const int n = int(ops.size());
  std::vector<int> pending(ops.size(), 0);              // producers not yet scheduled
  std::vector<std::vector<int>> consumers(ops.size());  // ascending record indices
  for (int i = 0; i < n; ++i) {
    for (int p : producers_of(rf, ops[size_t(i)])) {
      ++pending[size_t(i)];
      consumers[size_t(p)].push_back(i);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int i = 0; i < n; ++i) {
    if (pending[size_t(i)] == 0) ready.push(i);
  }
  std::vector<bool> done(size_t(n), false);
  std::vector<int> order;
  order.reserve(size_t(n));
  int last = -1;
  bool moved = false;
  while (int(order.size()) < n) {
    int next = -1;
    if (last >= 0) {
      for (int c : consumers[size_t(last)]) {
        if (!done[size_t(c)] && pending[size_t(c)] == 0) {
          next = c;
          break;
        }
      }
    }
    while (next < 0 && !ready.empty()) {
      if (!done[size_t(ready.top())]) next = ready.top();
      ready.pop();
    }
    if (next < 0) return {};  // a cycle cannot arise from recorded values; keep recorded order
    done[size_t(next)] = true;
    moved = moved || next != int(order.size());
    order.push_back(next);
    for (int c : consumers[size_t(next)]) {
      if (--pending[size_t(c)] == 0) ready.push(c);
    }
    last = next;
  }
  if (!moved) return {};
  return order;
}

bool is_valid_order(const RelativeForm& rf, const std::vector<Record>& ops, const std::vector<int>& order) {
  if (order.size() != ops.size()) return false;
  std::vector<int> position(ops.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    if (i < 0 || size_t(i) >= ops.size() || position[size_t(i)] >= 0) return false;
    position[size_t(i)] = int(k);
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    for (int p : producers_of(rf, ops[i])) {
      if (position[size_t(p)] >= position[i]) return false;
    }
  }
  return true;
}

void apply_order(RelativeForm& rf, std::vector<Record>& ops, const std::vector<int>& order) {
  std::vector<Record> scheduled;
  scheduled.reserve(ops.size());
  for (int i : order) scheduled.push_back(std::move(ops[size_t(i)]));
  ops = std::move(scheduled);
  std::fill(rf.producer.begin(), rf.producer.end(), -1);
  std::fill(rf.last_reader.begin(), rf.last_reader.end(), -1);
  for (size_t k = 0; k < ops.size(); ++k) {
    for (const StatePtr& s : ops[k].inputs) rf.last_reader[size_t(rf.rel(s.get()))] = int(k);
    for (const StatePtr& s : ops[k].outputs) rf.producer[size_t(rf.rel(s.get()))] = int(k);
  }
}

}  // namespace fusebox::lazy
