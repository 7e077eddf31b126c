// Every "no" of a fusion decision carries a reason. Decisions return a Verdict; refusals that a
// user may care about are recorded as MissedFusion remarks and printed by `fusebox explain`.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace fusebox {

class Verdict {
 public:
  static Verdict yes() { return Verdict(true, {}); }
  static Verdict no(std::string reason) { return Verdict(false, std::move(reason)); }
  explicit operator bool() const { return ok_; }
  const std::string& reason() const { return reason_; }

 private:
  Verdict(bool ok, std::string reason) : ok_(ok), reason_(std::move(reason)) {}
  bool ok_;
  std::string reason_;
};

// Reason categories of spec §4.5 (printed in the report).
enum class MissReason {
  MultiConsumer,
  EscapesAsOutput,
  BiasNotBroadcastable,
  UnsupportedActivation,
  NotClaimedByTarget,
  LimitReached,
  DTypeMismatch,
  ShapeMismatch,
  WouldCreateCycle,
  NotRecognised,  // canonicalize: a decomposed form matched by structure but refused
};
const char* miss_reason_name(MissReason r);

struct MissedFusion {
  std::string pattern;  // e.g. "elementwise_region", "fused_matmul_bias_act"
  std::string node;     // e.g. "%3 = add"
  MissReason reason;
  std::string detail;   // "not fusing %3 into %5: %3 is also a graph output"
  std::string hint;     // what the user could change, may be empty
};

struct FusionRemarks {
  std::vector<MissedFusion> missed;
  // Decisions that are not missed fusions, one line each for the report: "<topic>  <text>"
  // (the IO output gate's estimate, spec §4.6).
  std::vector<std::pair<std::string, std::string>> notes;
  void note(std::string topic, std::string text) { notes.emplace_back(std::move(topic), std::move(text)); }
  void miss(std::string pattern, std::string node, MissReason reason, std::string detail,
            std::string hint = {}) {
    missed.push_back({std::move(pattern), std::move(node), reason, std::move(detail), std::move(hint)});
  }
};

}  // namespace fusebox
