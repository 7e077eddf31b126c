// Node attributes: a small ordered list of (name, value) pairs. The schema of each op (ops.def)
// says which names exist, their types and defaults; the verifier checks attributes against it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ir/array.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace fusebox {

enum class AttrType : uint8_t { I64, F64, Bool, Str, I64s, F64s, Dims, DType, Array };
std::string_view attr_type_name(AttrType t);

// The alternatives are in AttrType order.
using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, Shape, DType, std::shared_ptr<const Array>>;

AttrType attr_type_of(const AttrValue& v);
bool attr_values_equal(const AttrValue& a, const AttrValue& b);  // arrays compared by data

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> list);

  void set(const std::string& name, AttrValue value);  // replaces an existing entry
  const AttrValue* find(std::string_view name) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }
  void erase(std::string_view name);
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }
  const std::vector<std::pair<std::string, AttrValue>>& entries() const { return entries_; }

  friend bool operator==(const Attrs& a, const Attrs& b);

 private:
  std::vector<std::pair<std::string, AttrValue>> entries_;
};

}  // namespace fusebox
