// Decision log of the lazy layer on stderr, chosen by FUSEBOX_LOG (read once) or set_log_level:
//   basic   one line per block run: its records, fused (by which fuser) or not, its kernels,
//           plan-cache hit or miss;
//   medium  adds, for each exploration, why each fuser closed and which one won;
//   full    adds one line per recorded op.
// Lines start with "[fusebox lazy]" and are written whole (one lock), so threads do not interleave.
#pragma once

#include <string>

#include "lazy/state.h"

namespace fusebox::lazy {

enum class LogLevel { Off = 0, Basic = 1, Medium = 2, Full = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
// "basic" | "medium" | "full" | "off" (or "" / "0"); anything else is an error naming the value.
Expected<LogLevel> parse_log_level(const std::string& text);

void log_line(const std::string& line);
void log_record(const Device& device, const Record& r);
// The name a record shows in logs and traces: the op keyword, or the custom op's name.
std::string record_name(const Record& r);

}  // namespace fusebox::lazy
