// Epilogues of fused contractions: the activation a fused_matmul_* / fused_conv_bias_act node
// applies last, y = act(contraction + bias + residual), and how it maps to and from the
// activation op it replaces. The fused ops store it in three attributes: act (a name below),
// act_alpha and act_beta (the activation's parameters, only where it has them).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/graph.h"

namespace fusebox {

// Activations an epilogue may carry. The text names are those of the `act` attribute in
// ops.def; keep the two lists equal (parser_test round-trips every name through the op schema).
#define FUSEBOX_EPILOGUE_ACTS(X)  \
  X(None, "none")                 \
  X(Relu, "relu")                 \
  X(LeakyRelu, "leaky_relu")      \
  X(Clip, "clip")                 \
  X(Sigmoid, "sigmoid")           \
  X(Tanh, "tanh")                 \
  X(HardSigmoid, "hardsigmoid")   \
  X(HardSwish, "hardswish")       \
  X(Silu, "silu")                 \
  X(Gelu, "gelu")                 \
  X(GeluTanh, "gelu_tanh")

enum class EpilogueAct : uint8_t {
#define FUSEBOX_EPILOGUE_ACT_ENUM(name, text) name,
  FUSEBOX_EPILOGUE_ACTS(FUSEBOX_EPILOGUE_ACT_ENUM)
#undef FUSEBOX_EPILOGUE_ACT_ENUM
};
inline constexpr int kNumEpilogueActs = 0
#define FUSEBOX_EPILOGUE_ACT_COUNT(name, text) +1
    FUSEBOX_EPILOGUE_ACTS(FUSEBOX_EPILOGUE_ACT_COUNT)
#undef FUSEBOX_EPILOGUE_ACT_COUNT
    ;

std::string_view epilogue_act_name(EpilogueAct a);
// Also accepts "gelu-tanh", the spelling of the spec's prose.
std::optional<EpilogueAct> parse_epilogue_act(std::string_view name);

// An activation with its parameters: leaky_relu's slope (alpha); clip's bounds (alpha = min,
// beta = max, either absent); hardsigmoid's alpha and beta.
struct Epilogue {
  EpilogueAct act = EpilogueAct::None;
  std::optional<double> alpha, beta;
  friend bool operator==(const Epilogue&, const Epilogue&) = default;
};

// The epilogue that replaces activation node `n`, or nullopt when `n` is not an activation.
std::optional<Epilogue> epilogue_of_activation(const Node& n);
// The epilogue a fused contraction carries (its act/act_alpha/act_beta attributes).
Epilogue epilogue_of_fused(const Node& fused);
// Writes act/act_alpha/act_beta.
void set_epilogue(Attrs& attrs, const Epilogue& e);
// The activation op and attributes that compute `e` on their own (e.act != None).
Op activation_op(const Epilogue& e, Attrs* attrs);

}  // namespace fusebox
