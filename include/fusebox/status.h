// Status and Expected<T>: the user-error channel of fusebox.
//
// Anything a user can get wrong (malformed text, a shape mismatch, a missing input) comes back as
// a Status whose message names what is wrong and where. Broken internal invariants use
// FUSEBOX_CHECK (src/ir/check.h) instead and abort.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace fusebox {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: text, shapes, attributes, files
  kNotFound,         // a named thing (input, file, op) does not exist
  kUnimplemented,    // valid input that this build cannot handle (e.g. no executor for a target)
  kExecutionError,   // a failure while running a compiled plan
  kInternal,         // a bug surfaced as a status rather than an abort
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status invalid(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status execution(std::string m) { return {StatusCode::kExecutionError, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid argument: <message>"
  std::string to_string() const;
  // Returns a copy whose message is "<prefix>: <message>" (adds context while propagating).
  Status with_context(const std::string& prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // The error; Status::ok() when a value is held.
  Status status() const { return has_value() ? Status::ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace fusebox

// Propagates a non-ok Status from the current function.
#define FUSEBOX_RETURN_IF_ERROR(expr)            \
  do {                                           \
    ::fusebox::Status fusebox_status_ = (expr);  \
    if (!fusebox_status_.is_ok()) return fusebox_status_; \
  } while (0)

#define FUSEBOX_CONCAT_INNER(a, b) a##b
#define FUSEBOX_CONCAT(a, b) FUSEBOX_CONCAT_INNER(a, b)

// `FUSEBOX_ASSIGN_OR_RETURN(auto x, f());` binds the value or returns the error.
#define FUSEBOX_ASSIGN_OR_RETURN(lhs, expr) \
  FUSEBOX_ASSIGN_OR_RETURN_IMPL(FUSEBOX_CONCAT(fusebox_expected_, __LINE__), lhs, expr)
#define FUSEBOX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.has_value()) return tmp.status();          \
  lhs = std::move(tmp).value()
