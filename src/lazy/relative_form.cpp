// The relative form of a segment: one pass over its records (relative_form.h).
#include "lazy/relative_form.h"

#include <cstring>
#include <string>
#include <type_traits>
#include <variant>

#include "ir/check.h"
#include "lazy/custom_op.h"

namespace fusebox::lazy {
namespace {

constexpr uint64_t kDrop = 0xD509;
constexpr uint64_t kLiteral = 1ull << 62;
constexpr uint64_t kCustom = 0xC057ull << 32;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 29);
}

uint64_t hash_bytes(const void* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

class Builder {
 public:
  Builder(RelativeForm& rf) : rf_(rf) {}

  void token(uint64_t t) { rf_.tokens.push_back(t); }

  int dim(int64_t size) {
    if (size == 1) return -1;
    auto it = rf_.dim_ids.find(size);
    if (it != rf_.dim_ids.end()) return it->second;
    const int id = int(rf_.dim_sizes.size());
    rf_.dim_ids.emplace(size, id);
    rf_.dim_sizes.push_back(size);
    return id;
  }
  void shape(const TensorState& s) {
    token(uint64_t(s.dtype) << 8 | s.shape.size());
    for (int64_t d : s.shape) token(d == 1 ? 1 : uint64_t(dim(d)) + 2);
  }
  // Relative index of a state; a tensor seen for the first time adds its type to the key.
  int tensor(TensorState* s, bool produced, int op_index) {
    if (const int known = rf_.index.find(s); known >= 0) return known;
    const int r = int(rf_.tensors.size());
    rf_.index.insert(s, r);
    rf_.tensors.push_back(s);
    rf_.alive.push_back(s->handles.load(std::memory_order_acquire) > 0);
    rf_.producer.push_back(produced ? op_index : -1);
    rf_.last_reader.push_back(-1);
    shape(*s);
    token(produced ? (rf_.alive.back() ? 3 : 2) : 1);
    return r;
  }
  void attr(const AttrValue& v) {
    token(v.index());
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, bool>) {
            token(uint64_t(x));
          } else if constexpr (std::is_same_v<T, double>) {
            uint64_t bits;
            std::memcpy(&bits, &x, sizeof bits);
            token(bits);
          } else if constexpr (std::is_same_v<T, std::string>) {
            token(hash_bytes(x.data(), x.size()));
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            token(x.size());
            for (int64_t e : x) token(uint64_t(e));
          } else if constexpr (std::is_same_v<T, std::vector<double>>) {
            token(hash_bytes(x.data(), x.size() * sizeof(double)));
          } else if constexpr (std::is_same_v<T, Shape>) {
            token(x.size());
            for (const Dim& d : x) {
              const int id = d.is_static() && d.value() > 1 ? rf_.dim_id(d.value()) : -1;
              token(id >= 0 ? uint64_t(id) + 2 : kLiteral | uint64_t(d.value()));
            }
          } else if constexpr (std::is_same_v<T, DType>) {
            token(uint64_t(x));
          } else {
            token(x ? hash_bytes(x->raw(), x->nbytes()) : 0);
          }
        },
        v);
  }

 private:
  RelativeForm& rf_;
};

}  // namespace

void StateIndex::reserve(size_t n) {
  if (2 * n <= slots_.size()) return;
  size_t capacity = 16;
  while (capacity < 2 * n) capacity *= 2;
  std::vector<std::pair<const TensorState*, int>> old = std::exchange(slots_, {});
  slots_.assign(capacity, {nullptr, -1});
  for (const auto& [s, r] : old) {
    if (s) slots_[slot_of(s)] = {s, r};
  }
}

size_t StateIndex::slot_of(const TensorState* s) const {
  const size_t mask = slots_.size() - 1;
  size_t i = size_t((uint64_t(reinterpret_cast<uintptr_t>(s)) >> 4) * 0x9E3779B97F4A7C15ull >> 20) & mask;
  while (slots_[i].first && slots_[i].first != s) i = (i + 1) & mask;
  return i;
}

int StateIndex::find(const TensorState* s) const {
  if (slots_.empty()) return -1;
  const auto& slot = slots_[slot_of(s)];
  return slot.first ? slot.second : -1;
}

void StateIndex::insert(const TensorState* s, int r) {
  reserve(size_ + 1);
  slots_[slot_of(s)] = {s, r};
  ++size_;
}

int RelativeForm::rel(const TensorState* s) const {
  const int r = index.find(s);
  FUSEBOX_CHECK(r >= 0) << "lazy: a tensor outside the segment's relative form";
  return r;
}

int RelativeForm::dim_id(int64_t size) const {
  if (size == 1) return -1;
  auto it = dim_ids.find(size);
  return it == dim_ids.end() ? -1 : it->second;
}

bool RelativeForm::escapes(const TensorState* s, size_t begin, size_t end) const {
  const int r = rel(s);
  return alive[size_t(r)] || last_reader[size_t(r)] >= int(end);
}

RelativeForm relative_form(std::vector<Record>& records, bool fusion, uint8_t trigger,
                           std::vector<Record>* ops) {
  RelativeForm rf;
  rf.tokens.reserve(records.size() * 8 + 2);
  // About two new tensors per record (a result and a scalar or weight operand).
  rf.index.reserve(records.size() * 2);
  rf.tensors.reserve(records.size() * 2);
  rf.producer.reserve(records.size() * 2);
  rf.last_reader.reserve(records.size() * 2);
  Builder b(rf);
  b.token(fusion ? 1 : 0);
  b.token(trigger);
  ops->reserve(records.size());
  for (Record& r : records) {
    if (r.is_drop) {
      // A drop of a tensor of the segment shapes what is written; others change nothing.
      if (const int t = rf.index.find(r.inputs[0].get()); t >= 0) {
        b.token(kDrop);
        b.token(uint64_t(t));
      }
      continue;
    }
    const int op_index = int(ops->size());
    b.token(uint64_t(r.op) << 16 | r.inputs.size() << 8 | r.outputs.size());
    if (r.custom) b.token(kCustom | r.custom->id);
    for (const StatePtr& s : r.inputs) {
      const int t = b.tensor(s.get(), false, op_index);
      rf.last_reader[size_t(t)] = op_index;
      b.token(uint64_t(t));
    }
    for (const auto& [name, value] : r.attrs.entries()) {
      b.token(hash_bytes(name.data(), name.size()));
      b.attr(value);
    }
    for (const StatePtr& s : r.outputs) b.token(uint64_t(b.tensor(s.get(), true, op_index)));
    ops->push_back(std::move(r));
  }
  // Four independent lanes: one chain of mixes was a serial multiply-shift chain of ~10 cycles
  // per token, half of this function's time (the tokens are compared exactly on a hit anyway).
  uint64_t lane[4] = {0x51A7E, 0x9E37, 0x85EB, 0xC2B2};
  const std::vector<uint64_t>& t = rf.tokens;
  size_t i = 0;
  for (; i + 4 <= t.size(); i += 4) {
    for (size_t k = 0; k < 4; ++k) lane[k] = mix(lane[k], t[i + k]);
  }
  for (; i < t.size(); ++i) lane[0] = mix(lane[0], t[i]);
  rf.hash = mix(mix(mix(mix(lane[0], lane[1]), lane[2]), lane[3]), t.size());
  return rf;
}

}  // namespace fusebox::lazy
