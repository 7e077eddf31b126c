// FUSEBOX_CHECK: the internal-invariant channel. A failed check is a bug in fusebox, never a user
// error: it prints file:line and the streamed message, then aborts.
#pragma once

#include <sstream>

namespace fusebox::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    stream_ << v;
    return *this;
  }

 private:
  std::ostringstream stream_;
};

}  // namespace fusebox::detail

#define FUSEBOX_CHECK(cond) \
  if (cond) {               \
  } else                    \
    ::fusebox::detail::CheckFailure(__FILE__, __LINE__, #cond)
