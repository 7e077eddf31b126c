// Fuzz target: the .fbir parser and verifier. Any text either fails with a located message or
// parses to a verified module, and a parsed module prints to text that parses back to the same
// text (print(parse(s)) is canonical).
#include <cstdint>
#include <string_view>

#include "ir/check.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace fusebox {
namespace {

// Bigger inputs add parse time, not new paths.
constexpr size_t kMaxInputBytes = 1 << 16;

void check_text(std::string_view text) {
  Expected<Module> m = parse_module(text, "fuzz.fbir");
  if (!m) {
    FUSEBOX_CHECK(!m.status().message().empty()) << "an error without a message";
    return;
  }
  FUSEBOX_CHECK(verify(*m).is_ok()) << "the parser returned a module the verifier rejects";
  const std::string printed = print_module(*m);
  Expected<Module> again = parse_module(printed, "printed.fbir");
  FUSEBOX_CHECK(again) << "printed text does not parse: " << again.status().to_string() << "\n" << printed;
  FUSEBOX_CHECK(print_module(*again) == printed) << "printing is not stable:\n" << printed;
}

}  // namespace
}  // namespace fusebox

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > fusebox::kMaxInputBytes) return 0;
  fusebox::check_text(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
