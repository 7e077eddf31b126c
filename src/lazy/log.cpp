// The lazy layer's stderr log (log.h).
#include "lazy/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "lazy/custom_op.h"

namespace fusebox::lazy {
namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("FUSEBOX_LOG");
  if (!v) return LogLevel::Off;
  Expected<LogLevel> l = parse_log_level(v);
  if (!l) {
    std::fprintf(stderr, "[fusebox lazy] %s; logging stays off\n", l.status().message().c_str());
    return LogLevel::Off;
  }
  return *l;
}

std::atomic<int>& level() {
  static std::atomic<int> l{int(level_from_env())};
  return l;
}

std::string shape_text(const TensorState& s) {
  std::string out = std::string(dtype_name(s.dtype)) + "[";
  for (size_t i = 0; i < s.shape.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(s.shape[i]);
  }
  return out + "]";
}

}  // namespace

LogLevel log_level() { return LogLevel(level().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel l) { level().store(int(l), std::memory_order_relaxed); }

Expected<LogLevel> parse_log_level(const std::string& text) {
  if (text.empty() || text == "0" || text == "off") return LogLevel::Off;
  if (text == "basic") return LogLevel::Basic;
  if (text == "medium") return LogLevel::Medium;
  if (text == "full") return LogLevel::Full;
  return Status::invalid("FUSEBOX_LOG='" + text + "' is not one of basic, medium, full");
}

void log_line(const std::string& line) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[fusebox lazy] %s\n", line.c_str());
  std::fflush(stderr);
}

std::string record_name(const Record& r) {
  if (r.custom) return r.custom->def.name;
  return std::string(op_keyword(r.op));
}

void log_record(const Device& device, const Record& r) {
  std::string line = "record " + device.to_string() + ": " + record_name(r) + "(";
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    if (i) line += ", ";
    line += 't';
    line += std::to_string(r.inputs[i]->id);
  }
  line += ") -> ";
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    if (i) line += ", ";
    line += 't';
    line += std::to_string(r.outputs[i]->id);
    line += ' ';
    line += shape_text(*r.outputs[i]);
  }
  log_line(line);
}

}  // namespace fusebox::lazy
