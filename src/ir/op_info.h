// The op table (ops.def) as data: Op, OpKind and the per-op OpInfo with its attribute schema.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attributes.h"

namespace fusebox {

enum class Op : uint16_t {
#define FUSEBOX_OP(name, kw, min_in, max_in, num_out, kind, schema) name,
#include "ir/ops.def"
#undef FUSEBOX_OP
};

inline constexpr int kNumOps = 0
#define FUSEBOX_OP(name, kw, min_in, max_in, num_out, kind, schema) +1
#include "ir/ops.def"
#undef FUSEBOX_OP
    ;

// The ordered scale of op kinds: fusion rules compare these, never op names.
enum class OpKind : uint8_t { Elementwise, Broadcast, Injective, Reduce, Contraction, Opaque };
std::string_view op_kind_name(OpKind k);

struct AttrSpec {
  std::string name;
  AttrType type;
  bool required = false;                 // no default and not optional
  std::optional<AttrValue> default_value;
  std::vector<std::string> choices;      // for str(a|b): the allowed values
};

struct OpInfo {
  Op op;
  std::string_view name;     // enum spelling, e.g. "MatMul"
  std::string_view keyword;  // text spelling, e.g. "matmul"
  int min_inputs;
  int max_inputs;   // -1: variadic
  int num_outputs;  // -1: decided per node
  OpKind kind;
  std::vector<AttrSpec> attrs;

  const AttrSpec* find_attr(std::string_view attr_name) const;
};

const OpInfo& op_info(Op op);
std::optional<Op> op_from_keyword(std::string_view keyword);
inline std::string_view op_keyword(Op op) { return op_info(op).keyword; }
inline OpKind op_kind(Op op) { return op_info(op).kind; }

}  // namespace fusebox
