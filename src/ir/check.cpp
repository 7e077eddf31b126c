#include "ir/check.h"

#include <cstdio>
#include <cstdlib>

namespace fusebox::detail {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": internal check failed: " << condition << ": ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "fusebox: %s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace fusebox::detail
