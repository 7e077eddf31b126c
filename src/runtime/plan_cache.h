// The Session's bounded cache of compiled plans (least recently used dropped first).
//
// Key: structural_hash(graph) mixed with the compile options as text (the resolved fusion
// options and pass list, the backend and its options). A hash hit is confirmed by exact
// equality of the graph (ir::identical) and of the options text, so a collision can cost a
// compile but never return another graph's plan.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>

#include "ir/graph.h"
#include "runtime/session.h"

namespace fusebox {

class Session::PlanCache {
 public:
  explicit PlanCache(size_t capacity) : capacity_(capacity) {}
  std::optional<Executable> find(uint64_t hash, const Graph& graph, const std::string& options);
  void insert(uint64_t hash, Graph graph, std::string options, Executable exe);
  Session::Stats stats() const;

 private:
  struct Entry {
    uint64_t hash;
    Graph graph;  // the graph as given to compile (constants shared, not copied)
    std::string options;
    Executable exe;
  };
  mutable std::mutex mu_;
  size_t capacity_;
  std::list<Entry> entries_;  // most recently used first; at most 64 by default: a scan is cheap
  Session::Stats stats_;
};

}  // namespace fusebox
