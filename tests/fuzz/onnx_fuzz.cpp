// Fuzz target: the ONNX importer (built with the optional ONNX component). Any bytes either fail
// with a message or import to a graph the verifier accepts.
#include <cstdint>
#include <string_view>

#include "ir/check.h"
#include "ir/verifier.h"
#include "onnx/importer.h"

namespace fusebox {
namespace {

// Seeds are a few hundred bytes; larger inputs mostly grow weight tensors.
constexpr size_t kMaxInputBytes = 1 << 16;

void check_bytes(std::string_view bytes) {
  Expected<Graph> g = import_onnx_bytes(bytes, "fuzz.onnx");
  if (!g) {
    FUSEBOX_CHECK(!g.status().message().empty()) << "an error without a message";
    return;
  }
  const Status verified = verify(*g);
  FUSEBOX_CHECK(verified.is_ok()) << "the importer returned a graph the verifier rejects: " << verified.to_string();
}

}  // namespace
}  // namespace fusebox

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > fusebox::kMaxInputBytes) return 0;
  fusebox::check_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
