#include "ir/claim_table.h"

namespace fusebox {

std::string_view fused_kind_name(FusedKind k) {
  switch (k) {
#define FUSEBOX_FUSED_KIND_NAME(name, text) \
  case FusedKind::name:                     \
    return text;
    FUSEBOX_FUSED_KINDS(FUSEBOX_FUSED_KIND_NAME)
#undef FUSEBOX_FUSED_KIND_NAME
  }
  return "?";
}

std::optional<FusedKind> parse_fused_kind(std::string_view name) {
#define FUSEBOX_FUSED_KIND_PARSE(n, text) \
  if (name == text) return FusedKind::n;
  FUSEBOX_FUSED_KINDS(FUSEBOX_FUSED_KIND_PARSE)
#undef FUSEBOX_FUSED_KIND_PARSE
  return std::nullopt;
}

bool ClaimTable::claims_activation(FusedKind k, EpilogueAct a) const {
  bool epilogue_kind = k == FusedKind::MatmulBiasAct || k == FusedKind::MatmulResidual || k == FusedKind::ConvBiasAct;
  return epilogue_kind && claims(k) && ((epilogue_acts >> static_cast<int>(a)) & 1u);
}

std::vector<FusedKind> ClaimTable::kinds() const {
  std::vector<FusedKind> out;
  for (int i = 0; i < kNumFusedKinds; ++i) {
    if (claims(static_cast<FusedKind>(i))) out.push_back(static_cast<FusedKind>(i));
  }
  return out;
}

std::vector<EpilogueAct> ClaimTable::activations() const {
  std::vector<EpilogueAct> out;
  for (int i = 0; i < kNumEpilogueActs; ++i) {
    if ((epilogue_acts >> i) & 1u) out.push_back(static_cast<EpilogueAct>(i));
  }
  return out;
}

std::vector<DType> ClaimTable::claimed_dtypes() const {
  std::vector<DType> out;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (claims_dtype(static_cast<DType>(i))) out.push_back(static_cast<DType>(i));
  }
  return out;
}

}  // namespace fusebox
