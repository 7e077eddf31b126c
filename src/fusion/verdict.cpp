#include "fusion/verdict.h"

namespace fusebox {

const char* miss_reason_name(MissReason r) {
  switch (r) {
    case MissReason::MultiConsumer: return "multi-consumer";
    case MissReason::EscapesAsOutput: return "escapes-as-output";
    case MissReason::BiasNotBroadcastable: return "bias-not-broadcastable";
    case MissReason::UnsupportedActivation: return "unsupported-activation";
    case MissReason::NotClaimedByTarget: return "not-claimed-by-target";
    case MissReason::LimitReached: return "limit-reached";
    case MissReason::DTypeMismatch: return "dtype-mismatch";
    case MissReason::ShapeMismatch: return "shape-mismatch";
    case MissReason::WouldCreateCycle: return "would-create-cycle";
    case MissReason::NotRecognised: return "not-recognised";
  }
  return "?";
}

}  // namespace fusebox
