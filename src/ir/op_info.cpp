#include "ir/op_info.h"

#include <array>
#include <unordered_map>

#include "ir/attr_text.h"
#include "ir/check.h"

namespace fusebox {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Elementwise: return "elementwise";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Injective: return "injective";
    case OpKind::Reduce: return "reduce";
    case OpKind::Contraction: return "contraction";
    case OpKind::Opaque: return "opaque";
  }
  return "?";
}

const AttrSpec* OpInfo::find_attr(std::string_view attr_name) const {
  for (const AttrSpec& a : attrs)
    if (a.name == attr_name) return &a;
  return nullptr;
}

namespace {

AttrType parse_attr_type(std::string_view t) {
  static const std::pair<std::string_view, AttrType> kTypes[] = {
      {"i64", AttrType::I64},   {"f64", AttrType::F64},   {"bool", AttrType::Bool},
      {"str", AttrType::Str},   {"i64s", AttrType::I64s}, {"f64s", AttrType::F64s},
      {"dims", AttrType::Dims}, {"dtype", AttrType::DType}, {"array", AttrType::Array}};
  for (const auto& [name, type] : kTypes)
    if (name == t) return type;
  FUSEBOX_CHECK(false) << "ops.def: unknown attribute type '" << t << "'";
  return AttrType::I64;
}

// "name:type", "name:type=default", "name:type?", "name:str(a|b)=a"
AttrSpec parse_attr_spec(std::string_view op, std::string_view spec) {
  AttrSpec out;
  size_t colon = spec.find(':');
  FUSEBOX_CHECK(colon != std::string_view::npos) << "ops.def " << op << ": bad schema '" << spec << "'";
  out.name = std::string(spec.substr(0, colon));
  std::string_view rest = spec.substr(colon + 1);
  std::string_view default_text;
  bool optional = false;
  if (size_t eq = rest.find('='); eq != std::string_view::npos) {
    default_text = rest.substr(eq + 1);
    rest = rest.substr(0, eq);
  } else if (!rest.empty() && rest.back() == '?') {
    optional = true;
    rest.remove_suffix(1);
  }
  if (size_t paren = rest.find('('); paren != std::string_view::npos) {
    std::string_view list = rest.substr(paren + 1, rest.size() - paren - 2);
    rest = rest.substr(0, paren);
    while (!list.empty()) {
      size_t bar = list.find('|');
      out.choices.emplace_back(list.substr(0, bar));
      list = bar == std::string_view::npos ? std::string_view{} : list.substr(bar + 1);
    }
  }
  out.type = parse_attr_type(rest);
  if (!default_text.empty()) {
    std::string text(default_text);
    if (out.type == AttrType::Str) text = quote_string(default_text);
    size_t consumed = 0;
    Expected<AttrValue> v = parse_attr_value(text, out.type, &consumed, nullptr);
    FUSEBOX_CHECK(v.has_value() && consumed == text.size())
        << "ops.def " << op << ": bad default '" << default_text << "' for " << out.name;
    out.default_value = *v;
  }
  out.required = !optional && !out.default_value;
  return out;
}

std::vector<AttrSpec> parse_schema(std::string_view op, std::string_view schema) {
  std::vector<AttrSpec> specs;
  while (!schema.empty()) {
    size_t semi = schema.find(';');
    specs.push_back(parse_attr_spec(op, schema.substr(0, semi)));
    schema = semi == std::string_view::npos ? std::string_view{} : schema.substr(semi + 1);
  }
  return specs;
}

struct OpTable {
  std::array<OpInfo, kNumOps> infos;
  std::unordered_map<std::string_view, Op> by_keyword;
};

OpTable build_table() {
  OpTable t{{{
#define FUSEBOX_OP(name, kw, min_in, max_in, num_out, kind, schema) \
  OpInfo{Op::name, #name, kw, min_in, max_in, num_out, OpKind::kind, parse_schema(#name, schema)},
#include "ir/ops.def"
#undef FUSEBOX_OP
  }}};
  for (const OpInfo& info : t.infos) {
    FUSEBOX_CHECK(t.by_keyword.emplace(info.keyword, info.op).second)
        << "ops.def: keyword '" << info.keyword << "' listed twice";
  }
  return t;
}

const OpTable& table() {
  static const OpTable t = build_table();  // thread-safe initialisation, read-only afterwards
  return t;
}

}  // namespace

const OpInfo& op_info(Op op) { return table().infos[static_cast<size_t>(op)]; }

std::optional<Op> op_from_keyword(std::string_view keyword) {
  const auto& map = table().by_keyword;
  auto it = map.find(keyword);
  if (it == map.end()) return std::nullopt;
  return it->second;
}

}  // namespace fusebox
