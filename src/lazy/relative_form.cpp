// The relative form of a segment, built as its records are recorded (relative_form.h).
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

RelativeFormBuilder::RelativeFormBuilder(bool fusion) : fusion_(fusion) { restart(); }

void RelativeFormBuilder::restart() {
  rf_ = RelativeForm();
  lane_[0] = 0x51A7E, lane_[1] = 0x9E37, lane_[2] = 0x85EB, lane_[3] = 0xC2B2;
  token(fusion_ ? 1 : 0);
}

void RelativeFormBuilder::token(uint64_t t) {
  uint64_t& lane = lane_[rf_.tokens.size() & 3];
  lane = mix(lane, t);
  rf_.tokens.push_back(t);
}

int RelativeFormBuilder::dim(int64_t size) {
  if (size == 1) return -1;
  auto it = rf_.dim_ids.find(size);
  if (it != rf_.dim_ids.end()) return it->second;
  const int id = int(rf_.dim_sizes.size());
  rf_.dim_ids.emplace(size, id);
  rf_.dim_sizes.push_back(size);
  return id;
}

void RelativeFormBuilder::shape(const TensorState& s) {
  token(uint64_t(s.dtype) << 8 | s.shape.size());
  for (int64_t d : s.shape) token(d == 1 ? 1 : uint64_t(dim(d)) + 2);
}

// Relative index of a state; a tensor seen for the first time adds its type to the key. Whether
// it is still alive is known only at the flush (finish).
int RelativeFormBuilder::tensor(TensorState* s, bool produced, int op_index) {
  if (const int known = rf_.index.find(s); known >= 0) return known;
  const int r = int(rf_.tensors.size());
  rf_.index.insert(s, r);
  rf_.tensors.push_back(s);
  rf_.producer.push_back(produced ? op_index : -1);
  rf_.last_reader.push_back(-1);
  shape(*s);
  token(produced ? 2 : 1);
  return r;
}

void RelativeFormBuilder::attr(const AttrValue& v) {
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

void RelativeFormBuilder::add(const Record& r, int op_index) {
  token(uint64_t(r.op) << 16 | r.inputs.size() << 8 | r.outputs.size());
  if (r.custom) token(kCustom | r.custom->id);
  for (const StatePtr& s : r.inputs) {
    const int t = tensor(s.get(), false, op_index);
    rf_.last_reader[size_t(t)] = op_index;
    token(uint64_t(t));
  }
  for (const auto& [name, value] : r.attrs.entries()) {
    token(hash_bytes(name.data(), name.size()));
    attr(value);
  }
  for (const StatePtr& s : r.outputs) token(uint64_t(tensor(s.get(), true, op_index)));
}

void RelativeFormBuilder::drop(const TensorState* s) {
  // A drop of a tensor of the segment shapes what is written; others change nothing.
  if (const int t = rf_.index.find(s); t >= 0) {
    token(kDrop);
    token(uint64_t(t));
  }
}

RelativeForm RelativeFormBuilder::finish(uint8_t trigger) {
  // Which produced tensors are still needed after the segment: a bit each, 64 to a token.
  const size_t n = rf_.tensors.size();
  rf_.alive.resize(n);
  uint64_t bits = 0;
  int used = 0;
  for (size_t i = 0; i < n; ++i) {
    rf_.alive[i] = rf_.tensors[i]->handles.load(std::memory_order_acquire) > 0;
    if (rf_.producer[i] < 0) continue;
    bits |= uint64_t(rf_.alive[i]) << used;
    if (++used == 64) {
      token(bits);
      bits = 0;
      used = 0;
    }
  }
  if (used) token(bits);
  token(trigger);
  const std::vector<uint64_t>& t = rf_.tokens;
  rf_.hash = mix(mix(mix(mix(lane_[0], lane_[1]), lane_[2]), lane_[3]), t.size());
  RelativeForm done = std::move(rf_);
  restart();
  // The next segment is likely as large as this one.
  rf_.tokens.reserve(done.tokens.size());
  rf_.index.reserve(n);
  rf_.tensors.reserve(n);
  rf_.producer.reserve(n);
  rf_.last_reader.reserve(n);
  return done;
}

}  // namespace fusebox::lazy
