#include "ir/structural_hash.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <variant>

namespace fusebox {

namespace {

// splitmix64's finaliser: every input bit moves every output bit.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class Hasher {
 public:
  void add(uint64_t v) { h_ = mix64(h_ ^ (v + 0x9e3779b97f4a7c15ull + (h_ << 6) + (h_ >> 2))); }
  void add_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    add(n);
    for (; n >= 8; n -= 8, p += 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      add(w);
    }
    uint64_t tail = 0;
    if (n > 0) std::memcpy(&tail, p, n);  // an empty array may have no storage: p null
    add(tail);
  }
  void add(std::string_view s) { add_bytes(s.data(), s.size()); }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0x6a09e667f3bcc908ull;
};

// Symbols are numbered in order of first appearance, so [N,N] and [M,M] hash equal while
// [N,N] and [N,M] (a different broadcast pattern) do not.
class GraphHasher {
 public:
  void graph(const Graph& g) {
    std::vector<int64_t> ordinal(g.num_values(), -1);
    int64_t next = 0;
    auto define = [&](ValueId v) {
      ordinal[static_cast<size_t>(v)] = next++;
      type(g.type(v));
    };
    auto use = [&](ValueId v) { h_.add(g.valid(v) ? uint64_t(ordinal[static_cast<size_t>(v)]) : ~uint64_t(0)); };
    h_.add(g.inputs().size());
    for (ValueId v : g.inputs()) define(v);
    h_.add(g.nodes().size());
    for (const Node& n : g.nodes()) {
      h_.add(uint64_t(n.op));
      h_.add(n.inputs.size());
      for (ValueId v : n.inputs) use(v);
      attrs(n.attrs);
      h_.add(n.body != nullptr);
      if (n.body) graph(*n.body);
      h_.add(n.outputs.size());
      for (ValueId v : n.outputs) define(v);
    }
    h_.add(g.outputs().size());
    for (ValueId v : g.outputs()) use(v);
    for (int64_t k : g.optional_outputs()) h_.add(uint64_t(k) + 1);
    h_.add(uint64_t(0));
    for (int64_t k : g.unmaterialized_outputs()) h_.add(uint64_t(k) + 1);
  }
  uint64_t value() const { return h_.value(); }

 private:
  void dim(const Dim& d, bool exact) {
    if (d.is_symbol()) {
      auto [it, inserted] = symbols_.emplace(d.symbol_name(), int64_t(symbols_.size()));
      h_.add(3 + uint64_t(it->second));
    } else if (d.is_dynamic()) {
      h_.add(0);
    } else {
      h_.add(d.value() == 1 ? 1 : 2);
      if (exact) h_.add(uint64_t(d.value()));
    }
  }
  void type(const TensorType& t) {
    h_.add(uint64_t(t.dtype));
    h_.add(t.shape.size());
    for (const Dim& d : t.shape) dim(d, false);
  }
  void attrs(const Attrs& a) {
    // Attrs compare as a set of names; sorting makes the hash agree.
    std::vector<const std::pair<std::string, AttrValue>*> entries;
    for (const auto& e : a.entries()) entries.push_back(&e);
    std::sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
    h_.add(entries.size());
    for (const auto* e : entries) {
      h_.add(e->first);
      value(e->second);
    }
  }
  void value(const AttrValue& v) {
    h_.add(v.index());
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, bool>) {
            h_.add(uint64_t(x));
          } else if constexpr (std::is_same_v<T, double>) {
            h_.add_bytes(&x, sizeof x);
          } else if constexpr (std::is_same_v<T, std::string>) {
            h_.add(x);
          } else if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<double>>) {
            h_.add_bytes(x.data(), x.size() * sizeof(x[0]));
          } else if constexpr (std::is_same_v<T, Shape>) {
            // An attribute's dims are values (a reshape's target): sizes count here.
            h_.add(x.size());
            for (const Dim& d : x) dim(d, true);
          } else if constexpr (std::is_same_v<T, DType>) {
            h_.add(uint64_t(x));
          } else {
            h_.add(x != nullptr);
            if (!x) return;
            h_.add(uint64_t(x->dtype()));
            h_.add(x->shape().size());
            for (int64_t d : x->shape()) h_.add(uint64_t(d));
            h_.add_bytes(x->raw(), x->nbytes());
          }
        },
        v);
  }

  Hasher h_;
  std::map<std::string, int64_t, std::less<>> symbols_;
};

bool same_node(const Node& a, const Node& b) {
  if (a.op != b.op || a.inputs != b.inputs || a.outputs != b.outputs || !(a.attrs == b.attrs)) return false;
  if (a.loc.line != b.loc.line || a.loc.column != b.loc.column) return false;
  if (!a.body || !b.body) return a.body == b.body;
  return identical(*a.body, *b.body);
}

}  // namespace

uint64_t structural_hash(const Graph& g) {
  GraphHasher h;
  h.graph(g);
  return h.value();
}

bool identical(const Graph& a, const Graph& b) {
  if (a.name() != b.name() || a.num_values() != b.num_values() || a.inputs() != b.inputs() ||
      a.outputs() != b.outputs() || a.nodes().size() != b.nodes().size() ||
      a.optional_outputs() != b.optional_outputs() || a.unmaterialized_outputs() != b.unmaterialized_outputs()) {
    return false;
  }
  for (size_t v = 0; v < a.num_values(); ++v) {
    const ValueInfo &x = a.value(ValueId(v)), &y = b.value(ValueId(v));
    if (x.name != y.name || !(x.type == y.type)) return false;
  }
  for (size_t i = 0; i < a.nodes().size(); ++i) {
    if (!same_node(a.nodes()[i], b.nodes()[i])) return false;
  }
  return true;
}

}  // namespace fusebox
