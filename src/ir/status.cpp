#include "fusebox/status.h"

namespace fusebox {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kExecutionError: return "execution error";
    case StatusCode::kInternal: return "internal error";
  }
  return "?";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

Status Status::with_context(const std::string& prefix) const {
  if (is_ok()) return *this;
  return Status(code_, prefix + ": " + message_);
}

}  // namespace fusebox
