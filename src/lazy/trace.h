// Tracing of the lazy layer as a Chrome/Perfetto trace: a JSON array of complete events
// ({"name","cat","ph":"X","ts","dur","pid","tid","args"}, times in microseconds) for the spans
// record (one op recorded), explore (fusers grouping a segment), compile (one group's graph
// through Session::compile) and execute (one block run). FUSEBOX_TRACE=trace.json turns it on at
// the first lazy op and writes the file at process exit; start_trace/write_trace do the same
// from code. At most max_events spans are kept (later ones are counted as dropped), so a long
// program's trace uses bounded memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

#include "fusebox/status.h"

namespace fusebox::lazy {

inline constexpr size_t kDefaultMaxTraceEvents = 100000;

// Starts (or restarts, dropping kept spans) tracing into `path`.
void start_trace(const std::string& path, size_t max_events = kDefaultMaxTraceEvents);
// Stops tracing (kept spans stay until the next start; nothing is written at exit).
void stop_trace();
// Writes the kept spans to the trace's path (also done at exit while tracing is on).
Status write_trace();
struct TraceInfo {
  bool on = false;
  size_t events = 0, dropped = 0;
  std::string path;
};
TraceInfo trace_info();

namespace trace_detail {
extern std::atomic<bool> g_on;
bool init_from_env();  // reads FUSEBOX_TRACE once
void add(const char* name, std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end,
         std::string detail);
}  // namespace trace_detail

inline bool tracing() {
  static const bool env = trace_detail::init_from_env();
  (void)env;
  return trace_detail::g_on.load(std::memory_order_relaxed);
}

// One span from construction to destruction; `name` must be a string literal. Costs one atomic
// load when tracing is off.
class TraceSpan {
 public:
  explicit TraceSpan(const char* name) : name_(tracing() ? name : nullptr) {
    if (name_) start_ = std::chrono::steady_clock::now();
  }
  ~TraceSpan() {
    if (name_) trace_detail::add(name_, start_, std::chrono::steady_clock::now(), std::move(detail_));
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  bool on() const { return name_ != nullptr; }
  // Shown as the span's args.detail.
  void set_detail(std::string d) {
    if (name_) detail_ = std::move(d);
  }

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
  std::string detail_;
};

}  // namespace fusebox::lazy
