#include "runtime/plan_cache.h"

#include "ir/structural_hash.h"

namespace fusebox {

std::optional<Executable> Session::PlanCache::find(uint64_t hash, const Graph& graph, const std::string& options) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->hash != hash || it->options != options || !identical(it->graph, graph)) continue;
    entries_.splice(entries_.begin(), entries_, it);
    ++stats_.plan_hits;
    return entries_.front().exe;
  }
  ++stats_.plan_misses;
  return std::nullopt;
}

void Session::PlanCache::insert(uint64_t hash, Graph graph, std::string options, Executable exe) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  entries_.push_front(Entry{hash, std::move(graph), std::move(options), std::move(exe)});
  if (entries_.size() > capacity_) entries_.pop_back();
}

Session::Stats Session::PlanCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Session::Stats s = stats_;
  s.cached_plans = entries_.size();
  return s;
}

}  // namespace fusebox
