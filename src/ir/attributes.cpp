#include "ir/attributes.h"

namespace fusebox {

std::string_view attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::I64: return "i64";
    case AttrType::F64: return "f64";
    case AttrType::Bool: return "bool";
    case AttrType::Str: return "str";
    case AttrType::I64s: return "i64s";
    case AttrType::F64s: return "f64s";
    case AttrType::Dims: return "dims";
    case AttrType::DType: return "dtype";
    case AttrType::Array: return "array";
  }
  return "?";
}

AttrType attr_type_of(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

bool attr_values_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (const auto* pa = std::get_if<std::shared_ptr<const Array>>(&a)) {
    const auto& pb = std::get<std::shared_ptr<const Array>>(b);
    if (!*pa || !pb) return *pa == pb;
    return (*pa)->same_data(*pb);
  }
  return a == b;
}

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> list) {
  for (const auto& [name, value] : list) set(name, value);
}

void Attrs::set(const std::string& name, AttrValue value) {
  for (auto& e : entries_) {
    if (e.first == name) {
      e.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(name, std::move(value));
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.first == name) return &e.second;
  return nullptr;
}

void Attrs::erase(std::string_view name) {
  std::erase_if(entries_, [&](const auto& e) { return e.first == name; });
}

bool operator==(const Attrs& a, const Attrs& b) {
  if (a.entries_.size() != b.entries_.size()) return false;
  for (const auto& [name, value] : a.entries_) {
    const AttrValue* other = b.find(name);
    if (!other || !attr_values_equal(value, *other)) return false;
  }
  return true;
}

}  // namespace fusebox
