#include "ir/epilogue.h"

#include "ir/check.h"

namespace fusebox {

std::string_view epilogue_act_name(EpilogueAct a) {
  switch (a) {
#define FUSEBOX_EPILOGUE_ACT_NAME(name, text) \
  case EpilogueAct::name:                     \
    return text;
    FUSEBOX_EPILOGUE_ACTS(FUSEBOX_EPILOGUE_ACT_NAME)
#undef FUSEBOX_EPILOGUE_ACT_NAME
  }
  return "?";
}

std::optional<EpilogueAct> parse_epilogue_act(std::string_view name) {
  if (name == "gelu-tanh") return EpilogueAct::GeluTanh;
#define FUSEBOX_EPILOGUE_ACT_PARSE(n, text) \
  if (name == text) return EpilogueAct::n;
  FUSEBOX_EPILOGUE_ACTS(FUSEBOX_EPILOGUE_ACT_PARSE)
#undef FUSEBOX_EPILOGUE_ACT_PARSE
  return std::nullopt;
}

namespace {

std::optional<double> optional_f64(const Node& n, std::string_view name) {
  const AttrValue* v = n.attrs.find(name);
  if (!v) return std::nullopt;
  return std::get<double>(*v);
}

}  // namespace

std::optional<Epilogue> epilogue_of_activation(const Node& n) {
  switch (n.op) {
    case Op::Relu: return Epilogue{EpilogueAct::Relu};
    case Op::LeakyRelu: return Epilogue{EpilogueAct::LeakyRelu, n.attr_f64("alpha"), std::nullopt};
    case Op::Clip: return Epilogue{EpilogueAct::Clip, optional_f64(n, "min"), optional_f64(n, "max")};
    case Op::Sigmoid: return Epilogue{EpilogueAct::Sigmoid};
    case Op::Tanh: return Epilogue{EpilogueAct::Tanh};
    case Op::HardSigmoid: return Epilogue{EpilogueAct::HardSigmoid, n.attr_f64("alpha"), n.attr_f64("beta")};
    case Op::HardSwish: return Epilogue{EpilogueAct::HardSwish};
    case Op::Silu: return Epilogue{EpilogueAct::Silu};
    case Op::Gelu:
      return Epilogue{n.attr_str("approximate") == "tanh" ? EpilogueAct::GeluTanh : EpilogueAct::Gelu};
    default: return std::nullopt;
  }
}

Epilogue epilogue_of_fused(const Node& fused) {
  std::optional<EpilogueAct> act = parse_epilogue_act(fused.attr_str("act"));
  FUSEBOX_CHECK(act.has_value()) << "fused op with unknown act " << fused.attr_str("act");
  return Epilogue{*act, optional_f64(fused, "act_alpha"), optional_f64(fused, "act_beta")};
}

void set_epilogue(Attrs& attrs, const Epilogue& e) {
  attrs.set("act", std::string(epilogue_act_name(e.act)));
  attrs.erase("act_alpha");
  attrs.erase("act_beta");
  if (e.alpha) attrs.set("act_alpha", *e.alpha);
  if (e.beta) attrs.set("act_beta", *e.beta);
}

Op activation_op(const Epilogue& e, Attrs* attrs) {
  *attrs = Attrs();
  switch (e.act) {
    case EpilogueAct::Relu: return Op::Relu;
    case EpilogueAct::LeakyRelu:
      if (e.alpha) attrs->set("alpha", *e.alpha);
      return Op::LeakyRelu;
    case EpilogueAct::Clip:
      if (e.alpha) attrs->set("min", *e.alpha);
      if (e.beta) attrs->set("max", *e.beta);
      return Op::Clip;
    case EpilogueAct::Sigmoid: return Op::Sigmoid;
    case EpilogueAct::Tanh: return Op::Tanh;
    case EpilogueAct::HardSigmoid:
      if (e.alpha) attrs->set("alpha", *e.alpha);
      if (e.beta) attrs->set("beta", *e.beta);
      return Op::HardSigmoid;
    case EpilogueAct::HardSwish: return Op::HardSwish;
    case EpilogueAct::Silu: return Op::Silu;
    case EpilogueAct::Gelu: return Op::Gelu;
    case EpilogueAct::GeluTanh:
      attrs->set("approximate", std::string("tanh"));
      return Op::Gelu;
    case EpilogueAct::None: break;
  }
  FUSEBOX_CHECK(false) << "activation_op of an epilogue without activation";
  return Op::Identity;
}

}  // namespace fusebox
