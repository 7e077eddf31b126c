// Fuzz target: the .npy reader. Any bytes either fail with a message or give an Array that
// writes back to a file that reads as the same Array.
#include <cstdint>
#include <string_view>

#include "ir/check.h"
#include "runtime/npy.h"

namespace fusebox {
namespace {

void check_bytes(std::string_view bytes) {
  Expected<Array> a = parse_npy(bytes, "fuzz.npy");
  if (!a) {
    FUSEBOX_CHECK(!a.status().message().empty()) << "an error without a message";
    return;
  }
  Expected<std::string> written = format_npy(*a);
  FUSEBOX_CHECK(written) << "a read array does not write: " << written.status().to_string();
  Expected<Array> again = parse_npy(*written, "written.npy");
  FUSEBOX_CHECK(again) << "a written array does not read: " << again.status().to_string();
  FUSEBOX_CHECK(again->same_data(*a)) << "write then read changed " << a->type_string();
}

}  // namespace
}  // namespace fusebox

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fusebox::check_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
