// The trace buffer and its JSON writer (trace.h).
#include "lazy/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

namespace fusebox::lazy {
namespace trace_detail {
std::atomic<bool> g_on{false};
}
namespace {

struct Event {
  const char* name;
  int64_t ts_ns, dur_ns;
  int tid;
  std::string detail;
};

struct TraceBuffer {
  std::mutex mu;
  std::string path;
  size_t max_events = kDefaultMaxTraceEvents;
  std::vector<Event> events;
  size_t dropped = 0;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  bool exit_hook = false;
};
TraceBuffer& buffer() {
  static TraceBuffer* b = new TraceBuffer();
  return *b;
}

std::atomic<int> g_next_tid{1};
int thread_number() {
  thread_local const int tid = g_next_tid.fetch_add(1, std::memory_order_relaxed);
  return tid;
}

void write_at_exit() {
  if (trace_detail::g_on.load(std::memory_order_relaxed)) {
    Status s = write_trace();
    if (!s.is_ok()) std::fprintf(stderr, "fusebox: %s\n", s.to_string().c_str());
  }
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

namespace trace_detail {

bool init_from_env() {
  const char* path = std::getenv("FUSEBOX_TRACE");
  if (path && *path) start_trace(path);
  return true;
}

void add(const char* name, std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end,
         std::string detail) {
  TraceBuffer& b = buffer();
  const int tid = thread_number();
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.events.size() >= b.max_events) {
    ++b.dropped;
    return;
  }
  b.events.push_back({name, std::chrono::duration_cast<std::chrono::nanoseconds>(start - b.origin).count(),
                      std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count(), tid, std::move(detail)});
}

}  // namespace trace_detail

void start_trace(const std::string& path, size_t max_events) {
  TraceBuffer& b = buffer();
  {
    std::lock_guard<std::mutex> lock(b.mu);
    b.path = path;
    b.max_events = max_events;
    b.events.clear();
    b.events.reserve(std::min<size_t>(max_events, 4096));
    b.dropped = 0;
    b.origin = std::chrono::steady_clock::now();
    if (!b.exit_hook) {
      b.exit_hook = true;
      std::atexit(write_at_exit);
    }
  }
  trace_detail::g_on.store(true, std::memory_order_relaxed);
}

void stop_trace() { trace_detail::g_on.store(false, std::memory_order_relaxed); }

TraceInfo trace_info() {
  TraceBuffer& b = buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  return {trace_detail::g_on.load(std::memory_order_relaxed), b.events.size(), b.dropped, b.path};
}

Status write_trace() {
  TraceBuffer& b = buffer();
  std::lock_guard<std::mutex> lock(b.mu);
  if (b.path.empty()) return Status::invalid("write_trace: tracing was never started (set FUSEBOX_TRACE or call start_trace)");
  std::ofstream f(b.path, std::ios::trunc);
  if (!f) return Status::invalid("write_trace: cannot open '" + b.path + "' for writing");
  const long pid = long(::getpid());
  f << "[\n";
  f << R"({"name":"process_name","ph":"M","pid":)" << pid << R"(,"tid":0,"args":{"name":"fusebox lazy","dropped_spans":)"
    << b.dropped << "}}";
  char num[64];
  for (const Event& e : b.events) {
    f << ",\n{\"name\":\"" << e.name << "\",\"cat\":\"lazy\",\"ph\":\"X\",";
    std::snprintf(num, sizeof num, "\"ts\":%.3f,\"dur\":%.3f,", double(e.ts_ns) / 1000.0, double(e.dur_ns) / 1000.0);
    f << num << "\"pid\":" << pid << ",\"tid\":" << e.tid;
    if (!e.detail.empty()) f << ",\"args\":{\"detail\":\"" << json_escape(e.detail) << "\"}";
    f << "}";
  }
  f << "\n]\n";
  f.close();
  if (!f) return Status::invalid("write_trace: writing '" + b.path + "' failed");
  return Status::ok();
}

}  // namespace fusebox::lazy
